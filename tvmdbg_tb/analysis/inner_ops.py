"""The Relax ops inside a fused kernel, as its replay (or deep mode) or its own inner-op check
saw them.

A FusedOpReplay record (see debug_event.proto) is linked to a kernel's traces by
(execution index, op id); a kernel built with the inner-op check counts on its trace
(inner_nonfinite) the NaN and infinities each of its ops made. This module turns both into
JSON for the `replay` route, the CLI and the alerts: an alert on a fused kernel whose
replay, or whose inner-op check, found the op that made the value lands on that op's own
line and says how it knows ("confirmed": "replay", "deep" or "inner_check"); otherwise its
location is the kernel's first located op ("confirmed": "heuristic").
"""

from __future__ import annotations

from tvmdbg_tb.analysis.answers import Alert
from tvmdbg_tb.events.locations import location
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


INNER_CHECK = "inner_check"
# inner_kinds' bits: which kinds a kernel's fused ops made.
NAN, NEG_INF, POS_INF = 1, 2, 4


def inner_kinds(trace: pb.GraphExecutionTrace) -> int:
    """The kinds (NAN | NEG_INF | POS_INF) the kernel's fused ops made inside it."""
    kinds = 0
    for entry in trace.inner_nonfinite:
        kinds |= _entry_kinds(entry)
    return kinds


def _entry_kinds(entry: pb.InnerNonfinite) -> int:
    return (NAN if entry.nan else 0) | (NEG_INF if entry.neg_inf else 0) | (POS_INF if entry.pos_inf else 0)


def _literal_spread(run: RunReader, trace: pb.GraphExecutionTrace) -> tuple[set[str], int]:
    """The vars of the kernel's ops that write a non-finite literal of the program
    (OriginalOp.nonfinite_literal: a mask's -inf) and the kinds those ops made inside it."""
    try:
        op = run.op(int(trace.op_id))
    except KeyError:
        return set(), 0
    literal_vars = {o.var_name for o in op.original_ops if o.nonfinite_literal}
    written = 0
    for entry in trace.inner_nonfinite:
        if entry.var_name in literal_vars:
            written |= _entry_kinds(entry)
    return literal_vars, written


def inner_literal(run: RunReader, trace: pb.GraphExecutionTrace) -> bool:
    """Whether the kernel's fused ops made nothing inside it but a non-finite literal of the
    program and its spread (a mask's -inf, made and absorbed inside the kernel): the first op
    that made one writes the literal, and the later ops made no kind of value the literal ops
    did not (a NaN or an infinity of the other sign after a mask's -inf is computed:
    `-inf - -inf`, an overflow)."""
    if not len(trace.inner_nonfinite):
        return False
    literal_vars, written = _literal_spread(run, trace)
    if trace.inner_nonfinite[0].var_name not in literal_vars:
        return False
    return inner_kinds(trace) & ~written == 0


def _culprit(run: RunReader, trace: pb.GraphExecutionTrace) -> int:
    """Index in trace.inner_nonfinite of the op that made the value the alert is about: the
    first that made a kind of value no op writing a non-finite literal made (past a mask's
    -inf to the NaN computed next to it); the first op when there is none."""
    literal_vars, written = _literal_spread(run, trace)
    for i, entry in enumerate(trace.inner_nonfinite):
        if entry.var_name not in literal_vars and _entry_kinds(entry) & ~written:
            return i
    return 0


def inner_nonfinite_json(run: RunReader, entry: pb.InnerNonfinite) -> dict:
    """One op's count from a kernel's inner-op check (GraphExecutionTrace.inner_nonfinite)."""
    return {
        "index": int(entry.index),
        "op_type": entry.op_type,
        "var_name": entry.var_name,
        "location": location(run, entry.code_location) if entry.HasField("code_location") else None,
        "nan_count": int(entry.nan),
        "neg_inf_count": int(entry.neg_inf),
        "pos_inf_count": int(entry.pos_inf),
    }


def confirmed_origin(record: pb.FusedOpReplay | None) -> pb.InnerOpResult | None:
    """The inner op a usable replay names as the maker of the non-finite value, or None."""
    if record is None or record.error or record.first_nonfinite_op < 0:
        return None
    for op in record.ops:
        if op.index == record.first_nonfinite_op:
            return op
    return None


def confirm_alert(run: RunReader, alert: Alert, trace: pb.GraphExecutionTrace | None = None) -> Alert:
    """Sets "confirmed" (and, when known, "inner_op" and the inner op's own "location"): from
    the kernel call's replay, else from its inner-op check (trace: the alert's trace when it
    carries inner_nonfinite, a kernel whose output hid what its ops made: the alert is
    "masked" with its culprit op's counts, "inner_nonfinite" lists every op's, and the
    culprit is the one that made it when the kernel's inputs were finite, an origin: the
    first op, or past a mask's literal the first that made another kind of value)."""
    record = run.replay_of(alert.execution_index, alert.op_id)
    op = confirmed_origin(record)
    entries = [inner_nonfinite_json(run, e) for e in trace.inner_nonfinite] if trace is not None else []
    first = entries[_culprit(run, trace)] if entries else None
    if entries:
        alert.inner_nonfinite = entries
        if not (alert.nan_count or alert.neg_inf_count or alert.pos_inf_count):
            alert.nan_count, alert.neg_inf_count = first["nan_count"], first["neg_inf_count"]
            alert.pos_inf_count, alert.masked = first["pos_inf_count"], True
    if op is None and entries and alert.origin:  # else its ops passed on what came in
        alert.confirmed = INNER_CHECK
        alert.inner_op = {**{k: first[k] for k in ("index", "op_type", "var_name", "location")}, "prim_func": ""}
        if first["location"] is not None:
            alert.location = first["location"]
        return alert
    if op is None:
        alert.confirmed = HEURISTIC
        alert.inner_op = None
        return alert
    inner = inner_op_json(run, op)
    alert.confirmed = "deep" if record.trigger == "deep" else "replay"
    alert.inner_op = {k: inner[k] for k in ("index", "op_type", "var_name", "prim_func", "location")}
    if inner["location"] is not None:
        alert.location = inner["location"]
    return alert


def _kernel_trace_position(run: RunReader, execution_index: int, op_id: int) -> int | None:
    """Position of the kernel's first output trace in that execution (None: not in the dump)."""
    digests = run.trace_digests()
    hits = run.execution_trace_indices(execution_index)
    hits = hits[digests["op_id"][hits] == op_id]
    return int(hits[0]) if len(hits) else None


def masked_alerts(run: RunReader, rows_of) -> list[tuple[int, Alert]]:
    """Alerts for NaN/Inf made inside fused kernels whose outputs stayed finite (known only
    from replays/deep mode), as (kernel trace position, alert), in trace order.

    rows_of(positions, origin) builds kernel alerts (alerts.alert_rows): a masked alert is the
    kernel trace's row with the inner op's counts, location and "masked": true."""
    import numpy as np

    from tvmdbg_tb.events.reader import INNER_NONFINITE, NONFINITE

    out = []
    digests = run.trace_digests()
    for record in run.replays():
        op = confirmed_origin(record)
        if op is None:
            continue
        position = _kernel_trace_position(run, record.execution_index, record.op_id)
        if position is None or digests["flags"][position] & (NONFINITE | INNER_NONFINITE):
            continue  # the kernel's output or its inner-op check shows it: its own alert is confirmed
        alert = rows_of(np.array([position], dtype=np.int64), np.array([True]))[0]
        values = op.outputs[0].debug_values if op.outputs else []
        if len(values) == 10:
            alert.size, alert.neg_inf_count = int(values[3]), int(values[4])
            alert.pos_inf_count, alert.nan_count = int(values[5]), int(values[6])
        alert.masked = True
        alert.origin = True
        out.append((position, alert))
    out.sort(key=lambda item: item[0])
    return out


def merge_alerts(kernel_positions, kernel_origin, masked: list[tuple[int, Alert]]):
    """Where kernel alerts and masked inner-op alerts go in one list in execution order (an
    inner op comes before the kernel's own outputs): (merged position of each kernel alert,
    merged position of each masked alert)."""
    import numpy as np

    inserts = np.searchsorted(kernel_positions, np.array([p for p, _ in masked], dtype=np.int64), side="left")
    n = len(kernel_positions)
    kernel_merged = np.arange(n) + np.searchsorted(inserts, np.arange(n), side="right")
    masked_merged = inserts + np.arange(len(masked))
    return kernel_merged, masked_merged


def replays(run: RunReader, op_id: int | None = None, execution_index: int | None = None) -> dict:
    """The `replays` route's answer: op-by-op replays of fused kernel calls (all, one kernel
    site's, or the one of a kernel in one execution), oldest first."""
    if execution_index is not None and op_id is not None:
        record = run.replay_of(execution_index, op_id)
        found = [record] if record is not None else []
    else:
        found = [
            r for r in run.replays(op_id) if execution_index is None or int(r.execution_index) == int(execution_index)
        ]
    return {"num_replays": len(found), "replays": [replay_json(run, r) for r in found]}
