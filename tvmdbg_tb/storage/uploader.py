"""Uploads a run's sealed segments from a local staging directory, on one background thread.

The traced program only ever writes local files and queues them here: it never waits for
the network and never sees its errors. Uploads run one at a time in the order queued, which
is the order readers rely on (a call's traces before the call, everything before the RunEnd).
A failing upload is retried with backoff, then counted as lost with a warning; past
max_pending_bytes of staged data waiting, new segments are refused (lost) rather than
filling the disk. The writer marks a dump with lost segments incomplete, never clean.
"""

from __future__ import annotations

import collections
import os
import threading
import time
import warnings
from typing import NamedTuple

from tvmdbg_tb.storage.base import Store

DEFAULT_MAX_PENDING_BYTES = 1 << 30
DEFAULT_RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
UPLOAD_NICENESS = 10


class _Task(NamedTuple):
    kind: str  # "file", "bytes" or "delete"
    path: str  # in the store
    local: str | None = None  # staged file, removed once uploaded
    data: bytes = b""
    size: int = 0


class Uploader:
    """Puts files and bytes into a store in the order queued. Thread-safe."""

    def __init__(
        self,
        store: Store,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        retry_delays: tuple[float, ...] = DEFAULT_RETRY_DELAYS,
    ):
        self.store = store
        self.max_pending_bytes = max_pending_bytes
        self.retry_delays = retry_delays
        self.lost: list[str] = []  # paths that could not be uploaded (or were refused)
        self.uploaded_bytes = 0  # bytes put into the store (markers and segments)
        self._queue: collections.deque[_Task] = collections.deque()
        self._pending_bytes = 0
        self._busy = False
        self._closed = False
        self._warned_retry = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="tvmdbg-upload", daemon=True)
        self._thread.start()

    def put_file(self, path: str, local: str) -> bool:
        """Queues the staged file local for upload as path (removed once uploaded); False,
        with a warning, when too much is waiting already (the file is kept, counted lost)."""
        size = os.path.getsize(local)
        with self._cond:
            if self._pending_bytes + size > self.max_pending_bytes and self._queue:
                self.lost.append(path)
                refused = True
            else:
                self._queue.append(_Task("file", path, local, size=size))
                self._pending_bytes += size
                self._cond.notify()
                refused = False
        if refused:
            warnings.warn(
                f"tvmdbg: uploads to {self.store.root} are {self.max_pending_bytes >> 20} MiB behind; "
                f"{path} is not uploaded (kept in {local}): the dump is incomplete",
                RuntimeWarning,
                stacklevel=2,
            )
        return not refused

    def put_bytes(self, path: str, data: bytes) -> None:
        with self._cond:
            self._queue.append(_Task("bytes", path, data=data, size=len(data)))
            self._cond.notify()

    def delete(self, path: str) -> None:
        with self._cond:
            self._queue.append(_Task("delete", path))
            self._cond.notify()

    def cancel(self, path: str) -> bool:
        """Takes a file not uploaded yet off the queue (its staged copy removed); False when
        it is being uploaded or done."""
        with self._cond:
            for task in self._queue:
                if task.kind == "file" and task.path == path:
                    self._queue.remove(task)
                    self._pending_bytes -= task.size
                    _remove(task.local)
                    return True
        return False

    def drain(self, timeout: float) -> bool:
        """Waits until everything queued is uploaded (or lost), at most timeout seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._queue) + self._busy

    def close(self) -> None:
        """Stops the thread once the queue is empty (what is left stays staged)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self) -> None:
        try:  # Linux: this thread only; the traced program keeps the CPU when none is free
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), UPLOAD_NICENESS)
        except (AttributeError, OSError):
            pass
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                task = self._queue.popleft()
                self._busy = True
            try:
                self._do(task)
            finally:
                with self._cond:
                    self._busy = False
                    if task.kind == "file":
                        self._pending_bytes -= task.size
                    self._cond.notify_all()

    def _do(self, task: _Task) -> None:
        for attempt in range(len(self.retry_delays) + 1):
            try:
                if task.kind == "file":
                    self.store.put_file(task.path, task.local)
                    _remove(task.local)
                elif task.kind == "bytes":
                    self.store.put(task.path, task.data)
                else:
                    self.store.delete(task.path)
                self.uploaded_bytes += task.size
                return
            except Exception as error:  # never let the thread die: the next segments still go
                if attempt == len(self.retry_delays):
                    if task.kind == "delete":
                        return  # a dropped segment left in place: readers take its marker instead
                    self.lost.append(task.path)
                    kept = f" (kept in {task.local})" if task.local else ""
                    warnings.warn(
                        f"tvmdbg: could not upload {task.path}{kept}: {error}; the dump is incomplete",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                    return
                if not self._warned_retry:
                    self._warned_retry = True
                    warnings.warn(
                        f"tvmdbg: uploading {task.path} failed ({error}); retrying", RuntimeWarning, stacklevel=2
                    )
                time.sleep(self.retry_delays[attempt])


def _remove(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass
