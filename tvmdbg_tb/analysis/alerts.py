"""NaN/Inf alerts, computed once as records are read (an observer on the read stream).

An alert is one non-finite output (op, output slot) in one execution, in trace order. Its
`origin` flag says the op made the bad value rather than passing one on: none of its inputs
was non-finite in that execution. Inputs produced by traced ops are looked up among that
execution's non-finite traces, function parameters in the execution's input summaries; an
input whose health was never recorded (a builtin's result, an op that op_regex filtered
out) counts as finite only if nothing earlier in the execution was non-finite. Where the
circular buffer dropped the start of an execution (the oldest in the dump, or the first after
each of its drops), an op whose producer trace is gone there is never called the origin:
nothing shows its inputs were finite.

Memory stays small: per alert a trace position and a flag (numpy), plus the packed keys of
the non-finite outputs of the last few executions (producers and consumers run in the same
execution). Work is vectorised per op, so a run that went NaN everywhere still loads fast.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np

from tvmdbg_tb.analysis.inner_ops import confirm_alert, masked_alerts, merge_alerts
from tvmdbg_tb.analysis.jsonable import num
from tvmdbg_tb.analysis.ranges import range_alerts
from tvmdbg_tb.events import layout
from tvmdbg_tb.events.health import HEALTH_MODES
from tvmdbg_tb.events.locations import location
from tvmdbg_tb.events.reader import NONFINITE, GrowingArray, RunReader, value_nonfinite_counts
from tvmdbg_tb.events.summaries import describe, nonfinite_counts
from tvmdbg_tb.proto import debug_event_pb2 as pb

ALERT_TYPE = "InfNanAlert"
RANGE_PAGE = 100  # range alerts in an answer unless asked otherwise
_RECENT_EXECUTIONS = 64
_BLOCK = 1 << 18  # non-finite traces handled at once
# A non-finite output's key: execution index << 28 | op (20 bits, dense ids) << 8 | slot (8 bits).
_E_SHIFT = 28
_OP_MASK = (1 << 20) - 1


def _pack(execution: np.ndarray, op, slot) -> np.ndarray:
    slot = np.clip(slot, 0, 255).astype(np.int64)
    return (np.maximum(execution, 0).astype(np.int64) << _E_SHIFT) | (np.asarray(op, dtype=np.int64) << 8) | slot


def _cut_executions(run: RunReader, digests: np.ndarray) -> dict[int, set[int]]:
    """{execution index: ops traced in it} of the executions whose first traces may be gone:
    the oldest in the dump when earlier traces were dropped (circular buffer, damage), and
    the first after each of the circular buffer's drops."""
    rows = [row for row, _, _ in run.ring_drops(layout.GRAPH_EXECUTION_TRACES) if row < len(digests)]
    if len(digests) and digests["index"][0] != 0:
        rows.append(0)
    cut = {}
    for e in {int(digests["execution_index"][row]) for row in rows}:
        cut[e] = set(np.unique(digests["op_id"][digests["execution_index"] == e]).tolist())
    return cut


def _contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    if not len(sorted_keys):
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys


class AlertMonitor:
    """Observer of one RunReader that keeps its NaN/Inf alerts up to date."""

    def __init__(self, run: RunReader):
        self._lock = threading.RLock()
        self._dense: dict[int, int] = {}  # op_id -> small int for packed keys
        self._clear()
        self._op_inputs: dict[int, tuple[list[tuple[int, int]], list[int], bool]] = {}
        run.add_observer(self)

    def _clear(self) -> None:
        self._positions = GrowingArray(np.int64)
        self._origin = GrowingArray(np.bool_)
        self._carry = np.zeros(0, dtype=np.int64)  # packed keys of recent non-finite outputs, sorted
        self._bad_params: OrderedDict[int, frozenset[int] | None] = OrderedDict()
        self._pending: dict[int, list[tuple[int, bool, tuple[int, ...]]]] = {}
        self._traced: set[int] = set()  # ops with at least one trace in the dump
        self._kinds = np.zeros(3, dtype=np.int64)  # alerts [0:_counted) with NaN, -Inf, +Inf
        self._counted = 0

    # -- observing -------------------------------------------------------------------------

    def __call__(self, run: RunReader, stream: str, start: int, reset: bool) -> None:
        with self._lock:
            if stream == layout.GRAPH_EXECUTION_TRACES:
                if reset:
                    self._clear()
                self._add(run, start)
            elif stream == layout.EXECUTION and self._pending:
                self._resolve_pending(run)

    def _inputs_of(self, run: RunReader, op_id: int) -> tuple[list[tuple[int, int]], list[int], bool]:
        """(producer (op, slot) pairs, param indices, has an input of unknown health)."""
        spec = self._op_inputs.get(op_id)
        if spec is None:
            try:
                op = run.op(op_id)
            except KeyError:
                return [], [], True  # op not read yet: do not cache
            producers, params, unknown = [], [], False
            for inp in op.inputs:
                if inp.kind == pb.OpInput.OP_OUTPUT:
                    producers.append((int(inp.producer_op_id), int(inp.producer_output_slot)))
                elif inp.kind == pb.OpInput.PARAM:
                    params.append(int(inp.param_index))
                elif inp.kind == pb.OpInput.OTHER:
                    unknown = True
            spec = self._op_inputs[op_id] = (producers, params, unknown)
        return spec

    def _params_bad(self, run: RunReader, execution_index: int) -> frozenset[int] | None:
        """Indices of the execution's non-finite inputs; None while it is not read."""
        if execution_index in self._bad_params:
            return self._bad_params[execution_index]
        hits = np.flatnonzero(run.execution_digests()["index"] == execution_index)
        if not len(hits):
            return None
        execution = run.execution(int(hits[-1]))
        bad = set()
        for i, summary in enumerate(execution.inputs):
            counts = nonfinite_counts(execution.tensor_debug_mode, summary.debug_values)
            if counts is None and summary.HasField("tensor_value"):  # FULL_TENSOR: from the values
                counts = value_nonfinite_counts(summary.tensor_value)
            if counts is None and summary.items:  # a FULL_TENSOR tuple: from its tensors
                parts = [
                    value_nonfinite_counts(item.tensor_value) for item in summary.items if item.HasField("tensor_value")
                ]
                counts = tuple(map(sum, zip(*[p for p in parts if p is not None]))) or None
            if counts is not None and any(counts):
                bad.add(i)
        self._bad_params[execution_index] = result = frozenset(bad)
        while len(self._bad_params) > _RECENT_EXECUTIONS:
            self._bad_params.popitem(last=False)
        return result

    def _dense_id(self, op_id: int) -> int:
        dense = self._dense.get(op_id)
        if dense is None:
            dense = self._dense[op_id] = len(self._dense) & _OP_MASK
        return dense

    def _add(self, run: RunReader, start: int) -> None:
        """Adds the non-finite traces from position start on, in blocks (bounded memory)."""
        digests = run.trace_digests()
        self._traced.update(np.unique(digests["op_id"][start:]).tolist())
        new = np.flatnonzero(digests["flags"][start:] & NONFINITE) + start
        for block in range(0, len(new), _BLOCK):
            self._add_block(run, digests, new[block : block + _BLOCK])

    def _add_block(self, run: RunReader, digests: np.ndarray, new: np.ndarray) -> None:
        """Origins of one block of non-finite traces, vectorised per op: the key of an output
        (execution, op, slot) is packed in an int64 and looked up in the sorted keys of this
        block and of the last few executions."""
        e = digests["execution_index"][new]
        ops, op_rows = np.unique(digests["op_id"][new], return_inverse=True)
        dense = np.array([self._dense_id(o) for o in ops.tolist()], dtype=np.int64)
        keys = _pack(e, dense[op_rows], digests["output_slot"][new])
        _, first_of_execution, execution_rows = np.unique(e, return_index=True, return_inverse=True)
        earlier = (np.arange(len(new)) != first_of_execution[execution_rows]) | np.isin(e, self._carry >> _E_SHIFT)
        known = np.union1d(self._carry, keys)
        origin = np.ones(len(new), dtype=np.bool_)
        first_alert = self._positions.size
        cut = _cut_executions(run, digests)
        by_op = np.argsort(op_rows, kind="stable")  # rows grouped by op, in trace order
        bounds = np.concatenate(([0], np.cumsum(np.bincount(op_rows, minlength=len(ops)))))
        for k, op_id in enumerate(ops.tolist()):
            rows = by_op[bounds[k] : bounds[k + 1]]
            producers, params, unknown = self._inputs_of(run, op_id)
            bad = np.zeros(len(rows), dtype=bool)
            for producer, slot in producers:
                if producer in self._traced:
                    bad |= _contains(known, _pack(e[rows], self._dense_id(producer), slot))
                else:
                    unknown = True
            if unknown:
                bad |= earlier[rows]
            for cut_execution, present_in_cut in cut.items():
                if any(p not in present_in_cut for p, _ in producers):
                    bad |= e[rows] == cut_execution
            origin[rows] = ~bad
            if not params:
                continue
            candidates = rows[~bad]
            for execution in np.unique(e[candidates]).tolist():
                same = candidates[e[candidates] == execution]
                bad_params = self._params_bad(run, execution)
                if bad_params is None:  # the execution record comes after its traces
                    origin[same] = ~earlier[same]
                    self._pending.setdefault(execution, []).extend(
                        (first_alert + r, bool(earlier[r]), tuple(params)) for r in same.tolist()
                    )
                elif any(p in bad_params for p in params):
                    origin[same] = False
        newest = int(e.max())
        self._carry = known[(known >> _E_SHIFT) >= newest - _RECENT_EXECUTIONS]
        self._positions.append_array(new)
        self._origin.append_array(origin)

    def _resolve_pending(self, run: RunReader) -> None:
        for e in list(self._pending):
            bad_params = self._params_bad(run, e)
            if bad_params is None:
                continue
            for alert, _earlier, params in self._pending.pop(e):
                if any(p in bad_params for p in params):
                    self._origin.view()[alert] = False

    # -- queries ---------------------------------------------------------------------------

    def num_alerts(self) -> int:
        return self._positions.size

    def first_origin_index(self) -> int | None:
        with self._lock:
            origin = self._origin.view()
            hits = np.flatnonzero(origin[: self._positions.size])
            return int(hits[0]) if len(hits) else None

    def counts(self, run: RunReader) -> dict[str, int]:
        """Alerts per kind over ALL alerts (not a page): an alert counts for a kind when its
        output holds at least one such value (-1, unknown in CURT_HEALTH, counts for none)."""
        with self._lock:  # counted as alerts arrive: a trace's counts never change
            n = self._positions.size
            if self._counted < n:
                digests = run.trace_digests()[self._positions.view()[self._counted : n]]
                self._kinds += [np.count_nonzero(digests[kind] > 0) for kind in ("nan", "neg_inf", "pos_inf")]
                self._counted = n
            nan, neg_inf, pos_inf = self._kinds.tolist()
            return {
                "nan": nan,
                "neg_inf": neg_inf,
                "pos_inf": pos_inf,
                "origin": int(np.count_nonzero(self._origin.view()[:n])),
            }

    def page(self, begin: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """(trace positions, origin flags) of alerts [begin:end]."""
        with self._lock:
            return self._positions.view()[begin:end].copy(), self._origin.view()[begin:end].copy()


_monitors: weakref.WeakKeyDictionary[RunReader, AlertMonitor] = weakref.WeakKeyDictionary()
_monitors_lock = threading.Lock()


def monitor(run: RunReader) -> AlertMonitor:
    """The run's AlertMonitor, registered on first use (it replays what is already read)."""
    with _monitors_lock:
        found = _monitors.get(run)
        if found is None:
            found = _monitors[run] = AlertMonitor(run)
        return found


def alert_rows(run: RunReader, positions: np.ndarray, origin: np.ndarray) -> list[dict]:
    """The alert objects (see docs/routes.md) of the traces at positions, with their flags."""
    digests = run.trace_digests()[positions]
    columns = {name: digests[name].tolist() for name in digests.dtype.names}
    executions = run.execution_digests()["index"]
    hits = np.flatnonzero(np.isin(executions, digests["execution_index"]))
    execution_position = dict(zip(executions[hits].tolist(), hits.tolist()))
    per_op: dict[int, dict] = {}
    gaps = _gaps(run) if len(positions) and origin.any() else []
    out = []
    for i, position in enumerate(positions.tolist()):
        op_id = columns["op_id"][i]
        if op_id not in per_op:
            try:
                op = run.op(op_id)
            except KeyError:
                op = None
            per_op[op_id] = {
                "op": op,
                # Output dtypes and shapes as compiled (-1: a symbolic dimension).
                "specs": [(spec.dtype, [int(d) for d in spec.shape]) for spec in (op.outputs if op else ())],
                # Output sizes known at compile time (None: symbolic, ask the record).
                "sizes": [
                    int(np.prod(spec.shape, dtype=np.int64)) if all(d >= 0 for d in spec.shape) else None
                    for spec in (op.outputs if op else ())
                ],
                "location": location(run, op.code_location) if op else None,
                "original_ops": [
                    {"op_type": o.op_type, "var_name": o.var_name, "location": location(run, o.code_location)}
                    for o in (op.original_ops if op else ())
                ],
            }
        info = per_op[op_id]
        op, slot = info["op"], columns["output_slot"][i]
        size = info["sizes"][slot] if 0 <= slot < len(info["sizes"]) else None
        dtype, shape = info["specs"][slot] if 0 <= slot < len(info["specs"]) else (None, None)
        if op is None or size is None:  # names or size only the record has
            trace = run.trace(position)
            size = describe(trace.tensor_debug_mode, list(trace.debug_values)).get("size", size)
        names = (op.op_name, op.kernel, int(op.graph_id)) if op else (trace.op_name, trace.kernel, int(trace.graph_id))
        e = columns["execution_index"][i]
        out.append(
            {
                "alert_type": ALERT_TYPE,
                "op_id": op_id,
                "op_name": names[0],
                "kernel": names[1],
                "graph_id": names[2],
                "output_slot": slot,
                "nan_count": columns["nan"][i],
                "neg_inf_count": columns["neg_inf"][i],
                "pos_inf_count": columns["pos_inf"][i],
                "size": size,
                "dtype": dtype,
                "shape": shape,
                "wall_time": num(columns["wall_time"][i]),
                "execution_index": e,
                "trace_index": columns["index"][i],
                "execution_position": execution_position.get(e),
                "trace_position": position,
                "origin": bool(origin[i]),
                "origin_uncertain": bool(origin[i]) and _near_a_gap(e, gaps),
                "location": info["location"],
                "original_ops": info["original_ops"],
            }
        )
        confirm_alert(run, out[-1])  # replay/deep mode: the inner op's own line
    return out


def num_alerts(run: RunReader) -> int:
    """Alerts of the run: kernel outputs plus NaN/Inf masked inside fused kernels (replays)."""
    total = monitor(run).num_alerts()
    if run.replays():
        with run.lock:
            total += len(masked_alerts(run, lambda p, o: alert_rows(run, p, o)))
    return total


_GAP_KINDS = ("damaged", "truncated", "aborted", "traces_without_execution", "executions_missing_traces")
# Files whose damage may change any origin: the ops' inputs (graphs), the run's mode (metadata).
_EVERYWHERE_FILES = tuple(layout.file_name(s) for s in (layout.GRAPHS, layout.METADATA))
_EVERYWHERE_KINDS = ("metadata_missing", "metadata_damaged", "traces_without_op")


def _gaps(run: RunReader) -> list[tuple[int, float]]:
    """Execution ranges where records are damaged or missing (see events/completeness.py): an
    origin there may be wrong, its true producer's trace being what is missing. Damage to
    the graphs or the metadata concerns every execution."""
    gaps = []
    for p in run.completeness().problems:
        if p.kind in _EVERYWHERE_KINDS or (p.kind == "damaged" and (p.file or "").endswith(_EVERYWHERE_FILES)):
            gaps.append((0, float("inf")))
        elif p.kind in _GAP_KINDS and p.executions:
            gaps.append((p.executions[0], float("inf") if p.executions[1] is None else p.executions[1]))
    return gaps


def _near_a_gap(execution_index: int, gaps: list[tuple[int, float]]) -> bool:
    """Whether records of this execution or of an earlier one are damaged or missing: an
    origin there may not be the first, the op that really made the first bad value being in
    what is missing."""
    return any(first <= execution_index for first, _ in gaps)


def alerts(
    run: RunReader,
    begin: int = 0,
    end: int = -1,
    alert_type: str | None = None,
    range_begin: int = 0,
    range_end: int = RANGE_PAGE,
) -> dict:
    """The `alerts` route's answer: alerts [begin:end] (end=-1: all) in execution order, and
    range alerts [range_begin:range_end] (analysis/ranges.py) under "range_alerts"."""
    m = monitor(run)
    with run.lock:  # alert positions and the digests they index, from one state
        answer = _alerts(run, m, begin, end, alert_type)
    answer["range_alerts"] = range_alerts(run, range_begin, range_end)  # reads the file: not under run.lock
    return answer


def start_dropped(run: RunReader) -> bool:
    """True when the first alerts may be gone: the dump no longer holds the start of the run
    (the circular buffer or damage dropped the oldest calls or kernel executions) and nothing
    vouches for what went. A dump whose records carry their places, written in a mode that
    counts NaN/Inf, does: its writer kept the first calls with a NaN or an Inf whole."""
    executions, traces = run.execution_digests(), run.trace_digests()
    lost = bool((len(executions) and executions["index"][0] != 0) or (len(traces) and traces["index"][0] != 0))
    lost |= bool(run.ring_drops(layout.EXECUTION) or run.ring_drops(layout.GRAPH_EXECUTION_TRACES))
    mode = run.metadata.tensor_debug_mode if run.metadata is not None else pb.TENSOR_DEBUG_MODE_UNSPECIFIED
    return lost and not (run.keyed and mode in HEALTH_MODES)


def _alerts(run: RunReader, m: AlertMonitor, begin: int, end: int, alert_type: str | None) -> dict:
    total = m.num_alerts()
    counts = m.counts(run) if total else {"nan": 0, "neg_inf": 0, "pos_inf": 0, "origin": 0}
    matches = alert_type in (None, "", ALERT_TYPE)
    masked = masked_alerts(run, lambda p, o: alert_rows(run, p, o)) if matches and run.replays() else []
    if masked:  # NaN/Inf made and hidden inside fused kernels (replay/deep mode)
        return _merged_alerts(run, m, masked, begin, end, alert_type)
    n = total if matches else 0
    end = n if end < 0 else min(end, n)
    begin = min(begin, end)
    positions, origin = m.page(begin, end) if matches else (np.zeros(0, np.int64), np.zeros(0, bool))
    return {
        "begin": begin,
        "end": end,
        "num_alerts": n,
        "alerts_breakdown": {ALERT_TYPE: total} if total else {},
        "alert_type": alert_type or None,
        "nan_alerts": counts["nan"] if matches else 0,
        "neg_inf_alerts": counts["neg_inf"] if matches else 0,
        "pos_inf_alerts": counts["pos_inf"] if matches else 0,
        "origin_alerts": counts["origin"] if matches else 0,
        "start_dropped": start_dropped(run),
        "first_origin_index": m.first_origin_index() if matches else None,
        "alerts": alert_rows(run, positions, origin),
    }


def _merged_alerts(run: RunReader, m: AlertMonitor, masked, begin: int, end: int, alert_type: str | None) -> dict:
    """Kernel alerts and masked inner-op alerts (all origins) in one list, in execution order."""
    total_kernel = m.num_alerts()
    positions, origin = m.page(0, total_kernel)
    kernel_at, masked_at = merge_alerts(positions, origin, masked)
    n = total_kernel + len(masked)
    end = n if end < 0 else min(end, n)
    begin = min(begin, end)
    firsts = [int(masked_at[0])]
    origins = np.flatnonzero(origin)
    if len(origins):
        firsts.append(int(kernel_at[origins[0]]))
    chosen = np.flatnonzero((kernel_at >= begin) & (kernel_at < end))
    rows = dict(zip(kernel_at[chosen].tolist(), alert_rows(run, positions[chosen], origin[chosen])))
    for k, at in enumerate(masked_at.tolist()):
        if begin <= at < end:
            rows[at] = masked[k][1]
    return {
        "begin": begin,
        "end": end,
        "num_alerts": n,
        "alerts_breakdown": {ALERT_TYPE: n},
        "alert_type": alert_type or None,
        "first_origin_index": min(firsts),
        "alerts": [rows[i] for i in range(begin, end)],
    }
