"""The instrumentation API: arguments, check-numerics, listeners, filters, unmapped
executables, stateful/timed calls, several functions and threads."""

from __future__ import annotations

import threading

import models_tvmscript
import numpy as np
import pytest
import tvm
from models import blockbuilder_planted, chain, compile_module
from tvm import relax

import tvmdbg
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import api


def _read(logdir):
    reader = tvmdbg.DebugDataReader(logdir)
    reader.update()
    return reader.run()


def _tensor(a):
    return tvm.runtime.tensor(np.asarray(a, dtype="float32"))


def test_enable_twice_and_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="tensor_debug_mode"):
        tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="EVERYTHING")
    with pytest.raises(ValueError, match="op_regex"):
        tvmdbg.enable_dump_debug_info(tmp_path, op_regex="(")
    with pytest.raises(TypeError):
        tvmdbg.enable_dump_debug_info(tmp_path, circular_buffer_size="10")
    writer = tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="CURT_HEALTH")
    try:
        assert tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="curt_health") is writer
        with pytest.raises(ValueError, match="different arguments"):
            tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH")
    finally:
        tvmdbg.disable_dump_debug_info()
    tvmdbg.disable_dump_debug_info()  # idempotent
    assert writer.closed


def test_check_numerics_raises_at_first_bad_kernel():
    tvmdbg.enable_check_numerics()
    try:
        model = blockbuilder_planted("log", fuse=False)
        with pytest.raises(api.CheckNumericsError) as caught:
            model.run()
    finally:
        tvmdbg.disable_check_numerics()
    error = caught.value
    assert error.kernel == "tir_log" and error.original_ops == [("relax.log", "lv1")]
    assert error.source == (model.fault_file, model.fault_line)
    message = str(error)
    assert f"models.py:{model.fault_line}" in message
    assert "nan=0 -inf=0 +inf=0 negative=2 zero=1 positive=5" in message  # the input explains it
    _, result = model.run()  # disabled: runs to completion
    assert np.isfinite(result.numpy()).all()


def test_check_numerics_with_fusion_names_the_fused_ops(tmp_path):
    tvmdbg.enable_dump_debug_info(tmp_path)
    tvmdbg.enable_check_numerics()
    try:
        model = blockbuilder_planted("div", fuse=True)
        with pytest.raises(api.CheckNumericsError) as caught:
            model.run()
    finally:
        tvmdbg.disable_check_numerics()
        tvmdbg.disable_dump_debug_info()
    assert ("relax.divide", "lv1") in caught.value.original_ops
    assert caught.value.kernel.startswith("fused_")
    run = _read(tmp_path)
    assert "CheckNumericsError" in run.execution(0).error


def test_listener_sees_every_call(tmp_path):
    seen = []

    def listener(execution, traces):
        seen.append((execution.function_name, execution.index, [t.op_name for t in traces]))

    api.add_execution_listener(listener)
    tvmdbg.enable_dump_debug_info(tmp_path)
    try:
        model = blockbuilder_planted("sqrt")
        vm, _ = model.run()
        vm["main"](*[tvm.runtime.tensor(a) for a in model.inputs])
    finally:
        tvmdbg.disable_dump_debug_info()
        api.remove_execution_listener(listener)
    assert [s[:2] for s in seen] == [("main", 0), ("main", 1)]
    assert seen[0][2] == ["lv", "lv1", "lv2", "lv3", "lv4", "gv"]


def test_filters_by_op_regex_and_dtype(tmp_path):
    tvmdbg.enable_dump_debug_info(tmp_path / "regex", op_regex=r"relax\.(log|matmul)")
    try:
        blockbuilder_planted("log").run()
    finally:
        tvmdbg.disable_dump_debug_info()
    run = _read(tmp_path / "regex")
    assert sorted(run.trace(i).kernel for i in range(run.num_traces())) == ["matmul", "tir_log"]
    from models import mixed_dtypes

    tvmdbg.enable_dump_debug_info(tmp_path / "dtype", tensor_dtypes=["int64", "bool"])
    try:
        executable, inputs = mixed_dtypes()
        relax.VirtualMachine(executable, tvm.cpu())["main"](*[tvm.runtime.tensor(a) for a in inputs])
    finally:
        tvmdbg.disable_dump_debug_info()
    run = _read(tmp_path / "dtype")
    assert sorted(run.trace(i).dtype for i in range(run.num_traces())) == ["bool", "int64"]


def test_executable_compiled_before_enable_is_traced_unmapped(tmp_path):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((8,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.log(x))
            parts = bb.emit(relax.op.split(a, 2))
            b = bb.emit(relax.op.add(relax.TupleGetItem(parts, 0), relax.TupleGetItem(parts, 1)))
            out = bb.emit_output(b)
        bb.emit_func_output(out)
    executable = compile_module(bb.get(), fuse=False)
    path = str(tmp_path / "lib.so")
    executable.export_library(path)
    loaded = tvm.runtime.load_module(path)
    tvmdbg.enable_dump_debug_info(tmp_path / "dump", tensor_debug_mode="FULL_HEALTH")
    try:
        for rt_mod in (executable, loaded):
            vm = relax.VirtualMachine(rt_mod, tvm.cpu())
            vm["main"](_tensor([0, 1, 2, 3, -1, 5, 6, 7]))
    finally:
        tvmdbg.disable_dump_debug_info()
    run = _read(tmp_path / "dump")
    graphs = run.graphs()
    assert len(graphs) == 2 and not any(g.source_mapped for g in graphs)
    assert all("without Relax op or source mapping" in g.note for g in graphs)
    for graph in graphs:
        ops = run.ops(graph.graph_id)
        assert [op.kernel for op in ops] == ["tir_log", "split", "add"]
        assert [len(op.outputs) for op in ops] == [1, 2, 1]
    first = [run.trace(int(i)) for i in run.execution_trace_indices(0)]
    assert [(t.kernel, t.output_slot) for t in first] == [("tir_log", 0), ("split", 0), ("split", 1), ("add", 0)]
    assert first[0].debug_values[6] == 1 and first[0].debug_values[4] == 1  # log: one nan, one -inf


def test_invoke_stateful_and_time_evaluator(tmp_path):
    tvmdbg.enable_dump_debug_info(tmp_path)
    try:
        executable, inputs = chain(n=4)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        vm.set_input("main", tvm.runtime.tensor(inputs[0]))
        vm.invoke_stateful("main")
        timer = vm.time_evaluator("main", tvm.cpu(), number=3, repeat=1)
        timer(tvm.runtime.tensor(inputs[0]))
    finally:
        tvmdbg.disable_dump_debug_info()
    run = _read(tmp_path)
    executions = [run.execution(i) for i in range(run.num_executions())]
    assert len(executions) == 1 + 4  # the stateful call, then warm-up + 3 timed runs
    assert len(executions[0].inputs) == 1 and len(executions[0].outputs) == 1
    assert all(e.num_traces == 4 for e in executions)
    assert len({e.index for e in executions}) == len(executions)


def test_several_functions_and_nested_calls(tmp_path):
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH")
    try:
        executable = compile_module(models_tvmscript.TwoFunctions, fuse=False)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        vm["main"](_tensor([1, 2, 3, 4]))
        vm["helper"](_tensor([1, 2, 3, 4]))
    finally:
        tvmdbg.disable_dump_debug_info()
    run = _read(tmp_path)
    graphs = {g.name: g for g in run.graphs()}
    assert set(graphs) == {"main", "helper"}
    main_traces = [run.trace(int(i)) for i in run.execution_trace_indices(0)]
    graph_of = [t.graph_id for t in main_traces]
    assert graph_of == [
        graphs["main"].graph_id,
        graphs["helper"].graph_id,
        graphs["helper"].graph_id,
        graphs["main"].graph_id,
    ]
    helper_ops = run.ops(graphs["helper"].graph_id)
    assert [o.original_ops[0].op_type for o in helper_ops] == ["relax.exp", "relax.add"]
    frame = run.user_frame(helper_ops[0].original_ops[0].code_location)
    assert (
        frame.file_path == models_tvmscript.__file__
        and "R.exp" in run.source_file(run.stack_frame(frame.id).file_index).lines[frame.line - 1]
    )


def test_threads_with_their_own_vms(tmp_path):
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="CURT_HEALTH", circular_buffer_size=-1)
    errors = []
    try:
        executable, inputs = chain(n=10)

        def work():
            try:
                vm = relax.VirtualMachine(executable, tvm.cpu())
                for _ in range(20):
                    vm["main"](tvm.runtime.tensor(inputs[0]))
            except Exception as error:  # surfaced below
                errors.append(error)

        threads = [threading.Thread(target=work) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        tvmdbg.disable_dump_debug_info()
    assert not errors
    run = _read(tmp_path)
    assert run.num_executions() == 60 and run.num_traces() == 600
    for i in range(run.num_executions()):
        execution = run.execution(i)
        traces = [run.trace(int(t)) for t in run.execution_trace_indices(execution.index)]
        assert [t.op_name for t in traces] == [op.op_name for op in run.ops(execution.graph_id)]
        assert all(t.tensor_debug_mode == pb.CURT_HEALTH for t in traces)


def test_check_numerics_on_an_executable_with_summary_kernels(tmp_path):
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH")
    try:
        model = blockbuilder_planted("sqrt", fuse=False)
        vm, _ = model.run()  # traced by the compiled summary kernels
        tvmdbg.enable_check_numerics()
        with pytest.raises(api.CheckNumericsError) as caught:
            vm["main"](*[tvm.runtime.tensor(a) for a in model.inputs])
    finally:
        tvmdbg.disable_check_numerics()
        tvmdbg.disable_dump_debug_info()
    assert caught.value.original_ops == [("relax.sqrt", "lv1")]
    run = _read(tmp_path)
    assert run.graphs()[0].instrumentation == "compiled"
    assert [run.execution(i).num_traces for i in range(2)] == [6, 2]  # stopped after sqrt


def test_control_flow_falls_back_to_the_vm_instrument(tmp_path):
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH")
    try:
        vm = relax.VirtualMachine(compile_module(models_tvmscript.WithBranch, fuse=False), tvm.cpu())
        for flag in (True, False):
            vm["main"](_tensor([0, 1, 2, 3]), tvm.runtime.tensor(np.array(flag)))
    finally:
        tvmdbg.disable_dump_debug_info()
    run = _read(tmp_path)
    graph = run.graphs()[0]
    assert graph.instrumentation == "vm_instrument" and "control flow" in graph.note
    kernels = [[run.trace(int(i)).kernel for i in run.execution_trace_indices(e)] for e in range(2)]
    assert kernels == [["tir_exp", "add"], ["tir_log", "add"]]
    log_trace = run.trace(int(run.execution_trace_indices(1)[0]))
    assert log_trace.debug_values[4] == 1  # log(0) = -inf


def test_a_listener_added_mid_session_sees_the_calls_after_it(tmp_path):
    """A listener added while a dump is running sees the calls after it, and none after it
    is removed: the dump has every call either way."""

    seen = []
    tvmdbg.enable_dump_debug_info(tmp_path, circular_buffer_size=-1)
    try:
        executable, inputs = chain(30, 9)
        function = relax.VirtualMachine(executable, tvm.cpu())["main"]
        function(tvm.runtime.tensor(inputs[0]))
        listener = lambda execution, traces: seen.append((execution.index, len(traces)))  # noqa: E731
        api.add_execution_listener(listener)
        try:
            function(tvm.runtime.tensor(inputs[0]))
        finally:
            api.remove_execution_listener(listener)
        function(tvm.runtime.tensor(inputs[0]))
    finally:
        tvmdbg.disable_dump_debug_info()
    assert seen == [(1, 30)]
    run = _read(tmp_path)
    assert run.num_executions() == 3 and run.num_traces() == 90


def test_circular_buffer_bytes_bounds_a_dump_that_keeps_every_record(tmp_path):
    """circular_buffer_size=-1 keeps every record; circular_buffer_bytes bounds each ring file
    (the newest records stay), and bad values are refused."""
    with pytest.raises(TypeError, match="circular_buffer_bytes must be an int"):
        tvmdbg.enable_dump_debug_info(tmp_path, circular_buffer_bytes="1MB")
    with pytest.raises(ValueError, match="circular_buffer_bytes must be >= 0"):
        tvmdbg.enable_dump_debug_info(tmp_path, circular_buffer_bytes=-1)
    executable, inputs = chain(20)
    calls, bound = 200, 32 * 1024
    sizes = {}
    for name, limit in (("all", None), ("bounded", bound)):
        tvmdbg.enable_dump_debug_info(
            tmp_path / name, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1, circular_buffer_bytes=limit
        )
        try:
            vm = relax.VirtualMachine(executable, tvm.cpu())
            for _ in range(calls):
                vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
        finally:
            tvmdbg.disable_dump_debug_info()
        run = _read(tmp_path / name)
        assert not run.corruptions and run.completeness().complete
        indices = run.execution_digests()["index"]
        (run_dir,) = (tmp_path / name).iterdir()
        sizes[name] = {f.name: f.stat().st_size for f in run_dir.iterdir()}
        if limit is None:
            assert list(indices) == list(range(calls)) and run.num_traces() == 20 * calls
        else:  # the newest records of each file, each file under the bound, read as complete
            assert indices[0] > 0 and list(indices) == list(range(indices[0], calls))
            traces = run.trace_digests()["index"]
            assert traces[0] > 0 and list(traces) == list(range(traces[0], 20 * calls))
            assert sizes[name]["tvmdbg.graph_execution_traces"] <= bound
            assert sizes[name]["tvmdbg.execution"] <= bound
    assert sizes["all"]["tvmdbg.graph_execution_traces"] > 4 * bound
