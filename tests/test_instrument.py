"""Instrumentation on real compiled models: planted NaN/Inf found at the right kernel, original
op and user line for every frontend, with and without fusion."""

from __future__ import annotations

import os

import numpy as np
import pytest
import trace_paths
import tvm
from models import FAULTS, FRONTENDS, extern_kernel_between, mismatched_shapes, planted
from tvm import relax

import tvmdbg
from tvmdbg_tb.events.reader import NONFINITE
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import api

CASES = [(frontend, fault, fuse) for frontend in FRONTENDS for fault in FAULTS for fuse in (False, True)]


@pytest.fixture(scope="module", params=trace_paths.PATHS)
def trace_path(request):
    with trace_paths.using(request.param):
        yield request.param


@pytest.fixture(scope="module")
def planted_dump(tmp_path_factory, trace_path):
    """Every planted model compiled and run once under FULL_HEALTH; execution index per case."""
    logdir = tmp_path_factory.mktemp("planted")
    seen: list[pb.Execution] = []
    listen = lambda execution, traces: seen.append(execution)  # noqa: E731
    api.add_execution_listener(listen)
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        index, outputs, models = {}, {}, {}
        for case in CASES:
            model = planted(*case)
            _, result = model.run()
            index[case] = seen[-1].index
            outputs[case] = result.numpy()
            models[case] = model
    finally:
        tvmdbg.disable_dump_debug_info()
        api.remove_execution_listener(listen)
    reader = tvmdbg.DebugDataReader(logdir)
    reader.update()
    yield reader.run(), index, outputs, models
    reader.close()


def _first_nonfinite(run, execution_index):
    rows = run.execution_trace_indices(execution_index)
    digests = run.trace_digests()[rows]
    bad = rows[(digests["flags"] & NONFINITE) != 0]
    return run.trace(int(bad[0])) if len(bad) else None


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_planted_fault_found_at_origin(planted_dump, case):
    run, index, outputs, models = planted_dump
    model = models[case]
    trace = _first_nonfinite(run, index[case])
    assert trace is not None, "no non-finite kernel output found"
    op = run.op(trace.op_id)
    fused = case[2]
    types = [o.op_type for o in op.original_ops]
    assert model.fault_op_type in types
    if not fused:
        assert types == [model.fault_op_type]
        frame = run.user_frame(op.code_location)
        assert (frame.file_path, frame.line) == (model.fault_file, model.fault_line)
    else:
        assert len(types) > 1, "fusion should fold several ops into the kernel"
    original = op.original_ops[types.index(model.fault_op_type)]
    frame = run.user_frame(original.code_location)
    assert (os.path.realpath(frame.file_path), frame.line) == (os.path.realpath(model.fault_file), model.fault_line)
    source = run.source_file(run.stack_frame(frame.id).file_index)
    assert source.lines[frame.line - 1].strip()  # the file itself is in the dump
    # The inputs' health explains the fault: the kernel's inputs (or their producers) hold
    # zeros / negatives that log, sqrt or division turn into NaN/Inf.
    fields = tvmdbg_fields(trace)
    assert fields["nan"] + fields["neg_inf"] + fields["pos_inf"] > 0
    if not fused:
        producer = next(i for i in op.inputs if i.kind == pb.OpInput.OP_OUTPUT)
        rows = run.execution_trace_indices(index[case])
        producer_trace = next(run.trace(int(r)) for r in rows if run.trace(int(r)).op_id == producer.producer_op_id)
        produced = tvmdbg_fields(producer_trace)
        assert produced["zero"] >= 1 and produced["negative"] >= 1
        assert produced["nan"] == produced["neg_inf"] == produced["pos_inf"] == 0


def tvmdbg_fields(trace):
    from tvmdbg_tb.events.summaries import describe

    return describe(trace.tensor_debug_mode, trace.debug_values)


@pytest.mark.parametrize("fuse", [False, True])
def test_nan_hidden_by_maximum_is_caught_at_origin(planted_dump, fuse):
    run, index, outputs, models = planted_dump
    case = ("blockbuilder", "sqrt", fuse)
    assert np.isfinite(outputs[case]).all(), "maximum(x, 0) should hide the NaN from the output"
    execution = run.execution(next(i for i in range(run.num_executions()) if run.execution(i).index == index[case]))
    assert execution.outputs[0].debug_values[6] == 0  # the output has no NaN
    trace = _first_nonfinite(run, index[case])
    assert trace is not None
    assert "relax.sqrt" in [o.op_type for o in run.op(trace.op_id).original_ops]


def test_graph_records_describe_sites(planted_dump, trace_path):
    run, index, _, _ = planted_dump
    graphs = run.graphs()
    assert len(graphs) == len(CASES)
    assert all(g.source_mapped and g.instrumentation for g in graphs)
    assert {g.instrumentation for g in graphs} == {"vm_instrument" if trace_path == "vm_instrument" else "compiled"}
    for graph in graphs:
        ops = run.ops(graph.graph_id)
        ids = [op.op_id for op in ops]
        assert len(set(ids)) == len(ids)
        assert [op.position for op in ops] == list(range(len(ops)))
        for op in ops:
            assert op.outputs and op.outputs[0].dtype == "float32" and list(op.outputs[0].shape) == [1, 8]
            for item in op.inputs:
                if item.kind == pb.OpInput.OP_OUTPUT:
                    assert item.producer_op_id in ids and item.producer_op_id < op.op_id
                elif item.kind == pb.OpInput.PARAM:
                    assert graph.param_names[item.param_index] == item.name
    # Unfused: one kernel per op, the `add`-like kernels may be shared by several sites.
    unfused = [g for g in graphs if len(run.ops(g.graph_id)) == 6]
    assert unfused


def test_executions_record_calls(planted_dump):
    run, index, outputs, models = planted_dump
    assert run.num_executions() == len(CASES)
    execution = run.execution(0)
    assert execution.function_name == "main"
    assert len(execution.inputs) == 3 and len(execution.outputs) == 1
    assert execution.duration_us > 0
    frame = run.user_frame(execution.code_location)
    assert frame.file_path.endswith("models.py") and frame.function == "run"
    assert execution.num_traces == len(run.execution_trace_indices(execution.index))
    durations = [run.trace(int(i)).duration_us for i in run.execution_trace_indices(execution.index)]
    assert all(0 < d < execution.duration_us for d in durations)


def test_failing_kernel_is_recorded_and_error_unchanged(tmp_path, trace_path):
    mod = mismatched_shapes()
    ex = tvm.compile(mod, "llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    args = (tvm.runtime.tensor(np.ones(3, "float32")), tvm.runtime.tensor(np.ones(4, "float32")))
    with pytest.raises(Exception) as plain:
        vm["main"](*args)
    tvmdbg.enable_dump_debug_info(tmp_path, circular_buffer_size=-1)
    try:
        ex = tvm.compile(mod, "llvm")
        vm = relax.VirtualMachine(ex, tvm.cpu())
        with pytest.raises(type(plain.value)) as traced:
            vm["main"](*args)
        assert str(traced.value) == str(plain.value)
        ok = vm["main"](*(tvm.runtime.tensor(np.ones(4, "float32")) for _ in range(2)))  # VM still usable
        np.testing.assert_allclose(ok.numpy(), np.e + 1, rtol=1e-6)
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        failed = run.execution(0)
        assert failed.error
        errors = [run.trace(int(i)) for i in run.execution_trace_indices(failed.index)]
        errors = [t for t in errors if t.error]
        assert len(errors) == 1 and errors[0].error.split(":")[0] in str(type(plain.value).__name__) + errors[0].error
        assert not run.execution(1).error


def _raise_in_kernel(x, out):
    raise ValueError("the extern kernel refused its input")


tvm.register_global_func("tvmdbg_test.failing_kernel", _raise_in_kernel, override=True)


def failing_extern_traces(logdir) -> list[tuple[str, str, int, str]]:
    """A FULL_HEALTH run whose extern kernel raises (the error unchanged): (kernel, op name,
    op id, error) of each trace of that call."""
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH")
    try:
        vm = relax.VirtualMachine(tvm.compile(extern_kernel_between("tvmdbg_test.failing_kernel"), "llvm"), tvm.cpu())
        with pytest.raises(ValueError, match="refused its input"):
            vm["main"](tvm.runtime.tensor(np.ones(4, "float32")))
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        traces = [run.trace(int(i)) for i in run.execution_trace_indices(0)]
        return [(t.kernel, t.op_name, t.op_id, t.error) for t in traces]


_REFUSE = [False]


def _copy_unless_refused(x, out):
    if _REFUSE[0]:
        raise ValueError("refused this time")
    np.from_dlpack(out)[:] = np.from_dlpack(x)


tvm.register_global_func("tvmdbg_test.sometimes_failing", _copy_unless_refused, override=True)


@pytest.mark.parametrize("mode", ["FULL_HEALTH", "NO_TENSOR"])
def test_a_call_failing_after_complete_ones_records_only_the_kernels_that_ran(tmp_path, trace_path, mode, monkeypatch):
    """The stats buffers are reused from call to call (the compiled path clears their
    timestamps as it reads them): a call failing midway after complete calls shows the
    kernels that ran and the one that raised, never a row left from an earlier call."""
    from tvmdbg_tb.tracing import fast_tracer, native_rows, vm_wrapper

    assert native_rows.LIBRARY.load() is not None, native_rows.LIBRARY.failure()
    one_pass, cleared = fast_tracer.CompiledTracer._one_pass, []

    def spied(self, *args):
        result = one_pass(self, *args)
        cleared.append(result is not None and result[3])
        return result

    monkeypatch.setattr(fast_tracer.CompiledTracer, "_one_pass", spied)
    x = tvm.runtime.tensor(np.linspace(-1, 1, 4, dtype="float32"))
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        vm = relax.VirtualMachine(
            tvm.compile(extern_kernel_between("tvmdbg_test.sometimes_failing"), "llvm"), tvm.cpu()
        )
        for refuse in (False, False, True, False, True):
            _REFUSE[0] = refuse
            if refuse:
                with pytest.raises(ValueError, match="refused this time"):
                    vm["main"](x)
            else:
                np.testing.assert_allclose(vm["main"](x).numpy(), 2 * np.exp(x.numpy()), rtol=1e-6)
        native = vm_wrapper.tracer_of(vm)._native if trace_path == "compiled" else None
    finally:
        _REFUSE[0] = False
        tvmdbg.disable_dump_debug_info()
    # The complete calls' buffers were cleared as they were read: by the Python path's one
    # pass, or by native_call, which recorded those three calls itself.
    assert cleared == ([True] * 3 if trace_path == "python_call" else [])
    if trace_path == "compiled":
        assert native.counts()[2] == 3
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        assert run.num_executions() == 5
        for index, refused in enumerate((False, False, True, False, True)):
            traces = [run.trace(int(i)) for i in run.execution_trace_indices(index)]
            kernels = [(t.kernel, bool(t.error)) for t in traces]
            if refused:
                assert kernels == [("tir_exp", False), ("tvmdbg_test.sometimes_failing", True)], index
                assert run.execution(index).error
            else:
                assert [k for k, _ in kernels] == ["tir_exp", "tvmdbg_test.sometimes_failing", "add"], index
                assert not any(e for _, e in kernels) and not run.execution(index).error


def test_failing_extern_kernel_is_the_error_site(tmp_path, trace_path):
    traces = failing_extern_traces(tmp_path)
    assert [t[0] for t in traces] == ["tir_exp", "tvmdbg_test.failing_kernel"]
    assert not traces[0][3] and "refused its input" in traces[1][3]
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        assert run.op(traces[1][2]).call_type == "call_dps_packed"
        assert "refused its input" in run.execution(0).error
