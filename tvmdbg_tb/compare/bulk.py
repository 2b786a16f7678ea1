"""Statistics of every trace of a FULL_STATS run at once, and the tolerance verdicts of all
aligned pairs in numpy, so that runs with millions of traces compare in seconds: only the
call pair shown in the table is then read record by record (core.py).
"""

from __future__ import annotations

import os

import numpy as np

from tvmdbg_tb.events import layout, vectorized
from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.events.summaries import LAYOUTS
from tvmdbg_tb.proto import debug_event_pb2 as pb

WIDTH = len(LAYOUTS[pb.FULL_STATS])
_CHUNK = 8 << 20
# Columns of FULL_STATS.
SIZE, NEG_INF, POS_INF, NAN, NEGATIVE, ZERO, POSITIVE = 3, 4, 5, 6, 7, 8, 9
MIN, MAX, MEAN, L2, ABS_MAX = 10, 11, 12, 13, 14


def stats_matrix(run: RunReader, offsets: np.ndarray) -> np.ndarray:
    """(len(offsets), WIDTH) float32-free float64 FULL_STATS rows of the traces at these file
    offsets (the digests' `offset` column); NaN rows for records that could not be read."""
    out = np.full((len(offsets), WIDTH), np.nan)
    if not len(offsets):
        return out
    order = np.argsort(offsets, kind="stable")
    sorted_offsets = offsets[order]
    path = os.path.join(run.path, layout.file_name(layout.GRAPH_EXECUTION_TRACES))
    with open(path, "rb") as f:
        position = 0
        while True:
            buf = f.read(_CHUNK)
            if not buf:
                break
            padded = vectorized.padded(buf)
            file_offsets, starts, lengths, _, consumed = vectorized.scan(buf, position, path, padded)
            if len(file_offsets):
                values = vectorized.trace_debug_values(padded, starts, lengths, WIDTH)
                at = np.searchsorted(sorted_offsets, file_offsets)
                hit = at < len(sorted_offsets)
                hit[hit] = sorted_offsets[at[hit]] == file_offsets[hit]
                out[order[at[hit]]] = values[hit]
            if consumed == 0:
                break  # a damaged or cut record: what follows is not read (rows stay NaN)
            position += consumed
            f.seek(position)
    return out


def divergent(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Per row pair, whether errors.from_stats would call it divergent (same formula)."""
    counts = [NAN, NEG_INF, POS_INF]
    nonfinite_differ = (a[:, counts] != b[:, counts]).any(axis=1)
    finite = a[:, NEGATIVE] + a[:, ZERO] + a[:, POSITIVE]
    with np.errstate(invalid="ignore", divide="ignore"):
        deltas = np.abs(a[:, [MIN, MAX, MEAN, ABS_MAX]] - b[:, [MIN, MAX, MEAN, ABS_MAX]]).max(axis=1)
        l2 = np.abs(a[:, L2] - b[:, L2]) / np.sqrt(np.maximum(finite, 1))
        bound = np.maximum(deltas, l2)
        beyond = (finite > 0) & (bound > atol + rtol * np.abs(b[:, ABS_MAX]))
    same_size = a[:, SIZE] == b[:, SIZE]
    return same_size & (nonfinite_differ | beyond)
