"""A model deployed as a library (tracing/saved.py): compiled under tvmdbg, saved with
export_library, loaded with tvm.runtime.load_module in a process of its own and run by a
VirtualMachine there. The compile-time capture travels inside the library, so the loaded
module is traced by the compiled path (native_call, no VM instrument) with its graph, its ops
and their source lines: the same alerts, at the same lines, with the same counts as the
in-memory build, and the same kernel outputs as an uninstrumented build. A library changed
after it was saved, or exported to a format that is not ELF, is handled apart."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

real_models = pytest.importorskip("real_models")

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import tvmdbg  # noqa: E402
from tvmdbg_tb import analysis  # noqa: E402

pytestmark = pytest.mark.slow  # BERT built once per test process, and a process that loads it

ROOT = Path(__file__).resolve().parent.parent

# The deployed program: loads the library and runs it traced (argv: library, inputs .npz,
# logdir, outputs .npz); prints how it was traced.
_DEPLOYED = """
import json, sys
import numpy as np
import tvmdbg
tvmdbg.enable_dump_debug_info(sys.argv[3], tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
import tvm
from tvm import relax
from tvmdbg_tb.capture import kernel_cache
from tvmdbg_tb.tracing import vm_wrapper
library = tvm.runtime.load_module(sys.argv[1])
vm = relax.VirtualMachine(library, tvm.cpu())
inputs = np.load(sys.argv[2])
args = [tvm.runtime.tensor(inputs[f"arr_{k}"]) for k in range(len(inputs.files))]
main = vm["main"]
for _ in range(2):
    out = main(*args)
flat = [out] if isinstance(out, tvm.runtime.Tensor) else list(out)
np.savez(sys.argv[4], *[t.numpy() for t in flat])
tracer = vm_wrapper.tracer_of(vm)
native = tracer._native if hasattr(tracer, "_native") else None
print(json.dumps({
    "tracer": type(tracer).__name__,
    "recorded_natively": native.counts()[2] if native else 0,
    "compiled_kernels": kernel_cache.compiled(),
}))
tvmdbg.disable_dump_debug_info()
"""


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """The planted BERT compiled under FULL_HEALTH, saved as a library, and its inputs."""
    built = real_models.build("bert", fuse=True, plant="inf_weight")
    directory = tmp_path_factory.mktemp("saved_bert")
    library = directory / "bert.so"
    built.executable.export_library(str(library))
    np.savez(directory / "inputs.npz", *built.inputs)
    return built, library, directory / "inputs.npz"


def _alerts(logdir) -> list[tuple]:
    """(op, origin, file, line, counts) of each alert of the run in logdir."""
    with tvmdbg.DebugDataReader(str(logdir)) as reader:
        reader.update()
        out = []
        for alert in analysis.alerts(reader.run())["alerts"]:
            where = alert["location"] or {}
            counts = (alert.get("nan"), alert.get("neg_inf"), alert.get("pos_inf"), alert.get("confirmed"))
            out.append((alert["op_name"], alert["origin"], where.get("file_path"), where.get("line"), counts))
        return out


def test_a_loaded_library_is_traced_like_the_executable_it_was_saved_from(bert, tmp_path):
    built, library, inputs = bert
    assert library.read_bytes()[-16:] == b"TVMDBG-CAPTURE/1"  # the capture is inside the one file
    logdir, outputs = tmp_path / "deployed", tmp_path / "outputs.npz"
    done = subprocess.run(
        [sys.executable, "-c", _DEPLOYED, str(library), str(inputs), str(logdir), str(outputs)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tvmdbg:" not in done.stderr, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # The compiled path, its common call in C++ (the first call, which made the run's first
    # non-finite value, is finished in Python: its replay), kernels from the cache.
    assert result["tracer"] == "CompiledTracer" and result["recorded_natively"] >= 1, result
    # Outputs bit-identical to the uninstrumented build's.
    plain = real_models.compile_module(built.mod, fuse=True)
    vm = relax.VirtualMachine(plain, tvm.cpu())
    expected = real_models._flatten(vm["main"](*[tvm.runtime.tensor(a) for a in built.inputs]))
    got = np.load(outputs)
    assert len(got.files) == len(expected)
    for k, array in enumerate(expected):
        np.testing.assert_array_equal(got[f"arr_{k}"], array)
    # The same alerts, at the same lines of the model's code, as the in-memory build traced.
    in_memory = real_models.record(built, tmp_path / "in_memory", calls=2)
    deployed_alerts, memory_alerts = _alerts(logdir), _alerts(in_memory)
    assert deployed_alerts == memory_alerts
    assert deployed_alerts and any(alert[1] for alert in deployed_alerts)  # an origin
    for _, _, file_path, line, _ in deployed_alerts:
        assert file_path and file_path.endswith(".py") and line > 0  # a source line, not unmapped
    assert any("transformers" in alert[2] for alert in deployed_alerts)


def test_a_library_changed_after_it_was_saved_keeps_no_stale_capture(bert, tmp_path, caplog):
    """The capture of one library appended to another: its hash says so; the library loads,
    unmapped (the VM instrument traces it), with a warning."""
    from tvmdbg_tb.tracing import saved

    built, library, _ = bert
    saved.install()
    other = tmp_path / "other.so"
    executable, _ = _small_executable()
    executable.export_library(str(other))
    assert saved.load(other) is None  # compiled without tvmdbg: nothing saved
    data, trailer_size = library.read_bytes(), saved._TRAILER.size
    length = int.from_bytes(data[-trailer_size : -trailer_size + 8], "little")
    other.write_bytes(other.read_bytes() + data[-trailer_size - length :])
    with caplog.at_level(logging.WARNING, logger="tvmdbg.saved"):
        module = tvm.runtime.load_module(str(other))
    assert "the library changed since it was saved" in caplog.text
    from tvmdbg_tb.capture import hooks

    assert hooks.info_of(module) is None
    vm = relax.VirtualMachine(module, tvm.cpu())
    x = np.linspace(-1, 1, 4, dtype="float32")
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), np.exp(x), rtol=1e-6)


def test_a_capture_another_tvmdbg_wrote_is_not_used(tmp_path, caplog, monkeypatch):
    """A library saved by a tvmdbg whose kernels wrote another stats layout or called the
    recount kernels with other arguments (here: the layout before RECOUNT_ARGUMENTS joined
    it): its capture is not used, and the warning says to export it again."""
    from tvmdbg_tb.capture import hooks
    from tvmdbg_tb.tracing import saved

    monkeypatch.setattr(saved, "LAYOUT", saved.LAYOUT[:-1])
    executable, _ = _small_executable(tmp_path / "compile")
    library = tmp_path / "older.so"
    executable.export_library(str(library))
    monkeypatch.undo()
    saved.install()
    with caplog.at_level(logging.WARNING, logger="tvmdbg.saved"):
        module = tvm.runtime.load_module(str(library))
    assert "another tvmdbg version wrote it" in caplog.text and "export the library again" in caplog.text
    assert hooks.info_of(module) is None


def test_a_library_that_is_not_elf_gets_a_sidecar(tmp_path):
    """export_library to a .tar (object files, linked when loaded): the capture goes to
    <file>.tvmdbg, keyed by the archive's hash."""
    from tvmdbg_tb.capture import hooks
    from tvmdbg_tb.tracing import saved

    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("loading a .tar library links it with the system compiler")
    executable, _ = _small_executable(tmp_path / "compile")
    archive = tmp_path / "small.tar"
    executable.export_library(str(archive))
    sidecar = tmp_path / ("small.tar" + saved.SIDECAR)
    assert sidecar.is_file()
    saved.install()
    module = tvm.runtime.load_module(str(archive))
    info = hooks.info_of(module)
    assert info is not None and info.source_mapped and info.compiled
    origin = info.functions["main"].sites[0].origins[0]
    assert origin.op_type == "relax.exp" and origin.frames[origin.user_index][0] == __file__


def _small_executable(logdir: Path | None = None):
    """exp(x) over 4 floats, built (and compiled) while tvmdbg records into logdir, if given."""
    if logdir is not None:
        tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_HEALTH")
    try:
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorType((4,), "float32"))
        with bb.function("main", [x]):
            out = bb.emit(relax.op.exp(x))
            bb.emit_func_output(out)
        return real_models.compile_module(bb.get(), fuse=True), [np.linspace(-1, 1, 4, dtype="float32")]
    finally:
        if logdir is not None:
            tvmdbg.disable_dump_debug_info()
