"""A logdir given as a path or a URL: which store holds it, and paths below it."""

from __future__ import annotations

import os
import posixpath
import re

from tvmdbg_tb.storage.base import Store, StoreUnavailableError

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")
# "s3://bucket/x" after os.path.normpath: "s3:/bucket/x". Created as a local path it would
# make a directory "s3:" under the current one, and the user would believe the logs are in
# the bucket.
_MANGLED_URL = re.compile(r"^(?:\./)?([A-Za-z][A-Za-z0-9+.-]+):/+")


def is_url(location: str | os.PathLike) -> bool:
    """Whether location names an fsspec file system (scheme://...) rather than a local path."""
    return isinstance(location, str) and bool(_URL.match(location))


def check_location(location: str | os.PathLike) -> str:
    """location as the writer and readers use it: a URL unchanged but for a trailing '/', a
    local path made absolute. Raises StoreUnavailableError for a local path that is a mangled
    URL ("s3:/bucket/x"): never created."""
    text = os.fspath(location)
    if is_url(text):
        return text.rstrip("/") if not text.endswith("://") else text
    mangled = _MANGLED_URL.match(text)
    if mangled and len(mangled.group(1)) > 1:  # not a Windows drive letter
        raise StoreUnavailableError(
            f"logdir {text!r} looks like a URL whose '//' was lost (os.path.normpath makes "
            f"'{mangled.group(1)}://bucket/x' into '{mangled.group(1)}:/bucket/x'); pass the URL itself, "
            f"e.g. '{mangled.group(1)}://{text[mangled.end() :]}'"
        )
    return os.path.abspath(text)


def join(base: str, *parts: str) -> str:
    """A path below base: '/'-joined for a URL, os.path.join for a local path."""
    parts = tuple(p for p in parts if p and p != ".")
    if is_url(base):
        return posixpath.join(base, *parts) if parts else base
    return os.path.join(base, *parts)


def open_store(location: str | os.PathLike) -> Store:
    """The store holding location: LocalStore for a path, FsspecStore for a URL (its file
    system imported now, lazily: s3fs and gcsfs are optional extras)."""
    text = check_location(location)
    if is_url(text):
        from tvmdbg_tb.storage.remote import FsspecStore

        return FsspecStore(text)
    from tvmdbg_tb.storage.local import LocalStore

    return LocalStore(text)


def location_problem(location: str | os.PathLike) -> str | None:
    """Why location cannot be read as a logdir, in a few words ('no such directory', 'not a
    directory', a missing file system), or None. On an object store: whether anything is
    stored under the prefix yet."""
    try:
        store = open_store(location)
    except StoreUnavailableError as error:
        return str(error)
    try:
        if store.isdir(store.root):
            return None
        if not store.remote and store.exists(store.root):
            return "not a directory"
    except OSError as error:
        return f"cannot be listed ({error})"
    return "nothing stored under this prefix (yet)" if store.remote else "no such directory"
