"""NaN/Inf alerts, computed once as records are read (an observer on the read stream).

An alert is one non-finite output (op, output slot) in one execution, in trace order. Its
`origin` flag says the op made the bad value rather than passing one on: none of its inputs
was non-finite in that execution. Inputs produced by traced ops are looked up among that
execution's non-finite traces, function parameters in the execution's input summaries; an
input whose health was never recorded (a builtin's result) counts as finite only if nothing
earlier in the execution was non-finite.

Memory stays small: per alert a trace position and a flag (numpy), plus the non-finite
outputs of the last few executions (producers and consumers run in the same execution).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np

from tvmdbg_tb.analysis.jsonable import num
from tvmdbg_tb.analysis.views import location
from tvmdbg_tb.events import layout
from tvmdbg_tb.events.reader import NONFINITE, RunReader
from tvmdbg_tb.events.summaries import describe, nonfinite_counts
from tvmdbg_tb.proto import debug_event_pb2 as pb

ALERT_TYPE = "InfNanAlert"
_RECENT_EXECUTIONS = 64


class _Growable:
    def __init__(self, dtype):
        self.data = np.zeros(256, dtype=dtype)
        self.size = 0

    def append(self, values: np.ndarray) -> None:
        need = self.size + len(values)
        if need > len(self.data):
            grown = np.zeros(max(need, 2 * len(self.data)), dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size : need] = values
        self.size = need

    def view(self) -> np.ndarray:
        return self.data[: self.size]


class AlertMonitor:
    """Observer of one RunReader that keeps its NaN/Inf alerts up to date."""

    def __init__(self, run: RunReader):
        self._lock = threading.RLock()
        self._clear()
        self._op_inputs: dict[int, tuple[list[tuple[int, int]], list[int], bool]] = {}
        run.add_observer(self)

    def _clear(self) -> None:
        self._positions = _Growable(np.int64)
        self._origin = _Growable(np.bool_)
        self._bad: OrderedDict[int, set[tuple[int, int]]] = OrderedDict()  # execution -> bad (op, slot)
        self._bad_params: OrderedDict[int, frozenset[int] | None] = OrderedDict()
        self._pending: dict[int, list[tuple[int, bool, tuple[int, ...]]]] = {}

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
            if counts is not None and any(counts):
                bad.add(i)
        self._bad_params[execution_index] = result = frozenset(bad)
        while len(self._bad_params) > _RECENT_EXECUTIONS:
            self._bad_params.popitem(last=False)
        return result

    def _add(self, run: RunReader, start: int) -> None:
        digests = run.trace_digests()
        new = np.flatnonzero(digests["flags"][start:] & NONFINITE) + start
        if not len(new):
            return
        rows = digests[new]
        origin = np.zeros(len(new), dtype=np.bool_)
        first_alert = self._positions.size
        for i, (e, op_id, slot) in enumerate(
            zip(rows["execution_index"].tolist(), rows["op_id"].tolist(), rows["output_slot"].tolist())
        ):
            bad = self._bad.get(e)
            earlier = bad is not None
            if bad is None:
                bad = self._bad[e] = set()
                while len(self._bad) > _RECENT_EXECUTIONS:
                    self._bad.popitem(last=False)
            producers, params, unknown = self._inputs_of(run, op_id)
            producer_bad = any(p in bad for p in producers)
            unknown_earlier = unknown and earlier
            bad.add((op_id, slot))
            if producer_bad or unknown_earlier:
                continue
            if params:
                bad_params = self._params_bad(run, e)
                if bad_params is None:  # the execution record comes after its traces
                    self._pending.setdefault(e, []).append((first_alert + i, earlier, tuple(params)))
                    origin[i] = not earlier
                    continue
                if any(p in bad_params for p in params):
                    continue
            origin[i] = True
        self._positions.append(new)
        self._origin.append(origin)

    def _resolve_pending(self, run: RunReader) -> None:
        for e in list(self._pending):
            bad_params = self._params_bad(run, e)
            if bad_params is None:
                continue
            for alert, _earlier, params in self._pending.pop(e):
                if any(p in bad_params for p in params):
                    self._origin.data[alert] = False

    # -- queries ---------------------------------------------------------------------------

    def num_alerts(self) -> int:
        return self._positions.size

    def first_origin_index(self) -> int | None:
        with self._lock:
            origin = self._origin.view()
            hits = np.flatnonzero(origin[: self._positions.size])
            return int(hits[0]) if len(hits) else None

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
    out = []
    for i, position in enumerate(positions.tolist()):
        op_id = columns["op_id"][i]
        if op_id not in per_op:
            try:
                op = run.op(op_id)
            except KeyError:
                op = None
            static = op is not None and len(op.outputs) > 0 and all(d >= 0 for d in op.outputs[0].shape)
            per_op[op_id] = {
                "op": op,
                "size": int(np.prod(op.outputs[0].shape, dtype=np.int64)) if static else None,
                "location": location(run, op.code_location) if op else None,
                "original_ops": [
                    {"op_type": o.op_type, "var_name": o.var_name, "location": location(run, o.code_location)}
                    for o in (op.original_ops if op else ())
                ],
            }
        info = per_op[op_id]
        op, size = info["op"], info["size"]
        slot = columns["output_slot"][i]
        if op is None or size is None or slot != 0:  # names or size only the record has
            trace = run.trace(position)
            size = describe(trace.tensor_debug_mode, list(trace.debug_values)).get("size")
            names = (trace.op_name, trace.kernel, int(trace.graph_id))
        else:
            names = (op.op_name, op.kernel, int(op.graph_id))
        if op is not None:
            names = (op.op_name, op.kernel, int(op.graph_id))
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
                "wall_time": num(columns["wall_time"][i]),
                "execution_index": e,
                "trace_index": columns["index"][i],
                "execution_position": execution_position.get(e),
                "trace_position": position,
                "origin": bool(origin[i]),
                "location": info["location"],
                "original_ops": info["original_ops"],
            }
        )
    return out


def alerts(run: RunReader, begin: int = 0, end: int = -1, alert_type: str | None = None) -> dict:
    """The `alerts` route's answer: alerts [begin:end] (end=-1: all) in execution order."""
    m = monitor(run)
    total = m.num_alerts()
    matches = alert_type in (None, "", ALERT_TYPE)
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
        "first_origin_index": m.first_origin_index() if matches else None,
        "alerts": alert_rows(run, positions, origin),
    }
