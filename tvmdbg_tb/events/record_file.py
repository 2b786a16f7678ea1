"""One append-only record file on a local disk, and the ring's compaction of it."""

from __future__ import annotations

import array
import itertools
import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

from tvmdbg_tb.events import native_records


def join_chunks(chunks: list, base: int, track_ends: bool) -> tuple[bytes | memoryview, array.array | None]:
    """chunks (records as bytes, runs of records as (blob, sizes), spools) joined (one spool
    alone: a view of it), and with track_ends each record's end offset counted from base; by
    native_records when built."""
    native = native_records.LIBRARY.loaded()
    if native is not None:
        data, ends = native.join_chunks(chunks, base, track_ends)
        if ends is None:
            return data, None
        found = array.array("q")
        found.frombytes(ends)
        return data, found
    # A spool (native_records.Spool: queued before the library was switched off) is a run too.
    runs = [c if isinstance(c, (bytes, tuple)) else (c, c.sizes()) for c in chunks]
    data = b"".join([c[0] if type(c) is not bytes else c for c in runs])
    if not track_ends:
        return data, None
    found = array.array("q")
    end = base
    for chunk in runs:
        if type(chunk) is not bytes:  # a run of records
            running = itertools.accumulate(chunk[1], initial=end)
            next(running)  # `end` itself: no record of this run ends there
            found.extend(running)
            end = found[-1] if found else end
        else:
            end += len(chunk)
            found.append(end)
    return data, found


class Dropped(NamedTuple):
    """Sequences [first, first + count) of a ring file that the compaction dropped (written as a
    RecordsDropped record in their place)."""

    first: int
    count: int


class RecordFile:
    """One append-only record file. A ring file also remembers where its records end and,
    once compacted, what precedes its newest records (its head): the records it keeps
    whole and RecordsDropped records, in sequence order."""

    def __init__(self, path: str, ring: bool):
        self.path = path
        self.ring = ring
        self.handle = open(path, "ab")
        self.size = self.handle.tell()
        self.ends = array.array("q")  # end offset of each record after the head (ring files only)
        self.head: list[tuple[int, int] | Dropped] = []  # byte ranges of records kept whole, and drops
        self.head_size = 0  # where the records after the head start
        self.first_sequence = 0  # the sequence of the first record after the head

    @property
    def dropped(self) -> int:
        """Records the compactions dropped."""
        return sum(item.count for item in self.head if isinstance(item, Dropped))

    def append(self, chunks: list) -> None:
        """Writes chunks: records (bytes) or runs of records ((blob, sizes): _Framed, or the
        spools native_records.queue_call queues into), joined by native_records when built."""
        data, ends = join_chunks(chunks, self.size, self.ring)
        self.handle.write(data)
        if ends is not None:
            self.ends.extend(ends)
        self.size += len(data)

    def flush(self, fsync: bool = False) -> None:
        self.handle.flush()
        if fsync:
            os.fsync(self.handle.fileno())

    def close(self) -> None:
        self.handle.close()

    def newest(self) -> tuple[int, int]:
        """(records, bytes) after the head: what the ring's bounds apply to."""
        return len(self.ends), self.size - self.head_size

    def _head_after(self, cut_index: int, kept: Sequence[tuple[int, int]]) -> list:
        """The file's head once records [0, cut_index) are cut: the head it has, then the kept
        ranges ((start, end) byte spans) with a Dropped in place of each run of the others."""
        head = list(self.head)
        done = 0  # records [0, done) of the dropped stretch [0, cut_index) are placed
        for low, high in kept:
            begin, stop = max(low - self.first_sequence, done), min(high - self.first_sequence + 1, cut_index)
            if begin >= stop:
                continue
            if begin > done:
                add_drop(head, self.first_sequence + done, begin - done)
            head.append((self._start_of(begin), self.ends[stop - 1]))
            done = stop
        if done < cut_index:
            add_drop(head, self.first_sequence + done, cut_index - done)
        return head

    def compact(
        self, max_records: int, max_bytes: int, kept: Sequence[tuple[int, int]], marker: Callable[[int, int], bytes]
    ) -> None:
        """Keeps the last records that fit both bounds (at least one) and, of the older ones,
        those whose sequences are in `kept` ((first, last) ranges, ascending), with a
        RecordsDropped record (marker(first, count)) in place of each run of the others;
        atomically."""
        self.handle.flush()
        keep = len(self.ends)
        if max_records > 0:
            keep = min(keep, max_records)
        cut_index = len(self.ends) - keep
        head = self._head_after(cut_index, kept)
        # The drop records count within the byte bound (the calls kept whole come on top).
        while keep > 1 and self.size - self._start_of(cut_index) + _markers_size(head, marker) > max_bytes:
            cut_index += 1
            keep -= 1
            head = self._head_after(cut_index, kept)
        if cut_index == 0:
            return
        cut = self._start_of(cut_index)
        tmp = self.path + ".compacting"
        new_head: list[tuple[int, int] | Dropped] = []
        with open(self.path, "rb") as src, open(tmp, "wb") as dst:
            for item in head:
                at = dst.tell()
                if isinstance(item, Dropped):
                    dst.write(marker(item.first, item.count))
                    new_head.append(item)
                else:
                    copy_range(src, dst, item[0], item[1])
                    new_head.append((at, dst.tell()))
            head_size = dst.tell()
            copy_range(src, dst, cut, self.size)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, self.path)
        self.handle.close()
        self.handle = open(self.path, "ab")
        shift = head_size - cut
        self.ends = array.array("q", [end + shift for end in self.ends[cut_index:]])
        self.size += shift
        self.head, self.head_size = new_head, head_size
        self.first_sequence += cut_index

    def _start_of(self, index: int) -> int:
        return self.ends[index - 1] if index > 0 else self.head_size


def copy_range(src, dst, start: int, end: int) -> None:
    """Copies bytes [start, end) of src to dst, a block at a time."""
    src.seek(start)
    while start < end and (block := src.read(min(1 << 20, end - start))):
        dst.write(block)
        start += len(block)


def add_drop(head: list, first: int, count: int) -> None:
    """Appends a dropped stretch to a head, merged with a drop just before it."""
    if head and isinstance(head[-1], Dropped) and head[-1].first + head[-1].count == first:
        head[-1] = Dropped(head[-1].first, head[-1].count + count)
    else:
        head.append(Dropped(first, count))


def _markers_size(head: list, marker: Callable[[int, int], bytes]) -> int:
    """The bytes of the RecordsDropped records a head holds."""
    return sum(len(marker(item.first, item.count)) for item in head if isinstance(item, Dropped))
