"""Trace records framed in C++ (native_records.cc): the writer's per-record Python loop
(join, CRC32C, header) for a batch of traces, in one call.

Why: on a chain of tiny kernels framing the records was about half of tvmdbg's cost per
kernel, and all of it ran in the traced thread (moving it to the flushing thread only moved
it, and colder caches made it dearer). The bytes are the Python path's, record for record.

A CPython extension built by tvmdbg_tb.native in a background thread when a writer starts,
so no traced call ever waits for a compiler; until it is loaded, and without a compiler or
Python's headers or with TVMDBG_NATIVE_RECORDS=0, the writer frames in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

from tvmdbg_tb.events.trace_parts import TraceParts
from tvmdbg_tb.native import PythonExtension, source

ENV_SWITCH = "TVMDBG_NATIVE_RECORDS"  # "0": always frame in Python
MIN_BATCH = 2  # a single trace: the Python loop is as fast as the call

LIBRARY = PythonExtension(source("native_records.cc"), ENV_SWITCH, "native record framing")


# A tally's fields: the counters each call advances, then the writer's settings queue_call
# reads with them (constants of a writer: its lock, run key field, the pending bytes that wake
# its flushing thread, whether it counts calls' health), carried from tally to tally.
FIELDS = (
    "next_trace", "execution_sequence", "pending_bytes", "lock", "run_key_field", "eager_bytes", "counts_health"
)  # fmt: skip


class PythonTally:
    """native_records.Tally's fields (a writer's counters that each call advances, and its
    settings), kept in Python until the library is loaded."""

    __slots__ = FIELDS

    def __init__(self) -> None:
        self.next_trace = self.execution_sequence = self.pending_bytes = self.eager_bytes = 0
        self.lock = self.run_key_field = None
        self.counts_health = False


def tally(old: object | None = None) -> object:
    """A writer's tally (FIELDS), old's carried over: native once the library is loaded
    (queue_call then reads and advances it with no Python attribute round trip; a writer's
    native tally is never replaced), else a PythonTally; old itself when it is already the best."""
    module = LIBRARY.loaded()
    if module is None:
        return old if old is not None else PythonTally()
    if type(old) is module.Tally:
        return old
    new = module.Tally()
    if old is not None:
        for field in FIELDS:
            setattr(new, field, getattr(old, field))
    return new


def spool_type() -> type | None:
    """The type of the buffers queue_call queues each stream's records into (native_records.cc
    Spool: records end to end outside the allocator's heap), or None before the library is loaded."""
    module = LIBRARY.loaded()
    return None if module is None else module.Spool


def frame(prefix: bytes, payloads: Sequence[bytes], first: int) -> tuple[bytes, list[int]] | None:
    """The framed records of payloads (trace k gets index first + k; a list, or TraceParts
    whose payloads are never built) and each record's size; None to frame in Python: the
    library is not loaded (or switched off), or a list is too short to gain from it."""
    module = LIBRARY.loaded()
    if module is None:
        return None
    if isinstance(payloads, TraceParts):
        parts = payloads
        return module.frame_trace_parts(
            prefix, parts.statics, parts.which, parts.middle, parts.tails, parts.width, first
        )
    if len(payloads) >= MIN_BATCH:
        return module.frame_traces(prefix, payloads, first)
    return None
