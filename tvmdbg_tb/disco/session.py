"""tvmdbg.disco.ProcessSession: TVM's disco ProcessSession whose workers record too."""

from __future__ import annotations

import atexit
import contextlib
import copy
import dataclasses
import enum
import json
import os
import pickle
import secrets
import shutil
import tempfile
import warnings

from tvmdbg_tb.capture import hooks as capture
from tvmdbg_tb.disco import functions
from tvmdbg_tb.disco.fix import disco_module
from tvmdbg_tb.disco.job import DISCO_ENV
from tvmdbg_tb.events.options import LiveOptions, public_values
from tvmdbg_tb.tracing import api

_disco = disco_module()


def _worker_options(options) -> dict:
    """The controller's options a worker takes, as public keywords (JSON): all but live
    control (the dashboard talks to one process) and a tensor_dtypes callable."""
    values = {}
    for keyword, value in public_values(dataclasses.replace(options, live=LiveOptions())).items():
        if keyword.startswith("live") or callable(value):
            continue
        if isinstance(value, enum.Enum):
            value = value.value
        values[keyword] = list(value) if isinstance(value, (tuple, frozenset, set)) else value
    return values


@contextlib.contextmanager
def _environ(updates: dict[str, str]):
    saved = {k: os.environ.get(k) for k in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class ProcessSession(_disco.ProcessSession):
    """A drop-in for tvm.runtime.disco.ProcessSession: with dumping enabled in this (the
    controller's) process, each worker k >= 1 records its calls under <logdir>/rank<k>/, and
    this process's run is rank 0; all carry one job id. Modules loaded with load_vm_module
    run in relax.VirtualMachine in every worker, traced, with the ops' names and source
    lines of an executable this process compiled and exported with tvmdbg enabled."""

    # tvm_ffi objects take no attributes but those named here (TVM's Session does the same).
    __slots__ = ("job_id", "_info_dir")

    def __init__(self, num_workers: int, num_groups: int = 1, entrypoint: str = "tvmdbg_tb.disco.worker"):
        job_id = secrets.token_hex(8)
        dump = api.current_dump()
        env = {}
        if dump is not None:
            writer, options = dump
            job = {"job_id": job_id, "world_size": num_workers, "logdir": writer.logdir}
            env[DISCO_ENV] = json.dumps({**job, "options": _worker_options(options)})
        with _environ(env):  # the workers start in the constructor and inherit it
            super().__init__(num_workers, num_groups, entrypoint)
        self.job_id = job_id
        self._info_dir = None
        if dump is not None:
            dump[0].write_disco_worker(job_id, 0, num_workers)

    def load_vm_module(self, path: str, device=None):
        """Loads the VM module at path in every worker through relax.VirtualMachine (traced
        when dumping is enabled there), with the description of its executable when this
        process exported it while recording."""
        info_path = self._write_info(path)
        self._get_cached_method(functions.PREPARE)(path, info_path)
        module = self._get_cached_method(functions.LOAD)(path, device)
        return _TracedModule(module, self)

    def _write_info(self, path: str) -> str:
        """The exported executable's description, pickled for the workers ('' when none)."""
        info = capture.exported_info(path)
        if info is None:
            return ""
        try:
            data = pickle.dumps(_portable(info))
        except Exception as error:
            warnings.warn(f"tvmdbg: the workers get no op lines for {path}: {error!r}", RuntimeWarning, stacklevel=3)
            return ""
        if self._info_dir is None:
            self._info_dir = tempfile.mkdtemp(prefix="tvmdbg-disco-")
            atexit.register(shutil.rmtree, self._info_dir, True)  # read by the workers at load time only
        info_path = os.path.join(self._info_dir, f"{len(os.listdir(self._info_dir))}.pickle")
        with open(info_path, "wb") as f:
            f.write(data)
        return info_path


def _portable(info):
    """info without its TVM objects (the FuseOps snapshots replays need) and without its
    compile-time buffers (the workers trace through the VM instrument)."""
    info = copy.copy(info)
    info.fused_module = None
    info.compiled = {}
    info.compiled_health = None
    info.functions = {
        name: dataclasses.replace(function, sites=[dataclasses.replace(s, fused_module=None) for s in function.sites])
        for name, function in info.functions.items()
    }
    return info


class _TracedModule(_disco.DModule):
    """A DModule whose functions come from the workers' traced VMs."""

    __slots__ = ()

    def __getitem__(self, name: str):
        function = self.session._get_cached_method(functions.FUNCTION)(self, name)
        return _disco.DPackedFunc(function, self.session)
