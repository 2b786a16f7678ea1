"""Range alerts: float outputs heading for overflow, seen before the inf (FULL_STATS runs).

A float16 model whose activations grow layer by layer, or a training run whose values grow
call after call, is finite until one value passes 65504; the NaN/Inf alert then comes too
late to say why. FULL_STATS records each output's finite abs-max, which shows the climb:

- `near_max`: an output's finite abs-max is at least its dtype's largest finite value divided
  by HEADROOM (float16: 65504 / 16 = 4094). A few more doublings and it overflows.
- `growth`: an output's abs-max is more than GROWTH_FACTOR times the same op output's at its
  previous call, and at that rate it reaches the dtype's largest value within GROWTH_HORIZON
  calls. The horizon scales the rule with the dtype: float16 values growing 4x per call from
  300 are flagged, float32 values doing the same from 300 are not.

Outputs already holding NaN/Inf are left to the NaN/Inf alerts. One alert per (op output,
kind): where it first happened, how many calls met the rule, and the largest abs-max among
them, so a long run stays a short list. Computed lazily and incrementally: each trace's
statistics are read from the trace file once (events/trace_values.py), when first asked for.
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from tvmdbg_tb.analysis.jsonable import num
from tvmdbg_tb.events import layout, trace_values
from tvmdbg_tb.events.locations import location, original_ops
from tvmdbg_tb.events.modes import spec
from tvmdbg_tb.events.reader import NONFINITE, RunReader
from tvmdbg_tb.events.summaries import LAYOUTS, dtype_name
from tvmdbg_tb.proto import debug_event_pb2 as pb

RANGE_ALERT = "RangeAlert"
NEAR_MAX, GROWTH = "near_max", "growth"
HEADROOM = 16.0
GROWTH_FACTOR = 2.0
GROWTH_HORIZON = 4

# Largest finite value of each float dtype, by DType code (the formats' definitions).
DTYPE_MAX = {
    pb.FLOAT16: 65504.0,
    pb.BFLOAT16: 3.3895313892515355e38,
    pb.FLOAT32: 3.4028234663852886e38,
    pb.FLOAT64: 1.7976931348623157e308,
    pb.FLOAT8_E4M3FN: 448.0,
    pb.FLOAT8_E5M2: 57344.0,
}
_MAX_BY_CODE = np.full(max(pb.DType.values()) + 1, np.nan)
for _code, _max in DTYPE_MAX.items():
    _MAX_BY_CODE[_code] = _max

_FIELDS = LAYOUTS[pb.FULL_STATS]
_DTYPE, _ABS_MAX = _FIELDS.index("dtype"), _FIELDS.index("abs_max")


@dataclass
class _Alert:
    """The first call of one op output that met one rule, and what the later ones added."""

    kind: str
    position: int  # trace position (stable until the reader resets the trace stream)
    op_id: int
    output_slot: int
    dtype: int
    abs_max: float
    previous_abs_max: float | None
    num_calls: int
    peak_abs_max: float


class RangeMonitor:
    """The range alerts of one RunReader, brought up to date when asked (see range_alerts)."""

    def __init__(self, run: RunReader):
        self._lock = threading.RLock()  # guards the state below
        self._scan_lock = threading.Lock()  # one scan at a time (taken before run.lock)
        self._generation = 0  # counts resets of the trace stream
        self._clear()
        run.add_observer(self)

    def _clear(self) -> None:
        self._generation += 1
        self._done = 0  # trace positions already scanned
        self._last: dict[int, float] = {}  # packed (op, slot) -> abs-max at its latest call
        self._alerts: dict[tuple[int, str], _Alert] = {}  # (packed op output, kind) ->

    def __call__(self, run: RunReader, stream: str, start: int, reset: bool) -> None:
        if stream == layout.GRAPH_EXECUTION_TRACES and reset:
            with self._lock:
                self._clear()

    def scan(self, run: RunReader) -> None:
        """Reads the statistics of the traces indexed since the last scan. The trace file is
        read without run.lock (other queries go on meanwhile); call it without holding it."""
        if not available(run):  # never FULL_STATS (the metadata is read once): no lock taken
            return
        with self._scan_lock:
            with run.lock:
                if run.metadata is None or not spec(run.metadata.tensor_debug_mode).statistics:
                    return
                with self._lock:
                    start, generation = self._done, self._generation
                digests = run.trace_digests()[start:].copy()
            if not len(digests):
                return
            values = np.full((len(digests), 2), np.nan)
            try:
                for positions, rows in trace_values.iter_debug_values(run, digests["offset"], len(_FIELDS)):
                    values[positions] = rows[:, [_DTYPE, _ABS_MAX]]
            except OSError:
                return  # the trace file is unreadable right now: try again at the next query
            with self._lock:
                if self._generation != generation:
                    return  # the trace stream was reset meanwhile: these positions are gone
                self._add(digests, values, start)
                self._done = start + len(digests)

    def _add(self, digests: np.ndarray, values: np.ndarray, start: int) -> None:
        codes = np.where(np.isfinite(values[:, 0]), values[:, 0], -1).astype(np.int64)
        known = (codes >= 0) & (codes < len(_MAX_BY_CODE))
        dtype_max = np.where(known, _MAX_BY_CODE[np.clip(codes, 0, len(_MAX_BY_CODE) - 1)], np.nan)
        abs_max = values[:, 1]
        slots = np.clip(digests["output_slot"], 0, None).astype(np.int64)
        keys = (digests["op_id"].astype(np.int64) << 16) | np.minimum(slots, 0xFFFF)
        previous = self._previous(keys, abs_max)
        usable = np.isfinite(dtype_max) & np.isfinite(abs_max) & ((digests["flags"] & NONFINITE) == 0)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            near = usable & (abs_max >= dtype_max / HEADROOM)
            ratio = abs_max / previous
            reaches = np.log(abs_max) + GROWTH_HORIZON * np.log(ratio) >= np.log(dtype_max)
            growth = usable & (previous > 0) & (ratio > GROWTH_FACTOR) & reaches
        for kind, mask in ((NEAR_MAX, near), (GROWTH, growth)):
            rows = np.flatnonzero(mask)
            if not len(rows):
                continue
            unique, first, counts = np.unique(keys[rows], return_index=True, return_counts=True)
            peaks = np.maximum.reduceat(
                abs_max[rows][np.argsort(keys[rows], kind="stable")], np.r_[0, np.cumsum(counts)[:-1]]
            )
            for key, r, count, peak in zip(unique.tolist(), rows[first].tolist(), counts.tolist(), peaks.tolist()):
                found = self._alerts.get((key, kind))
                if found is None:
                    self._alerts[(key, kind)] = _Alert(
                        kind=kind,
                        position=start + r,
                        op_id=key >> 16,
                        output_slot=int(digests["output_slot"][r]),
                        dtype=int(codes[r]),
                        abs_max=float(abs_max[r]),
                        previous_abs_max=float(previous[r]) if kind == GROWTH else None,
                        num_calls=count,
                        peak_abs_max=peak,
                    )
                else:
                    found.num_calls += count
                    found.peak_abs_max = max(found.peak_abs_max, peak)

    def _previous(self, keys: np.ndarray, abs_max: np.ndarray) -> np.ndarray:
        """Each row's abs-max at the same op output's previous call (NaN: none or unknown), and
        the newest abs-max of each op output kept for the next scan."""
        order = np.argsort(keys, kind="stable")
        sorted_keys, sorted_abs = keys[order], abs_max[order]
        starts = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
        previous_sorted = np.r_[np.nan, sorted_abs[:-1]]
        group_keys = sorted_keys[starts].tolist()
        previous_sorted[starts] = [self._last.get(k, np.nan) for k in group_keys]
        ends = np.r_[starts[1:], True]
        self._last.update(zip(group_keys, sorted_abs[ends].tolist()))
        previous = np.empty(len(keys))
        previous[order] = previous_sorted
        return previous

    def alerts(self) -> list[_Alert]:
        """Every range alert, in the order of their first calls."""
        with self._lock:
            return sorted(self._alerts.values(), key=lambda a: (a.position, a.kind != NEAR_MAX))


_monitors: weakref.WeakKeyDictionary[RunReader, RangeMonitor] = weakref.WeakKeyDictionary()
_monitors_lock = threading.Lock()


def monitor(run: RunReader) -> RangeMonitor:
    """The run's RangeMonitor, registered on first use."""
    with _monitors_lock:
        found = _monitors.get(run)
        if found is None:
            found = _monitors[run] = RangeMonitor(run)
        return found


def available(run: RunReader) -> bool:
    """Whether the run's mode records the abs-max range alerts need (FULL_STATS)."""
    return run.metadata is not None and spec(run.metadata.tensor_debug_mode).statistics


def num_range_alerts(run: RunReader) -> int:
    """The number of range alerts (call without holding run.lock: it may read the trace file)."""
    m = monitor(run)
    m.scan(run)
    return len(m.alerts())


def range_alerts(run: RunReader, begin: int = 0, end: int = -1) -> dict:
    """The `range_alerts` object of the `alerts` route (see docs/routes.md): alerts
    [begin:end] (end=-1: all) in the order of their first calls; counts cover all. Call it
    without holding run.lock: it may read the trace file."""
    m = monitor(run)
    m.scan(run)
    with run.lock:  # the alerts and the digests their positions index, from one state
        found = m.alerts()
        n = len(found)
        end = n if end < 0 else min(end, n)
        begin = min(max(begin, 0), end)
        return {
            "available": available(run),
            "headroom": HEADROOM,
            "growth_factor": GROWTH_FACTOR,
            "growth_horizon": GROWTH_HORIZON,
            "num_alerts": n,
            "near_max_alerts": sum(a.kind == NEAR_MAX for a in found),
            "growth_alerts": sum(a.kind == GROWTH for a in found),
            "begin": begin,
            "end": end,
            "alerts": [_row(run, a) for a in found[begin:end]],
        }


def _row(run: RunReader, alert: _Alert) -> dict:
    trace = run.trace_digests()[alert.position]
    try:
        op = run.op(alert.op_id)
        names = (op.op_name, op.kernel, int(op.graph_id))
    except KeyError:
        op = None
        record = run.trace(alert.position)
        names = (record.op_name, record.kernel, int(record.graph_id))
    executions = run.execution_digests()["index"]
    hits = np.flatnonzero(executions == trace["execution_index"])
    dtype_max = DTYPE_MAX[alert.dtype]
    growth = previous = calls_left = None
    if alert.kind == GROWTH:
        previous = alert.previous_abs_max
        growth = alert.abs_max / previous
        calls_left = max(1, math.ceil(math.log(dtype_max / alert.abs_max) / math.log(growth)))
    return {
        "alert_type": RANGE_ALERT,
        "kind": alert.kind,
        "op_id": alert.op_id,
        "op_name": names[0],
        "kernel": names[1],
        "graph_id": names[2],
        "output_slot": alert.output_slot,
        "dtype": dtype_name(alert.dtype),
        "dtype_max": dtype_max,
        "abs_max": alert.abs_max,
        "fraction_of_max": alert.abs_max / dtype_max,
        "previous_abs_max": previous,
        "growth": growth,
        "calls_to_overflow": calls_left,
        "num_calls": alert.num_calls,
        "peak_abs_max": alert.peak_abs_max,
        "wall_time": num(trace["wall_time"]),
        "execution_index": int(trace["execution_index"]),
        "trace_index": int(trace["index"]),
        "execution_position": int(hits[-1]) if len(hits) else None,
        "trace_position": alert.position,
        "location": location(run, op.code_location) if op else None,
        "original_ops": original_ops(run, op) if op else [],
    }
