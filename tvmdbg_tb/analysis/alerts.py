"""NaN/Inf alerts, computed once as records are read (an observer on the read stream).

An alert is one non-finite output (op, output slot) in one execution, in trace order, or a
kernel whose fused ops made NaN/Inf inside it that its output hides (the inner-op check: the
trace's inner_nonfinite, a "masked" alert). Its `origin` flag says the op made the bad value
rather than passing one on: none of its inputs was non-finite in that execution (an inner
alert is never an input of anything: its output is finite). Inputs produced by traced ops
are looked up among that execution's non-finite traces, function parameters in the
execution's input summaries (constants count as finite: the op reading a non-finite weight
is where it enters); an input whose health was never recorded (an op that op_regex filtered
out) counts as finite only if no earlier output of the execution was a non-finite value that
matters. Where the circular buffer dropped the start of an execution (the oldest in the dump,
or the first after each of its drops), an op whose producer trace is gone there is never
called the origin: nothing shows its inputs were finite.

Calls keep state between them (an LLM's KV cache, an object the function reads and writes), so
the rule also looks across the calls of the run. A function's parameters are its data inputs
and, past Relax's num_input (DebuggedGraph.num_inputs), its weights:

- a non-finite data input is the caller's: the ops reading it pass it on (no origin);
- a non-finite weight (an item of nn.Module export's packed params, by its own name) is
  brought in by the first op that reads it, which is the origin, as for a constant weight;
  an op reading one after an earlier output of the call went non-finite is no origin (a
  weight every layer shares enters at its first reader);
- an object input (the KV cache) holds what earlier calls stored in it: its health is
  unknown. Neither it nor a non-finite weight makes an origin once an earlier call of the
  run made a non-finite value (an alert whose output holds one): the value may come from
  there (prefill wrote it into the cache; a training step wrote the weights), and the
  origin stays that earlier call's. Nor does an input of unknown health (a builtin's result
  in a library compiled without tvmdbg, whose graph shows no producer): it may read the
  same state.

Non-finite outputs a model makes on purpose and absorbs (an attention mask's -inf) are no
alerts: once an execution's traces are all read, absorption.classify sorts its non-finite
outputs into alerts, absorbed and expected ones; the last two are listed apart (`benign`).
Until then (a live call still being written) they count as alerts.

Memory stays small: per non-finite output a trace position and a few flags (numpy), plus the
packed keys of the non-finite outputs of the last few executions (producers and consumers
run in the same execution) and the trace spans of executions not yet classified. Work is
vectorised per op, so a run that went NaN everywhere still loads fast.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from tvmdbg_tb.analysis import absorption
from tvmdbg_tb.analysis.answers import Alert, AlertCounts, AlertsPage
from tvmdbg_tb.analysis.inner_ops import (
    NAN,
    NEG_INF,
    POS_INF,
    confirm_alert,
    confirmed_origin,
    inner_kinds,
    inner_literal,
    masked_alerts,
    merge_alerts,
)
from tvmdbg_tb.analysis.inputs import OpReads, ParamHealth, param_health
from tvmdbg_tb.analysis.jsonable import num
from tvmdbg_tb.analysis.ranges import range_alerts
from tvmdbg_tb.analysis.unfinished import unfinished_alerts
from tvmdbg_tb.events import layout
from tvmdbg_tb.events.locations import location
from tvmdbg_tb.events.modes import spec
from tvmdbg_tb.events.reader import (
    HEALTH_KNOWN,
    INNER_NONFINITE,
    NONFINITE,
    RunReader,
)
from tvmdbg_tb.events.run_index import GrowingArray
from tvmdbg_tb.events.summaries import describe
from tvmdbg_tb.proto import debug_event_pb2 as pb

ALERT_TYPE = "InfNanAlert"
RANGE_PAGE = 100  # range alerts in an answer unless asked otherwise
_RECENT_EXECUTIONS = 64
_BLOCK = 1 << 18  # non-finite traces handled at once
# Executions whose traces are followed until all are read and they are classified; beyond
# this many, the oldest are forgotten (an execution never completed keeps its alerts as
# alerts). Traces are taken in slices of this many, each settled before the next.
_OPEN_EXECUTIONS = 1 << 16
_INNER_LITERAL = 8  # beyond inner_ops' NAN | NEG_INF | POS_INF bits
# A non-finite output's key: execution index << 28 | op (20 bits, dense ids) << 8 | slot (8 bits).
_E_SHIFT = 28
_OP_MASK = (1 << 20) - 1


_NEVER = np.iinfo(np.int64).max  # no execution made a bad value (yet)


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


class _Span:
    """The traces read so far of one execution not yet classified: their positions and count,
    and the indices of its non-finite outputs."""

    __slots__ = ("first", "last", "count", "alerts")

    def __init__(self):
        self.first = self.last = -1
        self.count = 0
        self.alerts: list[np.ndarray] = []


class AlertMonitor:
    """Observer of one RunReader that keeps its NaN/Inf alerts up to date."""

    def __init__(self, run: RunReader, expected_nonfinite: str | None = None):
        self._lock = threading.RLock()
        self._dense: dict[int, int] = {}  # op_id -> small int for packed keys
        self._facts = absorption.Facts(run, absorption.compile_pattern(expected_nonfinite))
        self.expected_nonfinite = expected_nonfinite or ""
        self._clear()
        self._op_inputs: dict[int, OpReads] = {}
        run.add_observer(self)

    def _clear(self) -> None:
        self._positions = GrowingArray(np.int64)
        self._origin = GrowingArray(np.bool_)
        # Per non-finite output: absorption's kind (ALERT until classified), whether a known
        # input was bad (a traced producer, a parameter, or its producer is cut from the dump),
        # whether an input's health is unknown.
        self._verdict = GrowingArray(np.uint8)
        self._known_bad = GrowingArray(np.bool_)
        self._unknown = GrowingArray(np.bool_)
        # Per non-finite output, the kinds its kernel's fused ops made inside it while its
        # output stayed finite (inner_ops.inner_kinds), | _INNER_LITERAL when they made only a
        # non-finite literal and its spread (inner_ops.inner_literal).
        self._inner = GrowingArray(np.uint8)
        self._carry = np.zeros(0, dtype=np.int64)  # packed keys of recent non-finite outputs, sorted
        # Per non-finite output: whether its op read a non-finite weight, an object (state).
        self._weight_bad = GrowingArray(np.bool_)
        self._stateful = GrowingArray(np.bool_)
        # The run's first execution that made a non-finite value (an alert holding one), and
        # the outputs whose origin flag depends on it (they read a weight or an object).
        self._first_bad_execution = _NEVER
        self._run_dependent: list[np.ndarray] = []
        self._param_health: OrderedDict[int, ParamHealth | None] = OrderedDict()
        self._pending: dict[int, list[tuple[int, OpReads]]] = {}
        self._traced: set[int] = set()  # ops with at least one trace in the dump
        self._kinds = np.zeros(3, dtype=np.int64)  # alerts [0:_counted) with NaN, -Inf, +Inf
        self._counted = 0
        # Of those, in outputs classified absorbed or expected (no alerts): counted apart.
        self._benign_kinds = np.zeros(3, dtype=np.int64)
        self._spans: OrderedDict[int, _Span] = OrderedDict()  # executions not classified yet
        # Recently classified executions with non-finite outputs (span, finite returns): a
        # replay of one of their kernels, written after the call, classifies them again.
        self._classified: OrderedDict[int, tuple[_Span, bool]] = OrderedDict()
        self._replays_seen = 0
        self._visible_cache: tuple[int, np.ndarray] | None = None
        self._version = 0

    # -- observing -------------------------------------------------------------------------

    def __call__(self, run: RunReader, stream: str, start: int, reset: bool) -> None:
        with self._lock:
            if stream == layout.GRAPH_EXECUTION_TRACES:
                if reset:
                    self._clear()
                    start = 0
                end = len(run.trace_digests())
                for lo in range(start, end, _OPEN_EXECUTIONS):
                    hi = min(lo + _OPEN_EXECUTIONS, end)
                    self._follow_traces(run, lo, hi)
                    self._add(run, lo, hi)
                    self._settle(run)
                self._version += 1
            elif stream == layout.EXECUTION:
                if self._pending:
                    self._resolve_pending(run)
                self._settle(run)

    def _inputs_of(self, run: RunReader, op_id: int) -> OpReads:
        """What the op reads: its producers, parameters and whether an input's health is unknown."""
        spec = self._op_inputs.get(op_id)
        if spec is None:
            try:
                spec = OpReads.of(run, run.op(op_id))
            except KeyError:
                return OpReads([], [], True, frozenset())  # op not read yet: do not cache
            self._op_inputs[op_id] = spec
        return spec

    def _health_of(self, run: RunReader, execution_index: int) -> ParamHealth | None:
        """param_health of an execution, kept for the last few; None while it is not read."""
        if execution_index in self._param_health:
            return self._param_health[execution_index]
        found = param_health(run, execution_index)
        if found is not None:
            self._param_health[execution_index] = found
            while len(self._param_health) > _RECENT_EXECUTIONS:
                self._param_health.popitem(last=False)
        return found

    def _dense_id(self, op_id: int) -> int:
        dense = self._dense.get(op_id)
        if dense is None:
            dense = self._dense[op_id] = len(self._dense) & _OP_MASK
        return dense

    def _span(self, execution: int) -> _Span:
        span = self._spans.get(execution)
        if span is None:
            span = self._spans[execution] = _Span()
            while len(self._spans) > _OPEN_EXECUTIONS:
                self._spans.popitem(last=False)  # never completed: its alerts stay alerts
        return span

    def _follow_traces(self, run: RunReader, start: int, stop: int) -> None:
        """Extends the spans of the executions that traces [start:stop] belong to."""
        e = run.trace_digests()["execution_index"][start:stop]
        if not len(e):
            return
        executions, first, counts = np.unique(e, return_index=True, return_counts=True)
        last = len(e) - 1 - np.unique(e[::-1], return_index=True)[1]
        for execution, lo, hi, count in zip(executions.tolist(), first.tolist(), last.tolist(), counts.tolist()):
            span = self._span(execution)
            span.first = start + lo if span.first < 0 else min(span.first, start + lo)
            span.last = max(span.last, start + hi)
            span.count += count

    def _add(self, run: RunReader, start: int, stop: int) -> None:
        """Adds the non-finite traces among [start:stop], in blocks (bounded memory)."""
        digests = run.trace_digests()
        self._traced.update(np.unique(digests["op_id"][start:stop]).tolist())
        new = np.flatnonzero(digests["flags"][start:stop] & (NONFINITE | INNER_NONFINITE)) + start
        for block in range(0, len(new), _BLOCK):
            self._add_block(run, digests, new[block : block + _BLOCK])

    def _add_block(self, run: RunReader, digests: np.ndarray, new: np.ndarray) -> None:
        """Origins of one block of non-finite traces, vectorised per op: the key of an output
        (execution, op, slot) is packed in an int64 and looked up in the sorted keys of this
        block and of the last few executions."""
        e = digests["execution_index"][new]
        flags = digests["flags"][new]
        output_bad = (flags & NONFINITE) != 0  # else only its fused ops made one (inner alert)
        ops, op_rows = np.unique(digests["op_id"][new], return_inverse=True)
        dense = np.array([self._dense_id(o) for o in ops.tolist()], dtype=np.int64)
        keys = _pack(e, dense[op_rows], digests["output_slot"][new])
        executions, execution_rows = np.unique(e, return_inverse=True)
        at = np.arange(len(new))
        first_bad = np.full(len(executions), len(new))  # each execution's first non-finite output
        np.minimum.at(first_bad, execution_rows[output_bad], at[output_bad])
        earlier = (first_bad[execution_rows] < at) | np.isin(e, self._carry >> _E_SHIFT)
        known = np.union1d(self._carry, keys[output_bad])
        known_bad = np.zeros(len(new), dtype=np.bool_)
        unknown_input = np.zeros(len(new), dtype=np.bool_)
        first_alert = self._positions.size
        cut = _cut_executions(run, digests)
        by_op = np.argsort(op_rows, kind="stable")  # rows grouped by op, in trace order
        bounds = np.concatenate(([0], np.cumsum(np.bincount(op_rows, minlength=len(ops)))))
        weight_bad = np.zeros(len(new), dtype=np.bool_)
        stateful = np.zeros(len(new), dtype=np.bool_)
        for k, op_id in enumerate(ops.tolist()):
            rows = by_op[bounds[k] : bounds[k + 1]]
            reads = self._inputs_of(run, op_id)
            producers, params, unknown = reads.producers, reads.params, reads.unknown
            bad = np.zeros(len(rows), dtype=bool)
            for producer, slot in producers:
                if producer in self._traced:
                    bad |= _contains(known, _pack(e[rows], self._dense_id(producer), slot))
                else:
                    unknown = True
            for cut_execution, present_in_cut in cut.items():
                if any(p not in present_in_cut for p, _ in producers):
                    bad |= e[rows] == cut_execution
            unknown_input[rows] = unknown
            known_bad[rows] = bad
            if not params:
                continue
            for execution in np.unique(e[rows]).tolist():
                same = rows[e[rows] == execution]
                health = self._health_of(run, execution)
                if health is None:  # the execution record comes after its traces
                    self._pending.setdefault(execution, []).extend((first_alert + r, reads) for r in same.tolist())
                    continue
                data, weight, state = health.read_by(reads)
                known_bad[same] |= data
                weight_bad[same], stateful[same] = weight, state
        later = e > self._first_bad_execution  # an earlier call of the run made a bad value
        # An input of unknown health (a builtin's result a library's graph does not show) may
        # hold what an earlier bad value became, in this call or, through state, an earlier one.
        # A bad weight enters once: its first reader is the origin, not the layers after it
        # that read it too (ALBERT's one shared layer, a tied embedding).
        dependent = weight_bad | stateful | unknown_input
        origin = ~known_bad & ~((unknown_input | weight_bad) & earlier) & ~(dependent & later)
        newest = int(e.max())
        self._carry = known[(known >> _E_SHIFT) >= newest - _RECENT_EXECUTIONS]
        self._positions.append_array(new)
        self._origin.append_array(origin)
        self._verdict.append_array(np.zeros(len(new), dtype=np.uint8))
        self._known_bad.append_array(known_bad)
        self._unknown.append_array(unknown_input)
        self._weight_bad.append_array(weight_bad)
        self._stateful.append_array(stateful)
        indices = np.arange(first_alert, first_alert + len(new))
        for execution, rows in _groups(e):
            self._span(execution).alerts.append(indices[rows])
        kinds = np.zeros(len(new), dtype=np.uint8)
        for k in np.flatnonzero(flags & INNER_NONFINITE).tolist():
            trace = run.trace(int(new[k]))
            kinds[k] = inner_kinds(trace) | (_INNER_LITERAL if inner_literal(run, trace) else 0)
        self._inner.append_array(kinds)

    def _resolve_pending(self, run: RunReader) -> None:
        for e in list(self._pending):
            health = self._health_of(run, e)
            if health is None:
                continue
            for alert, reads in self._pending.pop(e):
                data, weight, state = health.read_by(reads)
                self._weight_bad.view()[alert] = weight
                self._stateful.view()[alert] = state
                if data or ((weight or state) and e > self._first_bad_execution):
                    self._known_bad.view()[alert] |= data
                    self._origin.view()[alert] = False

    def _settle(self, run: RunReader) -> None:
        """Classifies the non-finite outputs of executions whose traces are all read (see
        absorption); again those of recent ones when replays of their kernels arrived since."""
        replays = run.replays()
        if len(replays) != self._replays_seen and self._classified:
            self._replays_seen = len(replays)
            again = {int(r.execution_index) for r in replays} & set(self._classified)
            if again:
                self._classify(run, [(e, *self._classified[e]) for e in sorted(again)])
        records = run.execution_digests()
        if not self._spans or not len(records):
            return
        executions = np.fromiter(self._spans, dtype=np.int64, count=len(self._spans))
        counts = np.fromiter((span.count for span in self._spans.values()), dtype=np.int64, count=len(executions))
        rows = _execution_rows(run, executions)
        found = rows >= 0
        complete = found & (counts >= records["num_traces"][np.maximum(rows, 0)])
        if not complete.any():
            return
        flags = records["flags"][np.maximum(rows, 0)]
        finite = found & ((flags & HEALTH_KNOWN) != 0) & ((flags & NONFINITE) == 0)
        batch = []
        for execution, ok in zip(executions[complete].tolist(), finite[complete].tolist()):
            span = self._spans.pop(execution)
            if span.alerts:
                batch.append((execution, span, ok))
                self._classified[execution] = (span, ok)
        while len(self._classified) > _RECENT_EXECUTIONS:
            self._classified.popitem(last=False)
        if batch:
            self._classify(run, batch)

    def _classify(self, run: RunReader, batch: list[tuple[int, _Span, bool]]) -> None:
        """absorption.classify on the non-finite outputs of whole executions (execution, its
        span, whether it returned finite values), absorption.classify_inner on their kernel
        calls whose ops made NaN/Inf that their outputs hide, then their origin flags again,
        in trace order: an unknown input counts as bad only after an earlier alert of the
        execution whose output was non-finite."""
        digests = run.trace_digests()
        indices = np.concatenate([a for _, span, _ in batch for a in span.alerts])
        positions = self._positions.view()[indices]
        every = absorption.Outputs(
            digests["execution_index"][positions],
            digests["op_id"][positions],
            digests["output_slot"][positions],
            positions,
        )
        output_bad = (digests["flags"][positions] & NONFINITE) != 0
        outputs, calls = (
            absorption.Outputs(every.execution[m], every.op[m], every.slot[m], every.position[m])
            for m in (output_bad, ~output_bad)
        )
        executions = {e for e, _, _ in batch}
        traced = np.unique(np.concatenate([np.arange(span.first, span.last + 1) for _, span, _ in batch]))
        traced = traced[np.isin(digests["execution_index"][traced], list(executions))]
        evidence = absorption.Evidence(
            digests["execution_index"][traced],
            digests["op_id"][traced],
            digests["flags"][traced],
            {e for e, _, ok in batch if ok},
            lambda execution: self._health_of(run, execution),
            _made_inside(run, executions) if run.replays() else {},
        )
        kinds = np.zeros(len(indices), dtype=np.uint8)
        fed = np.zeros(len(indices), dtype=bool)
        inside = np.zeros(len(indices), dtype=bool)
        kinds[output_bad], fed[output_bad], inside[output_bad] = absorption.classify(self._facts, outputs, evidence)
        if not output_bad.all():
            output_kinds = dict(zip(zip(outputs.execution.tolist(), outputs.op.tolist()), kinds[output_bad].tolist()))
            inner = self._inner.view()[indices[~output_bad]]
            literal, made_nan = (inner & _INNER_LITERAL) != 0, (inner & NAN) != 0
            kinds[~output_bad] = absorption.classify_inner(
                self._facts, calls, literal, made_nan, evidence, output_kinds
            )
        # Keep the per-kind counts of benign outputs (counts() subtracts them) in step.
        was = self._verdict.view()[indices] != absorption.ALERT
        now = kinds != absorption.ALERT
        for rows, sign in ((now & ~was, 1), (was & ~now, -1)):
            if rows.any():
                self._benign_kinds += sign * self._kind_counts(digests, indices[rows])
        self._verdict.view()[indices] = kinds
        order = np.lexsort((positions, every.execution))
        indices, kinds, execution = indices[order], kinds[order], every.execution[order]
        alert = kinds == absorption.ALERT
        passed_on = alert & output_bad[order]  # what an input of unknown health may have read
        counted = np.cumsum(passed_on) - passed_on
        starts = np.flatnonzero(np.concatenate(([True], execution[1:] != execution[:-1])))
        before = counted - np.repeat(counted[starts], np.diff(np.concatenate((starts, [len(execution)]))))
        # A replay that found the inner op making the value clears what the producers said.
        known_bad = (self._known_bad.view()[indices] & ~inside[order]) | fed[order]
        unknown = self._unknown.view()[indices]
        bad_calls = execution[passed_on]
        if len(bad_calls) and int(bad_calls.min()) < self._first_bad_execution:
            self._lower_watermark(int(bad_calls.min()), digests)
        # What a weight or an object brings in is no origin after an earlier call's bad value.
        dependent = self._weight_bad.view()[indices] | self._stateful.view()[indices] | unknown
        later = execution > self._first_bad_execution
        weight_bad = self._weight_bad.view()[indices]
        origin = alert & ~known_bad & ~((unknown | weight_bad) & (before > 0)) & ~(dependent & later)
        self._origin.view()[indices] = origin
        if (origin & dependent).any():
            self._run_dependent.append(indices[origin & dependent])
        self._version += 1

    def _lower_watermark(self, execution: int, digests: np.ndarray) -> None:
        """The run's first execution that made a bad value is this one (an earlier one than
        known, when executions are classified out of order): the origins that read a weight
        or an object after it are origins no more."""
        self._first_bad_execution = execution
        positions = self._positions.view()
        kept = []
        for chunk in self._run_dependent:
            later = digests["execution_index"][positions[chunk]] > execution
            self._origin.view()[chunk[later]] = False
            if (~later).any():
                kept.append(chunk[~later])
        self._run_dependent = kept

    def _kind_counts(self, digests: np.ndarray, indices: np.ndarray) -> np.ndarray:
        """How many of these non-finite outputs hold a NaN, a -inf, a +inf: in their values,
        or made inside their kernel while its output stayed finite (inner-op check)."""
        rows = digests[self._positions.view()[indices]]
        inner = self._inner.view()[indices]
        return np.array(
            [
                np.count_nonzero((rows[kind] > 0) | ((inner & bit) != 0))
                for kind, bit in (("nan", NAN), ("neg_inf", NEG_INF), ("pos_inf", POS_INF))
            ],
            dtype=np.int64,
        )

    # -- queries ---------------------------------------------------------------------------

    def _visible(self) -> np.ndarray:
        """Indices of the non-finite outputs that are alerts (not absorbed or expected)."""
        cached = self._visible_cache
        if cached is None or cached[0] != self._version:
            kinds = self._verdict.view()
            cached = self._visible_cache = (self._version, np.flatnonzero(kinds == absorption.ALERT))
        return cached[1]

    def num_alerts(self) -> int:
        with self._lock:
            return len(self._visible())

    def num_inner_alerts(self, run: RunReader) -> int:
        """Alerts whose kernel output is finite: NaN/Inf its fused ops made and hid (inner-op check)."""
        with self._lock:
            flags = run.trace_digests()["flags"][self._positions.view()[self._visible()]]
            return int(np.count_nonzero((flags & NONFINITE) == 0))

    def first_origin_index(self) -> int | None:
        with self._lock:
            visible = self._visible()
            hits = np.flatnonzero(self._origin.view()[visible])
            return int(hits[0]) if len(hits) else None

    def counts(self, run: RunReader) -> dict[str, int]:
        """Alerts per kind over ALL alerts (not a page): an alert counts for a kind when its
        output holds at least one such value (-1, unknown in CURT_HEALTH, counts for none)."""
        with self._lock:  # counted as alerts arrive: a trace's counts never change
            n = self._positions.size
            if self._counted < n:
                self._kinds += self._kind_counts(run.trace_digests(), np.arange(self._counted, n))
                self._counted = n
            nan, neg_inf, pos_inf = (self._kinds - self._benign_kinds).tolist()
            return {
                "nan": nan,
                "neg_inf": neg_inf,
                "pos_inf": pos_inf,
                "origin": int(np.count_nonzero(self._origin.view()[:n])),
            }

    def page(self, begin: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """(trace positions, origin flags) of alerts [begin:end]."""
        with self._lock:
            chosen = self._visible()[begin:end]
            return self._positions.view()[chosen].copy(), self._origin.view()[chosen].copy()

    def benign(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(trace positions, kinds, kinds of values made inside the kernel while its output
        stayed finite: inner_ops' NAN | NEG_INF | POS_INF) of the absorbed and expected
        non-finite outputs."""
        with self._lock:
            kinds = self._verdict.view()
            chosen = np.flatnonzero(kinds != absorption.ALERT)
            return self._positions.view()[chosen].copy(), kinds[chosen].copy(), self._inner.view()[chosen].copy()


def _made_inside(run: RunReader, executions: set[int]) -> dict[tuple[int, int], bool]:
    """(execution, op) of the replayed fused kernel calls of those executions whose replay
    found the inner op that made the value -> whether that op writes a non-finite literal."""
    out = {}
    for record in run.replays():
        if int(record.execution_index) not in executions:
            continue
        inner = confirmed_origin(record)
        if inner is None:
            continue
        try:
            op = run.op(int(record.op_id))
        except KeyError:
            continue
        literal = any(o.nonfinite_literal for o in op.original_ops if o.var_name == inner.var_name)
        out[(int(record.execution_index), int(record.op_id))] = literal
    return out


def _execution_rows(run: RunReader, executions: np.ndarray) -> np.ndarray:
    """The row of each execution (by Execution.index) among the run's execution digests, -1
    where its record is not read (or was dropped)."""
    index = run.execution_digests()["index"]
    if not len(index):
        return np.full(len(executions), -1, dtype=np.int64)
    if len(index) > 1 and (np.diff(index) <= 0).any():  # several threads: not in index order
        order = np.argsort(index, kind="stable")
        at = np.minimum(np.searchsorted(index[order], executions), len(index) - 1)
        rows = order[at]
    else:
        rows = np.minimum(np.searchsorted(index, executions), len(index) - 1)
    return np.where(index[rows] == executions, rows, -1)


def _groups(values: np.ndarray):
    """(value, row indices) for each distinct value, rows in order."""
    order = np.argsort(values, kind="stable")
    unique, starts = np.unique(values[order], return_index=True)
    for k, value in enumerate(unique.tolist()):
        stop = starts[k + 1] if k + 1 < len(starts) else len(order)
        yield value, order[starts[k] : stop]


_monitors: weakref.WeakKeyDictionary[RunReader, dict[str, AlertMonitor]] = weakref.WeakKeyDictionary()
_monitors_lock = threading.Lock()


def expected_pattern(run: RunReader, expected_nonfinite: str | None = None) -> str:
    """The expected_nonfinite pattern that applies: the one asked for, else the run's own."""
    if expected_nonfinite is not None:
        return expected_nonfinite
    return run.metadata.expected_nonfinite if run.metadata is not None else ""


def monitor(run: RunReader, expected_nonfinite: str | None = None) -> AlertMonitor:
    """The run's AlertMonitor for a pattern of expected non-finite ops (default: the run's
    own, enable_dump_debug_info(expected_nonfinite=...)), registered on first use (it replays
    what is already read). ValueError for a pattern that is not a regular expression."""
    pattern = expected_pattern(run, expected_nonfinite)
    with _monitors_lock:
        found = _monitors.setdefault(run, {})
        if pattern not in found:
            found[pattern] = AlertMonitor(run, pattern)
        return found[pattern]


def alert_rows(run: RunReader, positions: np.ndarray, origin: np.ndarray) -> list[Alert]:
    """The alert objects (see docs/routes.md) of the traces at positions, with their flags."""
    digests = run.trace_digests()[positions]
    columns = {name: digests[name].tolist() for name in digests.dtype.names}
    executions = run.execution_digests()["index"]
    hits = np.flatnonzero(np.isin(executions, digests["execution_index"]))
    execution_position = dict(zip(executions[hits].tolist(), hits.tolist()))
    per_op: dict[int, dict] = {}
    gaps = _gaps(run) if len(positions) and origin.any() else []
    calls = call_numbers(run, digests["execution_index"])
    healths: dict[int, ParamHealth | None] = {}
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
        called = calls.get(e, CallNumber("", None, 0))
        out.append(
            Alert(
                alert_type=ALERT_TYPE,
                op_id=op_id,
                op_name=names[0],
                kernel=names[1],
                graph_id=names[2],
                output_slot=slot,
                nan_count=columns["nan"][i],
                neg_inf_count=columns["neg_inf"][i],
                pos_inf_count=columns["pos_inf"][i],
                size=size,
                dtype=dtype,
                shape=shape,
                wall_time=num(columns["wall_time"][i]),
                execution_index=e,
                function_name=called.function,
                call=called.number,
                function_calls=called.calls,
                vm=called.vm,
                function_vms=called.vms,
                trace_index=columns["index"][i],
                execution_position=execution_position.get(e),
                trace_position=position,
                origin=bool(origin[i]),
                origin_uncertain=bool(origin[i]) and _near_a_gap(e, gaps),
                location=info["location"],
                original_ops=info["original_ops"],
                **_parameters_read(run, op, e, healths),
            )
        )
        # The inner op's own line: from a replay/deep mode, else from the kernel's inner-op check.
        confirm_alert(run, out[-1], run.trace(position) if columns["flags"][i] & INNER_NONFINITE else None)
    return out


class CallNumber(NamedTuple):
    """Which call an execution is: its function, the how-manieth call of that function by its
    VM (the step of a generation loop: "decode, call 5"; None: not known), how many calls of it
    by that VM the dump holds, the VM (Execution.vm, 0: not recorded) and how many VMs called
    that function in the dump (two models with the same function names, or threads)."""

    function: str
    number: int | None
    calls: int
    vm: int = 0
    vms: int = 1


def call_numbers(run: RunReader, executions: np.ndarray) -> dict[int, CallNumber]:
    """{execution index: its CallNumber} of these executions. The number is the one written at record time
    (Execution.call_number, per VM: two models or two threads' VMs keep their own counts, and
    the circular buffer's drops do not lose it); a dump of an earlier tvmdbg has none, and its
    numbers are counted over the run, None where drops or damage make that impossible."""
    digests = run.execution_digests()
    wanted = np.unique(executions)
    rows = _execution_rows(run, wanted)
    out: dict[int, CallNumber] = {}
    if not (rows >= 0).any():
        return out
    functions, recorded, vms = digests["function"], digests["call_number"], digests["vm"]
    counted = len(digests) and digests["index"][0] == 0 and not run.ring_drops(layout.EXECUTION)
    # Calls of a function by one VM: the pair as one key (function ids and VM numbers are small).
    callers = functions.astype(np.int64) << 32 | vms.astype(np.int64)
    pairs, inverse, totals = np.unique(callers, return_inverse=True, return_counts=True)
    vms_of = np.bincount((pairs >> 32).astype(np.int64))  # VMs per function id
    for e, row in zip(wanted.tolist(), rows.tolist()):
        if row < 0:
            continue
        function = int(functions[row])
        if recorded[row] > 0:
            number = int(recorded[row])
        elif counted:
            number = int(np.count_nonzero(callers[: row + 1] == callers[row]))
        else:
            number = None
        vm = int(vms[row])
        out[e] = CallNumber(run.function_names[function], number, int(totals[inverse[row]]), vm, int(vms_of[function]))
    return out


def _parameters_read(run: RunReader, op: pb.GraphOpCreation | None, execution: int, healths: dict) -> dict:
    """What an alert's op read of its function's parameters in that execution: the
    non-finite ones ("bad_parameters": name, index, tuple item, whether it is a weight) and
    the objects, whose state earlier calls may have written ("state")."""
    if op is None or not any(inp.kind == pb.OpInput.PARAM for inp in op.inputs):
        return {"bad_parameters": [], "state": []}
    if execution not in healths:
        healths[execution] = param_health(run, execution)
    health = healths[execution]
    if health is None:
        return {"bad_parameters": [], "state": []}
    weights = OpReads.of(run, op).weights
    bad, state = [], []
    for inp in op.inputs:
        if inp.kind != pb.OpInput.PARAM:
            continue
        param, item = int(inp.param_index), int(inp.tuple_item) if inp.HasField("tuple_item") else -1
        if health.holds(param, item):
            bad.append(
                {"name": inp.name, "param_index": param, "tuple_item": item if item >= 0 else None,
                 "weight": param in weights}
            )  # fmt: skip
        elif param in health.objects:
            state.append(inp.name)
    return {"bad_parameters": bad, "state": state}


def num_alerts(run: RunReader, expected_nonfinite: str | None = None) -> int:
    """Alerts of the run: kernel outputs plus NaN/Inf masked inside fused kernels (replays)."""
    total = monitor(run, expected_nonfinite).num_alerts()
    if run.replays():
        with run.lock:
            total += len(masked_alerts(run, lambda p, o: alert_rows(run, p, o)))
    return total


_GAP_KINDS = ("damaged", "truncated", "aborted", "traces_without_execution", "executions_missing_traces")
# Files whose damage may change any origin: the ops' inputs (graphs), the run's mode (metadata).
_EVERYWHERE_FILES = tuple(layout.file_name(s) for s in (layout.GRAPHS, layout.METADATA))
# (A call tvmdbg could not record may have made the first bad value: any origin is uncertain.)
_EVERYWHERE_KINDS = ("metadata_missing", "metadata_damaged", "traces_without_op", "unrecorded")


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
    expected_nonfinite: str | None = None,
) -> dict:
    """The `alerts` route's answer as JSON (alerts_page(...).to_json())."""
    return alerts_page(run, begin, end, alert_type, range_begin, range_end, expected_nonfinite).to_json()


def alerts_page(
    run: RunReader,
    begin: int = 0,
    end: int = -1,
    alert_type: str | None = None,
    range_begin: int = 0,
    range_end: int = RANGE_PAGE,
    expected_nonfinite: str | None = None,
) -> AlertsPage:
    """The `alerts` route's answer: alerts [begin:end] (end=-1: all) in execution order, range
    alerts [range_begin:range_end] (analysis/ranges.py) under "range_alerts", and the
    non-finite outputs that are no alerts ("benign": absorbed, or expected by the
    expected_nonfinite pattern, the run's own by default), and the non-finite outputs of calls
    that never returned, which only watchpoint hits recorded ("unfinished")."""
    m = monitor(run, expected_nonfinite)
    with run.lock:  # alert positions and the digests they index, from one state
        page = _page(run, m, begin, end, alert_type)
        page = dataclasses.replace(page, benign=benign(run, m), unfinished=unfinished_alerts(run))
    return dataclasses.replace(page, range_alerts=range_alerts(run, range_begin, range_end))  # reads the file


def benign(run: RunReader, m: AlertMonitor) -> dict:
    """The absorbed and expected non-finite outputs, per op (docs/routes.md#alerts)."""
    positions, kinds, inner = m.benign()
    digests = run.trace_digests()[positions]
    ops, first, inverse = np.unique(digests["op_id"], return_index=True, return_inverse=True)
    benign_ops = set(ops.tolist())
    rows = []
    for k in np.argsort(first, kind="stable").tolist():
        op_id = int(ops[k])
        mine = inverse == k
        try:
            op = run.op(op_id)
        except KeyError:
            op = None
        readers = {c for c, _, _ in run.consumers(op_id)} - benign_ops
        absorbed_by = []
        for reader in sorted(readers):
            try:
                consumer = run.op(reader)
            except KeyError:
                continue
            kind = consumer.original_ops[0].op_type if consumer.original_ops else consumer.kernel
            if kind not in absorbed_by:
                absorbed_by.append(kind)
        rows.append(
            {
                "op_id": op_id,
                "op_name": op.op_name if op else "",
                "kernel": op.kernel if op else "",
                "kind": absorption.KIND_NAMES[int(kinds[mine][0])],
                "count": int(np.count_nonzero(mine)),
                **{
                    kind: int(np.count_nonzero((digests[kind][mine] > 0) | ((inner[mine] & bit) != 0)))
                    for kind, bit in (("nan", NAN), ("neg_inf", NEG_INF), ("pos_inf", POS_INF))
                },
                "original_ops": [o.op_type for o in op.original_ops] if op else [],
                "location": location(run, op.code_location) if op else None,
                "absorbed_by": absorbed_by,
            }
        )
    return {
        "absorbed": int(np.count_nonzero(kinds == absorption.ABSORBED)),
        "expected": int(np.count_nonzero(kinds == absorption.EXPECTED)),
        "expected_nonfinite": m.expected_nonfinite or None,
        "ops": rows,
    }


def start_dropped(run: RunReader) -> bool:
    """True when the first alerts may be gone: the dump no longer holds the start of the run
    (the circular buffer or damage dropped the oldest calls or kernel executions) and nothing
    vouches for what went. A dump whose records carry their places, written in a mode that
    counts NaN/Inf, does: its writer kept the first calls with a NaN or an Inf whole."""
    executions, traces = run.execution_digests(), run.trace_digests()
    lost = bool((len(executions) and executions["index"][0] != 0) or (len(traces) and traces["index"][0] != 0))
    lost |= bool(run.ring_drops(layout.EXECUTION) or run.ring_drops(layout.GRAPH_EXECUTION_TRACES))
    mode = run.metadata.tensor_debug_mode if run.metadata is not None else pb.TENSOR_DEBUG_MODE_UNSPECIFIED
    return lost and not (run.keyed and spec(mode).knows_finite)


class _Listing:
    """The run's alerts in execution order: the monitor's kernel alerts with the NaN/Inf
    masked inside fused kernels (replays, deep mode) merged in, each masked one before its
    kernel's own outputs."""

    def __init__(self, run: RunReader, m: AlertMonitor, matches: bool):
        self.run, self.m = run, m
        self.kernel_total = m.num_alerts()
        replayed = matches and run.replays()
        self.masked = masked_alerts(run, lambda p, o: alert_rows(run, p, o)) if replayed else []
        self.total = (self.kernel_total + len(self.masked)) if matches else 0
        self.positions = self.origin = self.kernel_at = self.masked_at = None
        if self.masked:  # every kernel alert's place in the merged list
            self.positions, self.origin = m.page(0, self.kernel_total)
            self.kernel_at, self.masked_at = merge_alerts(self.positions, self.origin, self.masked)

    def rows(self, begin: int, end: int) -> list[dict]:
        """The alert objects [begin:end] of the merged list."""
        if not self.masked:
            if begin >= end:
                return []
            return alert_rows(self.run, *self.m.page(begin, end))
        chosen = np.flatnonzero((self.kernel_at >= begin) & (self.kernel_at < end))
        rows = dict(
            zip(self.kernel_at[chosen].tolist(), alert_rows(self.run, self.positions[chosen], self.origin[chosen]))
        )
        for k, at in enumerate(self.masked_at.tolist()):
            if begin <= at < end:
                rows[at] = self.masked[k][1]
        return [rows[i] for i in range(begin, end)]

    def first_origin_index(self) -> int | None:
        if not self.masked:
            return self.m.first_origin_index()
        firsts = [int(self.masked_at[0])]
        origins = np.flatnonzero(self.origin)
        if len(origins):
            firsts.append(int(self.kernel_at[origins[0]]))
        return min(firsts)

    def counts(self) -> AlertCounts:
        """Alerts per kind over the whole list (kernel alerts and masked ones)."""
        kernel = AlertCounts(**self.m.counts(self.run)) if self.kernel_total else AlertCounts()
        rows = [alert for _, alert in self.masked]
        return kernel.plus(
            AlertCounts(
                nan=sum(row.nan_count > 0 for row in rows),
                neg_inf=sum(row.neg_inf_count > 0 for row in rows),
                pos_inf=sum(row.pos_inf_count > 0 for row in rows),
                origin=len(rows),  # every masked alert is an origin
            )
        )


def _page(run: RunReader, m: AlertMonitor, begin: int, end: int, alert_type: str | None) -> AlertsPage:
    """The alerts page, built once whatever the alerts are made of."""
    matches = alert_type in (None, "", ALERT_TYPE)
    listing = _Listing(run, m, matches)
    n = listing.total
    end = n if end < 0 else min(end, n)
    begin = min(begin, end)
    every = listing.kernel_total + len(listing.masked)
    counts = listing.counts() if matches else AlertCounts()
    return AlertsPage(
        begin=begin,
        end=end,
        num_alerts=n,
        alerts_breakdown={ALERT_TYPE: every} if every else {},
        alert_type=alert_type or None,
        nan_alerts=counts.nan,
        neg_inf_alerts=counts.neg_inf,
        pos_inf_alerts=counts.pos_inf,
        origin_alerts=counts.origin,
        start_dropped=start_dropped(run),
        first_origin_index=listing.first_origin_index() if matches else None,
        alerts=listing.rows(begin, end) if matches else [],
    )
