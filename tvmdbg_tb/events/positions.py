"""Positions of the traces of one op (or one op output) or one execution, without a pass over
every trace digest per query.

Answers for the most recently asked keys are kept, within a byte budget, and extended with
the rows read since they were computed, so a dashboard asking for the same op page after
page, on a live run of millions of traces, costs a scan of the new rows only. An observer of
the run's reader: when the circular buffer (or a replaced file) resets the trace index, every
kept answer is dropped.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from tvmdbg_tb.events import layout

MAX_BYTES = 32 << 20  # positions kept, all keys together
_ENTRY_BYTES = 256  # counted per kept answer besides its positions (an empty one costs too)


class TracePositions:
    """The per-run cache; select() is called with the run's lock held (rows cannot change)."""

    def __init__(self, max_bytes: int | None = None):
        self.max_bytes = MAX_BYTES if max_bytes is None else max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple, tuple[int, np.ndarray]] = OrderedDict()  # key -> (rows scanned, positions)
        self._bytes = 0

    def __call__(self, run, stream: str, start: int, reset: bool) -> None:
        if reset and stream == layout.GRAPH_EXECUTION_TRACES:
            with self._lock:
                self._entries.clear()
                self._bytes = 0

    def select(self, digests: np.ndarray, key: tuple[tuple[str, int], ...]) -> np.ndarray:
        """Positions of the rows of `digests` (the run's whole trace index) whose columns
        equal the values of key, e.g. (("op_id", 3), ("output_slot", 0)), oldest first."""
        with self._lock:
            found = self._entries.pop(key, None)
            if found is not None:
                self._bytes -= found[1].nbytes + _ENTRY_BYTES
        scanned, positions = found if found is not None and found[0] <= len(digests) else (0, np.zeros(0, np.int64))
        if scanned < len(digests):
            rows = digests[scanned:]
            mask = rows[key[0][0]] == key[0][1]
            for column, value in key[1:]:
                mask &= rows[column] == value
            new = np.flatnonzero(mask)
            if len(new):
                positions = np.concatenate([positions, new + scanned])
            scanned = len(digests)
        with self._lock:
            if positions.nbytes + _ENTRY_BYTES <= self.max_bytes:
                self._entries[key] = (scanned, positions)
                self._bytes += positions.nbytes + _ENTRY_BYTES
                while self._bytes > self.max_bytes:
                    _, (_, dropped) = self._entries.popitem(last=False)
                    self._bytes -= dropped.nbytes + _ENTRY_BYTES
        positions.flags.writeable = False  # shared by the queries that follow
        return positions
