"""Trace records framed in C++ (native_records.cc): the writer's per-record Python loop
(join, CRC32C, header) for a batch of traces, in one call.

Why: on a chain of tiny kernels framing the records was about half of tvmdbg's cost per
kernel, and all of it ran in the traced thread (moving it to the flushing thread only moved
it, and colder caches made it dearer). The bytes are the Python path's, record for record.

Built by tvmdbg_tb.native in a background thread when a writer starts in a process that
has imported tvm, so no traced call ever waits for a compiler; until it is loaded, and
without a compiler or with TVMDBG_NATIVE_RECORDS=0, the writer frames in Python.
"""

from __future__ import annotations

import struct
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from tvmdbg_tb.events.trace_parts import TraceParts
from tvmdbg_tb.native import NativeLibrary

ENV_SWITCH = "TVMDBG_NATIVE_RECORDS"  # "0": always frame in Python
MIN_BATCH = 6  # smaller batches: the call's fixed cost (~2.7 us) exceeds the Python loop's

LIBRARY = NativeLibrary(Path(__file__).with_name("native_records.cc"), ENV_SWITCH, "native record framing")
_started = threading.Event()


def start_loading() -> None:
    """Builds (first time on this machine) and loads the library in a background thread,
    once per process, if tvm is already imported (the library links against tvm_ffi)."""
    if _started.is_set() or "tvm" not in sys.modules or not LIBRARY.enabled():
        return
    _started.set()
    threading.Thread(target=LIBRARY.load, name="tvmdbg-native-build", daemon=True).start()


def frame_traces(prefix: bytes, payloads: Sequence[bytes], first: int) -> tuple[memoryview, list[int]] | None:
    """The framed records of payloads (trace k gets index first + k) and each record's size,
    or None to frame in Python (library not loaded, or switched off since)."""
    module = LIBRARY.loaded()
    if module is None or not LIBRARY.enabled():
        return None
    count = len(payloads)
    lengths = struct.pack(f"<{count}I", *map(len, payloads))
    out = memoryview(module.frame_traces(prefix, b"".join(payloads), lengths, first))
    return out[8 * count :], out[: 8 * count].cast("Q").tolist()


def frame_parts(prefix: bytes, parts: TraceParts, first: int) -> tuple[memoryview, list[int]] | None:
    """frame_traces for traces given as parts: no payload is built in Python."""
    module = LIBRARY.loaded()
    if module is None or not LIBRARY.enabled():
        return None
    blob, offsets = parts.table
    out = memoryview(
        module.frame_trace_parts(
            prefix, blob, offsets, parts.which.tobytes(), parts.middle, parts.tails, parts.width, first
        )
    )
    count = len(parts)
    return out[8 * count :], out[: 8 * count].cast("Q").tolist()
