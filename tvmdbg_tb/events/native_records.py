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


def frame(prefix: bytes, payloads: Sequence[bytes], first: int) -> tuple[memoryview, list[int]] | None:
    """The framed records of payloads (trace k gets index first + k; a list, or TraceParts
    whose payloads are never built) and each record's size; None to frame in Python: the
    library is not loaded or switched off, or a list is too short to gain from it."""
    module = LIBRARY.loaded()
    if module is None or not LIBRARY.enabled():
        return None
    count = len(payloads)
    if isinstance(payloads, TraceParts):
        blob, offsets = payloads.table
        out = module.frame_trace_parts(
            prefix, blob, offsets, payloads.which.tobytes(), payloads.middle, payloads.tails, payloads.width, first
        )
    elif count >= MIN_BATCH:
        lengths = struct.pack(f"<{count}I", *map(len, payloads))
        out = module.frame_traces(prefix, b"".join(payloads), lengths, first)
    else:
        return None
    view = memoryview(out)
    return view[8 * count :], view[: 8 * count].cast("Q").tolist()
