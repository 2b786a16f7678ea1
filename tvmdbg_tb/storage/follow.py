"""Following a stream as it grows: a local file, or a stream's segments in a store.

The reader asks a Follower two things: what is there now (current(): whether the stream was
replaced since, so everything must be read again, and its size), and bytes at an offset
(read()). Both layouts answer them, so one reader and one record-framing code path serve
local and object storage.
"""

from __future__ import annotations

import bisect
import os
import stat
from typing import Protocol

from tvmdbg_tb.storage import segments
from tvmdbg_tb.storage.base import Entry, Store
from tvmdbg_tb.storage.files import UnreadableStreamError, file_kind, holes, next_data, open_regular
from tvmdbg_tb.storage.locations import join


class Follower(Protocol):
    path: str  # the stream's name in messages (a file path, or a URL without segment number)

    @property
    def opened(self) -> bool:
        """Whether current() found the stream at least once."""

    def current(self, read_to: int) -> tuple[bool, int] | None:
        """(replaced, size) of the stream now; replaced: not the stream read so far (a ring
        compaction or drop), or shorter than read_to. None while there is no stream."""

    def read(self, offset: int, length: int) -> bytes:
        """Up to length bytes from offset, in the stream current() last found."""

    def length(self) -> int:
        """The size of the stream current() last found (what read() can reach)."""

    def data_from(self, offset: int) -> int | None:
        """The first offset >= offset not in a hole of a sparse file (None: only holes follow)."""

    def holes(self, start: int, stop: int):
        """The holes of a sparse file in [start, stop), as (begin, end) pairs (records.Holes)."""

    def size_now(self) -> int | None:
        """The stream's size looked up afresh, None when it is gone."""

    def modified(self) -> float:
        """When the stream last grew (s since the epoch), 0 when unknown."""

    def close(self) -> None: ...


class FileFollower:
    """A local append-only file, replaced atomically by the writer's ring compaction."""

    def __init__(self, path: str):
        self.path = path
        self.fd: int | None = None
        self.inode: tuple[int, int] | None = None

    @property
    def opened(self) -> bool:
        return self.inode is not None

    def current(self, read_to: int) -> tuple[bool, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableStreamError(f"{self.path} is not a regular file ({file_kind(st.st_mode)})")
        reset = False
        if (st.st_dev, st.st_ino) != self.inode or st.st_size < read_to:
            reset = self.inode is not None
            self._reopen()
        return reset, os.fstat(self.fd).st_size

    def _reopen(self) -> None:
        """Opens the file now at the path, only if it is a regular file (storage/files.py).
        Its identity is taken from the file opened, not from the stat before: the writer may
        replace the file in between, and the file then stat'ed, unlinked and closed, frees its
        inode number for a later replacement to reuse; taken from the stat, the reader would
        follow a dead file as if current."""
        fd = open_regular(self.path)
        if self.fd is not None:
            os.close(self.fd)
        self.fd = fd
        st = os.fstat(fd)
        self.inode = (st.st_dev, st.st_ino)

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self.fd, length, offset)

    def length(self) -> int:
        return os.fstat(self.fd).st_size

    def data_from(self, offset: int) -> int | None:
        return next_data(self.fd, offset)

    def holes(self, start: int, stop: int):
        return holes(self.fd, start, stop)

    def size_now(self) -> int | None:
        try:
            return os.stat(self.path).st_size
        except OSError:
            return None

    def modified(self) -> float:
        try:
            return os.lstat(self.path).st_mtime
        except OSError:
            return 0.0

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


# Segments up to this size are fetched whole (the writer seals at 8 MiB by default).
_WHOLE_SEGMENT_BYTES = 64 << 20


class Listing:
    """One directory's files as last listed: a run's streams read their segments from one
    listing per update (one LIST request, not one per stream)."""

    def __init__(self, store: Store, directory: str):
        self.store = store
        self.directory = directory
        self.entries: dict[str, Entry] | None = None

    def refresh(self) -> dict[str, Entry]:
        self.entries = self.store.listdir(self.directory)
        return self.entries

    def current(self) -> dict[str, Entry]:
        return self.entries if self.entries is not None else self.refresh()


class SegmentFollower:
    """A stream kept as sealed segments (storage/segments.py), read as their concatenation.
    Segments never change once written, so what was read stays valid while the listing
    shows the same segments (names and tags) in front; anything else (a segment dropped by
    the ring, replaced, gone) makes the stream read again from its start."""

    def __init__(self, store: Store, directory: str, stem: str, listing: Listing):
        self.store = store
        self.directory = directory
        self.stem = stem
        self.path = join(directory, stem)
        self._listing = listing
        self._segments: list[Entry] = []  # the effective segments, in order
        self._starts: list[int] = []  # each one's offset in the stream
        self._cached: tuple[str, str, bytes] | None = None  # (name, tag, content) of the last segment read
        self._opened = False

    @property
    def opened(self) -> bool:
        return self._opened

    def _effective(self, entries: dict[str, Entry]) -> list[Entry]:
        """The stream's segments by number, a drop marker taking its segment's place."""
        chosen: dict[int, Entry] = {}
        for name, entry in entries.items():
            parsed = segments.parse(self.stem, name)
            if parsed is None:
                continue
            number, dropped = parsed
            if dropped or number not in chosen:
                chosen[number] = entry
        return [chosen[n] for n in sorted(chosen)]

    def current(self, read_to: int) -> tuple[bool, int] | None:
        found = self._effective(self._listing.current())
        if not found and not self._opened:
            return None
        known = [(e.name, e.tag) for e in self._segments]
        reset = self._opened and [(e.name, e.tag) for e in found[: len(known)]] != known
        self._segments = found
        self._starts, total = [], 0
        for entry in found:
            self._starts.append(total)
            total += entry.size
        self._opened = True
        if total < read_to and not reset:
            reset = True
        return reset, total

    def read(self, offset: int, length: int) -> bytes:
        out = []
        index = bisect.bisect_right(self._starts, offset) - 1
        while length > 0 and 0 <= index < len(self._segments):
            entry, start = self._segments[index], self._starts[index]
            inner = offset - start
            if inner < entry.size:
                piece = self._piece(entry, inner, length)
                out.append(piece)
                offset += len(piece)
                length -= len(piece)
                if inner + len(piece) < entry.size:
                    break  # a shorter object than listed: read what there is
            index += 1
        return b"".join(out)

    def _piece(self, entry: Entry, offset: int, length: int) -> bytes:
        """Bytes of one segment: a segment of the writer's size is fetched whole and kept (the
        reader reads front to back, then records near each other); a larger object, which no
        tvmdbg writer makes, only by ranges, so a hostile bucket costs no memory."""
        path = join(self.directory, entry.name)
        if entry.size > _WHOLE_SEGMENT_BYTES:
            return self.store.read(path, offset, min(length, entry.size - offset))
        if self._cached is None or self._cached[:2] != (entry.name, entry.tag):
            self._cached = (entry.name, entry.tag, self.store.read(path, 0, entry.size))
        return self._cached[2][offset : offset + length]

    def length(self) -> int:
        return sum(e.size for e in self._segments)

    def data_from(self, offset: int) -> int | None:
        return offset  # objects have no holes

    def holes(self, start: int, stop: int):
        return iter(())

    def size_now(self) -> int | None:
        found = self._effective(self.store.listdir(self.directory))
        return sum(e.size for e in found) if found else None

    def modified(self) -> float:
        return max((e.modified for e in self._segments), default=0.0)

    def close(self) -> None:
        self._cached = None


def is_segmented(store: Store, directory: str, metadata_stem: str, listing: Listing | None = None) -> bool:
    """Whether the run in directory is kept as segments: always on an object store; locally
    when it has no metadata file but metadata segments (a run copied down from a bucket)."""
    if store.remote:
        return True
    entries = (listing or Listing(store, directory)).current()
    return metadata_stem not in entries and any(segments.parse(metadata_stem, n) for n in entries)


def follower(store: Store, directory: str, stem: str, listing: Listing, segmented: bool) -> Follower:
    """The follower of stream stem of the run in directory, in the run's layout."""
    if segmented:
        return SegmentFollower(store, directory, stem, listing)
    return FileFollower(join(directory, stem))
