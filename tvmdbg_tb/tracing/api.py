"""The instrumentation's switches: which session traces TVM, with which sinks.

The public API (tvmdbg.enable_dump_debug_info, ...) is tvmdbg_tb.debugger, which adds the
tools built on top of this layer (fused-kernel replay, live control) through its hooks:
`SESSION_HOOKS` (called with each new dumping session), `_State.extra_sinks` and the
`inner_origin` of enable_check_numerics. This module imports none of them.

How kernels are traced (DebuggedGraph.instrumentation says which):

- "compiled" (the fast path, NO_TENSOR/CURT_HEALTH/CONCISE_HEALTH/FULL_HEALTH/SHAPE/FULL_STATS
  on x86):
  Relax functions built after enable get a small native summary kernel after each kernel
  call site (see compiled.py); Python reads one buffer per VM call. Such an executable
  calls tvmdbg's packed functions, so run it in a process where tvmdbg is imported and
  compile deployment artifacts without tvmdbg enabled.
- "vm_instrument" (the fallback: FULL_TENSOR, check-numerics, control flow, executables
  compiled before enable or loaded from a library): a Python callback on every VM call.

Hooks for tools built on top (the CLI, notebooks):

- add_execution_listener(fn): fn(execution: pb.Execution, traces: list[pb.GraphExecutionTrace])
  is called on the calling thread after every top-level VM call while a session is active
  (after the call's records were queued to the dump). A listener may block (e.g. to pause
  the program at a breakpoint); an exception it raises is reported as a warning only.
- enable_check_numerics() / disable_check_numerics(): raise CheckNumericsError when a
  kernel's output first holds NaN or Inf (with or without a dump). Kernels after it in the
  same VM call are skipped and the error is raised when the call returns.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from typing import NamedTuple

from tvmdbg_tb.capture import compiled, frames
from tvmdbg_tb.capture import hooks as capture
from tvmdbg_tb.events.options import DumpOptions, logdir_path
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import vm_wrapper
from tvmdbg_tb.tracing.check_numerics import CheckNumerics, CheckNumericsError
from tvmdbg_tb.tracing.fast_tracer import FAST_MODES, supported_platform
from tvmdbg_tb.tracing.session import Session, WriterSink, execution_message

__all__ = [
    "CheckNumericsError",
    "add_execution_listener",
    "disable_check_numerics",
    "disable_dump_debug_info",
    "enable_check_numerics",
    "enable_dump_debug_info",
    "remove_execution_listener",
]

ExecutionListener = Callable[[pb.Execution, list[pb.GraphExecutionTrace]], None]

_LOCK = threading.RLock()
_LISTENERS: list[ExecutionListener] = []
# Called with every new session that writes a dump (e.g. to attach the automatic replay).
SESSION_HOOKS: list[Callable[[Session], None]] = []


class _ListenerSink:
    """Delivers executions to the registered listeners; a failing listener only warns."""

    wants_nonfinite = False
    after_call = True  # a listener hears a call with its replay already in the dump

    def on_graph(self, graph, ops) -> None:
        return None

    def on_kernel(self, call) -> None:
        return None

    def idle(self) -> bool:
        """No listener: nothing to deliver (Session.serialized_execution_done skips this sink)."""
        return not _LISTENERS

    def on_execution(self, execution, traces) -> None:
        if not _LISTENERS:
            return
        traces = list(traces)
        execution = execution_message(execution)
        for listener in list(_LISTENERS):
            try:
                listener(execution, traces)
            except Exception as error:
                warnings.warn(
                    f"tvmdbg: execution listener {listener!r} failed: {error!r}", RuntimeWarning, stacklevel=2
                )

    def close(self) -> None:
        return None


class _Dump(NamedTuple):
    """The dump being written: its logdir and options (a second enable must match both)."""

    logdir: str
    options: DumpOptions


class _State:
    session: Session | None = None
    dump: _Dump | None = None
    writer: DebugEventsWriter | None = None
    check: CheckNumerics | None = None
    extra_sinks: list = []  # sinks of tools built on top (tvmdbg_tb.live), kept across sessions


_STATE = _State()


def _activate(session: Session | None) -> None:
    old = _STATE.session
    if old is not None and old is not session:
        vm_wrapper.detach_all()
        if old.param_cache is not None:
            old.param_cache.close()
    _STATE.session = session
    vm_wrapper.ACTIVE.session = session
    capture.STATE.on_executable = (lambda executable, info: session.register_executable(info)) if session else None
    capture.STATE.recording = session is not None
    capture.STATE.compile_health = _compile_health(session)
    capture.STATE.params_in_kernels = session is None or session.param_cache is None
    capture.STATE.inner_ops = session is None or session.options.inner_op_check
    if session is None:
        capture.REGISTRY.clear()


def _compile_health(session: Session | None) -> compiled.Summaries | None:
    """What the summary kernels of later builds record; None: no compile-time
    instrumentation (the VM instrument traces them)."""
    if session is None or session.want_nonfinite or session.mode not in FAST_MODES or not supported_platform():
        return None
    if session.trace_fused_ops:  # deep mode replays fused kernels on their live inputs
        return None
    if session.mode == pb.FULL_STATS:
        return compiled.Summaries.STATS
    if session.mode == pb.SHAPE:
        return compiled.Summaries.SHAPE
    return compiled.Summaries.TIMESTAMPS if session.mode == pb.NO_TENSOR else compiled.Summaries.HEALTH


def _new_session() -> Session | None:
    """A session for the current writer (new ids) with the current sinks; None if idle."""
    writer = _STATE.writer if _STATE.writer is not None and not _STATE.writer.failed else None
    if writer is None and _STATE.check is None:
        return None  # a writer that could not create its files has warned: trace nothing
    # Check-numerics alone traces with the default options (NO_TENSOR, no filters).
    session = Session(_STATE.dump.options if _STATE.dump is not None else DumpOptions(), writer)
    if writer is not None:
        session.add_sink(WriterSink(writer))
        for hook in SESSION_HOOKS:
            hook(session)
    if _STATE.check is not None:
        session.add_sink(_STATE.check)
    session.add_sink(_ListenerSink())
    for sink in _STATE.extra_sinks:
        session.add_sink(sink)
    return session


def enable_dump_debug_info(logdir: str | os.PathLike, options: DumpOptions) -> DebugEventsWriter:
    """Starts the dumping session and returns its writer (the options are documented on
    DumpOptions). The same logdir and equal options again return the same writer; others
    raise ValueError. Never raises for the file system (see the writer)."""
    dump = _Dump(logdir_path(logdir), options)
    places = _model_code(options.model_code)
    with _LOCK:
        if _STATE.writer is not None:
            if dump == _STATE.dump:
                return _STATE.writer
            changed = (
                [f"logdir: {_STATE.dump.logdir!r} -> {dump.logdir!r}"] if dump.logdir != _STATE.dump.logdir else []
            )
            changed += _STATE.dump.options.differences(options)
            raise ValueError(
                "tvmdbg dumping is already enabled with different arguments "
                f"({'; '.join(changed)}); call tvmdbg.disable_dump_debug_info() first"
            )
        capture.install()
        vm_wrapper.install()
        _STATE.writer = DebugEventsWriter(dump.logdir, options)
        _STATE.dump = dump
        frames.set_model_code(places)
        _activate(_new_session())
        return _STATE.writer


def _model_code(model_code: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """model_code (or TVMDBG_MODEL_CODE when None) as path prefixes; a clear error naming
    what is not found."""
    if model_code is None:
        model_code = os.environ.get(frames.MODEL_CODE_ENV)
        if model_code is None:
            return None
        try:
            return frames.parse_model_code(model_code)
        except ValueError as error:
            raise ValueError(f"{frames.MODEL_CODE_ENV}={model_code!r}: {error}") from None
    return frames.parse_model_code(model_code)


def current_dump() -> tuple[DebugEventsWriter, DumpOptions] | None:
    """The enabled dump's writer and options (tvmdbg_tb.disco hands them to its workers)."""
    with _LOCK:
        if _STATE.writer is None or _STATE.dump is None:
            return None
        return _STATE.writer, _STATE.dump.options


def disable_dump_debug_info() -> None:
    """Stops recording, flushes and closes the dump. A no-op when not enabled."""
    with _LOCK:
        writer = _STATE.writer
        if writer is None:
            return
        _STATE.writer = None
        _STATE.dump = None
        frames.set_model_code(None)
        _activate(_new_session())
        writer.close()


def enable_check_numerics(trace_fused_ops: bool = False, inner_origin: Callable | None = None) -> None:
    """Raises CheckNumericsError at the first kernel output holding NaN or Inf (see module doc).

    trace_fused_ops: also replay every fused kernel op by op and raise at a NaN/Inf made
        inside it even when the kernel's output is finite (the error names the inner op).
    inner_origin: the replay that finds that op (see CheckNumerics)."""
    if not isinstance(trace_fused_ops, bool):
        raise TypeError(f"trace_fused_ops must be True or False, got {trace_fused_ops!r}")
    with _LOCK:
        if _STATE.check is not None:
            _STATE.check.trace_fused_ops = trace_fused_ops
            if _STATE.session is not None:
                _STATE.session.update_sinks()  # its deep mode follows the check's
            return
        capture.install()
        vm_wrapper.install()
        _STATE.check = CheckNumerics(trace_fused_ops=trace_fused_ops, inner_origin=inner_origin)
        if _STATE.session is not None:
            _STATE.session.add_sink(_STATE.check)  # same run: keep the session and its ids
            vm_wrapper.detach_all()  # check-numerics needs the per-kernel VM instrument
            capture.STATE.compile_health = _compile_health(_STATE.session)
        else:
            _activate(_new_session())


def disable_check_numerics() -> None:
    with _LOCK:
        if _STATE.check is None:
            return
        check, _STATE.check = _STATE.check, None
        if _STATE.writer is not None:
            _STATE.session.remove_sink(check)
            vm_wrapper.detach_all()
            capture.STATE.compile_health = _compile_health(_STATE.session)
        else:
            _activate(None)


def add_execution_listener(listener: ExecutionListener) -> None:
    """Calls listener(execution, traces) after every traced top-level VM call."""
    if not callable(listener):
        raise TypeError(f"listener must be callable, got {listener!r}")
    with _LOCK:
        _LISTENERS.append(listener)


def remove_execution_listener(listener: ExecutionListener) -> None:
    with _LOCK:
        if listener in _LISTENERS:
            _LISTENERS.remove(listener)
