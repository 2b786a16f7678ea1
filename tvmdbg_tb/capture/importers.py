"""Which node of an imported model graph a TVM importer is converting, seen from inside it.

from_exported_program (torch.fx nodes) and from_onnx (ONNX NodeProtos) both convert one
node at a time in a loop whose local `node` is the node; every Relax op they emit meanwhile
comes from it. A BlockBuilder.emit wrapper (capture.py) and record_torch_reference
(torch_reference.py) look up the stack for that frame. The node gives an op its identity
(graphs.ModelNode: what `tvmdbg compare` aligns on) and its stack: the fx node's
meta["stack_trace"], or the stack torch.onnx's exporter recorded in the ONNX node's
metadata_props. No import of torch or onnx here: the node objects are read by attribute.
"""

from __future__ import annotations

import sys

from tvmdbg_tb.capture import frames as frames_mod
from tvmdbg_tb.capture.frames import Frame
from tvmdbg_tb.capture.graphs import ModelNode

TORCH_FX = "torch.fx"
ONNX = "onnx"
_FRONTENDS = (("relax/frontend/torch/", TORCH_FX), ("relax/frontend/onnx/", ONNX))
# Keys of the stack trace the PyTorch ONNX exporter (dynamo) writes into a node's metadata_props.
_ONNX_STACK_KEYS = ("pkg.torch.onnx.stack_trace", "pkg.torch.export.stack_trace")


def converting_node(skip: int = 1):
    """(format, node) of the node being converted by the importer on this thread's stack,
    or None outside an importer. skip: frames above the caller to start from."""
    frame = sys._getframe(skip + 1)
    while frame is not None:
        path = frame.f_code.co_filename.replace("\\", "/")
        if "/relax/frontend/" in path:
            for marker, kind in _FRONTENDS:
                if marker in path:
                    node = frame.f_locals.get("node")
                    if _is_node(kind, node):
                        return kind, node
        frame = frame.f_back
    return None


def parameter_names(skip: int = 1) -> dict[str, str]:
    """{placeholder name: the model's own parameter name} ("p_model_layers_1_mlp_up_proj_weight":
    "model.layers.1.mlp.up_proj.weight") of the ExportedProgram from_exported_program is
    converting on this thread's stack (its parameters and buffers, which become the Relax
    function's parameters under keep_params_as_input=True); {} outside it."""
    frame = sys._getframe(skip + 1)
    while frame is not None:
        program = frame.f_locals.get("exported_program")
        signature = getattr(program, "graph_signature", None)
        if signature is not None:
            names = {}
            for mapping in ("inputs_to_parameters", "inputs_to_buffers"):
                found = getattr(signature, mapping, None)  # a Mapping (read-only in torch 2.x)
                if hasattr(found, "items"):
                    names.update({str(k): str(v) for k, v in found.items()})
            return names
        frame = frame.f_back
    return {}


def _is_node(kind: str, node) -> bool:
    if kind == TORCH_FX:
        return hasattr(node, "meta") and hasattr(node, "target") and hasattr(node, "graph")
    return hasattr(node, "op_type") and hasattr(node, "metadata_props")


def model_node(kind: str, node) -> ModelNode:
    """The node's identity as the dump records it."""
    if kind == TORCH_FX:
        return ModelNode(TORCH_FX, str(node.name), str(node.target), module=module_path(node))
    return ModelNode(ONNX, str(node.name), str(node.op_type))


def module_path(node) -> str:
    """The path of the torch module an fx node was made in ("model.layers.1.mlp"), from
    torch.export's nn_module_stack (innermost last); "" when not recorded: which layer of
    several running the same line of the model's code."""
    meta = getattr(node, "meta", None)
    stack = meta.get("nn_module_stack") if isinstance(meta, dict) else None
    if not stack:
        return ""
    try:
        path = list(stack.values())[-1][0]
    except (TypeError, IndexError, AttributeError):
        return ""
    return path if isinstance(path, str) else ""


def node_frames(kind: str, node) -> list[Frame]:
    """The Python stack that made the node, as its exporter recorded it (outermost first);
    [] when none was recorded."""
    if kind == TORCH_FX:
        meta = node.meta
        trace = meta.get("stack_trace") if isinstance(meta, dict) else None
        return frames_mod.parse_traceback(trace) if trace else []
    for prop in node.metadata_props:
        if prop.key in _ONNX_STACK_KEYS and prop.value:
            return frames_mod.parse_traceback(prop.value)
    return []
