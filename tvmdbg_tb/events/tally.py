"""The trace digests per execution, kept as they are read: how many traces each execution
has and where its first one is, which op ids traces name, and the oldest execution among the
traces after the circular buffer's last drop.

A completeness assessment (whether traces lack their execution, executions lack traces, or
traces name ops no graph holds) and a page of executions (each one's first trace) need the
digests only through these. Kept here and extended with the rows read since the last query,
a query on a live run of millions of traces costs the new rows, not a pass (and copies) over
every row. An observer of the run's reader: a reset of the trace index (a file replaced by
the circular buffer) starts it over.
"""

from __future__ import annotations

import numpy as np

from tvmdbg_tb.events import layout

_BLOCK_ROWS = 1 << 20  # rows tallied at once: bounds the transient memory of the first pass


class TraceTally:
    """Per execution index, the traces read and the position of its first (`execution_ids`
    ascending, `trace_counts`, `first_positions`); the op ids traces name (`op_ids`,
    ascending). Extended under the run's lock (rows cannot change meanwhile)."""

    def __init__(self):
        self._reset()

    def _reset(self) -> None:
        self.scanned = 0  # trace rows tallied
        self.execution_ids = np.zeros(0, np.int64)
        self.trace_counts = np.zeros(0, np.int64)
        self.first_positions = np.zeros(0, np.int64)
        self.op_ids = np.zeros(0, np.int64)
        self._newest_from = 0  # the first row after the circular buffer's last drop
        self._newest_min: int | None = None  # the least execution index of rows [_newest_from, scanned)

    def __call__(self, run, stream: str, start: int, reset: bool) -> None:
        if reset and stream == layout.GRAPH_EXECUTION_TRACES:
            self._reset()

    def extend(self, digests: np.ndarray) -> None:
        """Tallies the rows of `digests` (the run's whole trace index) read since the last call."""
        if self.scanned > len(digests):  # the index was rebuilt without a reset being heard
            self._reset()
        while self.scanned < len(digests):
            rows = digests[self.scanned : self.scanned + _BLOCK_ROWS]
            ids, first, counts = np.unique(rows["execution_index"], return_index=True, return_counts=True)
            self.execution_ids, self.trace_counts, self.first_positions = _merged(
                (self.execution_ids, self.trace_counts, self.first_positions), (ids, counts, first + self.scanned)
            )
            self.op_ids = np.union1d(self.op_ids, rows["op_id"])
            self._include_newest(rows, self.scanned)
            self.scanned += len(rows)

    def first_trace_positions(self, execution_ids: np.ndarray) -> np.ndarray:
        """The position of each execution's first trace, -1 for one without traces."""
        if not len(self.execution_ids):
            return np.full(len(execution_ids), -1, np.int64)
        at = np.minimum(np.searchsorted(self.execution_ids, execution_ids), len(self.execution_ids) - 1)
        return np.where(self.execution_ids[at] == execution_ids, self.first_positions[at], -1)

    def newest_min(self, digests: np.ndarray, newest_from: int) -> int | None:
        """The least execution index of the rows from `newest_from` on (None: no such row)."""
        if newest_from != self._newest_from:  # a new drop: the newest stretch starts elsewhere
            self._newest_from, self._newest_min = newest_from, None
            tail = digests["execution_index"][newest_from : self.scanned]
            if len(tail):
                self._newest_min = int(tail.min())
        return self._newest_min

    def _include_newest(self, rows: np.ndarray, first: int) -> None:
        begin = max(self._newest_from - first, 0)
        if begin < len(rows):
            low = int(rows["execution_index"][begin:].min())
            self._newest_min = low if self._newest_min is None else min(self._newest_min, low)


def _merged(table: tuple[np.ndarray, ...], new: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Two sorted (id, count, first position) tables as one: counts of a shared id added, its
    first position the earlier."""
    ids, counts, firsts = table
    new_ids, new_counts, new_firsts = new
    if not len(ids):
        return new
    if not len(new_ids):
        return table
    if new_ids[0] >= ids[-1]:  # the common case: later executions (the last one's traces may go on)
        if new_ids[0] == ids[-1]:
            counts = counts.copy()
            counts[-1] += new_counts[0]
            new_ids, new_counts, new_firsts = new_ids[1:], new_counts[1:], new_firsts[1:]
        return (
            np.concatenate([ids, new_ids]),
            np.concatenate([counts, new_counts]),
            np.concatenate([firsts, new_firsts]),
        )
    merged, where = np.unique(np.concatenate([ids, new_ids]), return_inverse=True)
    total = np.bincount(where, weights=np.concatenate([counts, new_counts])).astype(np.int64)
    first = np.full(len(merged), np.iinfo(np.int64).max)
    np.minimum.at(first, where, np.concatenate([firsts, new_firsts]))
    return merged, total, first
