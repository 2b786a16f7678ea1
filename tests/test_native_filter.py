"""The VM instrument's native pre-filter (tracing/native_filter): built for real where a C++
compiler exists, the same dumps, errors and check-numerics stops as the pure-Python instrument
on real models, fewer Python callbacks, and a silent fall back when it cannot be built."""

from __future__ import annotations

import logging
import shutil

import models_tvmscript
import numpy as np
import pytest
import trace_paths
import tvm
from models import blockbuilder_planted, compile_module, mismatched_shapes, mixed_dtypes
from test_instrument import failing_extern_traces
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

import tvmdbg
from tvmdbg_tb.tracing import api, native_filter, vm_tracer

needs_compiler = pytest.mark.skipif(
    shutil.which("c++") is None and shutil.which("g++") is None, reason="no C++ compiler on this machine"
)


@I.ir_module
class WithNested:
    """main calls a Relax function (the VM instrument sees it as a nested call)."""

    @R.function
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.exp(x)
        z = R.multiply(y, x)
        return z

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = WithNested
        a = R.log(x)
        b = cls.helper(a)
        c = R.add(b, x)
        return c


@pytest.fixture
def native(request, monkeypatch):
    """TVMDBG_NATIVE_FILTER on or off; the fallback (VM instrument) path for every VM."""
    monkeypatch.setenv(native_filter.ENV_SWITCH, "1" if request.param else "0")
    with trace_paths.using("vm_instrument"):
        yield request.param


def _callbacks(monkeypatch) -> list[int]:
    """Counts the calls reaching the Python instrument (bound when each tracer is made)."""
    count = [0]
    original = vm_tracer.Tracer._instrument

    def counted(self, *args):
        count[0] += 1
        return original(self, *args)

    monkeypatch.setattr(vm_tracer.Tracer, "_instrument", counted)
    return count


def _dump(logdir, mode: str, before_enable: bool) -> dict:
    """Runs real models on the fallback path and reads the dump back: everything recorded
    except timings."""
    tensor = tvm.runtime.tensor
    runs = []
    compiled = {}
    if before_enable:  # executables compiled before enable: unmapped functions
        compiled = {"mixed": mixed_dtypes(fuse=True), "nested": (compile_module(WithNested, fuse=False), None)}
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        for fuse in (False, True):
            ex, inputs = compiled.get("mixed") if before_enable and fuse else mixed_dtypes(fuse=fuse)
            vm = relax.VirtualMachine(ex, tvm.cpu())
            runs.append(vm["main"](*[tensor(a) for a in inputs]))
            runs.append(vm["main"](*[tensor(a * 2) for a in inputs]))
            tracer = vm.__dict__["_tvmdbg_tracer"]
            assert (tracer._native is not None) == native_filter.enabled()
        ex = compiled["nested"][0] if before_enable else compile_module(WithNested, fuse=False)
        vm = relax.VirtualMachine(ex, tvm.cpu())
        for _ in range(2):
            vm["main"](tensor(np.array([0.5, 1.0, 0.0, -1.0], "float32")))
        vm = relax.VirtualMachine(compile_module(models_tvmscript.WithBranch, fuse=False), tvm.cpu())
        for flag in (True, False):
            vm["main"](tensor(np.array([0.0, 1, 2, 3], "float32")), tensor(np.array(flag)))
        timer = vm.time_evaluator("main", tvm.cpu(), number=2, repeat=1)
        timer(tensor(np.array([1.0, 2, 3, 4], "float32")), tensor(np.array(True)))
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        executions = []
        for i in range(run.num_executions()):
            execution = run.execution(i)
            execution.ClearField("duration_us")
            execution.ClearField("code_location")
            execution.ClearField("executable_id")  # a fresh id per compile
            executions.append(execution.SerializeToString(deterministic=True))
        traces = []
        for i in range(run.num_traces()):
            trace = run.trace(i)
            trace.ClearField("duration_us")
            traces.append(trace.SerializeToString(deterministic=True))
        kernels = [run.trace(i).kernel for i in range(run.num_traces())]
    return {"executions": executions, "traces": traces, "kernels": kernels}


@needs_compiler
def test_the_native_filter_builds_and_loads():
    assert native_filter.enabled()
    module = native_filter.load()
    assert module is not None, native_filter.failure()
    assert native_filter.LIBRARY.path().exists()
    assert native_filter.load() is module  # loaded once per process


@needs_compiler
@pytest.mark.parametrize("before_enable", [False, True], ids=["mapped", "compiled_before_enable"])
@pytest.mark.parametrize("mode", ["NO_TENSOR", "FULL_HEALTH", "FULL_TENSOR"])
def test_native_and_python_dumps_are_identical(tmp_path, monkeypatch, mode, before_enable):
    dumps, callbacks = {}, {}
    for use in (True, False):
        monkeypatch.setenv(native_filter.ENV_SWITCH, "1" if use else "0")
        count = _callbacks(monkeypatch)
        with trace_paths.using("vm_instrument"):
            dumps[use] = _dump(tmp_path / str(use), mode, before_enable)
        callbacks[use] = count[0]
    assert dumps[True]["traces"], "nothing traced"
    assert {"tir_exp", "tir_log", "multiply", "add"} <= set(dumps[True]["kernels"])
    assert dumps[True] == dumps[False]
    if not before_enable:  # mapped functions: the builtins never reach Python
        assert callbacks[True] < callbacks[False] * 0.8, callbacks
    else:  # unmapped: every call is forwarded, as before
        assert callbacks[True] <= callbacks[False], callbacks


@needs_compiler
@pytest.mark.parametrize("native", [True, False], indirect=True, ids=["native", "python"])
def test_check_numerics_stops_at_the_first_bad_kernel(native, tmp_path):
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    tvmdbg.enable_check_numerics()
    try:
        model = blockbuilder_planted("log", fuse=False)
        with pytest.raises(api.CheckNumericsError) as caught:
            model.run()
        vm = relax.VirtualMachine(model.executable, tvm.cpu())
        vm["main"]
        assert (vm.__dict__["_tvmdbg_tracer"]._native is not None) == native
    finally:
        tvmdbg.disable_check_numerics()
        tvmdbg.disable_dump_debug_info()
    error = caught.value
    assert error.kernel == "tir_log" and error.original_ops == [("relax.log", "lv1")]
    assert error.source == (model.fault_file, model.fault_line)
    assert "nan=0 -inf=0 +inf=0 negative=2 zero=1 positive=5" in str(error)
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        kernels = [run.trace(i).kernel for i in range(run.num_traces())]
        assert "CheckNumericsError" in run.execution(0).error
    assert len(kernels) == 2 and kernels[-1] == "tir_log"  # subtract, log; multiply... never ran


def _failing_runs(logdir) -> tuple[list[str], list[tuple[str, str]]]:
    """A shape mismatch caught by a VM builtin, then a good call: errors and named culprits."""
    tvmdbg.enable_dump_debug_info(logdir, circular_buffer_size=-1)
    errors = []
    try:
        vm = relax.VirtualMachine(tvm.compile(mismatched_shapes(), "llvm"), tvm.cpu())
        with pytest.raises(Exception) as raised:
            vm["main"](tvm.runtime.tensor(np.ones(3, "float32")), tvm.runtime.tensor(np.ones(4, "float32")))
        errors.append(str(raised.value))
        ok = vm["main"](*(tvm.runtime.tensor(np.ones(4, "float32")) for _ in range(2)))
        np.testing.assert_allclose(ok.numpy(), np.e + 1, rtol=1e-6)
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        named = [(t.kernel, t.error) for t in (run.trace(i) for i in range(run.num_traces())) if t.error]
        assert run.execution(0).error and not run.execution(1).error
    return errors, named


def _on_both_paths(monkeypatch, run, tmp_path) -> dict:
    """run(logdir) on the VM instrument with the native filter (True) and without (False)."""
    results = {}
    for use in (True, False):
        monkeypatch.setenv(native_filter.ENV_SWITCH, "1" if use else "0")
        with trace_paths.using("vm_instrument"):
            results[use] = run(tmp_path / str(use))
    return results


@needs_compiler
def test_a_builtin_that_raises_is_named_the_same(tmp_path, monkeypatch):
    results = _on_both_paths(monkeypatch, _failing_runs, tmp_path)
    errors, named = results[True]
    assert len(named) == 1 and named[0][0].startswith("vm.builtin."), named
    assert results[True] == results[False]


@needs_compiler
def test_a_kernel_that_raises_is_named_the_same(tmp_path, monkeypatch):
    results = _on_both_paths(monkeypatch, failing_extern_traces, tmp_path)
    assert [t[0] for t in results[True]] == ["tir_exp", "tvmdbg_test.failing_kernel"]
    assert "refused its input" in results[True][1][3] and results[True][1][2] >= 0  # a mapped site
    assert results[True] == results[False]


def test_without_a_compiler_the_python_instrument_traces(tmp_path, monkeypatch, caplog):
    """A failed build is said once in the log, never retried, and tracing goes on in Python."""
    monkeypatch.setattr(native_filter.LIBRARY, "_state", {})
    monkeypatch.setenv("TVMDBG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", "/bin/false")
    monkeypatch.setenv(native_filter.ENV_SWITCH, "1")
    builds = [0]
    original = native_filter.LIBRARY._build

    def counted(path):
        builds[0] += 1
        return original(path)

    monkeypatch.setattr(native_filter.LIBRARY, "_build", counted)
    with caplog.at_level(logging.WARNING, logger="tvmdbg.native"), trace_paths.using("vm_instrument"):
        tvmdbg.enable_dump_debug_info(tmp_path / "dump", tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            for _ in range(3):
                model = blockbuilder_planted("log", fuse=False)
                vm, _ = model.run()
                assert vm.__dict__["_tvmdbg_tracer"]._native is None
        finally:
            tvmdbg.disable_dump_debug_info()
    assert builds[0] == 1 and native_filter.failure() is not None
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob("*.so"))
    warnings = [r for r in caplog.records if "native VM filter unavailable" in r.getMessage()]
    assert len(warnings) == 1
    with tvmdbg.DebugDataReader(tmp_path / "dump") as reader:
        reader.update()
        run = reader.run()
        assert run.num_executions() == 3 and run.num_traces() == 3 * run.execution(0).num_traces > 0


def test_disabled_by_the_environment(monkeypatch):
    monkeypatch.setenv(native_filter.ENV_SWITCH, "0")
    assert not native_filter.enabled()
    model = blockbuilder_planted("log", fuse=False)
    vm = relax.VirtualMachine(model.executable, tvm.cpu())
    assert native_filter.attach(vm, lambda *args: 0, lambda *args: 0, frozenset()) is None
