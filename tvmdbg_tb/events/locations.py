"""Source locations as the front ends show them: the frame of a recorded call stack to show
(the innermost of the model's code), the user's own call site next to it when that frame is
a library's, and the model node (torch.fx, ONNX) an op was converted from."""

from __future__ import annotations

from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb


def _frame(frame: pb.StackFrame) -> dict:
    return {"file_path": frame.file_path, "line": int(frame.line), "function": frame.function}


def model_node(loc: pb.CodeLocation) -> dict | None:
    """{"format", "name", "op_type", "model_file", "module"} of the location's model node, or None."""
    if not loc.HasField("model_node"):
        return None
    node = loc.model_node
    return {
        "format": node.format,
        "name": node.name,
        "op_type": node.op_type,
        "model_file": node.model_file,
        "module": node.module,
    }


def location(run: RunReader, loc: pb.CodeLocation | None) -> dict | None:
    """A code location as {"file_path", "line", "function"} of the frame to show, with
    "called_from" (the user's own frame, same keys) when that frame is a library's and
    "model_node" when the op came from an imported model graph's node. An op of an ONNX
    file without a recorded Python stack has "model_node" (and "called_from": the import
    call) but no "file_path". None when there is nothing to show."""
    if loc is None:
        return None
    frame = run.user_frame(loc)
    node = model_node(loc)
    if frame is None and node is None:
        return None
    out = _frame(frame) if frame is not None else {}
    caller = run.called_from_frame(loc)
    if caller is not None:
        out["called_from"] = _frame(caller)
    if node is not None:
        out["model_node"] = node
    return out


def original_ops(run: RunReader, op: pb.GraphOpCreation) -> list[dict]:
    """The Relax ops fused into op, each with its own source line (and, for an op a pass made
    in place of the user's, that pass: rewritten_by)."""
    out = []
    for o in op.original_ops:
        entry = {"op_type": o.op_type, "var_name": o.var_name, "location": location(run, o.code_location)}
        if o.rewritten_by:
            entry["rewritten_by"] = o.rewritten_by
        out.append(entry)
    return out
