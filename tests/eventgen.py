"""Synthetic events for tests of the writer and reader (no TVM needed)."""

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
