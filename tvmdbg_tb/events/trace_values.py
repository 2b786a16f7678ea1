"""The debug values of many traces at once, read straight from a run's trace file.

Bulk readers (compare's statistics, range alerts) need a few numbers of every trace; parsing
each record with protobuf would cost seconds on a large dump. The digests already hold each
record's file offset (and the reader verified each record's CRCs when it indexed it), so the
file is read chunk by chunk from the first trace asked for, each record is found by its
offset (the length field's CRC checked again), and the values of a whole chunk are decoded
at once (vectorized.trace_debug_values): memory stays bounded by one chunk.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from tvmdbg_tb.events import layout, records, vectorized
from tvmdbg_tb.events.files import open_regular

CHUNK = 8 << 20


def iter_debug_values(run_path: str, offsets: np.ndarray, width: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yields (positions in offsets, (k, width) float64 debug values) chunk by chunk of the trace
    file of the run at run_path, for the traces at these file offsets (the digests' `offset`
    column). Rows are NaN where a record holds fewer than `width` values; records that cannot
    be read (damaged, cut, gone) are left out."""
    if not len(offsets):
        return
    order = np.argsort(offsets, kind="stable")
    sorted_offsets = np.asarray(offsets, dtype=np.int64)[order]
    path = os.path.join(run_path, layout.file_name(layout.GRAPH_EXECUTION_TRACES))
    with os.fdopen(open_regular(path), "rb") as f:  # never a FIFO swapped in since it was indexed
        file_size = os.fstat(f.fileno()).st_size
        first = 0  # index in sorted_offsets of the next record to read
        while first < len(sorted_offsets):
            position = int(sorted_offsets[first])
            if position + records.HEADER_SIZE > file_size:
                break  # the file is shorter than the index (cut): the rest is gone
            size = CHUNK
            while True:  # a chunk holds at least its first record, however large
                f.seek(position)
                buf = f.read(size)
                last = int(np.searchsorted(sorted_offsets, position + len(buf), side="left"))
                b = vectorized.padded(buf)
                starts, lengths, state = vectorized.frames_at(b, sorted_offsets[first:last] - position, len(buf))
                end = int(starts[0] + lengths[0] + records.FOOTER_SIZE) if last > first else 0
                if last == first or state[0] != vectorized.CUT or len(buf) < size or end > file_size - position:
                    break
                size = end
            if last == first:
                break  # the file shrank since (replaced): nothing more to read here
            usable = np.flatnonzero(state == vectorized.USABLE)
            if len(usable):
                values = vectorized.trace_debug_values(b, starts[usable], lengths[usable], width)
                yield order[first + usable], values
            # The next chunk starts at the first record this one cut; a damaged record, and one
            # cut by the end of the file, are left out.
            cut = np.flatnonzero(state == vectorized.CUT)
            first = last if not len(cut) else first + max(int(cut[0]), 1)
