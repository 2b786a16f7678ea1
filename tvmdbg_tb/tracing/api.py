"""The instrumentation's switches: which session traces TVM, with which sinks.

The public API (tvmdbg.enable_dump_debug_info, ...) is tvmdbg_tb.debugger, which adds the
tools built on top of this layer (fused-kernel replay, live control) through its hooks:
`SESSION_HOOKS` (called with each new dumping session), add_tool_sink and the
`inner_origin` of enable_check_numerics. This module imports none of them. What the
switches change is one object, the TracingState in force (state.py).

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

import functools
import operator
import os
import warnings
from collections.abc import Callable
from typing import NamedTuple

from tvmdbg_tb.capture import frames
from tvmdbg_tb.capture import hooks as capture
from tvmdbg_tb.events import modes
from tvmdbg_tb.events.modes import Summaries
from tvmdbg_tb.events.options import DumpOptions, logdir_path
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import native_call, saved, vm_wrapper
from tvmdbg_tb.tracing.check_numerics import CheckNumerics, CheckNumericsError
from tvmdbg_tb.tracing.fast_tracer import install_native_stats, supported_platform
from tvmdbg_tb.tracing.session import Session, WriterSink, execution_message
from tvmdbg_tb.tracing.state import ACTIVE, TracingState

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

# Wiring, not state: called with every new session that writes a dump; tvmdbg_tb.debugger
# registers the automatic replay here once, at import.
SESSION_HOOKS: list[Callable[[Session], None]] = []


class _ListenerSink:
    """Delivers executions to the registered listeners; a failing listener only warns."""

    wants_nonfinite = False
    after_call = True  # a listener hears a call with its replay already in the dump

    def __init__(self, listeners: list[ExecutionListener]):
        self._listeners = listeners  # the tracing state's: listeners added later are heard
        # idle() -> bool: no listener, nothing to deliver (Session.serialized_execution_done
        # skips this sink). A C callable, not a method: native_call asks it after every
        # traced call, and a Python frame per call costs more than the test.
        self.idle = functools.partial(operator.not_, listeners)

    def on_graph(self, graph, ops) -> None:
        return None

    def on_kernel(self, call) -> None:
        return None

    def on_execution(self, execution, traces) -> None:
        if not self._listeners:
            return
        traces = list(traces)
        execution = execution_message(execution)
        for listener in list(self._listeners):
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


def _current_capture() -> capture.CaptureState:
    return ACTIVE.state.capture


def _install() -> None:
    """TVM's classes patched (once per process), reading the tracing state in force; the
    native tvmdbg.stats in place before the first VM is made, when native_call is built."""
    capture.install(_current_capture)
    saved.install()
    vm_wrapper.install(ACTIVE)
    native_call.LIBRARY.start_loading()
    install_native_stats()


def _activate(state: TracingState, session: Session | None) -> None:
    """Makes session the one VM calls and builds are traced into (None: idle)."""
    old = state.session
    if old is not None and old is not session:
        vm_wrapper.detach_all(state)
        for cache in (old.param_cache, old.weight_cache):
            if cache is not None:
                cache.close()
    state.session = session
    hooks = state.capture
    hooks.on_executable = (lambda executable, info: session.register_executable(info)) if session else None
    hooks.recording = session is not None
    hooks.compile_health = _compile_health(state)
    hooks.params_in_kernels = session is None or session.param_cache is None
    hooks.weights_in_kernels = session is None or session.weight_cache is None
    hooks.inner_ops = session is None or session.options.inner_op_check
    if session is None:
        hooks.registry.clear()


def _retrace(state: TracingState) -> None:
    """The session's sinks changed what tracing must see: VMs get new tracers and later
    builds the matching instrumentation."""
    vm_wrapper.detach_all(state)
    state.capture.compile_health = _compile_health(state)


def _compile_health(state: TracingState) -> Summaries | None:
    """What the summary kernels of later builds record; None: no compile-time
    instrumentation (the VM instrument traces them)."""
    session = state.session
    if session is None or session.want_nonfinite or modes.spec(session.mode).summary is None:
        return None
    if not (state.paths.compiled and supported_platform()):
        return None
    if session.trace_fused_ops:  # deep mode replays fused kernels on their live inputs
        return None
    return modes.spec(session.mode).summary


def _new_session(state: TracingState) -> Session | None:
    """A session for the current writer (new ids) with the current sinks; None if idle."""
    writer = state.writer if state.writer is not None and not state.writer.failed else None
    if writer is None and state.check is None:
        return None  # a writer that could not create its files has warned: trace nothing
    # Check-numerics alone traces with the default options (NO_TENSOR, no filters).
    session = Session(state.dump.options if state.dump is not None else DumpOptions(), writer, state.exports)
    if writer is not None:
        session.add_sink(WriterSink(writer))
        for hook in SESSION_HOOKS:
            hook(session)
    if state.check is not None:
        session.add_sink(state.check)
    session.add_sink(_ListenerSink(state.listeners))
    for sink in state.extra_sinks:
        session.add_sink(sink)
    return session


def enable_dump_debug_info(logdir: str | os.PathLike, options: DumpOptions) -> DebugEventsWriter:
    """Starts the dumping session and returns its writer (the options are documented on
    DumpOptions). The same logdir and equal options again return the same writer; others
    raise ValueError. Never raises for the file system (see the writer)."""
    dump = _Dump(logdir_path(logdir), options)
    places = _model_code(options.model_code)
    state = ACTIVE.state
    with state.lock:
        if state.writer is not None:
            if dump == state.dump:
                return state.writer
            changed = [f"logdir: {state.dump.logdir!r} -> {dump.logdir!r}"] if dump.logdir != state.dump.logdir else []
            changed += state.dump.options.differences(options)
            raise ValueError(
                "tvmdbg dumping is already enabled with different arguments "
                f"({'; '.join(changed)}); call tvmdbg.disable_dump_debug_info() first"
            )
        _install()
        state.writer = DebugEventsWriter(dump.logdir, options)
        state.dump = dump
        frames.set_model_code(places)
        _activate(state, _new_session(state))
        return state.writer


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
    state = ACTIVE.state
    with state.lock:
        if state.writer is None or state.dump is None:
            return None
        return state.writer, state.dump.options


def disable_dump_debug_info() -> None:
    """Stops recording, flushes and closes the dump. A no-op when not enabled."""
    state = ACTIVE.state
    with state.lock:
        writer = state.writer
        if writer is None:
            return
        state.writer = None
        state.dump = None
        frames.set_model_code(None)
        _activate(state, _new_session(state))
        writer.close()


def current_writer() -> DebugEventsWriter | None:
    """The writer of the dump being written (None when not dumping)."""
    return ACTIVE.state.writer


def add_tool_sink(sink) -> None:
    """Adds the sink of a tool built on top (tvmdbg_tb.live's controller) to the session and
    to every later one; VMs are traced kernel by kernel from now on if it needs that."""
    state = ACTIVE.state
    with state.lock:
        state.extra_sinks.append(sink)
        if state.session is not None:
            state.session.add_sink(sink)
            _retrace(state)


def remove_tool_sink(sink) -> None:
    state = ACTIVE.state
    with state.lock:
        if sink in state.extra_sinks:
            state.extra_sinks.remove(sink)
        if state.session is not None:
            state.session.remove_sink(sink)


def enable_check_numerics(trace_fused_ops: bool = False, inner_origin: Callable | None = None) -> None:
    """Raises CheckNumericsError at the first kernel output holding NaN or Inf (see module doc).

    trace_fused_ops: also replay every fused kernel op by op and raise at a NaN/Inf made
        inside it even when the kernel's output is finite (the error names the inner op).
    inner_origin: the replay that finds that op (see CheckNumerics)."""
    if not isinstance(trace_fused_ops, bool):
        raise TypeError(f"trace_fused_ops must be True or False, got {trace_fused_ops!r}")
    state = ACTIVE.state
    with state.lock:
        if state.check is not None:
            state.check.trace_fused_ops = trace_fused_ops
            if state.session is not None:
                state.session.update_sinks()  # its deep mode follows the check's
            return
        _install()
        state.check = CheckNumerics(trace_fused_ops=trace_fused_ops, inner_origin=inner_origin)
        if state.session is not None:
            state.session.add_sink(state.check)  # same run: keep the session and its ids
            _retrace(state)  # check-numerics needs the per-kernel VM instrument
        else:
            _activate(state, _new_session(state))


def disable_check_numerics() -> None:
    state = ACTIVE.state
    with state.lock:
        if state.check is None:
            return
        check, state.check = state.check, None
        if state.writer is not None:
            state.session.remove_sink(check)
            _retrace(state)
        else:
            _activate(state, None)


def add_execution_listener(listener: ExecutionListener) -> None:
    """Calls listener(execution, traces) after every traced top-level VM call."""
    if not callable(listener):
        raise TypeError(f"listener must be callable, got {listener!r}")
    state = ACTIVE.state
    with state.lock:
        state.listeners.append(listener)


def remove_execution_listener(listener: ExecutionListener) -> None:
    state = ACTIVE.state
    with state.lock:
        if listener in state.listeners:
            state.listeners.remove(listener)
