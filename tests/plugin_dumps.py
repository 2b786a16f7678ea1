"""Dumps for the plugin tests, written through the real writer (no TVM needed).

`write_nan_chain` models a function main(x, w): lv0 = matmul(x, w); lv1 = fused log+add(lv0);
lv2 = relu(lv1) (a builtin feeds it too); lv3 = sum(lv2). Execution 2 makes NaN in lv1 (the
origin) which lv2 and lv3 pass on; execution 3 gets a NaN parameter, so lv0 is not the origin.
"""

from __future__ import annotations

import numpy as np

from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb

OPS = ("lv0", "lv1", "lv2", "lv3")
KERNELS = ("matmul", "fused_log_add", "relu", "sum")


def health(size: int, nan: int = 0, dtype: int = pb.FLOAT32) -> list[float]:
    return [0, dtype, 1, size, 0, 0, nan, 0, size - nan, 0]


def write_graph(w: DebugEventsWriter) -> None:
    here = w.code_location([(__file__, 1, "<module>"), (__file__, 12, "model")], user_frame_index=1)
    spec = pb.TensorSpec(dtype="float32", shape=[4, 8], shape_expr="(4, 8)")
    w.write_graph(
        pb.DebuggedGraph(
            graph_id=0,
            name="main",
            executable_id="exe0",
            source_mapped=True,
            instrumentation="compiled",
            param_names=["x", "w"],
            params=[spec, pb.TensorSpec(dtype="float32", shape=[8, 8])],
            target="llvm",
            code_location=here,
        )
    )
    inputs = [
        [
            pb.OpInput(kind=pb.OpInput.PARAM, name="x", param_index=0, spec=spec),
            pb.OpInput(kind=pb.OpInput.PARAM, name="w", param_index=1),
        ],
        [pb.OpInput(kind=pb.OpInput.OP_OUTPUT, name="lv0", producer_op_id=0, spec=spec)],
        [
            pb.OpInput(kind=pb.OpInput.OP_OUTPUT, name="lv1", producer_op_id=1),
            pb.OpInput(kind=pb.OpInput.CONSTANT, name="c0"),
        ],
        [pb.OpInput(kind=pb.OpInput.OP_OUTPUT, name="lv2", producer_op_id=2)],
    ]
    for op_id, (name, kernel) in enumerate(zip(OPS, KERNELS)):
        line = 20 + op_id
        loc = w.code_location([(__file__, 1, "<module>"), (__file__, line, "model")], user_frame_index=1)
        originals = [pb.OriginalOp(op_type=f"relax.{kernel}", var_name=name, code_location=loc)]
        if kernel == "fused_log_add":
            add_loc = w.code_location([(__file__, 1, "<module>"), (__file__, 40, "model")], user_frame_index=1)
            originals = [
                pb.OriginalOp(op_type="relax.log", var_name="lv1a", code_location=loc),
                pb.OriginalOp(op_type="relax.add", var_name="lv1", code_location=add_loc),
            ]
        w.write_graph_op_creation(
            pb.GraphOpCreation(
                op_id=op_id,
                graph_id=0,
                op_name=name,
                kernel=kernel,
                call_type="call_tir",
                original_ops=originals,
                inputs=inputs[op_id],
                outputs=[pb.TensorSpec(dtype="float32", shape=[4, 8] if op_id < 3 else [], shape_expr="(4, 8)")],
                output_names=[name],
                device="cpu:0",
                position=op_id,
                code_location=loc,
            )
        )


def write_execution(w: DebugEventsWriter, nan_from: int | None = None, nan_param: bool = False) -> int:
    """One call of main; ops from nan_from on output NaN; nan_param makes input x NaN."""
    index = w.allocate_execution_index()
    if nan_param:
        nan_from = 0
    traces = []
    for op_id, (name, kernel) in enumerate(zip(OPS, KERNELS)):
        size = 32 if op_id < 3 else 1
        nan = size if nan_from is not None and op_id >= nan_from else 0
        traces.append(
            pb.GraphExecutionTrace(
                op_id=op_id,
                output_slot=0,
                execution_index=index,
                op_name=name,
                kernel=kernel,
                graph_id=0,
                tensor_debug_mode=pb.FULL_HEALTH,
                debug_values=health(size, nan),
                device="cpu:0",
                duration_us=float(op_id + 1),
                dtype="float32",
                shape=[4, 8] if op_id < 3 else [],
            )
        )
    w.write_graph_execution_traces(traces)
    w.write_execution(
        pb.Execution(
            index=index,
            function_name="main",
            graph_id=0,
            tensor_debug_mode=pb.FULL_HEALTH,
            inputs=[
                pb.TensorSummary(debug_values=health(32, 32 if nan_param else 0), dtype="float32", shape=[4, 8]),
                pb.TensorSummary(debug_values=health(64), dtype="float32", shape=[8, 8]),
            ],
            outputs=[pb.TensorSummary(debug_values=health(1, 1 if nan_from is not None else 0), dtype="float32")],
            duration_us=50.0,
            num_traces=len(traces),
            executable_id="exe0",
            code_location=w.code_location([(__file__, 60, "train")], user_frame_index=0),
        )
    )
    return index


def write_nan_chain(logdir, run_name: str = "run_a", close: bool = True) -> DebugEventsWriter:
    """Executions 0, 1 finite; 2 NaN born in lv1; 3 NaN param x."""
    w = DebugEventsWriter(
        logdir, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1), run_id=run_name
    )
    write_graph(w)
    write_execution(w)
    write_execution(w)
    write_execution(w, nan_from=1)
    write_execution(w, nan_param=True)
    if close:
        w.close()
    else:
        w.flush()
    return w


def write_tensor_call(w: DebugEventsWriter, tensors: list[tuple], graph_id: int = 0) -> None:
    """One call of graph graph_id whose traces hold FULL_TENSOR values, each given as
    (op_id, op_name, kernel, dtype, shape, content bytes)."""
    index = w.allocate_execution_index()
    w.write_graph_execution_traces(
        [
            pb.GraphExecutionTrace(
                op_id=op_id,
                execution_index=index,
                op_name=op_name,
                kernel=kernel,
                tensor_debug_mode=pb.FULL_TENSOR,
                tensor_value=pb.TensorValue(dtype=dtype, shape=shape, content=content),
                dtype=dtype,
                shape=shape,
            )
            for op_id, op_name, kernel, dtype, shape, content in tensors
        ]
    )
    w.write_execution(pb.Execution(index=index, function_name="main", graph_id=graph_id, num_traces=len(tensors)))


def float32_tensor(op_id: int, op_name: str, kernel: str, value: np.ndarray) -> tuple:
    """A float32 array as write_tensor_call's tuple."""
    return (op_id, op_name, kernel, "float32", list(value.shape), value.astype(np.float32).tobytes())


def write_full_tensor(logdir, run_name: str = "run_t") -> np.ndarray:
    """A FULL_TENSOR run whose only trace holds a 3x4 float32 value with a NaN and an Inf."""
    w = DebugEventsWriter(
        logdir, DumpOptions(tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1), run_id=run_name
    )
    write_graph(w)
    value = np.arange(12, dtype=np.float32).reshape(3, 4)
    value[1, 2] = np.nan
    value[2, 3] = np.inf
    write_tensor_call(w, [float32_tensor(0, "lv0", "matmul", value)])
    w.close()
    return value
