"""The tracing state: everything tracing holds while a process runs, in one object.

TVM's classes are patched once per process (the build hooks in tvmdbg_tb.capture.hooks, the
VirtualMachine wrappers in vm_wrapper.py, the Tensor export watch in param_cache.py); the
patches find what to do in ACTIVE.state, the one TracingState in force. The switches
(api.py: enable_dump_debug_info, enable_check_numerics, listeners) change that object and
nothing else; tests that need another configuration (another tracing path) build a
TracingState and activate it (`with activated(TracingState(paths=Paths(compiled=False))):`)
instead of flipping module globals. Caches that only make lookups cheaper (compiled kernels,
spec tables) stay where they are used, documented there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from tvmdbg_tb.capture.hooks import CaptureState


@dataclasses.dataclass(frozen=True, kw_only=True)
class Paths:
    """Which tracers may serve a VM call (all by default; tests and benchmarks pin one)."""

    # Builds get summary kernels and their calls the compiled tracer (fast_tracer.py, x86);
    # False: every call goes through the VM instrument (vm_tracer.py).
    compiled: bool = True
    # The compiled tracer's common call runs in C++ (native_call.cc); False: its Python path.
    native_calls: bool = True


class ExportWatch:
    """Tensor memory written or exported outside tvmdbg while a parameter cache exists
    (param_summaries="once_per_value"; the rule is in param_cache.py)."""

    TAINT_LIMIT = 1 << 16  # data pointers tracked at most; beyond, nothing is reused

    def __init__(self) -> None:
        self.watched = False  # param_cache's Tensor patches are in force: own reads are marked
        self.caches: list[Any] = []  # the live param_cache.SummaryCache objects
        self.tainted: set[int] = set()  # data pointers writable from outside
        self.overflow = False  # more exported tensors than TAINT_LIMIT: reuse off


class TracingState:
    """What tracing holds: the session and its dump, the sinks and listeners that outlive
    sessions, what the build hooks do (capture), the VMs traced and which tracers serve."""

    def __init__(self, paths: Paths = Paths()) -> None:
        self.paths = paths
        self.lock = threading.RLock()  # the switches' lock
        self.capture = CaptureState()
        self.session: Any = None  # session.Session VM calls are traced into (None: idle)
        self.dump: Any = None  # api's (logdir, DumpOptions) of the dump being written
        self.writer: Any = None  # its DebugEventsWriter
        self.check: Any = None  # check_numerics.CheckNumerics while enabled
        self.extra_sinks: list[Any] = []  # sinks of tools built on top (tvmdbg_tb.live), kept across sessions
        self.listeners: list[Callable] = []  # add_execution_listener's
        self.vms: weakref.WeakSet = weakref.WeakSet()  # VMs holding a tracer (detached when the session ends)
        self.exports = ExportWatch()
        self.live: Any = None  # tvmdbg_tb.live's controller and control server (live/api.py)


class _Active:
    """The TracingState in force (the patches read it here)."""

    def __init__(self) -> None:
        self.state = TracingState()


ACTIVE = _Active()


@contextlib.contextmanager
def activated(state: TracingState) -> Iterator[TracingState]:
    """Puts state in force for the block, then the previous one again (its session, if the
    block left one, is the caller's to end)."""
    previous, ACTIVE.state = ACTIVE.state, state
    try:
        yield state
    finally:
        ACTIVE.state = previous
