"""DebugDataReader: the dumps under a logdir, read incrementally into compact indexes.

- Incremental: each record file remembers the byte offset it has read to; `update()` reads
  only what is new and resumes a truncated last record once the writer completes it.
- Loud about damage: a bad CRC becomes a `Corruption` (file, offset, reason) in
  `corruptions`, the reader resynchronises on the next good record and goes on. So does a
  whole record out of its run's order: foreign, duplicated, reordered or missing
  (events/integrity.py).
- Compact: executions and traces are indexed as rows of numpy structured arrays (about 80
  bytes per trace); full records are parsed on demand from their file offset.
- A ring file compacted by the writer (a new inode) is re-read from its start; observers
  hear about it as a reset.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable

import numpy as np

from tvmdbg_tb import storage
from tvmdbg_tb.events import completeness, integrity, layout, records, vectorized
from tvmdbg_tb.events.digests import (
    EXECUTION_DIGEST,
    HAS_ERROR,
    HEALTH_KNOWN,
    INNER_NONFINITE,
    NONFINITE,
    TRACE_DIGEST,
)
from tvmdbg_tb.events.health import value_nonfinite_counts
from tvmdbg_tb.events.modes import spec
from tvmdbg_tb.events.run_index import RunIndex
from tvmdbg_tb.events.summaries import describe, nonfinite_counts
from tvmdbg_tb.proto import debug_event_pb2 as pb

_READ_CHUNK = 4 << 20
_FRAMING = records.HEADER_SIZE + records.FOOTER_SIZE
# Seconds a completeness verdict is reused while nothing was read (the writer's liveness
# is what changes meanwhile), or while a live run only grew.
_COMPLETENESS_TTL = 2.0  # bytes indexed at once: bounds the transient memory of indexing


UnreadableStreamError = storage.UnreadableStreamError


class StaleRecordError(LookupError):
    """A record asked for by index is no longer in the dump (dropped by the circular buffer)."""


def _records_of(batch) -> list[tuple[int, bytes]]:
    """[(file offset, serialized event)] of a batch from poll_batches."""
    buf, offsets, starts, lengths, _ = batch
    return [
        (offset, buf[start : start + length])
        for offset, start, length in zip(offsets.tolist(), starts.tolist(), lengths.tolist())
    ]


class _RecordFileReader:
    """Follows one stream's records: new records since the last poll, resets on replacement.
    The bytes come from a storage follower (a local file, or an object store's segments), so
    local and object storage share this one framing path."""

    def __init__(self, source: storage.Follower):
        self.source = source
        self.path = source.path
        self.offset = 0
        self.size = 0
        self._reported: set[int] = set()
        self._checked: tuple[int, int] | None = None  # (offset, size) scanned without progress
        self._pinned: tuple[bool, int] | None = None  # (reset, size) the next poll reads to
        self._rewound = False

    def poll(self) -> tuple[bool, list[tuple[int, bytes]], list[records.Corruption]]:
        """(reset, [(offset, serialized event)], corruptions) for what is new in the file."""
        reset, out, bad = False, [], []
        for batch_reset, batch, batch_bad in self.poll_batches():
            reset |= batch_reset
            bad.extend(batch_bad)
            out.extend(_records_of(batch))
        return reset, out, bad

    def poll_batches(self):
        """Yields (reset, (buf, file offsets, data starts, data lengths, buf padded or None),
        corruptions) per chunk of what is new in the file, so that a large file is indexed one
        bounded chunk at a time. The read position advances before each yield.

        Reads to the size pin() saw, or else to the file's size now. Raises
        UnreadableStreamError for anything but a regular file (never opened: a FIFO would
        block). A stretch that holds no whole record (a record being written, or a damaged
        tail) is scanned once per size of the file, not on every poll."""
        pinned, self._pinned = self._pinned, None
        if pinned is None:
            pinned = self._current()
            if pinned is None:
                return
        reset, size = pinned
        reset, self._rewound = reset or self._rewound, False
        self.size = size
        empty = np.zeros(0, np.int64)
        while True:
            if size <= self.offset or self._checked == (self.offset, size):
                if reset:  # a file replaced by one with nothing new to read
                    yield reset, (b"", empty, empty, empty, None), []
                break
            want = min(size - self.offset, _READ_CHUNK)
            buf = self.source.read(self.offset, want)
            padded = vectorized.padded(buf)  # shared by the scan and the digest decoding
            offsets, starts, lengths, found, consumed = vectorized.scan(buf, self.offset, self.path, padded)
            bad = [item for item in found if self._new_damage(item)]
            if consumed == 0:
                step = self._past_a_stuck_record(buf, size)
                if step is None:
                    if bad or reset:
                        yield reset, (b"", empty, empty, empty, None), bad
                    self._checked = (self.offset, size)
                    break
                kind, payload = step
                if kind == "record":
                    yield reset, (*payload, None), bad
                else:
                    bad = [b for b in bad if b.offset != payload.offset] + [payload]
                    yield reset, (b"", empty, empty, empty, None), bad
                reset = False
                continue
            self.offset += consumed
            yield reset, (buf, offsets, starts, lengths, padded), bad
            reset = False
            if want < _READ_CHUNK:
                break

    def pin(self) -> None:
        """Fixes what the next poll_batches reads: the file as it is now (reopened if it was
        replaced), to its size now, whatever is appended meanwhile. Raises as poll_batches."""
        self._pinned = self._current()

    def rewind(self) -> None:
        """Makes the next poll read the file again from its start, as a reset (damage already
        reported is not reported again)."""
        self.offset = 0
        self._checked = None
        self._rewound = True

    def _current(self) -> tuple[bool, int] | None:
        """(reset, size): the stream as it is now (read again from its start when it was
        replaced or shrunk, reset then True) and its size; None when there is no stream."""
        found = self.source.current(self.offset)
        if found is not None and found[0]:
            self.offset = 0
            self._checked = None
            self._reported.clear()
        return found

    def _new_damage(self, item: records.Corruption) -> bool:
        if item.offset in self._reported:
            return False
        self._reported.add(item.offset)
        return True

    def _past_a_stuck_record(self, buf: bytes, size: int):
        """At self.offset no whole record was found in one chunk: a record larger than a
        chunk, or damage followed by nothing valid within the chunk. Returns ("record",
        (buf, offsets, starts, lengths)) for a big good record, ("damage", Corruption) after
        moving past damaged bytes to the next valid record (searched to the end of the file,
        whatever the records' sizes), or None when the rest must wait for more bytes. A record
        is read whole only once records.check_record found it whole: a length its header
        declares costs no memory beyond one chunk."""
        if len(buf) < records.HEADER_SIZE:
            return None
        state, length = records.check_record(self._pread, self.offset, size, self.source.holes)
        if state in (records.WHOLE, records.BAD_DATA):
            offset, need = self.offset, records.HEADER_SIZE + length + records.FOOTER_SIZE
            self.offset += need
            if state == records.WHOLE:
                big = self.source.read(offset, need)
                start = np.array([records.HEADER_SIZE])
                return "record", (big, np.array([offset]), start, np.array([length]))
            self._reported.add(offset)
            return "damage", records.Corruption(self.path, offset, need, records.BAD_DATA)
        nxt = self._next_record(self.offset + 1, size)
        if nxt is None:
            return None  # a record still being written, or cut (see RunReader.tails); or damage to the end
        reason = {
            records.BAD_LENGTH: records.BAD_LENGTH,
            records.TOO_LARGE: f"declared length {length} is larger than any record",
        }.get(state, f"declared length {length} goes past the next record")
        damage = records.Corruption(self.path, self.offset, nxt - self.offset, reason)
        self._reported.add(self.offset)
        self.offset = nxt
        return "damage", damage

    def _next_record(self, start: int, size: int) -> int | None:
        """The file offset of the first whole valid record at or after start, if any."""
        window = start
        while window < size:
            data = self.source.data_from(window)  # a hole of a sparse file holds no record start,
            if data is None or data >= size:  # but its last bytes may begin a header
                return None
            window = max(window, data - records.HEADER_SIZE + 1)
            buf = self.source.read(window, _READ_CHUNK + records.HEADER_SIZE)
            for pos in records.header_candidates(buf, 0, size - window):
                if pos >= _READ_CHUNK:
                    break
                if records.check_record(self._pread, window + pos, size, self.source.holes)[0] == records.WHOLE:
                    return window + pos
            window += _READ_CHUNK
        return None

    def _pread(self, offset: int, size: int) -> bytes:
        return self.source.read(offset, size)

    def read_at(self, offset: int) -> pb.DebugEvent:
        """The event of the record at offset (in the file generation currently indexed)."""
        header = self.source.read(offset, records.HEADER_SIZE)
        if len(header) < records.HEADER_SIZE:
            raise StaleRecordError(f"{self.path}: no record at byte {offset}")
        length = int.from_bytes(header[:8], "little")
        if offset + records.HEADER_SIZE + length + records.FOOTER_SIZE > self.source.length():
            raise StaleRecordError(f"{self.path}: the record at byte {offset} goes past the end of the file")
        data = self.source.read(offset + records.HEADER_SIZE, length)
        footer = self.source.read(offset + records.HEADER_SIZE + length, records.FOOTER_SIZE)
        if not records.intact(header, data, footer):
            raise StaleRecordError(f"{self.path}: no valid record at byte {offset}")
        return pb.DebugEvent.FromString(data)

    def close(self) -> None:
        self.source.close()


class RunReader(RunIndex):
    """One run's dump: its record files read incrementally (framing, damage, order, the
    circular buffer's drops) into the run's index (RunIndex), and its records by index."""

    def __init__(self, name: str, path: str, store: storage.Store | None = None):
        """path: the run's directory (a URL on an object store) in store (by default the
        store holding path)."""
        super().__init__(name)
        self.path = path
        store = store if store is not None else storage.open_store(path)
        self._listing = storage.Listing(store, path)
        # Kept as segments (an object store, or a run copied down from one): one listing per update.
        self.segmented = storage.is_segmented(store, path, layout.file_name(layout.METADATA), self._listing)
        self._store = store
        self._files = {
            s: _RecordFileReader(storage.follower(store, path, layout.file_name(s), self._listing, self.segmented))
            for s in layout.STREAMS
        }
        # The run's key (that of its DebugMetadata record); keyed: False for a dump written
        # before records carried one (nothing to check them by), None while unknown.
        self.run_key: int | None = None
        self.keyed: bool | None = None
        self._orders = {s: integrity.RecordOrder(f.path) for s, f in self._files.items()}
        # Where the circular buffer dropped records: (digest row after the drop, first place,
        # count) per ring stream.
        self._ring_drops: dict[str, list[tuple[int, int, int]]] = {s: [] for s in layout.RING_STREAMS}
        self._explained: set[tuple[str, int]] = set()  # (file, offset) of open-ended damage that explained a gap
        self._update_lock = threading.Lock()  # one update at a time
        self.corruptions: list[records.Corruption] = []
        # Damage already reported, while the execution file is read again (see _update_digests).
        self._reread_damage: set[tuple[str, int, str]] | None = None
        # Streams that could not be read, and why (the others are still read).
        self.stream_errors: dict[str, str] = {}
        self._completeness: tuple | None = None  # (state key, when, Completeness)
        self._assessing = threading.Lock()  # held by the request that assesses completeness
        self._completeness_ttl = _COMPLETENESS_TTL
        # Why the last update() of this run failed (set by DebugDataReader.update), or None.
        self.error: str | None = None

    # -- reading ---------------------------------------------------------------------------

    def update(self) -> dict[str, int]:
        """Reads what was appended since the last update; returns new records per stream.

        The run lock is held per chunk, not for the whole update: while a large dump is
        indexed, queries answer from the chunks indexed so far (with their alerts). What they
        see is whole all the same: the metadata is read first (the run key), then the other
        files' sizes are taken in the reverse of layout.WRITE_ORDER and the files read to
        those sizes in that order, so that a call is shown only once its traces are, a trace
        once its op is; a RunEnd read is shown last, once everything written before it is."""
        with self._update_lock:
            counts = dict.fromkeys(layout.STREAMS, 0)
            ended = self._run_end_read is not None
            self._read_streams(counts)
            if self.segmented and not ended and self._run_end_read is not None:
                # The RunEnd's segment is uploaded after every other one: a listing begun after
                # it was read lists them all, so the records it counts are read before it shows.
                self._read_streams(counts)
            if self._run_end_read is not None:
                with self._lock:
                    self.run_end = self._run_end_read
            return counts

    def _read_streams(self, counts: dict[str, int]) -> None:
        """One pass over the streams (on an object store, from one fresh listing of the run)."""
        if self.segmented:
            self._listing.refresh()  # an OSError fails this update of the run (DebugDataReader says why)
        self._read_stream(layout.METADATA, counts)
        for stream in reversed(layout.WRITE_ORDER[1:]):
            try:
                self._files[stream].pin()
            except OSError:
                pass  # said by _read_stream, which tries again
        for stream in layout.WRITE_ORDER[1:]:
            self._read_stream(stream, counts)

    def _read_stream(self, stream: str, counts: dict[str, int]) -> None:
        try:  # one unreadable stream must not hide the others
            counts[stream] = self._update_stream(stream)
            self.stream_errors.pop(stream, None)
        except OSError as error:
            self.stream_errors[stream] = str(error) if isinstance(error, UnreadableStreamError) else repr(error)

    def _update_stream(self, stream: str) -> int:
        if stream in (layout.EXECUTION, layout.GRAPH_EXECUTION_TRACES):
            return self._update_digests(stream)
        count = 0
        batches = self._files[stream].poll_batches()  # bounded memory
        while True:
            with self._lock:
                item = next(batches, None)
                if item is None:
                    return count
                reset, batch, bad = item
                self.corruptions.extend(bad)
                if reset:
                    self._orders[stream].reset()
                raw = _records_of(batch)
                items = self._decodable(stream, raw)
                if stream == layout.METADATA and self.keyed is None:
                    self._adopt_run_key(items)
                items = self._in_order(stream, items, {offset: len(data) + _FRAMING for offset, data in raw})
                count += len(items)
                self.ingest(stream, items, reset)

    def _adopt_run_key(self, items: list[tuple[int, pb.DebugEvent]]) -> None:
        """The run's key: its DebugMetadata record's (the first one read)."""
        for _, event in items:
            if event.HasField("debug_metadata"):
                self.run_key, self.keyed = event.run_key, event.run_key != 0
                return

    def _in_order(
        self, stream: str, items: list[tuple[int, pb.DebugEvent]], sizes: dict[int, int]
    ) -> list[tuple[int, pb.DebugEvent]]:
        """The items that belong where they are (see events/integrity.py); the others are
        damage. Not checked in a dump whose records carry no run key. sizes: each record's
        by its offset."""
        if not self.keyed or not items:
            return items
        offsets = np.array([offset for offset, _ in items], dtype=np.int64)
        sizes = np.array([sizes[offset] for offset, _ in items], dtype=np.int64)
        places = np.array([event.sequence for _, event in items], dtype=np.int64)
        keys = np.array([event.run_key for _, event in items], dtype=np.uint64)
        keep, bad, _ = self._orders[stream].check(offsets, sizes, places, keys, self.run_key)
        path = self._files[stream].path
        self.corruptions.extend(m.corruption(path) for m in self._unexplained(path, bad))
        return [item for item, kept in zip(items, keep.tolist()) if kept]

    def _unexplained(self, path: str, misplaced: list, damaged: Iterable[records.Corruption] = ()) -> list:
        """Misplaced records (integrity.Misplaced) but for places reported missing right after
        a damaged stretch of the file (damaged, or one already reported; one whose end was not
        known yet explains the first gap after it): that damage is what hid them, reported
        once."""
        if not misplaced:
            return misplaced
        found = [c for c in (*self.corruptions, *damaged) if c.path == path and not c.misplaced]
        ends = {c.offset + c.length for c in found}
        open_ended = sorted(c.offset for c in found if c.length < 0 and (path, c.offset) not in self._explained)
        out = []
        for m in misplaced:
            if not m.length and m.offset in ends:
                continue
            if not m.length and open_ended and open_ended[0] < m.offset:
                self._explained.add((path, open_ended.pop(0)))
                continue
            out.append(m)
        return out

    def _decodable(self, stream: str, items: list[tuple[int, bytes]]) -> list[tuple[int, pb.DebugEvent]]:
        """Parses each record; one that protobuf rejects (its CRC was fine: a writer bug or a
        foreign file) becomes a Corruption and is skipped, never stopping the others."""
        out = []
        for offset, data in items:
            try:
                out.append((offset, pb.DebugEvent.FromString(data)))
            except Exception as error:
                self._undecodable(stream, offset, len(data), error)
        return out

    def _undecodable(self, stream: str, offset: int, length: int, error: Exception) -> None:
        self.corruptions.append(self._corruption(stream, offset, length, error))

    def _corruption(self, stream: str, offset: int, length: int, error: Exception) -> records.Corruption:
        size = length + records.HEADER_SIZE + records.FOOTER_SIZE
        return records.Corruption(self._files[stream].path, offset, size, f"undecodable record: {error}")

    def _update_digests(self, stream: str) -> int:
        """Indexes new execution or trace records chunk by chunk, mostly vectorised (see
        vectorized.py). A chunk is decoded outside the run lock and published (rows, then
        observers) under it."""
        reader = self._files[stream]
        table, rows_of = (
            (self._executions, self._execution_rows) if stream == layout.EXECUTION else (self._traces, self._trace_rows)
        )
        batches = reader.poll_batches()
        new = 0
        while True:
            with self._lock:  # a reset reopens the file: old rows must go at the same time
                item = next(batches, None)
                if item is None:
                    if stream == layout.EXECUTION:
                        self._reread_damage = None
                    return new
                reset, (buf, offsets, starts, lengths, padded), bad = item
                self.corruptions.extend(self._not_reported(stream, bad))
                if reset:
                    self._clear_digests(stream)
                    if stream == layout.GRAPH_EXECUTION_TRACES and self._executions.size:
                        # Re-read after the traces (a large ring file takes several chunks):
                        # no call is shown while its traces are being read again.
                        self._clear_digests(layout.EXECUTION)
                        self._files[layout.EXECUTION].rewind()
                        self._reread_damage = {(c.path, c.offset, c.reason) for c in self.corruptions}
            if not len(offsets):
                continue
            chunk = rows_of(buf, offsets, starts, lengths, vectorized.padded(buf) if padded is None else padded)
            rows, drops, damaged = self._placed(stream, offsets, lengths, chunk)
            # Reserve for the whole file at once (records so far scaled by the bytes left).
            expected = int((table.size + len(rows)) * reader.size / max(reader.offset, 1) * 1.01) + 1024
            damaged = self._not_reported(stream, damaged)
            with self._lock:
                self.corruptions.extend(damaged)
                start = table.size
                self._ring_drops[stream].extend((start + d.before, d.first, d.count) for d in drops)
                table.append_array(rows, expected)
                self._notify(stream, start, False)
            new += len(rows)

    def _placed(self, stream: str, offsets, lengths, chunk) -> tuple[np.ndarray, list, list]:
        """(rows, the circular buffer's drops, damage) of one chunk of digest rows: those
        decoded, in place and of this run (see events/integrity.py)."""
        rows, keep, damaged, places, keys, marks = chunk
        candidates = np.flatnonzero(keep)
        if not self.keyed:
            return rows[candidates], [], damaged
        drops = [
            (int(np.searchsorted(candidates, k)), int(offsets[k]), int(lengths[k]) + _FRAMING, first, count)
            for k, first, count in marks
        ]
        sizes = lengths[candidates] + _FRAMING
        order = self._orders[stream]
        in_order, bad, found = order.check(
            offsets[candidates], sizes, places[candidates], keys[candidates], self.run_key, drops
        )
        column = "index" if stream == layout.EXECUTION else "execution_index"
        for m in self._unexplained(order.path, bad, damaged):
            executions = None
            if m.position < len(candidates) and keys[candidates[m.position]] == self.run_key:
                e = int(rows[column][candidates[m.position]])
                executions = (e, e)
            damaged.append(m.corruption(order.path, executions))
        return rows[candidates[in_order]], found, damaged

    def _not_reported(self, stream: str, damaged: list[records.Corruption]) -> list[records.Corruption]:
        """Damage but what was reported when the execution file was read the first time."""
        if stream != layout.EXECUTION or not self._reread_damage:
            return damaged
        return [c for c in damaged if (c.path, c.offset, c.reason) not in self._reread_damage]

    def _clear_digests(self, stream: str) -> None:
        """Forgets a digest stream's rows (its file was replaced, or is read again). Under the lock."""
        (self._executions if stream == layout.EXECUTION else self._traces).clear()
        self._orders[stream].reset()
        self._ring_drops[stream] = []
        self._notify(stream, 0, True)

    def _execution_rows(self, buf, offsets, starts, lengths, padded) -> tuple:
        """EXECUTION_DIGEST rows of one chunk (vectorised, protobuf for the odd record): see
        _chunk_rows."""
        columns = vectorized.execution_digests(padded, starts, lengths)
        rows = np.zeros(len(offsets), dtype=EXECUTION_DIGEST)
        for name in ("index", "graph_id", "wall_time", "num_traces", "duration_us", "call_number", "vm", "flags"):
            rows[name] = columns[name]
        rows["offset"] = offsets
        ok = columns["ok"]
        function = rows["function"]
        ids = self._function_ids_raw
        for i, start, length in zip(
            np.flatnonzero(ok).tolist(), columns["name_start"][ok].tolist(), columns["name_len"][ok].tolist()
        ):
            raw = buf[start : start + length]
            fid = ids.get(raw)
            if fid is None:
                try:
                    fid = ids[raw] = self._function_id(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    ok[i] = False  # protobuf will reject it and say so
                    continue
            function[i] = fid
        return self._chunk_rows(
            layout.EXECUTION, rows, ok, columns["sequence"], columns["run_key"], buf, offsets, starts, lengths
        )

    def _chunk_rows(self, stream, rows, ok, places, keys, buf, offsets, starts, lengths) -> tuple:
        """(rows, which to keep, damage, places, run keys, the circular buffer's drops as
        (position in the chunk, first place, count)) of one chunk, the records the fast path
        did not understand parsed by protobuf: a RecordsDropped record is a drop, a record
        protobuf rejects is damage."""
        keep = np.ones(len(rows), dtype=bool)
        damaged, drops = [], []
        places, keys = places.copy(), keys.copy()
        row_of = self._execution_row if stream == layout.EXECUTION else self._trace_row
        for i in np.flatnonzero(~ok).tolist():
            data = buf[int(starts[i]) : int(starts[i] + lengths[i])]
            try:
                event = pb.DebugEvent.FromString(data)
                keys[i] = event.run_key
                if event.HasField("records_dropped"):
                    drops.append((i, event.records_dropped.first_sequence, event.records_dropped.count))
                    keep[i] = False
                    continue
                rows[i] = row_of(int(offsets[i]), event)
                places[i] = event.sequence if stream == layout.EXECUTION else rows[i]["index"]
            except Exception as error:
                damaged.append(self._corruption(stream, int(offsets[i]), len(data), error))
                keep[i] = False
        return rows, keep, damaged, places, keys, drops

    def _trace_rows(self, buf, offsets, starts, lengths, padded) -> tuple:
        """TRACE_DIGEST rows of one chunk (vectorised, protobuf for the odd record): see
        _chunk_rows."""
        columns = vectorized.trace_digests(padded, starts, lengths)
        rows = np.zeros(len(offsets), dtype=TRACE_DIGEST)
        for name in TRACE_DIGEST.names:
            rows[name] = offsets if name == "offset" else columns[name]
        return self._chunk_rows(
            layout.GRAPH_EXECUTION_TRACES, rows, columns["ok"], columns["index"], columns["run_key"], buf, offsets,
            starts, lengths,
        )  # fmt: skip

    def _execution_row(self, offset: int, event: pb.DebugEvent) -> tuple:
        """The digest row of one execution parsed by protobuf (the vectorised path's fallback)."""
        execution = event.execution
        flags = HAS_ERROR if execution.error else 0
        for summary in execution.outputs:
            try:
                counts = nonfinite_counts(execution.tensor_debug_mode, summary.debug_values)
            except (ValueError, OverflowError):  # a NaN or huge count: the summary says nothing
                counts = None
            if counts is not None:
                flags |= HEALTH_KNOWN
                if any(counts):
                    flags |= NONFINITE
        fid = self._function_id(execution.function_name)
        return (
            execution.index,
            execution.graph_id,
            event.wall_time,
            offset,
            execution.num_traces,
            execution.duration_us,
            fid,
            execution.call_number,
            execution.vm,
            flags,
        )

    @staticmethod
    def _trace_row(offset: int, event: pb.DebugEvent) -> tuple:
        """The digest row of one trace parsed by protobuf (the vectorised path's fallback)."""
        t = event.graph_execution_trace
        try:
            counts = nonfinite_counts(t.tensor_debug_mode, t.debug_values)
        except (ValueError, OverflowError):  # a NaN or huge count: the summary says nothing
            counts = None
        if counts is None and spec(t.tensor_debug_mode).values and t.HasField("tensor_value"):
            counts = value_nonfinite_counts(t.tensor_value)
        flags = HAS_ERROR if t.error else 0
        if len(t.inner_nonfinite):
            flags |= INNER_NONFINITE
        if counts is None:
            counts = (-1, -1, -1)
        else:
            flags |= HEALTH_KNOWN
            if any(counts):
                flags |= NONFINITE
        return (
            t.index,
            t.op_id,
            t.execution_index,
            event.wall_time,
            offset,
            *counts,
            t.duration_us,
            t.output_slot,
            flags,
        )

    def close(self) -> None:
        for f in self._files.values():
            f.close()

    # -- queries ---------------------------------------------------------------------------

    @property
    def updating(self) -> bool:
        """True while an update() is reading new records (e.g. the first indexing of a dump)."""
        return self._update_lock.locked()

    # -- completeness ----------------------------------------------------------------------

    def completeness(self) -> completeness.Completeness:
        """Whether this dump is complete, live or incomplete, and what is missing where
        (see events/completeness.py). Derived from what update() has read."""
        with self._lock:
            key = (
                self._executions.size,
                self._traces.size,
                len(self.corruptions),
                tuple(self.tails()),
                self.run_end is not None,
                tuple(self.stream_errors),
                len(self._frames),
                len(self._ops),
                len(self._source_files),
            )
        cached = self._reusable_completeness(key, self._completeness_ttl)
        if cached is not None:
            return cached
        if not self._assessing.acquire(blocking=False):
            # Another request is assessing: while a live run only grows, its previous verdict
            # stands until then (a crowd of requests costs one assessment, not one each). Never
            # waits: the caller may hold the run's lock, which the assessment takes.
            cached = self._reusable_completeness(key, float("inf"))
            return cached if cached is not None else self._assess(key)
        try:
            return self._assess(key)
        finally:
            self._assessing.release()

    def _assess(self, key: tuple) -> completeness.Completeness:
        started = time.monotonic()
        result = completeness.assess(self)
        now = time.monotonic()
        # A verdict that took long (a pass over millions of digests) is reused for longer
        # while the run grows: assessing costs at most a tenth of a core.
        self._completeness_ttl = max(_COMPLETENESS_TTL, 10 * (now - started))
        self._completeness = (key, now, result)
        return result

    def _reusable_completeness(self, key: tuple, ttl: float) -> completeness.Completeness | None:
        cached = self._completeness
        if cached is not None and time.monotonic() - cached[1] < ttl:
            # While a running writer's dump grows (counts, tails), reuse the verdict for a moment
            # (it costs a pass over the trace digests); never when damage, errors or the end appeared.
            old = cached[0]
            if old == key or (old[2], old[4], old[5]) == (key[2], key[4], key[5]) and cached[2].ended == "running":
                return cached[2]
        return None

    def places_read(self) -> dict[str, int]:
        """Per stream, the place (DebugEvent.sequence; a trace's index) after the last record
        read in order: what the RunEnd's record counts are checked against."""
        with self._lock:
            return {s: order.expected for s, order in self._orders.items()}

    def ring_drops(self, stream: str) -> list[tuple[int, int, int]]:
        """Where the circular buffer dropped records of a ring stream: (the digest row after
        the drop, first place, count), in file order."""
        with self._lock:
            return list(self._ring_drops[stream])

    def tails(self) -> list[tuple[str, int, int]]:
        """(path, bytes read as whole records, file size) per stream file."""
        return [(f.path, f.offset, f.size) for f in self._files.values() if f.source.opened]

    def open_stream(self, stream: str) -> storage.Follower:
        """A follower of one of the run's streams of its own (its own file handle or listing),
        for bulk reads by stream offset beside the reader (events/trace_values.py)."""
        listing = storage.Listing(self._store, self.path)
        return storage.follower(self._store, self.path, layout.file_name(stream), listing, self.segmented)

    def grown_since_read(self) -> bool:
        """Whether a stream has grown (or was replaced) since it was last read."""
        for f in self._files.values():
            if f.source.opened:
                size = f.source.size_now()
                if size is not None and size != f.size:
                    return True
        return False

    def last_growth(self) -> float:
        """When a stream of the run last grew (s since the epoch; 0 when unknown)."""
        return max((f.source.modified() for f in self._files.values()), default=0.0)

    def _load_source_file(self, offset: int) -> pb.SourceFile:
        return self._files[layout.SOURCE_FILES].read_at(offset).source_file

    def execution(self, i: int) -> pb.Execution:
        """The full i-th execution in the dump (0 = oldest still kept)."""
        with self._lock:  # the row and the file generation it points into, together
            row = self._row(self._executions, i, "execution")
            return self._files[layout.EXECUTION].read_at(int(row["offset"])).execution

    def trace(self, i: int) -> pb.GraphExecutionTrace:
        """The full i-th graph execution trace in the dump (0 = oldest still kept)."""
        with self._lock:  # the row and the file generation it points into, together
            row = self._row(self._traces, i, "graph execution trace")
            return self._files[layout.GRAPH_EXECUTION_TRACES].read_at(int(row["offset"])).graph_execution_trace

    def traces(self, indices: Iterable[int]) -> list[pb.GraphExecutionTrace]:
        return [self.trace(int(i)) for i in indices]

    def start_time(self) -> float:
        """When the run started: its metadata record's wall time, else its directory's."""
        if self.metadata_wall_time is not None:
            return self.metadata_wall_time
        return self._files[layout.METADATA].source.modified()


class DebugDataReader:
    """Every run under a logdir (the logdir itself may be a run). Call `update()` to read
    what is new; new runs are discovered on each update."""

    def __init__(self, logdir: str | os.PathLike):
        """logdir: a local path or a URL (s3://, gs://, any fsspec URL). Raises
        storage.StoreUnavailableError when its file system is not installed."""
        self.logdir = os.fspath(logdir)
        self.store = storage.open_store(self.logdir)
        self._runs: dict[str, RunReader] = {}
        self._lock = threading.Lock()

    def discover(self) -> list[str]:
        """Finds new run directories without reading them (so observers can be added before
        the first read); returns the names of all runs."""
        with self._lock:
            found = layout.find_run_dirs(self.store)
            for name in found:
                if name not in self._runs:
                    self._runs[name] = RunReader(name, self.store.join(name), self.store)
            for name in set(self._runs) - set(found):  # its directory went: so does the run
                del self._runs[name]  # its files close when the last query using it ends
            return sorted(self._runs)

    def update(self) -> dict[str, dict[str, int]]:
        """Reads what is new in every run; returns {run: {stream: new records}}."""
        self.discover()
        with self._lock:
            runs = list(self._runs.values())
        counts = {}
        for run in runs:
            try:
                counts[run.name] = run.update()
                run.error = None
            except Exception as error:  # e.g. a file turned unreadable: keep the other runs going
                run.error = f"{type(error).__name__}: {error}"
                counts[run.name] = {}
        return counts

    def runs(self) -> list[str]:
        with self._lock:
            return sorted(self._runs)

    def run(self, name: str | None = None) -> RunReader:
        """The named run; without a name, the run choose() picks (the only one, or of several
        the one whose first NaN/Inf came first)."""
        if name is None:
            return self.choose()[0]
        with self._lock:
            try:
                return self._runs[name]
            except KeyError:
                raise KeyError(f"no run {name!r} in {self.logdir}") from None

    def choose(self) -> tuple[RunReader, str]:
        """The run to show when none is named, and why: one rule for run() and every CLI
        command. The only run; of several, the one whose first NaN or Inf (a kernel output, a
        function's result or an inner op of a replayed kernel) was recorded first, so a logdir
        where some run holds NaN/Inf never reads as clean; when no run recorded one, the run
        that started last. LookupError for a logdir without runs."""
        with self._lock:
            runs = sorted(self._runs.values(), key=lambda run: run.name)
        if not runs:
            raise LookupError(f"{self.logdir} holds no tvmdbg run")
        if len(runs) == 1:
            return runs[0], "the only run"
        first_bad = [(run.first_nonfinite_time(), run.name, run) for run in runs]
        bad = [entry for entry in first_bad if entry[0] is not None]
        if bad:
            chosen = min(bad, key=lambda entry: entry[:2])[2]
            if chosen.disco is not None:  # the first origin across the ranks of a disco job
                worker = chosen.disco
                ranks = len(self.job(worker.job_id))
                return chosen, (
                    f"rank {worker.rank} of disco job {worker.job_id} ({ranks} of {worker.world_size} ranks read), "
                    "whose first NaN/Inf was recorded first"
                )
            return chosen, "the run whose first NaN/Inf was recorded first"
        started = max(runs, key=lambda run: (run.start_time(), run.name))
        return started, "the newest run (no run recorded a NaN/Inf)"

    def ordered_runs(self) -> list[str]:
        """The runs' names in choose()'s order, one order for every command (`check`, `alerts`,
        the tab): those that recorded a NaN or Inf by when they recorded the first, then the
        others, newest first."""
        with self._lock:
            runs = sorted(self._runs.values(), key=lambda run: run.name)
        first_bad = [(run.first_nonfinite_time(), run) for run in runs]
        bad = sorted(
            (entry for entry in first_bad if entry[0] is not None), key=lambda entry: (entry[0], entry[1].name)
        )
        clean = [run for when, run in first_bad if when is None]
        clean.sort(key=lambda run: (run.start_time(), run.name), reverse=True)
        return [run.name for _, run in bad] + [run.name for run in clean]

    def job(self, job_id: str) -> list[RunReader]:
        """The runs of a disco job (tvmdbg_tb.disco) found so far, by rank."""
        with self._lock:
            runs = [run for run in self._runs.values() if run.disco is not None and run.disco.job_id == job_id]
        return sorted(runs, key=lambda run: (run.disco.rank, run.name))

    @property
    def corruptions(self) -> list[records.Corruption]:
        with self._lock:
            runs = list(self._runs.values())
        return [c for run in runs for c in run.corruptions]

    def close(self) -> None:
        for run in self._runs.values():
            run.close()

    def __enter__(self) -> DebugDataReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = [
    "DebugDataReader",
    "RunReader",
    "StaleRecordError",
    "UnreadableStreamError",
    "describe",
    "TRACE_DIGEST",
    "EXECUTION_DIGEST",
]
