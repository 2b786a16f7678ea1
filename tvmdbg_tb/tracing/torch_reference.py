"""record_torch_reference: a run of an exported PyTorch program in eager mode, written as a
tvmdbg dump whose ops line up with the Relax ops the torch importer makes of it.

Each fx node becomes one op whose original ops are the Relax ops the importer emits for that
node (found by importing the program once, watching BlockBuilder.emit), with the node's own
stack trace and the node itself (CodeLocation.model_node) as location, the last of them
marked as the node's output. Its output is the node's eager output. So `tvmdbg compare
TVM_RUN REFERENCE` pairs a kernel with the fx node whose output the kernel computes, by the
node's name (the importer records it on every Relax op it makes: see
tvmdbg_tb/compare/identity.py), whatever Relax ops a converter chose. torch is imported
lazily: it is never a dependency of tvmdbg.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
from tvm import relax

from tvmdbg_tb.capture import frames as frames_mod
from tvmdbg_tb.capture import graphs, importers
from tvmdbg_tb.events import layout
from tvmdbg_tb.events.modes import mode_value, spec
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing.summary import tensor_summary


def _converting_node(top_graph):
    """The fx node of top_graph the torch importer is converting, or None; None too inside
    a control-flow branch (a subgraph's node)."""
    converting = importers.converting_node(2)
    if converting is None or converting[0] != importers.TORCH_FX:
        return None
    node = converting[1]
    return node if getattr(node, "graph", None) is top_graph else None


def _is_control_flow(node) -> bool:
    """A higher-order op (torch.cond, while_loop, map, ...): its branches are subgraphs that
    eager runs as one node, so their inner ops have no reference value."""
    import torch

    return isinstance(node.target, torch._ops.HigherOrderOperator)


def _lifted_inputs(program) -> list[tuple[str, Any]]:
    """(name, value) of the parameters torch.export lifted to inputs, in the order
    from_exported_program(keep_params_as_input=True) appends them after the user inputs (the
    graph signature's order). Buffers and constants are not: the importer always binds them
    as constants."""
    import torch

    parameter = torch.export.graph_signature.InputKind.PARAMETER
    return [
        (spec.arg.name, program.state_dict.get(spec.target))
        for spec in program.graph_signature.input_specs
        if spec.kind is parameter
    ]


def relax_ops_per_node(exported_program) -> dict[str, list[str]]:
    """fx node name -> the Relax op types the importer emits for it, in order (the program
    must already be decomposed as the importer would; it is imported without decomposing)."""
    from tvm.relax.frontend.torch import from_exported_program

    emitted: dict[str, list[str]] = {}
    originals = {name: getattr(relax.BlockBuilder, name) for name in ("emit", "emit_output")}

    def wrap(original):
        def emit(self, expr, *args, **kwargs):
            var = original(self, expr, *args, **kwargs)
            node = _converting_node(exported_program.graph)
            if node is not None:
                emitted.setdefault(node.name, []).append(graphs.op_type_of(expr))
            return var

        return emit

    try:
        for name, original in originals.items():
            setattr(relax.BlockBuilder, name, wrap(original))
        from_exported_program(exported_program, run_ep_decomposition=False)
    finally:
        for name, original in originals.items():
            setattr(relax.BlockBuilder, name, original)
    return emitted


def _numpy(value) -> np.ndarray | None:
    import torch

    if not isinstance(value, torch.Tensor):
        return None
    value = value.detach().cpu()
    if value.dtype == torch.bfloat16:
        value = value.float()
    return value.contiguous().numpy()


def _leaves(value) -> list:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def record_torch_reference(
    exported_program,
    example_inputs,
    logdir: str | os.PathLike,
    tensor_debug_mode: str = "FULL_STATS",
    run_ep_decomposition: bool = True,
) -> str:
    """Runs exported_program eagerly on example_inputs and writes a reference run to logdir;
    returns the run's directory. The call's inputs are the user inputs, then the lifted
    parameters (compared when the model was imported with keep_params_as_input=True, else
    reported as extra inputs). Control flow (torch.cond, while_loop, ...) runs as one node:
    its output is recorded, the ops inside its branches are not, which the graph's note says
    and `compare` reports (not comparable, with why). tensor_debug_mode FULL_STATS (statistics) or FULL_TENSOR
    (values too). run_ep_decomposition must match the from_exported_program call of the
    compiled model (the same default, True)."""
    import torch

    mode = mode_value(tensor_debug_mode)
    if not spec(mode).comparable:
        raise ValueError(f"a reference run needs FULL_STATS or FULL_TENSOR, not {tensor_debug_mode!r}")
    program = exported_program.run_decompositions() if run_ep_decomposition else exported_program
    relax_ops = relax_ops_per_node(program)
    module = program.module()
    inputs = tuple(example_inputs)
    outputs: dict[str, Any] = {}

    class _Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            if node.op == "call_function":
                outputs[node.name] = result
            return result

    with torch.no_grad():
        final = _Recorder(module).run(*inputs)
    options = DumpOptions(tensor_debug_mode=mode, circular_buffer_size=-1, run_name="PyTorch eager reference")
    writer = DebugEventsWriter(logdir, options)
    try:
        _write(writer, mode, module.graph, relax_ops, outputs, inputs, final, _lifted_inputs(program))
    finally:
        writer.close()
    return writer.run_dir


def _write(writer: DebugEventsWriter, mode: int, graph, relax_ops, outputs, inputs, final, lifted) -> None:
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    param_index = {n.name: i for i, n in enumerate(placeholders)}
    writer.write_graph(
        pb.DebuggedGraph(
            graph_id=0,
            name="main",
            executable_id="torch_eager",
            source_mapped=True,
            instrumentation="torch_eager",
            # User inputs, then the lifted parameters: the order of the
            # Relax function's parameters with from_exported_program(keep_params_as_input=True).
            param_names=[n.name for n in placeholders] + [name for name, _ in lifted],
            target="torch eager (cpu)",
            note=_graph_note(graph),
        )
    )
    op_ids: dict[str, int] = {}
    traces = []
    for position, node in enumerate(n for n in graph.nodes if n.op == "call_function"):
        op_id = op_ids[node.name] = position
        writer.write_graph_op_creation(_op_record(writer, node, position, relax_ops, op_ids, param_index))
        traces += _node_traces(mode, node, op_id, outputs.get(node.name))
    execution = _execution(writer, mode, len(traces), inputs, final, lifted)  # its index, before the traces go
    writer.write_graph_execution_traces(traces)
    writer.write_execution(execution)


def _graph_note(graph) -> str:
    """The reference graph's note, naming the control-flow nodes run as one (compare reads it)."""
    control_flow = []
    for node in graph.nodes:
        if node.op == "call_function" and _is_control_flow(node):
            frames = importers.node_frames(importers.TORCH_FX, node)
            index = frames_mod.user_index(frames)
            where = f" at {os.path.basename(frames[index][0])}:{frames[index][1]}" if index >= 0 else ""
            control_flow.append(f"{node.name} (torch higher-order op {node.target}){where}")
    note = "PyTorch eager reference written by tvmdbg.record_torch_reference"
    if not control_flow:
        return note
    return layout.control_flow_note(
        control_flow,
        "ran in eager as one node each: their outputs are compared, the ops inside their branches "
        "or loop bodies are not (not comparable). " + note,
    )


def _op_record(writer: DebugEventsWriter, node, position: int, relax_ops, op_ids, param_index) -> pb.GraphOpCreation:
    """One fx node as an op whose original ops are the Relax ops the importer makes of it."""
    frames = importers.node_frames(importers.TORCH_FX, node)
    shown = frames_mod.user_index(frames)
    model_node = pb.ModelNode(
        format=importers.TORCH_FX, name=node.name, op_type=str(node.target), module=importers.module_path(node)
    )
    location = writer.code_location(frames, shown, frames_mod.called_from_index(frames, shown), model_node)
    op = pb.GraphOpCreation(
        op_id=op_ids[node.name],
        graph_id=0,
        op_name=node.name,
        kernel=str(node.target),
        call_type="torch",
        position=position,
        code_location=location,
    )
    for op_type in relax_ops.get(node.name) or ["torch." + str(node.target)]:
        op.original_ops.add(op_type=op_type, var_name=node.name, code_location=location)
    op.original_ops[-1].node_output = True  # the op's output is the node's
    for arg in node.all_input_nodes:
        if arg.name in op_ids:
            op.inputs.add(kind=pb.OpInput.OP_OUTPUT, name=arg.name, producer_op_id=op_ids[arg.name])
        elif arg.name in param_index:
            op.inputs.add(kind=pb.OpInput.PARAM, name=arg.name, param_index=param_index[arg.name])
        else:
            op.inputs.add(kind=pb.OpInput.OTHER, name=arg.name)
    return op


def _node_traces(mode: int, node, op_id: int, output) -> list[pb.GraphExecutionTrace]:
    """A trace per tensor of the node's eager output."""
    traces = []
    for slot, leaf in enumerate(_leaves(output)):
        array = _numpy(leaf)
        if array is None:
            continue
        summary = tensor_summary(mode, array)
        trace = pb.GraphExecutionTrace(
            op_id=op_id,
            output_slot=slot,
            execution_index=0,
            op_name=node.name,
            kernel=str(node.target),
            graph_id=0,
            tensor_debug_mode=mode,
            debug_values=summary.debug_values,
            device="cpu:0",
            duration_us=math.nan,
            dtype=summary.dtype,
            shape=summary.shape,
        )
        if summary.HasField("tensor_value"):
            trace.tensor_value.CopyFrom(summary.tensor_value)
        traces.append(trace)
    return traces


def _execution(writer: DebugEventsWriter, mode: int, num_traces: int, inputs, final, lifted) -> pb.Execution:
    """The one call: user inputs, then the lifted parameters (a model imported with
    keep_params_as_input=True takes them as inputs in this order; otherwise they are constants
    in the compiled model and these extra inputs are reported, not compared)."""
    user_inputs = [_numpy(x) for x in inputs] + [_numpy(value) for _, value in lifted]
    execution = pb.Execution(
        index=writer.allocate_execution_index(),
        function_name="main",
        graph_id=0,
        tensor_debug_mode=mode,
        num_traces=num_traces,
        duration_us=math.nan,
        executable_id="torch_eager",
        call_number=1,
        vm=1,
    )
    # A value that is not a tensor keeps its position with an empty summary (not comparable).
    execution.inputs.extend(pb.TensorSummary() if x is None else tensor_summary(mode, x) for x in user_inputs)
    execution.outputs.extend(tensor_summary(mode, x) for x in map(_numpy, _leaves(final)) if x is not None)
    return execution
