"""Synthetic events for tests of the writer and reader (no TVM needed)."""

from collections.abc import Callable, Sequence

from tvmdbg_tb.proto import debug_event_pb2 as pb


def trace(op_id: int, execution_index: int, nan: int = 0, slot: int = 0) -> pb.GraphExecutionTrace:
    """A FULL_HEALTH trace of a 100-element float32 output with nan NaNs."""
    return pb.GraphExecutionTrace(
        op_id=op_id,
        output_slot=slot,
        execution_index=execution_index,
        op_name=f"lv{op_id}",
        kernel=f"kernel{op_id}",
        tensor_debug_mode=pb.FULL_HEALTH,
        debug_values=[0, pb.FLOAT32, 1, 100, 0, 0, nan, 50 - nan, 0, 50],
        duration_us=1.5,
        dtype="float32",
        shape=[100],
    )


def execution(index: int, num_traces: int = 0) -> pb.Execution:
    return pb.Execution(index=index, function_name="main", graph_id=0, num_traces=num_traces, duration_us=10.0)


def chain_ops(
    n: int,
    kernel: Callable[[int], str] = lambda op_id: f"kernel{op_id}",
    location: Callable[[int], pb.CodeLocation | None] = lambda op_id: None,
    outputs: Sequence[pb.TensorSpec] = (),
    op_code_location: bool = True,
) -> list[pb.GraphOpCreation]:
    """Ops lv0..lv{n-1} of graph 0, each relax.add reading the previous one's output."""
    ops = []
    for op_id in range(n):
        loc = location(op_id)
        op = pb.GraphOpCreation(
            op_id=op_id,
            graph_id=0,
            op_name=f"lv{op_id}",
            kernel=kernel(op_id),
            inputs=[pb.OpInput(kind=pb.OpInput.OP_OUTPUT, producer_op_id=op_id - 1)] if op_id else [],
            outputs=list(outputs),
            position=op_id,
            original_ops=[pb.OriginalOp(op_type="relax.add", var_name=f"lv{op_id}", code_location=loc)],
        )
        if loc is not None and op_code_location:
            op.code_location.CopyFrom(loc)
        ops.append(op)
    return ops
