"""Big but legitimate dumps, written through tvmdbg's own writer: a graph of hundreds of
thousands of kernels (a chain of layers, each op created at its own source line of a
generated model file, a call that went NaN in the middle of it), a source file of nearly 8 MiB
(the writer's cap; long lines and one of 4 MiB) and a source file of a million lines. Shared by the
tests that check the routes stay bounded and the dashboard stays responsive on them."""

from __future__ import annotations

from pathlib import Path

from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb

# Ops per layer of the big graph (a residual block: each layer reads its input twice).
LAYER_OPS = 6
SOURCE_BYTES = 8 << 20
MILLION_LINES = 1_000_000


def write_sources(directory: Path) -> dict[str, Path]:
    """The two big source files: `wide` (within 8 MiB: short lines, 300 lines of 9,000
    characters, one line of 4 MiB, short lines) and `long` (a million short lines)."""
    directory.mkdir(parents=True, exist_ok=True)
    wide = directory / "wide_model.py"
    line = "x = layer(x)  # " + "w" * 47 + "\n"  # 64 bytes
    with open(wide, "w") as f:
        f.write(line * 4000)
        f.writelines(f"row{i} = '{'r' * 8990}'\n" for i in range(300))
        f.write("table = '" + "t" * (4 << 20) + "'\n")
        f.write(line * 4000)
    assert wide.stat().st_size <= SOURCE_BYTES, wide.stat().st_size
    long = directory / "long_model.py"
    with open(long, "w") as f:
        f.writelines(f"y{i}\n" for i in range(MILLION_LINES))  # within the writer's 8 MiB
    return {"wide": wide, "long": long}


def write_big_graph(
    logdir: Path, num_ops: int, sources: dict[str, Path], run_name: str = "big", lines: int = MILLION_LINES
) -> dict:
    """A FULL_HEALTH run whose one graph holds num_ops kernels in layers of LAYER_OPS (op k
    reads op k-1; the first op of a layer also reads the previous layer's input), op k created
    at line k % lines + 1 of the million-line file (fewer lines: layers sharing their lines, as
    a model's do), with one call of the first 2,000 ops whose op 1000 made a NaN; the wide file
    is named by the graph's own location. Returns where things are."""
    w = DebugEventsWriter(
        str(logdir), DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1), run_id=run_name
    )
    wide_loc = w.code_location([(str(sources["wide"]), 3, "build")], user_frame_index=0)
    w.write_graph(
        pb.DebuggedGraph(graph_id=0, name="main", executable_id="e", source_mapped=True, code_location=wide_loc)
    )
    long_path = str(sources["long"])
    for op_id in range(num_ops):
        inputs = []
        if op_id:
            inputs.append(pb.OpInput(kind=pb.OpInput.OP_OUTPUT, name=f"lv{op_id - 1}", producer_op_id=op_id - 1))
        else:
            inputs.append(pb.OpInput(kind=pb.OpInput.PARAM, name="x", param_index=0))
        if op_id % LAYER_OPS == 0 and op_id >= LAYER_OPS:
            inputs.append(
                pb.OpInput(kind=pb.OpInput.OP_OUTPUT, name=f"lv{op_id - LAYER_OPS}", producer_op_id=op_id - LAYER_OPS)
            )
        loc = w.code_location([(long_path, op_id % lines + 1, "forward")], user_frame_index=0)
        op_type = ("relax.add", "relax.matmul", "relax.nn.relu", "relax.multiply", "relax.exp", "relax.log")[
            op_id % LAYER_OPS
        ]
        w.write_graph_op_creation(
            pb.GraphOpCreation(
                op_id=op_id,
                graph_id=0,
                op_name=f"lv{op_id}",
                kernel=op_type.split(".")[-1],
                call_type="call_tir",
                inputs=inputs,
                position=op_id,
                code_location=loc,
                original_ops=[pb.OriginalOp(op_type=op_type, var_name=f"lv{op_id}", code_location=loc)],
                outputs=[pb.TensorSpec(dtype="float32", shape=[64], shape_expr="(64,)")],
            )
        )
    traced = min(num_ops, 2000)
    bad = min(1000, traced - 1)
    index = w.allocate_execution_index()
    traces = []
    for op_id in range(traced):
        nan = 3 if op_id >= bad else 0
        traces.append(
            pb.GraphExecutionTrace(
                op_id=op_id,
                execution_index=index,
                op_name=f"lv{op_id}",
                kernel="k",
                tensor_debug_mode=pb.FULL_HEALTH,
                debug_values=[0, pb.FLOAT32, 1, 64, 0, 0, nan, 20, 0, 44 - nan],
                duration_us=1.0,
                dtype="float32",
                shape=[64],
            )
        )
    w.write_graph_execution_traces(traces)
    w.write_execution(
        pb.Execution(index=index, function_name="main", graph_id=0, num_traces=traced, duration_us=100.0),
    )
    w.close()
    return {"run": w.run_id, "bad_op": bad, "traced": traced}
