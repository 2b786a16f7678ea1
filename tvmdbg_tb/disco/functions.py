"""The global functions a disco session calls in each of its processes (workers and the
controller, which is worker 0): a VM module loaded through relax.VirtualMachine, so that
tvmdbg's tracer sees its calls, and its functions handed out as traced callables.

TVM's own `runtime.disco.load_vm_module` makes the VM in C++, where no Python tracer is ever
attached; these replace it for tvmdbg.disco.ProcessSession without touching TVM's.
"""

from __future__ import annotations

import os
import pickle
import re
import threading
import warnings

import tvm
from tvm import relax

from tvmdbg_tb.capture import compiled
from tvmdbg_tb.capture import hooks as capture
from tvmdbg_tb.tracing import fast_tracer  # noqa: F401  registers "tvmdbg.stats"

LOAD = "tvmdbg.disco.load_vm_module"
FUNCTION = "tvmdbg.disco.module_function"
PREPARE = "tvmdbg.disco.prepare"

_LOCK = threading.Lock()
_VMS: list[relax.VirtualMachine] = []  # the VMs loaded in this process, kept alive with their modules
_INFOS: dict[str, object] = {}  # library realpath -> the description its exporter sent


@tvm.register_global_func(PREPARE, override=True)
def _prepare(library: str, info_path: str) -> None:
    """Before a library is loaded: its description, a pickle the controller wrote (which
    brings op names and source lines)."""
    if not info_path:
        return
    try:
        with open(info_path, "rb") as f:
            info = pickle.load(f)
    except Exception as error:  # the op names are lost, not the run
        warnings.warn(f"tvmdbg: could not read {info_path}: {error!r}", RuntimeWarning, stacklevel=2)
        return
    with _LOCK:
        _INFOS[os.path.realpath(library)] = info


# The global functions an executable compiled with tvmdbg enabled calls (capture/compiled.py).
_TVMDBG_FUNCTION = re.compile(r"tvmdbg\.tvmdbg_(?:tick|(stats|health|shape)_(\w+))\b")


def register_kernels(executable: relax.VMExecutable) -> None:
    """Registers the summary kernels the executable's bytecode calls (compiled once per
    machine, loaded from the kernel cache): a process that did not build it has none."""
    for kind, dtype in {m.groups() for m in _TVMDBG_FUNCTION.finditer(executable.as_text())}:
        if kind:
            compiled.kernel(dtype, health=kind in ("health", "stats"), stats=kind == "stats")
        else:
            compiled.kernel(None)


def load_vm_module(path: str, device) -> tvm.runtime.Module:
    """The VM module of the library at path, made by relax.VirtualMachine (TVM's
    runtime.disco.load_vm_module makes it in C++), its summary kernels registered."""
    executable = relax.VMExecutable(tvm.runtime.load_module(path))  # a Python object: it takes its info
    register_kernels(executable)
    with _LOCK:
        info = _INFOS.get(os.path.realpath(path))
    if info is not None:
        capture.attach(executable, info)
    vm = relax.VirtualMachine(executable, device if device is not None else tvm.cpu())
    with _LOCK:
        _VMS.append(vm)
    return vm.module


tvm.register_global_func(LOAD, load_vm_module, override=True)


@tvm.register_global_func(FUNCTION, override=True)
def _function(module: tvm.runtime.Module, name: str):
    with _LOCK:
        vm = next((vm for vm in _VMS if vm.module.same_as(module)), None)
    if vm is None:
        return module[name]
    function = vm[name]  # traced when dumping is enabled in this process
    return lambda *args: function(*args)
