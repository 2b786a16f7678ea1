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
from tvmdbg_tb.events.layout import NO_INPUT
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
    (OriginalOp.nonfinite_literal: a mask's -inf) and the infinities those ops made inside it
    (a NaN such an op makes is computed, not written: `(1 - keep) * -inf` at a kept position)."""
    try:
        op = run.op(int(trace.op_id))
    except KeyError:
        return set(), 0
    literal_vars = {o.var_name for o in op.original_ops if o.nonfinite_literal}
    written = 0
    for entry in trace.inner_nonfinite:
        if entry.var_name in literal_vars:
            written |= _entry_kinds(entry) & ~NAN
    return literal_vars, written


_MAX_ANCESTORS = 512  # kernels looked through for where a condition comes from


def masked_inside(run: RunReader, trace: pb.GraphExecutionTrace, masked_inputs: set[int]) -> bool:
    """Whether everything the kernel's ops made inside it (trace.inner_nonfinite) is masking,
    by the data flow between them (GraphOpCreation.fused_members): each op that made a value
    either writes a non-finite literal of the program and made only infinities, or made it from
    mask values only (the kernel inputs in masked_inputs, which carried an absorbed mask's
    values in; literal ops; what ops move or compute of those), and then a NaN it made is
    selected away by a `where` whose condition is computed from those same values (PyTorch's
    safe softmax: a fully masked row's softmax is NaN, `where(all(x == -inf), 0, softmax(x))`).
    A value an op makes of finite data (sqrt of a negative, 0 x -inf of a literal) is no masking."""
    try:
        op = run.op(int(trace.op_id))
    except KeyError:
        return False
    members = op.fused_members
    made = {int(e.index): _entry_kinds(e) for e in trace.inner_nonfinite}
    if not members or any(k >= len(members) for k in made):
        return False
    mask = {-1 - i for i in masked_inputs}  # refs holding the mask's values
    for k, member in enumerate(members):
        reads_mask = any(r in mask for r in member.input_refs)
        if k not in made:
            if reads_mask:
                mask.add(k)  # moved, selected or compared: still the mask's
            continue
        if member.nonfinite_literal:
            if made[k] & NAN:
                return False  # a NaN of the literal and finite data: computed
        elif not reads_mask:
            return False  # made of finite data
        elif made[k] & NAN and not _selected_away(run, op, k, mask, masked_inputs):
            return False
        mask.add(k)
    return True


def _selected_away(run: RunReader, op: pb.GraphOpCreation, k: int, mask: set[int], masked_inputs: set[int]) -> bool:
    """Whether no value of member k reaches the kernel's outputs but through a `where` that
    selects it by a condition computed from the mask's values (inside the kernel, or in the
    kernels that computed its inputs from them)."""
    members = op.fused_members
    readers: dict[int, list[tuple[int, int]]] = {}
    for j, member in enumerate(members):
        for position, ref in enumerate(member.input_refs):
            readers.setdefault(ref, []).append((j, position))
    sources = _mask_sources(run, op, masked_inputs)
    seen, stack = {k}, [k]
    while stack:
        current = stack.pop()
        consumers = readers.get(current, [])
        if not consumers:
            return False  # reaches an output of the kernel
        for j, position in consumers:
            member = members[j]
            if _is_where(member) and position > 0 and _from_mask(members, member.input_refs[0], mask, sources, op):
                continue  # selected by the mask
            if j not in seen:
                seen.add(j)
                stack.append(j)
    return True


def _is_where(member: pb.FusedMember) -> bool:
    return member.op_type.rsplit(".", 1)[-1].split(":")[-1].rstrip("0123456789") in ("where", "tir_where")


def _from_mask(members, ref: int, mask: set[int], sources: set[int], op: pb.GraphOpCreation) -> bool:
    """Whether the value at ref is computed from the mask's values: inside the kernel, or
    from a kernel input made (through other kernels) from what carried the mask in."""
    seen, stack = set(), [ref]
    while stack:
        current = stack.pop()
        if current in mask:
            return True
        if current in seen or current == NO_INPUT:
            continue
        seen.add(current)
        if current >= 0:
            stack.extend(members[current].input_refs)
            continue
        i = -1 - current
        if i < len(op.inputs) and op.inputs[i].kind == pb.OpInput.OP_OUTPUT and op.inputs[i].producer_op_id in sources:
            return True
    return False


def _mask_sources(run: RunReader, op: pb.GraphOpCreation, masked_inputs: set[int]) -> set[int]:
    """The kernels whose outputs are computed from the values the masked inputs carried in:
    their producers, and every kernel of the graph reading from those (bounded)."""
    producers = {
        int(op.inputs[i].producer_op_id)
        for i in masked_inputs
        if i < len(op.inputs) and op.inputs[i].kind == pb.OpInput.OP_OUTPUT
    }
    found, stack = set(producers), list(producers)
    while stack and len(found) < _MAX_ANCESTORS:
        for consumer, _, _ in run.consumers(stack.pop()):
            if consumer not in found and consumer != op.op_id:
                found.add(int(consumer))
                stack.append(int(consumer))
    return found


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
