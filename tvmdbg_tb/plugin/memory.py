"""Keeps TensorBoard's memory close to what the plugin really holds, under many clients.

TensorBoard answers each request on its own thread. glibc's malloc gives threads arenas of
their own (up to 8 per core) and, after a large block is freed, raises its mmap threshold to
that block's size (up to 32 MiB), so the numpy temporaries of later requests come from the
arenas and stay resident once freed. Measured with 32 clients on a 2M-trace run
(bench/bench_load.py), TensorBoard's RSS rose from ~310 MB to ~900 MB while the live Python and
numpy memory stayed under ~250 MB. A fixed mmap threshold (blocks of 256 KiB and more are
mapped and returned to the system when freed) and two arenas keep RSS near the live memory.
This is TensorBoard's process, so the setting is applied once, only on glibc, and only when
the user has not chosen their own (MALLOC_ARENA_MAX / MALLOC_MMAP_THRESHOLD_ in the environment).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading

logger = logging.getLogger("tvmdbg.plugin")

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameters (malloc.h)
_M_ARENA_MAX = -8
MMAP_THRESHOLD = 256 << 10
ARENA_MAX = 2
_DONE = threading.Event()


def limit_allocator_retention() -> bool:
    """Sets the glibc malloc parameters above (once per process); False where not applied."""
    if _DONE.is_set():
        return True
    _DONE.set()
    if os.environ.get("MALLOC_ARENA_MAX") or os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return False  # the user's choice
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if not hasattr(libc, "gnu_get_libc_version"):
            return False  # not glibc: its allocator behaves otherwise
        ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and libc.mallopt(_M_ARENA_MAX, ARENA_MAX) == 1
    except (OSError, AttributeError) as error:
        logger.debug("tvmdbg: malloc parameters not set: %r", error)
        return False
    return bool(ok)
