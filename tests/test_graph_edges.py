"""Graph edges through what is not a kernel: a reshape (lowered to the vm.builtin.reshape
builtin, no kernel), a tuple built in the function and its items, a constant bound to a var.
Their results keep the graph edge, and so the health, of the tensor they are."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from models import compile_module
from tvm import relax

import tvmdbg
from tvmdbg_tb import analysis
from tvmdbg_tb.cli.reports import input_health
from tvmdbg_tb.proto import debug_event_pb2 as pb


def _module():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 6), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            made = bb.emit(relax.op.log(x))  # -inf at x == 0
            viewed = bb.emit(relax.op.reshape(made, (3, 4)))
            pair = bb.emit(relax.Tuple([viewed, made]))
            item = bb.emit(relax.TupleGetItem(pair, 0))
            bound = bb.emit(relax.const(2.0, "float32"))
            scaled = bb.emit(relax.op.multiply(item, bound))
            out = bb.emit_output(relax.op.exp(scaled))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("fuse", [False, True])
def test_views_tuple_items_and_bound_constants_keep_the_edge_and_the_health(tmp_path, fuse):
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH")
    try:
        vm = relax.VirtualMachine(compile_module(_module(), fuse), tvm.cpu())
        x = np.array([[0, 1, 2, 3, 4, 5]] * 2, dtype="float32")
        vm["main"](tvm.runtime.tensor(x))
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        ops = run.ops()
        assert all(i.kind != pb.OpInput.OTHER for op in ops for i in op.inputs)
        (log,) = [op for op in ops if any(o.op_type == "relax.log" for o in op.original_ops)]
        consumers = [op for op in ops if any(i.producer_op_id == log.op_id for i in op.inputs if i.kind == 1)]
        assert consumers, "the multiply reads the log through a reshape and a tuple item"
        if not fuse:
            (multiply,) = consumers
            view, constant = multiply.inputs
            # The tensor as the multiply reads it (the tuple item's var and shape), made by the log.
            assert (view.kind, tuple(view.spec.shape), view.producer_op_id) == (pb.OpInput.OP_OUTPUT, (3, 4), log.op_id)
            assert constant.kind == pb.OpInput.CONSTANT and constant.name.startswith("lv")
            assert input_health(run, multiply, 0)[0] != "-"  # the log's health, seen through the view


def test_a_view_of_a_parameter_is_the_parameter_and_the_build_stays_compiled(tmp_path):
    # Large enough for the kernel to count its output and the parameters it reads (epilogue.py):
    # the view it reads is no parameter it can count.
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((256, 512), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            viewed = bb.emit(relax.op.reshape(x, (512, 256)))
            out = bb.emit_output(relax.op.exp(viewed))
        bb.emit_func_output(out)
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH")
    try:
        vm = relax.VirtualMachine(compile_module(bb.get(), False), tvm.cpu())
        vm["main"](tvm.runtime.tensor(np.ones((256, 512), "float32")))
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        (graph,) = run.graphs()
        assert graph.instrumentation == "compiled"
        (exp,) = run.ops()
        (inp,) = exp.inputs
        assert (inp.kind, inp.param_index, tuple(inp.spec.shape)) == (pb.OpInput.PARAM, 0, (512, 256))


@tvm.register_global_func("tvmdbg_test.numpy_log", override=True)
def _numpy_log(x):
    with np.errstate(divide="ignore"):
        return tvm.runtime.tensor(np.log(x.numpy()))


def test_an_extern_call_that_makes_a_value_is_summarised_like_a_kernel(tmp_path):
    # R.call_pure_packed of a registered function: its result is a traced output with its
    # health (compiled into the module, not left to the slower VM instrument).
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH")
    try:
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorType((4,), "float32"))
        with bb.function("main", [x]):
            with bb.dataflow():
                ty = relax.TensorType((4,), "float32")
                made = bb.emit(relax.call_pure_packed("tvmdbg_test.numpy_log", x, ty_args=ty))
                out = bb.emit_output(relax.op.exp(made))
            bb.emit_func_output(out)
        vm = relax.VirtualMachine(compile_module(bb.get(), False), tvm.cpu())
        vm["main"](tvm.runtime.tensor(np.array([0, 1, 2, 3], "float32")))
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        (graph,) = run.graphs()
        assert graph.instrumentation == "compiled"
        extern, exp = run.ops()
        assert (extern.kernel, extern.call_type) == ("tvmdbg_test.numpy_log", "call_packed")
        assert exp.inputs[0].producer_op_id == extern.op_id
        (alert,) = analysis.alerts(run)["alerts"]
        assert alert["op_id"] == extern.op_id and alert["origin"] and alert["neg_inf_count"] == 1
