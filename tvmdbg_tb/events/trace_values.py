"""The debug values of many traces at once, read straight from a run's trace file.

Bulk readers (compare's statistics, range alerts) need a few numbers of every trace; parsing
each record with protobuf would cost seconds on a large dump. Here the file is read chunk by
chunk from the first trace asked for, and the values of the traces asked for are decoded for
a whole chunk at once (vectorized.trace_debug_values): memory stays bounded by one chunk.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from tvmdbg_tb.events import layout, vectorized

CHUNK = 8 << 20


def iter_debug_values(run_path: str, offsets: np.ndarray, width: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yields (positions in offsets, (k, width) float64 debug values) chunk by chunk of the trace
    file of the run at run_path, for the traces at these file offsets (the digests' `offset`
    column). Rows are NaN where a record holds fewer than `width` values; records that cannot
    be read (damaged, cut, gone) are left out."""
    if not len(offsets):
        return
    order = np.argsort(offsets, kind="stable")
    sorted_offsets = offsets[order]
    path = os.path.join(run_path, layout.file_name(layout.GRAPH_EXECUTION_TRACES))
    with open(path, "rb") as f:
        position = int(sorted_offsets[0])  # a record's start: the scan begins in step
        f.seek(position)
        while position <= sorted_offsets[-1]:
            buf = f.read(CHUNK)
            if not buf:
                break
            padded = vectorized.padded(buf)
            file_offsets, starts, lengths, _, consumed = vectorized.scan(buf, position, path, padded)
            if len(file_offsets):
                at = np.minimum(np.searchsorted(sorted_offsets, file_offsets), len(sorted_offsets) - 1)
                hit = sorted_offsets[at] == file_offsets
                if hit.any():
                    yield order[at[hit]], vectorized.trace_debug_values(padded, starts[hit], lengths[hit], width)
            if consumed == 0:
                break  # a damaged or cut record: what follows is not read
            position += consumed
            f.seek(position)
