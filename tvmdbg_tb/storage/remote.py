"""Any fsspec file system (s3://, gs://, memory://, ...): objects, never appended to.

fsspec and the scheme's own package (s3fs, gcsfs) are imported only when a URL is opened:
they are optional extras, and an ImportError at import time of the TensorBoard plugin would
take all of TensorBoard down. Listings are always fresh (fsspec caches them per instance).
Endpoints: AWS_ENDPOINT_URL (as boto3 and s3fs read it), else TensorBoard's S3_ENDPOINT, so
one variable serves both; STORAGE_EMULATOR_HOST for a GCS emulator (gcsfs reads it).
"""

from __future__ import annotations

import datetime
import functools
import os
import posixpath

from tvmdbg_tb.storage import segments
from tvmdbg_tb.storage.base import Entry, Store, StoreUnavailableError

# The tvmdbg extra that brings each scheme's file system (pyproject's optional extras).
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}


def _as_oserror(method):
    """Every failure of the file system as an OSError naming the path: botocore and aiohttp
    raise their own exceptions for a refused connection or bad credentials, and callers
    (the writer's uploads, the reader's update) treat OSError as 'the storage failed'."""

    @functools.wraps(method)
    def wrapped(self, path, *args, **kwargs):
        try:
            return method(self, path, *args, **kwargs)
        except OSError:
            raise
        except Exception as error:
            raise OSError(f"{path}: {type(error).__name__}: {error}") from error

    return wrapped


def _options(protocol: str) -> dict:
    """The endpoint passed explicitly: it is then part of fsspec's key for its cached file
    system instances, so a process never reuses an instance made for another endpoint."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("S3_ENDPOINT")
    if protocol in ("s3", "s3a") and endpoint:
        return {"client_kwargs": {"endpoint_url": endpoint}}
    if protocol in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST"):
        return {"token": "anon"}  # an emulator (gcsfs reads its address itself) takes no credentials
    return {}


def _modified(info: dict) -> float:
    for key in ("LastModified", "updated", "mtime", "created"):
        value = info.get(key)
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.timezone.utc)
            return value.timestamp()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return 0.0


def _tag(info: dict) -> str:
    for key in ("ETag", "etag", "generation", "md5Hash"):
        if info.get(key):
            return str(info[key])
    return f"{info.get('size')}:{_modified(info)}"


class FsspecStore(Store):
    remote = True

    def __init__(self, root: str):
        super().__init__(root)
        protocol = root.split("://", 1)[0].lower()
        try:
            import fsspec

            self.fs = fsspec.filesystem(protocol, **_options(protocol))
        except (ImportError, ValueError) as error:
            extra = EXTRAS.get(protocol)
            hint = f": pip install 'tvmdbg[{extra}]'" if extra else f" for {protocol}://"
            raise StoreUnavailableError(
                f"{root}: cannot open {protocol}:// ({error}); install its file system{hint}"
            ) from None
        self.protocol = protocol
        self._root_key = self._key(root)

    def _key(self, path: str) -> str:
        """path as the file system names it (no protocol)."""
        return self.fs._strip_protocol(path).rstrip("/")

    def join(self, *parts: str) -> str:
        parts = tuple(p for p in parts if p and p != ".")
        return posixpath.join(self.root, *parts) if parts else self.root

    def relpath(self, path: str) -> str:
        return posixpath.relpath(self._key(path), self._root_key) if self._key(path) != self._root_key else "."

    @_as_oserror
    def isdir(self, path: str) -> bool:
        self.fs.invalidate_cache(self._key(path))
        return self.fs.isdir(self._key(path))

    @_as_oserror
    def exists(self, path: str) -> bool:
        self.fs.invalidate_cache(self._key(path))
        return self.fs.exists(self._key(path))

    @_as_oserror
    def listdir(self, path: str) -> dict[str, Entry]:
        key = self._key(path)
        self.fs.invalidate_cache(key)
        try:
            infos = self.fs.ls(key, detail=True)
        except FileNotFoundError:
            return {}
        entries = {}
        for info in infos:
            if info.get("type") != "file":
                continue
            name = posixpath.basename(info["name"].rstrip("/"))
            entries[name] = Entry(name, int(info.get("size") or 0), _tag(info), _modified(info))
        return entries

    @_as_oserror
    def find_dirs_holding(self, names: tuple[str, ...], max_depth: int) -> list[str]:
        self.fs.invalidate_cache(self._root_key)
        try:
            keys = self.fs.find(self._root_key, detail=False)  # one flat listing, paged
        except FileNotFoundError:
            return []
        found = set()
        for key in keys:
            directory, name = posixpath.split(key.rstrip("/"))
            if not any(segments.is_stream_file(n, name) for n in names):
                continue
            rel = posixpath.relpath(directory, self._root_key) if directory != self._root_key else "."
            parts = [] if rel == "." else rel.split("/")
            if len(parts) <= max_depth and not any(p.startswith(".") for p in parts):
                found.add(rel)
        return sorted(found)

    @_as_oserror
    def read(self, path: str, offset: int, length: int) -> bytes:
        return self.fs.cat_file(self._key(path), start=offset, end=offset + length)

    @_as_oserror
    def put_file(self, path: str, local_path: str) -> None:
        self.fs.put_file(local_path, self._key(path))

    @_as_oserror
    def put(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(self._key(path), data)

    @_as_oserror
    def create_exclusive(self, path: str, data: bytes) -> bool:
        key = self._key(path)
        try:
            with self.fs.open(key, "xb") as f:  # S3: IfNoneMatch="*"; GCS: ifGenerationMatch=0
                f.write(data)
        except FileExistsError:
            return False
        except (ValueError, NotImplementedError):  # no exclusive create: checked, then written
            self.fs.invalidate_cache(key)
            if self.fs.exists(key):
                return False
            self.fs.pipe_file(key, data)
        return True

    @_as_oserror
    def delete(self, path: str) -> None:
        try:
            self.fs.rm_file(self._key(path))
        except FileNotFoundError:
            pass
