"""The storage interface: the few operations a dump needs of where it lives."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple


class StoreUnavailableError(ValueError):
    """A logdir that cannot be used as given: a URL whose file system is not installed (the
    s3/gcs extras), or a local path that is a mangled URL."""


class Entry(NamedTuple):
    """One file of a directory listing. tag: what changes when the file's content does (an
    object's ETag or generation; a local file's inode, size and mtime)."""

    name: str
    size: int
    tag: str
    modified: float


class Store(ABC):
    """A local directory or a bucket prefix holding tvmdbg runs. Paths are full paths (a URL
    for object stores) built with join(); every operation may raise OSError."""

    remote: bool = False  # True: no appends; runs are written as sealed segments

    def __init__(self, root: str):
        self.root = root

    @abstractmethod
    def join(self, *parts: str) -> str:
        """A path below root (parts relative, '/'-separated)."""

    @abstractmethod
    def relpath(self, path: str) -> str:
        """path relative to root ('.' for root itself)."""

    @abstractmethod
    def isdir(self, path: str) -> bool:
        """Whether path is a directory (on an object store: a prefix holding objects)."""

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def listdir(self, path: str) -> dict[str, Entry]:
        """The files directly in directory path, fresh (never a cached listing); {} when none."""

    @abstractmethod
    def find_dirs_holding(self, names: tuple[str, ...], max_depth: int) -> list[str]:
        """Directories at or under root (hidden ones and symlinks skipped) holding one of the
        streams names (a file, or its segments), relative to root ('.': root), sorted."""

    @abstractmethod
    def read(self, path: str, offset: int, length: int) -> bytes:
        """Up to length bytes of path from offset."""

    @abstractmethod
    def put_file(self, path: str, local_path: str) -> None:
        """Uploads a whole local file as path (replacing it)."""

    @abstractmethod
    def put(self, path: str, data: bytes) -> None: ...

    @abstractmethod
    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Creates path holding data unless it exists (atomically where the store can);
        False when it existed."""

    @abstractmethod
    def delete(self, path: str) -> None:
        """Removes path; no error when it is gone already."""
