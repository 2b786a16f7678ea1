"""The Relax ops inside a fused kernel, as its replay (or deep mode) saw them.

A FusedOpReplay record (see debug_event.proto) is linked to a kernel's traces by
(execution index, op id). This module turns it into JSON for the `replay` route, the CLI
and the alerts: an alert on a fused kernel whose replay found the op that made the value
lands on that op's own line and says how it knows ("confirmed": "replay" or "deep");
otherwise its location is the kernel's first located op ("confirmed": "heuristic").
"""

from __future__ import annotations

from tvmdbg_tb.analysis.views import location
from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.events.summaries import describe
from tvmdbg_tb.proto import debug_event_pb2 as pb

HEURISTIC = "heuristic"


def _summary(summary: pb.TensorSummary) -> dict:
    values = list(summary.debug_values)
    return {
        "dtype": summary.dtype,
        "shape": [int(d) for d in summary.shape],
        "debug_values": values,
        "summary": describe(pb.FULL_HEALTH, values),
        "has_value": False,
    }


def _health(summary: pb.TensorSummary) -> str:
    """ "nonfinite", "finite" or "unknown" (for colouring)."""
    values = summary.debug_values
    if len(values) != 10:
        return "unknown"
    return "nonfinite" if values[4] + values[5] + values[6] > 0 else "finite"


def inner_op_json(run: RunReader, op: pb.InnerOpResult) -> dict:
    health = [_health(s) for s in op.outputs]
    return {
        "index": int(op.index),
        "op_type": op.op_type,
        "var_name": op.var_name,
        "prim_func": op.prim_func,
        "location": location(run, op.code_location) if op.HasField("code_location") else None,
        "input_refs": [int(r) for r in op.input_refs],
        "outputs": [_summary(s) for s in op.outputs],
        "health": "nonfinite" if "nonfinite" in health else (health[0] if health else "unknown"),
        "origin": bool(op.origin),
    }


def replay_json(run: RunReader, record: pb.FusedOpReplay) -> dict:
    """The JSON of one replay (docs/routes.md#replay)."""
    first = int(record.first_nonfinite_op)
    return {
        "execution_index": int(record.execution_index),
        "op_id": int(record.op_id),
        "graph_id": int(record.graph_id),
        "kernel": record.kernel,
        "trigger": record.trigger,
        "error": record.error or None,
        "note": record.note or None,
        "matches_kernel": bool(record.matches_kernel),
        "first_nonfinite_op": first if first >= 0 else None,
        "inputs": [_summary(s) for s in record.inputs],
        "ops": [inner_op_json(run, op) for op in record.ops],
    }


def confirmed_origin(record: pb.FusedOpReplay | None) -> pb.InnerOpResult | None:
    """The inner op a usable replay names as the maker of the non-finite value, or None."""
    if record is None or record.error or record.first_nonfinite_op < 0:
        return None
    for op in record.ops:
        if op.index == record.first_nonfinite_op:
            return op
    return None


def confirm_alert(run: RunReader, alert: dict) -> dict:
    """Adds "confirmed" (and, when known, "inner_op" and the inner op's own "location")."""
    record = run.replay_of(alert["execution_index"], alert["op_id"])
    op = confirmed_origin(record)
    if op is None:
        alert["confirmed"] = HEURISTIC
        alert["inner_op"] = None
        return alert
    inner = inner_op_json(run, op)
    alert["confirmed"] = "deep" if record.trigger == "deep" else "replay"
    alert["inner_op"] = {k: inner[k] for k in ("index", "op_type", "var_name", "prim_func", "location")}
    if inner["location"] is not None:
        alert["location"] = inner["location"]
    return alert
