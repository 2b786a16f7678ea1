"""The VM instrument's native pre-filter: a small C++ function (native_filter.cc) that the
Relax VM calls instead of the Python tracer, forwarding only the calls the tracer reads.

Why: the VM calls its instrument before and after every call instruction; on a chain of
tiny kernels two of every three are builtins (alloc_tensor, null_value) that the tracer
ignores after one set lookup, yet each paid the conversion of its arguments to Python.
The filter makes that lookup in C++, per thread, against the set the tracer activates
(vm_tracer keeps it in step at the start and end of a call and on nested functions), and
takes each kernel's start itself: the tracer hears once per kernel, when it returned, with
its duration.

Built once with the system C++ compiler (g++, no ninja) into a user cache directory, one
.so per (source, tvm, tvm_ffi, python) version, and loaded at the first traced VM. Without
a compiler, or when the build fails, or with TVMDBG_NATIVE_FILTER=0, the tracer stays pure
Python: said once in the log, never retried in the same process.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger("tvmdbg.instrument")

ENV_SWITCH = "TVMDBG_NATIVE_FILTER"  # "0": never use the native filter
IDLE = -2  # no traced call on this thread: the VM's calls are answered 0 natively
ALL = -1  # every call is forwarded to Python

_SOURCE = Path(__file__).with_name("native_filter.cc")
_lock = threading.Lock()
_state: dict[str, Any] = {}  # "module" once loaded, "error" once it failed: never retried


def enabled() -> bool:
    """False when TVMDBG_NATIVE_FILTER=0 disables the native filter."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    """Where built filters are kept: $TVMDBG_CACHE_DIR, else $XDG_CACHE_HOME/tvmdbg, else ~/.cache/tvmdbg."""
    explicit = os.environ.get("TVMDBG_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tvmdbg"


def library_path() -> Path:
    """The cached .so for this source and these tvm / tvm_ffi / python versions."""
    import tvm
    import tvm_ffi

    key = hashlib.sha256()
    key.update(_SOURCE.read_bytes())
    for part in (tvm.__version__, tvm_ffi.__version__, sys.version, sys.platform):
        key.update(part.encode())
    return cache_dir() / f"native_filter-{key.hexdigest()[:16]}.so"


def load() -> Any | None:
    """The loaded filter module (built on first use), or None when it is unavailable.

    Called once per process at the first traced VM (and by benchmarks before timing); a
    failure is logged once and remembered."""
    if "module" in _state or "error" in _state:
        return _state.get("module")
    with _lock:
        if "module" in _state or "error" in _state:
            return _state.get("module")
        try:
            _state["module"] = _build_and_load()
        except Exception as error:  # no compiler, a failed build, an unloadable library
            _state["error"] = error
            logger.warning("tvmdbg: native VM filter unavailable, tracing in pure Python: %s", error)
        return _state.get("module")


def failure() -> BaseException | None:
    """Why load() returned None (None when it worked or was not tried)."""
    return _state.get("error")


def _build_and_load():
    import tvm_ffi

    path = library_path()
    if not path.exists():
        _build(path)
    return tvm_ffi.load_module(str(path))


def _build(path: Path) -> None:
    from tvm_ffi import libinfo

    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        raise RuntimeError("no C++ compiler found (c++/g++ not on PATH)")
    library = Path(libinfo.find_libtvm_ffi())
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=path.stem, suffix=".so.tmp", dir=path.parent)
    os.close(descriptor)
    command = [
        compiler,
        "-std=c++17",
        "-O2",
        "-fPIC",
        "-shared",
        f"-I{libinfo.find_include_path()}",
        f"-I{libinfo.find_dlpack_include_path()}",
        str(_SOURCE),
        "-o",
        temporary,
        f"-L{library.parent}",
        f"-Wl,-rpath,{library.parent}",
        "-ltvm_ffi",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"building {_SOURCE.name} failed: {done.stderr.strip()[-2000:]}")
        os.replace(temporary, path)  # atomic: concurrent builders never load half a file
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


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
        logger.warning("tvmdbg: native VM filter could not be attached, tracing in pure Python: %s", error)
        return None
