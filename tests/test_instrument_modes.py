"""Every tensor debug mode checked against numpy on the same tensors."""

from __future__ import annotations

import numpy as np
import pytest
import trace_paths
import tvm
from models import mixed_dtypes
from tvm import relax

import tvmdbg
from tvmdbg_tb.events.modes import MODE_NAMES, Summaries
from tvmdbg_tb.events.summaries import dtype_code
from tvmdbg_tb.proto import debug_event_pb2 as pb


@pytest.fixture(scope="module", params=trace_paths.PATHS)
def trace_path(request):
    with trace_paths.using(request.param):
        yield request.param


def _run_in_mode(logdir, mode):
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        executable, inputs = mixed_dtypes()
        vm = relax.VirtualMachine(executable, tvm.cpu())
        vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
    finally:
        tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(logdir)
    reader.update()
    run = reader.run()
    return run, [run.trace(i) for i in range(run.num_traces())], inputs


@pytest.fixture(scope="module")
def dumps(tmp_path_factory, trace_path):
    return {mode: _run_in_mode(tmp_path_factory.mktemp(mode), mode) for mode in MODE_NAMES}


def _values(tensor_value: pb.TensorValue) -> np.ndarray:
    return np.frombuffer(tensor_value.content, dtype=tensor_value.dtype).reshape(tuple(tensor_value.shape))


def _expected(mode: str, array: np.ndarray) -> list[float]:
    size, rank = array.size, array.ndim
    is_float = array.dtype.kind == "f"
    nan = int(np.isnan(array).sum()) if is_float else 0
    pos_inf = int(np.isposinf(array).sum()) if is_float else 0
    neg_inf = int(np.isneginf(array).sum()) if is_float else 0
    finite = array[np.isfinite(array)] if is_float else array.astype("int64")
    negative, zero, positive = int((finite < 0).sum()), int((finite == 0).sum()), int((finite > 0).sum())
    code = dtype_code(str(array.dtype))
    if mode == "CURT_HEALTH":
        return [1.0 if nan + pos_inf + neg_inf else 0.0]
    if mode == "CONCISE_HEALTH":
        return [size, neg_inf, pos_inf, nan]
    if mode == "FULL_HEALTH":
        return [0, code, rank, size, neg_inf, pos_inf, nan, negative, zero, positive]
    if mode == "SHAPE":
        return [code, rank, size, *array.shape]
    if mode == "FULL_STATS":
        values = finite.astype("float64")
        if not values.size:
            stats = [np.nan] * 5
        else:
            low, high = values.min(), values.max()
            stats = [low, high, values.mean(), np.sqrt((values**2).sum()), max(-low, high)]
        return [0, code, rank, size, neg_inf, pos_inf, nan, negative, zero, positive, *stats]
    return []


def _matches(got, expected) -> bool:
    """Equal, up to summation order for FULL_STATS' sums (float32 partial sums per block on the
    fast path: ~1e-7 relative); counts stay exact."""
    return len(got) == len(expected) and bool(np.allclose(got, expected, rtol=1e-6, atol=0, equal_nan=True))


def test_full_tensor_values_match_numpy(dumps):
    run, traces, inputs = dumps["FULL_TENSOR"]
    by_name = {t.op_name: _values(t.tensor_value) for t in traces}
    x = inputs[0]
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(by_name["lv"], np.log(x), rtol=1e-6)
        np.testing.assert_array_equal(by_name["lv1"], np.argmax(x, axis=1))
        np.testing.assert_array_equal(by_name["lv2"], x > 0)
        np.testing.assert_allclose(by_name["lv4"], np.log(x).astype("float16"), rtol=1e-3)
    assert {str(v.dtype) for v in by_name.values()} == {"float32", "int64", "bool", "int32", "float16"}


@pytest.mark.parametrize("mode", [m for m in MODE_NAMES if m != "FULL_TENSOR"])
def test_mode_values_match_numpy(dumps, mode):
    _, full, inputs = dumps["FULL_TENSOR"]
    reference = {t.op_name: _values(t.tensor_value) for t in full}
    run, traces, _ = dumps[mode]
    assert sorted(t.op_name for t in traces) == sorted(reference)
    for trace in traces:
        array = reference[trace.op_name]
        assert trace.tensor_debug_mode == pb.TensorDebugMode.Value(mode)
        assert _matches(list(trace.debug_values), _expected(mode, array)), (trace.op_name, array)
        assert trace.dtype == str(array.dtype) and list(trace.shape) == list(array.shape)
    execution = run.execution(0)
    assert _matches(list(execution.inputs[0].debug_values), _expected(mode, inputs[0]))
    assert len(execution.outputs) == 5
    for summary in execution.outputs:
        assert _matches(list(summary.debug_values), _expected(mode, reference_by_dtype(reference, summary.dtype)))


def reference_by_dtype(reference, dtype):
    return next(v for v in reference.values() if str(v.dtype) == dtype)


def test_nonfinite_digests_follow_the_mode(dumps):
    run, traces, _ = dumps["FULL_HEALTH"]
    digests = run.trace_digests()
    log_row = [i for i, t in enumerate(traces) if t.op_name == "lv"][0]
    assert (digests["nan"][log_row], digests["neg_inf"][log_row], digests["pos_inf"][log_row]) == (3, 1, 1)


def test_a_shape_build_counts_nothing_and_health_sessions_count_again(tmp_path):
    """SHAPE builds write sizes and dims only (kernels without counts, no parameter rows); a
    later health session on the same executable still gets exact counts, and a health build
    serves SHAPE."""

    data = np.array([[1.0, np.nan, 0.0, -3.0], [2.0, 2.0, -np.inf, 0.5]], "float32")

    def run(mode, executable, logdir):
        tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode=mode, circular_buffer_size=-1)
        try:
            if executable is None:
                executable, _ = mixed_dtypes()
            vm = relax.VirtualMachine(executable, tvm.cpu())
            outs = [o.numpy() for o in vm["main"](tvm.runtime.tensor(data))]
        finally:
            tvmdbg.disable_dump_debug_info()
        reader = tvmdbg.DebugDataReader(str(logdir))
        reader.update()
        execution = reader.run().execution(0)
        for summary, array in zip(execution.outputs, outs):
            assert list(summary.debug_values) == _expected(mode, array), (mode, summary.dtype)
        return executable, vm._tvmdbg_info

    with trace_paths.using("compiled"):
        shape_build, info = run("SHAPE", None, tmp_path / "shape")
        assert info.compiled_health is Summaries.SHAPE
        function = info.compiled["main"]
        assert function.nrows == 1 + len(function.rows)  # no parameter rows
        run("FULL_HEALTH", shape_build, tmp_path / "health_on_shape")
        health_build, _ = run("FULL_HEALTH", None, tmp_path / "health")
        run("SHAPE", health_build, tmp_path / "shape_on_health")


def test_shape_values_of_static_and_symbolic_outputs(tmp_path):
    """SHAPE on the compiled path: a static output's values come with its constant trace
    fields, a symbolic one's from the kernel's row; each written once, in a function that
    has both."""
    n = tvm.tirx.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n, 4), "float32"))
    y = relax.Var("y", relax.TensorType((3,), "float32"))
    with bb.function("main", [x, y]):
        with bb.dataflow():
            a = bb.emit(relax.op.add(x, relax.const(1.0, "float32")))
            b = bb.emit(relax.op.multiply(y, relax.const(2.0, "float32")))
            c = bb.emit(relax.op.multiply(a, relax.const(2.0, "float32")))
            out = bb.emit_output(relax.Tuple([c, b]))
        bb.emit_func_output(out)
    xs, ys = np.ones((5, 4), "float32"), np.ones(3, "float32")
    with trace_paths.using("compiled"):
        tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="SHAPE", circular_buffer_size=-1)
        try:
            vm = relax.VirtualMachine(tvm.compile(bb.get(), "llvm"), tvm.cpu())
            for _ in range(2):
                vm["main"](tvm.runtime.tensor(xs), tvm.runtime.tensor(ys))
            assert vm._tvmdbg_info.compiled
        finally:
            tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    run = reader.run()
    assert run.num_traces() == 6
    expected = [_expected("SHAPE", arr) for arr in (xs + 1, ys * 2, (xs + 1) * 2)] * 2
    assert [list(run.trace(k).debug_values) for k in range(6)] == expected
