"""The debug values of many traces at once, read straight from a run's trace stream.

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

from tvmdbg_tb import storage
from tvmdbg_tb.events import layout, records, vectorized

CHUNK = 8 << 20


def iter_debug_values(run, offsets: np.ndarray, width: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yields (positions in offsets, (k, width) float64 debug values) chunk by chunk of the trace
    stream of run (a RunReader, or a run directory's path or URL), for the traces at these
    stream offsets (the digests' `offset` column). Rows are NaN where a record holds fewer than
    `width` values; records that cannot be read (damaged, cut, gone) are left out."""
    if not len(offsets):
        return
    order = np.argsort(offsets, kind="stable")
    sorted_offsets = np.asarray(offsets, dtype=np.int64)[order]
    source = _open(run)
    found = source.current(0)
    if found is None:
        raise FileNotFoundError(f"{source.path}: no such stream")
    file_size = found[1]
    try:
        first = 0  # index in sorted_offsets of the next record to read
        while first < len(sorted_offsets):
            position = int(sorted_offsets[first])
            if position + records.HEADER_SIZE > file_size:
                break  # the file is shorter than the index (cut): the rest is gone
            size = CHUNK
            while True:  # a chunk holds at least its first record, however large
                buf = source.read(position, size)
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
    finally:
        source.close()


def _open(run) -> storage.Follower:
    """A fresh follower of the trace stream (its own file handle or listing: never the
    reader's, which its next update may move on)."""
    if hasattr(run, "open_stream"):
        return run.open_stream(layout.GRAPH_EXECUTION_TRACES)
    path = os.fspath(run)
    store = storage.open_store(path)
    listing = storage.Listing(store, store.root)
    segmented = storage.is_segmented(store, store.root, layout.file_name(layout.METADATA), listing)
    return storage.follower(store, store.root, layout.file_name(layout.GRAPH_EXECUTION_TRACES), listing, segmented)
