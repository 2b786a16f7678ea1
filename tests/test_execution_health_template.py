"""Execution input/output summaries in health modes (the pre-serialised template on the
compiled path, messages on the VM-instrument path) match numpy on every output dtype,
on the first call and on repeated calls."""

from __future__ import annotations

import numpy as np
import pytest
import trace_paths
import tvm
from models import chain, mixed_dtypes
from test_instrument_modes import _expected
from tvm import relax

import tvmdbg


@pytest.fixture(params=trace_paths.PATHS)
def trace_path(request):
    with trace_paths.using(request.param):
        yield request.param


@pytest.mark.parametrize("mode", ["CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH"])
def test_execution_summaries_match_numpy(tmp_path, trace_path, mode):
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        executable, inputs = mixed_dtypes()
        vm = relax.VirtualMachine(executable, tvm.cpu())
        calls = [inputs[0], np.array([[1.0, np.nan, 0.0, -3.0], [2.0, 2.0, -np.inf, 0.5]], "float32")]
        results = []
        for data in [calls[0], calls[1], calls[0]]:
            out = vm["main"](tvm.runtime.tensor(data))
            results.append((data, [o.numpy() for o in out]))
    finally:
        tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    run = reader.run()
    assert run.num_executions() == 3
    assert run.num_traces() == 3 * 5
    for i, (data, outs) in enumerate(results):
        execution = run.execution(i)
        assert execution.index == i and execution.function_name == "main"
        assert len(execution.inputs) == 1 and len(execution.outputs) == 5
        for summary, array in zip([*execution.inputs, *execution.outputs], [data, *outs]):
            assert summary.dtype == str(array.dtype)
            assert tuple(summary.shape) == array.shape
            assert list(summary.debug_values) == _expected(mode, array), (i, summary.dtype)


@pytest.mark.parametrize("mode", ["CONCISE_HEALTH", "FULL_HEALTH"])
def test_static_function_summaries_match_numpy(tmp_path, trace_path, mode):
    """A fully static function (the compiled path's pre-serialised template applies): every
    call's summaries, index, kernel count, duration and the user's frame."""
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        executable, inputs = chain(4, 7)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        planted = inputs[0].copy()
        planted[[1, 4, 5]] = [np.nan, -np.inf, np.inf]
        datas = [inputs[0], planted, inputs[0], np.zeros(7, "float32"), -np.ones(7, "float32")]
        results = []
        for data in datas:
            results.append((data, vm["main"](tvm.runtime.tensor(data)).numpy()))
    finally:
        tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    run = reader.run()
    assert run.num_executions() == len(datas) and run.num_traces() == 4 * len(datas)
    for i, (data, out) in enumerate(results):
        execution = run.execution(i)
        assert execution.index == i and execution.num_traces == 4 and execution.duration_us > 0
        assert run.user_frame(execution.code_location).function == "test_static_function_summaries_match_numpy"
        assert [s.dtype for s in (*execution.inputs, *execution.outputs)] == ["float32", "float32"]
        assert list(execution.inputs[0].shape) == [7] and list(execution.outputs[0].shape) == [7]
        assert list(execution.inputs[0].debug_values) == _expected(mode, data)
        assert list(execution.outputs[0].debug_values) == _expected(mode, out)


def _optimizer_executions(logdir, mode: str, params: str, steps: int = 4):
    """A diverging training run (tvm.relax.training, SGD at lr 7: NaN after a few steps):
    each optimizer call's Execution and, taken before it, its parameter and gradient arrays,
    and the optimizer's compile-time instrumentation (None on the VM-instrument path)."""
    from models import digits_training

    pytest.importorskip("sklearn")
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode=mode, circular_buffer_size=-1, param_summaries=params)
    try:
        training = digits_training(lr=7.0, fuse=True)
        trainer = training.trainer
        optimizer = trainer.vm._tvmdbg_info.compiled.get("optimizer")  # its instrumentation
        seen = []
        for _ in range(steps):
            before = [p.numpy() for p in trainer._params]
            trainer.update(training.inputs, training.targets)
            seen.append(before)
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(str(logdir)) as reader:
        reader.update()
        run = reader.run()
        executions = [run.execution(i) for i in range(run.num_executions())]
    return [e for e in executions if e.function_name == "optimizer"], seen, optimizer


def _assert_same_summary(a, b) -> None:
    """Equal summaries; FULL_STATS' float statistics to rounding (the kernel sums in blocks)."""
    assert (a.dtype, list(a.shape), len(a.items)) == (b.dtype, list(b.shape), len(b.items))
    assert a.HasField("summarized_in_execution") == b.HasField("summarized_in_execution")
    assert a.summarized_in_execution == b.summarized_in_execution
    assert len(a.debug_values) == len(b.debug_values)
    np.testing.assert_allclose(a.debug_values, b.debug_values, rtol=1e-5)
    for x, y in zip(a.items, b.items):
        _assert_same_summary(x, y)


@pytest.mark.slow
@pytest.mark.parametrize("params", ["every_call", "once_per_value"])
@pytest.mark.parametrize("mode", ["NO_TENSOR", "SHAPE", "CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH", "FULL_STATS"])
def test_tuple_arguments_match_numpy_on_both_paths(tmp_path, mode, params):
    """The optimizer's tuple arguments (parameters, gradients, state): the compiled path's
    template (kernel rows per tensor) writes what the VM-instrument path computes in numpy,
    and the parameter tuple's totals and items match numpy as the run goes NaN."""
    recorded = {}
    for path in trace_paths.PATHS:
        with trace_paths.using(path):
            recorded[path] = _optimizer_executions(tmp_path / path, mode, params)
    if mode not in ("NO_TENSOR", "SHAPE", "FULL_STATS"):  # the compiled path summarised each tensor in a kernel
        optimizer = recorded["compiled"][2]
        assert [len(rows or ()) for rows in optimizer.param_leaf_rows] == [4, 4, 1]
    (fast, seen, _), (slow, _, _) = recorded["compiled"], recorded["vm_instrument"]
    assert len(fast) == len(slow) == 4
    for a, b in zip(fast, slow):
        assert [s.dtype for s in a.inputs] == ["tuple", "tuple", "tuple"]
        for x, y in zip([*a.inputs, *a.outputs], [*b.inputs, *b.outputs], strict=True):
            _assert_same_summary(x, y)
    nonfinite = 0
    for execution, arrays in zip(fast, seen):
        tuple_summary = execution.inputs[0]
        assert list(tuple_summary.shape) == [len(arrays)]
        if mode == "NO_TENSOR":
            assert not tuple_summary.items and not tuple_summary.debug_values
            continue
        if mode == "SHAPE":  # each tensor's shape, nothing for the tuple
            assert [list(i.debug_values) for i in tuple_summary.items] == [_expected(mode, a) for a in arrays]
            assert not tuple_summary.debug_values
            continue
        for item, array in zip(tuple_summary.items, arrays):
            np.testing.assert_allclose(item.debug_values, _expected(mode, array), rtol=1e-5)
        flat = np.concatenate([a.ravel() for a in arrays])
        expected = _expected(mode, flat)
        if mode in ("FULL_HEALTH", "FULL_STATS"):
            expected[2] = 0  # a tuple's rank
        np.testing.assert_allclose(tuple_summary.debug_values, expected, rtol=1e-5)
        nonfinite += int(not np.isfinite(flat).all())
    if mode not in ("NO_TENSOR", "SHAPE"):
        assert nonfinite, "the run was meant to reach non-finite parameters"


def _nested_tuple_model():
    """main(x, t) with t = (a, (k, b)): a nested tuple argument of two dtypes."""
    from models import compile_module

    f32, i32 = relax.TensorType((2, 3), "float32"), relax.TensorType((3,), "int32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", f32)
    t = relax.Var("t", relax.TupleType([f32, relax.TupleType([i32, f32])]))
    with bb.function("main", [x, t]):
        with bb.dataflow():
            a = bb.emit(relax.TupleGetItem(t, 0))
            inner = bb.emit(relax.TupleGetItem(t, 1))
            b = bb.emit(relax.TupleGetItem(inner, 1))
            total = bb.emit(relax.op.add(x, a))
            out = bb.emit_output(relax.op.multiply(total, b))
        bb.emit_func_output(out)
    return compile_module(bb.get(), False)


@pytest.mark.parametrize("mode", ["NO_TENSOR", "CONCISE_HEALTH", "FULL_HEALTH"])
def test_nested_tuple_argument_in_flatten_order(tmp_path, mode):
    """A nested tuple argument's tensors are summarised in the order summary.flatten lists
    the runtime value, on both paths, and match numpy."""
    a = np.array([[1.0, -2.0, np.nan], [0.0, 3.0, np.inf]], "float32")
    k = np.array([0, -7, 9], "int32")
    b = np.array([[2.0, 0.0, -1.0], [np.nan, 1.0, 1.0]], "float32")
    x = np.ones((2, 3), "float32")
    recorded = {}
    for path in trace_paths.PATHS:
        with trace_paths.using(path):
            tvmdbg.enable_dump_debug_info(str(tmp_path / path), tensor_debug_mode=mode, circular_buffer_size=-1)
            try:
                vm = relax.VirtualMachine(_nested_tuple_model(), tvm.cpu())
                tensors = [tvm.runtime.tensor(v) for v in (a, k, b)]
                nested = (tensors[0], (tensors[1], tensors[2]))
                for _ in range(2):
                    vm["main"](tvm.runtime.tensor(x), nested)
            finally:
                tvmdbg.disable_dump_debug_info()
            with tvmdbg.DebugDataReader(str(tmp_path / path)) as reader:
                reader.update()
                recorded[path] = [reader.run().execution(i) for i in range(2)]
            if path == "compiled" and mode != "NO_TENSOR":
                main = vm._tvmdbg_info.compiled["main"]
                assert [len(rows or ()) for rows in main.param_leaf_rows] == [0, 3]
    for fast, slow in zip(recorded["compiled"], recorded["vm_instrument"]):
        for p, q in zip([*fast.inputs, *fast.outputs], [*slow.inputs, *slow.outputs], strict=True):
            _assert_same_summary(p, q)
        summary = fast.inputs[1]
        assert summary.dtype == "tuple" and list(summary.shape) == [3]
        if mode == "NO_TENSOR":
            continue
        assert [i.dtype for i in summary.items] == ["float32", "int32", "float32"]
        for item, array in zip(summary.items, (a, k, b)):
            assert list(item.debug_values) == _expected(mode, array)
        totals = _expected(mode, np.concatenate([a.ravel(), b.ravel(), k.ravel().astype("float32")]))
        if mode == "FULL_HEALTH":
            totals[1:3] = [0, 0]  # no common dtype; a tuple's rank
        assert list(summary.debug_values) == totals
