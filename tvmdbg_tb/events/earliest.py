"""The earliest wall time of a NaN/Inf in a run's digest tables, kept as rows are read.

DebugDataReader.choose() (the CLI's and the dashboard's default run) asks every run for its
first NaN/Inf on each `runs` request; kept here and extended with the rows indexed since the
last question, that costs the new rows, not a pass over millions. An observer of the run's
reader: a reset of a table (a file replaced by the circular buffer) starts it over.
"""

from __future__ import annotations

import numpy as np


class EarliestNonfinite:
    """Per digest table (stream), the rows scanned so far and the earliest wall time among
    those flagged non-finite."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, float | None]] = {}  # stream -> (rows scanned, earliest)

    def __call__(self, run, stream: str, start: int, reset: bool) -> None:
        if reset:
            self._seen.pop(stream, None)

    def earliest(self, stream: str, rows: np.ndarray, flags: int) -> float | None:
        """Of `rows`, the stream's whole digest table (under the run's lock), flagged by one
        of `flags` (always the same for a stream)."""
        scanned, best = self._seen.get(stream, (0, None))
        if scanned > len(rows):  # cleared without a reset seen: start over
            scanned, best = 0, None
        if scanned < len(rows):
            new = rows[scanned:]
            times = new["wall_time"][new["flags"] & flags != 0]
            if len(times):
                found = float(times.min())
                best = found if best is None else min(best, found)
            self._seen[stream] = (len(rows), best)
        return best
