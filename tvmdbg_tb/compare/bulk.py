"""Statistics of every trace of a FULL_STATS run at once, and the tolerance verdicts of all
aligned pairs in numpy, so that runs with millions of traces compare in seconds: only the
call pair shown in the table is then read record by record (core.py).
"""

from __future__ import annotations

import numpy as np

from tvmdbg_tb.events import trace_values
from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.events.summaries import LAYOUTS
from tvmdbg_tb.proto import debug_event_pb2 as pb

WIDTH = len(LAYOUTS[pb.FULL_STATS])
# Columns of FULL_STATS read, and their order in stats_matrix's rows (finite elements counted
# once instead of negative/zero/positive: 10 doubles per trace).
_SIZE, _NEG_INF, _POS_INF, _NAN, _NEGATIVE, _ZERO, _POSITIVE = 3, 4, 5, 6, 7, 8, 9
SIZE, NAN, NEG_INF, POS_INF, FINITE, MIN, MAX, MEAN, L2, ABS_MAX = range(10)


def _compact(values: np.ndarray) -> np.ndarray:
    out = np.empty((len(values), 10))
    out[:, [SIZE, NAN, NEG_INF, POS_INF]] = values[:, [_SIZE, _NAN, _NEG_INF, _POS_INF]]
    out[:, FINITE] = values[:, _NEGATIVE] + values[:, _ZERO] + values[:, _POSITIVE]
    out[:, MIN:] = values[:, 10:15]
    return out


def iter_stats(run: RunReader, offsets: np.ndarray):
    """Yields (positions in offsets, their stats rows) chunk by chunk of the trace file, rows
    as stats_matrix gives them; records that cannot be read are left out."""
    for positions, values in trace_values.iter_debug_values(run, offsets, WIDTH):
        yield positions, _compact(values)


def stats_matrix(run: RunReader, offsets: np.ndarray) -> np.ndarray:
    """(len(offsets), 10) float64 rows [size, nan, neg_inf, pos_inf, finite, min, max, mean,
    l2_norm, abs_max] of the traces at these file offsets (the digests' `offset` column); NaN
    rows for records that could not be read."""
    out = np.full((len(offsets), 10), np.nan)
    for positions, rows in iter_stats(run, offsets):
        out[positions] = rows
    return out


def divergent(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Per row pair of stats_matrix rows, whether errors.from_stats calls it divergent (the
    same formula)."""
    counts = [NAN, NEG_INF, POS_INF]
    nonfinite_differ = (a[:, counts] != b[:, counts]).any(axis=1)
    finite = a[:, FINITE]
    with np.errstate(invalid="ignore", divide="ignore"):
        deltas = np.abs(a[:, [MIN, MAX, MEAN, ABS_MAX]] - b[:, [MIN, MAX, MEAN, ABS_MAX]]).max(axis=1)
        l2 = np.abs(a[:, L2] - b[:, L2]) / np.sqrt(np.maximum(finite, 1))
        bound = np.maximum(deltas, l2)
        beyond = (finite > 0) & (bound > atol + rtol * np.abs(b[:, ABS_MAX]))
    same_size = a[:, SIZE] == b[:, SIZE]
    return same_size & (nonfinite_differ | beyond)
