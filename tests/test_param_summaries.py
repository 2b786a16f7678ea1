"""param_summaries="once_per_value": a weight passed again as the same tensor object is not
re-summarised, and every write the rule can see (a DLPack/numpy view, copyfrom, copyto,
an in-place kernel) still shows a NaN written into the weight between calls, on both
tracing paths, with counts equal to numpy's."""

from __future__ import annotations

import numpy as np
import pytest
import trace_paths
import tvm
from models import compile_module
from tvm import relax

import tvmdbg
from tvmdbg_tb.tracing.state import ACTIVE


@pytest.fixture(params=trace_paths.PATHS)
def trace_path(request):
    with trace_paths.using(request.param):
        yield request.param


def _mlp(batch=2, dims=(12, 16, 4)):
    """y = relu(x @ w1) @ w2, the weights as function parameters."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((batch, dims[0]), "float32"))
    w1 = relax.Var("w1", relax.TensorType((dims[0], dims[1]), "float32"))
    w2 = relax.Var("w2", relax.TensorType((dims[1], dims[2]), "float32"))
    with bb.function("main", [x, w1, w2]):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.relu(relax.op.matmul(x, w1)))
            out = bb.emit_output(relax.op.matmul(h, w2))
        bb.emit_func_output(out)
    return bb.get()


def _numpy_health(array):
    a = np.asarray(array, dtype=np.float64)
    neg_inf, pos_inf, nan = int(np.isneginf(a).sum()), int(np.isposinf(a).sum()), int(np.isnan(a).sum())
    finite = a[np.isfinite(a)]
    return [a.size, neg_inf, pos_inf, nan, int((finite < 0).sum()), int((finite == 0).sum()), int((finite > 0).sum())]


def _executions(logdir):
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        return [run.execution(i) for i in range(run.num_executions())], run.num_traces()


def _run(tmp_path, calls, param_summaries="once_per_value"):
    """Compiles the MLP under FULL_HEALTH, then runs calls(function, x, w1, w2, snapshots):
    snapshots.append() records the weights' values as numpy saw them before each call."""
    tvmdbg.enable_dump_debug_info(
        str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1, param_summaries=param_summaries
    )
    try:
        rng = np.random.default_rng(0)
        executable = compile_module(_mlp(), fuse=False)
        function = relax.VirtualMachine(executable, tvm.cpu())["main"]
        x = tvm.runtime.tensor(rng.standard_normal((2, 12)).astype("float32"))
        w1 = tvm.runtime.tensor(rng.standard_normal((12, 16)).astype("float32"))
        w2 = tvm.runtime.tensor(rng.standard_normal((16, 4)).astype("float32"))
        snapshots = []
        calls(function, x, w1, w2, snapshots)
    finally:
        tvmdbg.disable_dump_debug_info()
    return _executions(str(tmp_path)), snapshots


def _call(function, x, w1, w2, snapshots):
    snapshots.append((w1.numpy().copy(), w2.numpy().copy()))
    function(x, w1, w2)


def _check(executions, snapshots):
    assert len(executions) == len(snapshots)
    for execution, (w1, w2) in zip(executions, snapshots):
        assert list(execution.inputs[1].debug_values)[3:] == _numpy_health(w1)
        assert list(execution.inputs[2].debug_values)[3:] == _numpy_health(w2)


def test_unchanged_weights_summarised_once(tmp_path, trace_path):
    def calls(function, x, w1, w2, snapshots):
        for _ in range(3):
            _call(function, x, w1, w2, snapshots)

    (executions, traces), snapshots = _run(tmp_path, calls)
    _check(executions, snapshots)
    first = executions[0].index
    assert not executions[0].inputs[1].HasField("summarized_in_execution")
    for execution in executions[1:]:
        assert execution.inputs[1].summarized_in_execution == first
        assert execution.inputs[2].summarized_in_execution == first
    assert traces == 3 * 3  # matmul, relu, matmul: every kernel execution still recorded


def test_default_summarises_every_call(tmp_path, trace_path):
    def calls(function, x, w1, w2, snapshots):
        for _ in range(2):
            _call(function, x, w1, w2, snapshots)

    (executions, _), snapshots = _run(tmp_path, calls, param_summaries="every_call")
    _check(executions, snapshots)
    assert not any(e.inputs[1].HasField("summarized_in_execution") for e in executions)


def test_nan_written_through_numpy_view_is_caught(tmp_path, trace_path):
    """The view is made after the first call (the weight already summarised)."""

    def calls(function, x, w1, w2, snapshots):
        _call(function, x, w1, w2, snapshots)
        _call(function, x, w1, w2, snapshots)
        view = np.from_dlpack(w1)
        view[3, 5] = np.nan
        _call(function, x, w1, w2, snapshots)
        view[0, 0] = np.inf
        _call(function, x, w1, w2, snapshots)

    (executions, _), snapshots = _run(tmp_path, calls)
    _check(executions, snapshots)
    assert executions[1].inputs[1].HasField("summarized_in_execution")
    assert executions[2].inputs[1].debug_values[6] == 1  # the NaN, in the weight's own summary
    assert not executions[2].inputs[1].HasField("summarized_in_execution")
    assert executions[3].inputs[1].debug_values[5] == 1  # +inf written later through the same view
    # w2 was never exported nor written: still reused.
    assert executions[3].inputs[2].summarized_in_execution == executions[0].index


def test_view_made_before_first_call_is_caught(tmp_path, trace_path):
    def calls(function, x, w1, w2, snapshots):
        view = np.from_dlpack(w2)
        _call(function, x, w1, w2, snapshots)
        _call(function, x, w1, w2, snapshots)
        view[1, 1] = np.nan
        _call(function, x, w1, w2, snapshots)

    (executions, _), snapshots = _run(tmp_path, calls)
    _check(executions, snapshots)
    assert executions[2].inputs[2].debug_values[6] == 1


def test_nan_written_by_copyfrom_and_copyto_is_caught(tmp_path, trace_path):
    def calls(function, x, w1, w2, snapshots):
        _call(function, x, w1, w2, snapshots)
        _call(function, x, w1, w2, snapshots)
        bad = w1.numpy()
        bad[2, 2] = np.nan
        w1.copyfrom(bad)
        _call(function, x, w1, w2, snapshots)
        _call(function, x, w1, w2, snapshots)  # unchanged again: reused, NaN included
        worse = w2.numpy()
        worse[0, :] = -np.inf
        tvm.runtime.tensor(worse).copyto(w2)
        _call(function, x, w1, w2, snapshots)

    (executions, _), snapshots = _run(tmp_path, calls)
    _check(executions, snapshots)
    assert executions[2].inputs[1].debug_values[6] == 1
    assert not executions[2].inputs[1].HasField("summarized_in_execution")
    assert executions[3].inputs[1].summarized_in_execution == executions[2].index
    assert executions[4].inputs[2].debug_values[4] == 4  # the -inf row


def test_bad_param_summaries_rejected(tmp_path):
    with pytest.raises(ValueError, match="param_summaries"):
        tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", param_summaries="sometimes")


def _training_summaries(logdir, param_summaries):
    from models import digits_training

    tvmdbg.enable_dump_debug_info(
        str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1, param_summaries=param_summaries
    )
    try:
        training = digits_training(lr=7.0, fuse=True)
        for _ in range(6):  # goes NaN after ~3 steps: the updated weights carry it
            training.trainer.update(training.inputs, training.targets)
    finally:
        tvmdbg.disable_dump_debug_info()
    executions, traces = _executions(str(logdir))

    def values(summary):
        return [list(summary.debug_values), [list(item.debug_values) for item in summary.items]]

    return [(e.function_name, [values(s) for s in e.inputs]) for e in executions], executions, traces


def test_training_step_counts_equal_every_call(tmp_path, trace_path):
    """Weights updated by the optimizer come back as the outputs it returned (summarised
    there): every input summary equals the one computed every call, NaNs included."""
    every, _, every_traces = _training_summaries(tmp_path / "every", "every_call")
    once, executions, once_traces = _training_summaries(tmp_path / "once", "once_per_value")
    assert once == every
    assert once_traces == every_traces
    assert any(any(v[0][6] > 0 for v in inputs) for _, inputs in once)  # the NaN reached the weights
    reused = [s for e in executions for s in e.inputs if s.HasField("summarized_in_execution")]
    assert len(reused) >= 10


def _inplace_module():
    """main(x, w): w += 1 in place (call_tir_inplace), then x + w."""
    from tvm.script import tirx as T

    @T.prim_func
    def add_one(a: T.handle):
        A = T.match_buffer(a, (8,), "float32")
        for i in range(8):
            A[i] = A[i] + T.float32(1)

    bb = relax.BlockBuilder()
    gvar = bb.add_func(add_one, "add_one")
    x = relax.Var("x", relax.TensorType((8,), "float32"))
    w = relax.Var("w", relax.TensorType((8,), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            bumped = bb.emit(relax.call_tir_inplace(gvar, relax.Tuple([w]), 0, relax.TensorType((8,), "float32")))
            out = bb.emit_output(relax.op.add(x, bumped))
        bb.emit_func_output(out)
    return bb.get()


def test_function_with_inplace_kernel_never_reuses(tmp_path, trace_path):
    """A weight the function itself updates in place is summarised on every call."""
    tvmdbg.enable_dump_debug_info(
        str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1, param_summaries="once_per_value"
    )
    try:
        function = relax.VirtualMachine(compile_module(_inplace_module(), fuse=False), tvm.cpu())["main"]
        x = tvm.runtime.tensor(np.zeros(8, "float32"))
        w = tvm.runtime.tensor(np.arange(-3, 5, dtype="float32"))  # -3..4: crosses zero as it grows
        for _ in range(4):
            function(x, w)
    finally:
        tvmdbg.disable_dump_debug_info()
    executions, _ = _executions(str(tmp_path))
    assert len(executions) == 4
    assert not any(e.inputs[1].HasField("summarized_in_execution") for e in executions)
    negatives = [e.inputs[1].debug_values[7] for e in executions]
    # The compiled path summarises parameters before the first kernel, the VM-instrument path
    # when the call returns (after the in-place update): either way they follow the updates.
    assert negatives == ([3, 2, 1, 0] if trace_path != "vm_instrument" else [2, 1, 0, 0])
    np.testing.assert_array_equal(w.numpy(), np.arange(-3, 5, dtype="float32") + 4)


def test_exports_of_an_earlier_session_are_forgotten(tmp_path, trace_path):
    """A session starts from its own exports: memory a finished session saw exported (and the
    allocator may hand to a new tensor) does not stop reuse later, as views made before
    enable_dump_debug_info are not noticed (the documented rule)."""
    w = {}

    def export(function, x, w1, w2, snapshots):
        _call(function, x, w1, w2, snapshots)
        w["view"] = np.from_dlpack(w1)  # tainted for the rest of this session
        _call(function, x, w1, w2, snapshots)

    (first, _), _ = _run(tmp_path / "first", export)
    assert not first[1].inputs[1].HasField("summarized_in_execution")

    def again(function, x, w1, w2, snapshots):
        w1.copyfrom(w["view"])  # a new tensor; then two calls with it unchanged
        _call(function, x, w1, w2, snapshots)
        _call(function, x, w1, w2, snapshots)

    tvmdbg.enable_dump_debug_info(
        str(tmp_path / "second"), tensor_debug_mode="FULL_HEALTH", param_summaries="once_per_value"
    )
    tvmdbg.disable_dump_debug_info()  # a whole session in between: nothing carried over

    assert not ACTIVE.state.exports.tainted
    (second, _), snapshots = _run(tmp_path / "third", again)
    _check(second, snapshots)
    assert second[1].inputs[1].summarized_in_execution == second[0].index


def _relu_module():
    """main(x, w) = relu(w) + x, and echo(x, w) = (relu(w) + x, w), which returns w itself
    (its output row is w's parameter row): a -inf in w is an input of main only, an output
    of echo too; a NaN in x reaches both outputs."""
    bb = relax.BlockBuilder()
    for name, echo in (("main", False), ("echo", True)):
        x = relax.Var("x", relax.TensorType((8,), "float32"))
        w = relax.Var("w", relax.TensorType((8,), "float32"))
        with bb.function(name, [x, w]):
            with bb.dataflow():
                out = bb.emit_output(relax.op.add(relax.op.nn.relu(w), x))
            bb.emit_func_output(relax.Tuple([out, w]) if echo else out)
    return bb.get()


def _reused_calls(logdir, reused_templates: bool = True) -> tuple[list, int]:
    """Calls that reuse parameter summaries under FULL_HEALTH on the compiled path: the MLP's
    weights (one rewritten with a NaN in between), _relu_module's functions with a -inf
    weight and then a NaN input. Returns what
    the writer was told of each call's health next to what it finds in the records
    (health.call_nonfinite), and how many reusing calls took the one native pass.
    reused_templates=False: every such call takes the per-summary loop instead."""
    from tvmdbg_tb.events import health
    from tvmdbg_tb.events.writer import DebugEventsWriter
    from tvmdbg_tb.tracing import fast_tracer

    told, passes = [], [0]
    write_call, one_pass = DebugEventsWriter.write_call, fast_tracer.CompiledTracer._one_pass

    def spied_write(self, execution, payloads, wall_time=None, step=0, nonfinite=None, execution_index=None):
        told.append((nonfinite, health.call_nonfinite(self.tensor_debug_mode, execution, payloads)))
        write_call(self, execution, payloads, wall_time, step, nonfinite, execution_index)

    def counted_pass(self, call, *args):
        found = one_pass(self, call, *args)
        passes[0] += bool(call.skips) and found is not None
        return found

    rng = np.random.default_rng(0)
    with pytest.MonkeyPatch.context() as patch, trace_paths.using("compiled"):
        patch.setattr(DebugEventsWriter, "write_call", spied_write)
        patch.setattr(fast_tracer.CompiledTracer, "_one_pass", counted_pass)
        if not reused_templates:
            patch.setattr(fast_tracer.CompiledTracer, "_reused_plan", lambda *args: None)
        tvmdbg.enable_dump_debug_info(
            str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1, param_summaries="once_per_value"
        )
        try:
            mlp = relax.VirtualMachine(compile_module(_mlp(), fuse=False), tvm.cpu())["main"]
            x, w1, w2 = (
                tvm.runtime.tensor(rng.standard_normal(s).astype("float32")) for s in ((2, 12), (12, 16), (16, 4))
            )
            for k in range(6):
                if k == 3:
                    bad = w1.numpy()
                    bad[2, 2] = np.nan
                    w1.copyfrom(bad)
                mlp(x, w1, w2)
            vm = relax.VirtualMachine(compile_module(_relu_module(), fuse=True), tvm.cpu())
            x = tvm.runtime.tensor(np.zeros(8, "float32"))
            w = tvm.runtime.tensor(np.array([-np.inf] + [1.0] * 7, "float32"))
            nan_x = tvm.runtime.tensor(np.array([np.nan] + [0.0] * 7, "float32"))
            for name, value in (("main", x), ("echo", x), ("main", nan_x), ("echo", nan_x)):
                for _ in range(3):
                    vm[name](value, w)
        finally:
            tvmdbg.disable_dump_debug_info()
    return told, passes[0]


def test_reused_summaries_in_one_pass_write_the_loops_records(tmp_path):
    """A call that repeats the summaries of the same parameters as the call before it fills
    their template in the one native pass: every record is the one the per-summary loop
    writes, and the writer is told the call's health (no re-parse) exactly as the records
    hold it: outputs of traces and of the Execution count (a reused parameter row returned
    as an output too), inputs do not (reused or not)."""
    runs = {templates: _reused_calls(tmp_path / str(templates), templates) for templates in (True, False)}
    (told, passes), (loop_told, loop_passes) = runs[True], runs[False]
    assert trace_paths.records(tmp_path / "True") == trace_paths.records(tmp_path / "False")
    assert passes == 8 and loop_passes == 0
    assert [reference for _, reference in told] == [reference for _, reference in loop_told]
    assert all(given == reference for given, reference in told if given is not None)
    mlp, relu = told[:6], told[6:]
    assert [reference for _, reference in mlp] == [False] * 3 + [True] * 3  # the NaN weight reaches the output
    assert [given for given, _ in mlp] == [False, None, False, None, None, True]  # None: the loop
    # main with the -inf weight (an input only), echo (which returns it), then a NaN input.
    assert [reference for _, reference in relu] == [False] * 3 + [True] * 9
    assert [given for given, _ in relu] == [False, None, False, None, True, True] + [None, None, True, None, True, True]
    assert [given for given, _ in loop_told] == [False, None, None, None, None, None, False] + [None] * 11
