"""The VM instrument's native pre-filter: a small C++ function (native_filter.cc) that the
Relax VM calls instead of the Python tracer, forwarding only the calls the tracer reads.

Why: the VM calls its instrument before and after every call instruction; on a chain of
tiny kernels two of every three are builtins (alloc_tensor, null_value) that the tracer
ignores after one set lookup, yet each paid the conversion of its arguments to Python.
The filter makes that lookup in C++, per thread, against the set the tracer activates
(vm_tracer keeps it in step at the start and end of a call and on nested functions), and
takes each kernel's start itself: the tracer hears once per kernel, when it returned, with
its duration.

Built and loaded by tvmdbg_tb.native (once, cached per version) at the first traced VM.
Without a compiler, or when the build fails, or with TVMDBG_NATIVE_FILTER=0, the tracer
stays pure Python: said once in the log, never retried in the same process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tvmdbg_tb.native import NativeLibrary, source

ENV_SWITCH = "TVMDBG_NATIVE_FILTER"  # "0": never use the native filter
IDLE = -2  # no traced call on this thread: the VM's calls are answered 0 natively
ALL = -1  # every call is forwarded to Python

LIBRARY = NativeLibrary(source("native_filter.cc"), ENV_SWITCH, "native VM filter")


def enabled() -> bool:
    """False when TVMDBG_NATIVE_FILTER=0 disables the native filter."""
    return LIBRARY.enabled()


def load() -> Any | None:
    """The loaded filter module (built on first use), or None when it is unavailable.

    Called once per process at the first traced VM (and by benchmarks before timing)."""
    return LIBRARY.load()


def failure() -> BaseException | None:
    """Why load() returned None (None when it worked or was not tried)."""
    return LIBRARY.failure()


class NativeFilter:
    """Steers one VM's native filter from its Python tracer (per thread, like the tracer)."""

    __slots__ = ("_id", "_enter", "_activate", "_note", "_stop", "_started", "_add_set", "_sets", "__weakref__")

    def __init__(self, module, vm, callback: Callable, on_kernel: Callable, functions: frozenset[str]) -> None:
        handle, instrument = module.filter_create(callback, on_kernel, sorted(functions))
        self._id = int(handle)
        self._enter = module.filter_enter
        self._activate = module.filter_activate
        self._note = module.filter_note
        self._stop = module.filter_stop
        self._started = module.filter_started
        self._add_set = module.filter_add_set
        self._sets: dict[frozenset[str], int] = {}
        vm._set_instrument(instrument)  # the VM owns the filter; we keep only its id

    def set_of(self, relevant: frozenset[str] | None) -> int:
        """The native number of a set of symbols (ALL for None: every call is forwarded)."""
        if relevant is None:
            return ALL
        found = self._sets.get(relevant)
        if found is None:
            found = self._sets[relevant] = int(self._add_set(self._id, sorted(relevant)))
        return found

    def enter(self, number: int) -> None:
        """A call starts (or ends, with IDLE) on this thread: the noted builtin is forgotten."""
        self._enter(self._id, number)

    def activate(self, number: int) -> None:
        """The running Relax function changed (a nested function entered or returned)."""
        self._activate(self._id, number)

    def note(self, builtin: str | None) -> None:
        """The builtin the Python callback skipped itself (or None when it returned)."""
        self._note(self._id, builtin)

    def stop(self) -> None:
        """The tracer skips the call's remaining kernels: forward every kernel start again."""
        self._stop(self._id)

    def started(self) -> tuple[str | None, str | None]:
        """(the skipped builtin, the kernel whose start was taken natively) that started and
        did not return on this thread."""
        builtin, kernel = self._started(self._id)
        return (None if builtin is None else str(builtin), None if kernel is None else str(kernel))


def attach(vm, callback: Callable, on_kernel: Callable, functions: frozenset[str]) -> NativeFilter | None:
    """Installs the native filter as vm's instrument; None (and nothing installed) when
    disabled or unavailable.

    callback: the tracer's instrument, for the calls it reads; on_kernel(None, symbol,
    duration_us, ret, *args): a kernel of an active symbol set returned, its start taken
    natively (functions: the Relax functions' symbols, whose calls always go to callback)."""
    if not enabled():
        return None
    module = load()
    if module is None:
        return None
    try:
        return NativeFilter(module, vm, callback, on_kernel, functions)
    except Exception as error:
        logging.getLogger("tvmdbg.native").warning(
            "tvmdbg: native VM filter could not be attached, tracing in pure Python: %s", error
        )
        return None
