"""Source locations as the front ends show them: the user's frame of a recorded call stack."""

from __future__ import annotations

from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb


def location(run: RunReader, loc: pb.CodeLocation | None) -> dict | None:
    """The user's frame of a code location as {"file_path", "line", "function"}, or None."""
    if loc is None:
        return None
    frame = run.user_frame(loc)
    if frame is None:
        return None
    return {"file_path": frame.file_path, "line": int(frame.line), "function": frame.function}


def original_ops(run: RunReader, op: pb.GraphOpCreation) -> list[dict]:
    """The Relax ops fused into op, each with its own source line."""
    return [
        {"op_type": o.op_type, "var_name": o.var_name, "location": location(run, o.code_location)}
        for o in op.original_ops
    ]
