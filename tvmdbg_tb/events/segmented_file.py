"""A run's record streams on an object store: sealed segments, staged locally, uploaded.

Object stores cannot append (an s3fs file is invisible until closed; gcsfs turns an append
into an overwrite), so each stream appends to its open segment, a file in a local staging
directory, and a seal closes the open segment of every stream, in layout.WRITE_ORDER, and
queues them for upload (storage/uploader.py, one at a time in that order): so a reader never
lists a call whose traces are not uploaded yet. Seals come by size (any open segment over
segment_bytes), by time (seal_seconds: a live run shows up), at the first write (the
metadata: the run can be found) and at close. Nothing is uploaded twice. The circular buffer
drops whole sealed segments, each replaced by a marker holding a RecordsDropped record, and
never a segment holding a call it keeps whole (the first NaN/Inf calls).
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tvmdbg_tb import storage
from tvmdbg_tb.events import layout
from tvmdbg_tb.events.record_file import join_chunks
from tvmdbg_tb.storage import segments

SEGMENT_BYTES = 8 << 20
SEAL_SECONDS = 5.0
UPLOAD_TIMEOUT = 60.0  # seconds close() waits for the uploads (TVMDBG_UPLOAD_TIMEOUT)
# The object whose exclusive creation claims a run's name on a store (os.mkdir's part locally).
RUN_CLAIM = "tvmdbg.run"


@dataclass
class Segment:
    """A sealed segment: its number, the sequences [first, first + count) it holds, its size."""

    number: int
    first: int
    count: int
    size: int
    kept: bool = False  # holds a record the ring keeps whole
    dropped: bool = False  # replaced by a drop marker


class SegmentedRecordFile:
    """One stream as segments: the record-file interface the writer uses (events/record_file.py)."""

    def __init__(self, run: SegmentedRun, stem: str, ring: bool):
        self.run = run
        self.stem = stem
        self.ring = ring
        self.path = storage.join(run.run_dir, stem)
        self.size = 0  # bytes appended, in all segments
        self.sealed: list[Segment] = []
        self.handle = None  # the open segment's staged file
        self.open_count = 0
        self.open_size = 0
        self._first = 0  # the sequence of the open segment's first record
        self._number = 0

    def _remote(self, number: int) -> str:
        return storage.join(self.run.run_dir, segments.segment_name(self.stem, number))

    def append(self, chunks: list) -> None:
        data, ends = join_chunks(chunks, self.size, True)
        if not data:
            return
        if self.handle is None:
            self.handle = open(os.path.join(self.run.staging, segments.segment_name(self.stem, self._number)), "wb")
        self.handle.write(data)
        self.open_count += len(ends)
        self.open_size += len(data)
        self.size += len(data)

    def flush(self, fsync: bool = False) -> None:
        if self.handle is not None:
            self.handle.flush()
            if fsync:
                os.fsync(self.handle.fileno())

    def seal(self) -> None:
        """Closes the open segment and queues its upload."""
        if self.handle is None:
            return
        local = self.handle.name
        self.handle.close()
        self.handle = None
        self.run.uploader.put_file(self._remote(self._number), local)
        self.sealed.append(Segment(self._number, self._first, self.open_count, self.open_size))
        self._first += self.open_count
        self._number += 1
        self.open_count = self.open_size = 0

    @property
    def dropped(self) -> int:
        """Records the ring dropped."""
        return sum(s.count for s in self.sealed if s.dropped)

    def newest(self) -> tuple[int, int]:
        """(records, bytes) the ring may still drop, and the open segment's."""
        live = [s for s in self.sealed if not s.dropped and not s.kept]
        return sum(s.count for s in live) + self.open_count, sum(s.size for s in live) + self.open_size

    def compact(
        self, max_records: int, max_bytes: int, kept: Sequence[tuple[int, int]], marker: Callable[[int, int], bytes]
    ) -> None:
        """Drops the oldest sealed segments while the newer records still hold max_records
        (or, past max_bytes, any) of them, skipping segments that hold a sequence in kept;
        each dropped segment's place holds a marker (marker(first, count)) from then on."""
        records, size = self.newest()
        for segment in self.sealed:
            if segment.dropped or segment.kept:
                continue
            if any(low < segment.first + segment.count and high >= segment.first for low, high in kept):
                segment.kept = True
                records, size = records - segment.count, size - segment.size
                continue
            rest = records - segment.count
            if rest < 1 or not ((max_records > 0 and rest >= max_records) or size > max_bytes):
                break
            remote = self._remote(segment.number)
            self.run.uploader.put_bytes(
                storage.join(self.run.run_dir, segments.dropped_name(self.stem, segment.number)),
                marker(segment.first, segment.count),
            )
            if not self.run.uploader.cancel(remote):
                self.run.uploader.delete(remote)
            segment.dropped = True
            records, size = rest, size - segment.size

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class SegmentedRun:
    """A run's streams on a store, claimed there by exclusive create, staged in a local
    directory and uploaded in the background."""

    def __init__(self, store: storage.Store, base: str, ring_streams: Sequence[str]):
        self.store = store
        self.run_id, self.run_dir = self._claim(base)
        self.staging = tempfile_dir(self.run_id)
        self.uploader = storage.Uploader(store)
        self.segment_bytes = _env_number("TVMDBG_SEGMENT_BYTES", SEGMENT_BYTES, int)
        self.seal_seconds = _env_number("TVMDBG_SEAL_SECONDS", SEAL_SECONDS, float)
        self.upload_timeout = _env_number("TVMDBG_UPLOAD_TIMEOUT", UPLOAD_TIMEOUT, float)
        self.files = {s: SegmentedRecordFile(self, layout.file_name(s), s in ring_streams) for s in layout.STREAMS}
        self._last_seal = time.monotonic()
        self._sealed_once = False

    def _claim(self, base: str) -> tuple[str, str]:
        """A fresh run name under the store's root: base, or base-1, base-2, ... if taken."""
        for attempt in range(1000):
            name = base if attempt == 0 else f"{base}-{attempt}"
            if self.store.create_exclusive(self.store.join(name, RUN_CLAIM), b""):
                return name, self.store.join(name)
        raise FileExistsError(f"no free run name under {self.store.root} for {base!r}")

    def after_write(self) -> None:
        """Seals when due: the first write, an open segment past segment_bytes, or
        seal_seconds since the last seal."""
        opened = [f for f in self.files.values() if f.open_size]
        if not opened:
            return
        due = (
            not self._sealed_once
            or any(f.open_size >= self.segment_bytes for f in opened)
            or time.monotonic() - self._last_seal >= self.seal_seconds
        )
        if due:
            self.seal()

    def seal(self) -> None:
        for stream in layout.WRITE_ORDER:
            self.files[stream].seal()
        self._sealed_once = True
        self._last_seal = time.monotonic()

    def finish(self) -> tuple[bool, str | None]:
        """Seals everything and waits for the uploads (at most upload_timeout): (all done,
        why the dump in the store is incomplete, or None)."""
        self.seal()
        done = self.uploader.drain(self.upload_timeout)
        if not done:
            return (
                False,
                f"{self.uploader.pending} uploads to {self.store.root} did not finish in {self.upload_timeout:g} s",
            )
        if self.uploader.lost:
            return True, f"{len(self.uploader.lost)} segments could not be uploaded to {self.store.root}"
        return True, None

    def close(self) -> None:
        """Stops the uploads; the staging directory goes when nothing is left in it."""
        self.uploader.close()
        for record_file in self.files.values():
            record_file.close()
        left = os.listdir(self.staging) if os.path.isdir(self.staging) else []
        if not left:
            shutil.rmtree(self.staging, ignore_errors=True)
        elif not self.uploader.pending:
            warnings.warn(
                f"tvmdbg: {len(left)} segments of {self.run_dir} were not uploaded; they are kept in {self.staging}",
                RuntimeWarning,
                stacklevel=2,
            )


def tempfile_dir(run_id: str) -> str:
    """A fresh staging directory (under TVMDBG_STAGING_DIR, else the system's temporary one)."""
    import tempfile

    return tempfile.mkdtemp(prefix=f"tvmdbg-staging-{run_id[:80]}-", dir=os.environ.get("TVMDBG_STAGING_DIR") or None)


def _env_number(name: str, default, kind):
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        warnings.warn(f"tvmdbg: {name}={text!r} is not a number; using {default}", RuntimeWarning, stacklevel=3)
        return default
    return value if value > 0 else default
