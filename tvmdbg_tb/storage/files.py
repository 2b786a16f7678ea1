"""Opening a dump's local files without trusting them.

A logdir may come from someone else (a shared bucket, a downloaded bug report): any of its
names can be a FIFO (an open that never returns), a device (`/dev/zero` reads forever), a
directory, or a symlink to any of those. A file is opened without blocking and kept only when
the file opened, not the name, is a regular file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator


class UnreadableStreamError(OSError):
    """A stream's path is not a regular file (a directory, a FIFO, a device): never read."""


def file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str, follow_symlinks: bool = True) -> int:
    """A read-only descriptor of the regular file at path. O_NONBLOCK: opening a FIFO returns
    at once (and is then refused) instead of waiting for a writer; the kind is taken from the
    open file (fstat), so a name swapped for a FIFO or a device between a check and the open
    is refused too. follow_symlinks=False refuses a symlink (O_NOFOLLOW). Raises
    FileNotFoundError, UnreadableStreamError, or OSError."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if not follow_symlinks and os.path.islink(path):
            raise UnreadableStreamError(f"{path} is a symbolic link") from None
        if error.errno == errno.ENXIO:  # a socket, or a FIFO opened with nobody at the other end
            raise UnreadableStreamError(f"{path} is not a regular file") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnreadableStreamError(f"{path} is not a regular file ({file_kind(mode)})")
        os.set_blocking(fd, True)  # reads of a regular file never wait; keep pread's usual behaviour
    except BaseException:
        os.close(fd)
        raise
    return fd


def next_data(fd: int, offset: int) -> int | None:
    """The first offset >= offset of the file that is not in a hole (None: only holes follow);
    offset itself where the file system does not tell (SEEK_DATA)."""
    try:
        return os.lseek(fd, offset, os.SEEK_DATA)
    except OSError as error:
        return None if error.errno == errno.ENXIO else offset


def holes(fd: int, start: int, stop: int) -> Iterator[tuple[int, int]]:
    """The [begin, end) holes of a sparse file in [start, stop): stretches it does not hold,
    which read as zeros (records.Holes). None where the file system does not tell."""
    while start < stop:
        try:
            begin = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError:
            return
        if begin >= stop:
            return
        end = next_data(fd, begin)
        end = stop if end is None else min(end, stop)
        if end <= begin:
            return
        yield begin, end
        start = end
