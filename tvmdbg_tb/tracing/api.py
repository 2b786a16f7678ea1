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
import re
import threading
import warnings
from collections.abc import Callable, Collection
from typing import NamedTuple

from tvmdbg_tb.capture import frames
from tvmdbg_tb.capture import hooks as capture
from tvmdbg_tb.events.summaries import mode_value
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


class DumpArgs(NamedTuple):
    """enable_dump_debug_info's arguments, normalised: a second call must match them."""

    logdir: str
    mode: int
    circular_buffer_size: int
    op_regex: str | None
    tensor_dtypes: tuple | Callable | None
    trace_fused_ops: bool
    param_summaries: str
    run_name: str | None
    circular_buffer_bytes: int | None
    model_code: tuple[str, ...] | None  # path prefixes (frames.parse_model_code); None: default
    expected_nonfinite: str | None
    inner_op_check: bool
    extra: tuple  # the layer above's (tvmdbg_tb.debugger: live)


class _State:
    session: Session | None = None
    dump_args: DumpArgs | None = None
    writer: DebugEventsWriter | None = None
    check: CheckNumerics | None = None
    extra_sinks: list = []  # sinks of tools built on top (tvmdbg_tb.live), kept across sessions


_STATE = _State()


def _normalise_dtypes(tensor_dtypes):
    if tensor_dtypes is None or callable(tensor_dtypes):
        return tensor_dtypes
    if isinstance(tensor_dtypes, str):
        return (tensor_dtypes,)
    try:
        return tuple(sorted(str(getattr(d, "name", d)) for d in tensor_dtypes))
    except TypeError as error:
        raise TypeError(f"tensor_dtypes must be dtype names or a callable, got {tensor_dtypes!r}") from error


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
    args = _STATE.dump_args
    capture.STATE.inner_ops = args is None or args.inner_op_check
    if session is None:
        capture.REGISTRY.clear()


def _compile_health(session: Session | None) -> bool | str | None:
    """How builds are instrumented: None (the VM instrument traces them), False (timestamps
    only: NO_TENSOR), "shape" (sizes and dims, no counts: SHAPE), True (summary kernels) or
    "stats" (with FULL_STATS' statistics)."""
    if session is None or session.want_nonfinite or session.mode not in FAST_MODES or not supported_platform():
        return None
    if session.trace_fused_ops:  # deep mode replays fused kernels on their live inputs
        return None
    if session.mode == pb.FULL_STATS:
        return "stats"
    if session.mode == pb.SHAPE:
        return "shape"
    return session.mode != pb.NO_TENSOR


def _new_session() -> Session | None:
    """A session for the current writer (new ids) with the current sinks; None if idle."""
    writer = _STATE.writer if _STATE.writer is not None and not _STATE.writer.failed else None
    if writer is None and _STATE.check is None:
        return None  # a writer that could not create its files has warned: trace nothing
    args = _STATE.dump_args
    if args is not None:
        mode, op_regex, tensor_dtypes, deep = args.mode, args.op_regex, args.tensor_dtypes, args.trace_fused_ops
    else:
        mode, op_regex, tensor_dtypes, deep = pb.NO_TENSOR, None, None, False
    session = Session(mode, op_regex, tensor_dtypes, writer)
    session.trace_fused_ops = deep or (_STATE.check is not None and _STATE.check.trace_fused_ops)
    if args is not None and args.param_summaries != "every_call":
        from tvmdbg_tb.tracing import param_cache

        if mode in (pb.CURT_HEALTH, pb.CONCISE_HEALTH, pb.FULL_HEALTH):
            session.param_cache = param_cache.SummaryCache()
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


def enable_dump_debug_info(
    logdir: str | os.PathLike,
    tensor_debug_mode: str = "NO_TENSOR",
    circular_buffer_size: int = 1000,
    op_regex: str | None = None,
    tensor_dtypes: Collection[str] | Callable[[str], bool] | None = None,
    trace_fused_ops: bool = False,
    param_summaries: str = "every_call",
    run_name: str | None = None,
    circular_buffer_bytes: int | None = None,
    model_code: str | Collection[str] | None = None,
    expected_nonfinite: str | None = None,
    inner_op_check: bool = True,
    extra_args: tuple = (),
) -> DebugEventsWriter:
    """Starts the dumping session and returns its writer. The arguments are documented on
    tvmdbg_tb.debugger.enable_dump_debug_info (the public name), which also passes its own
    as extra_args, compared like the others: same arguments again return the same writer,
    different ones raise ValueError. Never raises for the file system (see the writer)."""
    mode = mode_value(tensor_debug_mode)
    if isinstance(circular_buffer_size, bool) or not isinstance(circular_buffer_size, int):
        raise TypeError(f"circular_buffer_size must be an int, got {circular_buffer_size!r}")
    if circular_buffer_bytes is not None:
        if isinstance(circular_buffer_bytes, bool) or not isinstance(circular_buffer_bytes, int):
            raise TypeError(f"circular_buffer_bytes must be an int or None, got {circular_buffer_bytes!r}")
        if circular_buffer_bytes < 0:
            raise ValueError(f"circular_buffer_bytes must be >= 0 (0: no byte bound), got {circular_buffer_bytes}")
    for name, pattern in (("op_regex", op_regex), ("expected_nonfinite", expected_nonfinite)):
        if pattern is None:
            continue
        if not isinstance(pattern, str):
            raise TypeError(f"{name} must be a string, got {pattern!r}")
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"{name} {pattern!r} is not a valid regular expression: {error}") from error
    if not isinstance(logdir, (str, os.PathLike)) or not os.fspath(logdir):
        raise ValueError(f"logdir must be a non-empty path, got {logdir!r}")
    if not isinstance(trace_fused_ops, bool):
        raise TypeError(f"trace_fused_ops must be True or False, got {trace_fused_ops!r}")
    if not isinstance(inner_op_check, bool):
        raise TypeError(f"inner_op_check must be True or False, got {inner_op_check!r}")
    from tvmdbg_tb.tracing import param_cache

    if param_summaries not in param_cache.CHOICES:
        raise ValueError(f"param_summaries must be one of {param_cache.CHOICES}, got {param_summaries!r}")
    args = DumpArgs(
        os.path.abspath(os.fspath(logdir)),
        mode,
        circular_buffer_size,
        op_regex,
        _normalise_dtypes(tensor_dtypes),
        trace_fused_ops,
        param_summaries,
        _checked_run_name(run_name),
        circular_buffer_bytes,
        _model_code(model_code),
        expected_nonfinite or None,
        inner_op_check,
        tuple(extra_args),
    )
    with _LOCK:
        if _STATE.writer is not None:
            if args == _STATE.dump_args:
                return _STATE.writer
            raise ValueError(
                "tvmdbg dumping is already enabled with different arguments "
                f"({_STATE.dump_args!r}); call tvmdbg.disable_dump_debug_info() first"
            )
        capture.install()
        vm_wrapper.install()
        _STATE.writer = DebugEventsWriter(
            args.logdir,
            tensor_debug_mode=mode,
            circular_buffer_size=circular_buffer_size,
            circular_buffer_bytes=circular_buffer_bytes,
            display_name=args.run_name,
            expected_nonfinite=args.expected_nonfinite,
        )
        _STATE.dump_args = args
        frames.set_model_code(args.model_code)
        _activate(_new_session())
        return _STATE.writer


def _model_code(model_code: str | Collection[str] | None) -> tuple[str, ...] | None:
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


MAX_RUN_NAME = 200


def _checked_run_name(run_name: str | None) -> str | None:
    """The user's run name, stripped (None for none); a clear error for anything else."""
    if run_name is None:
        return None
    if not isinstance(run_name, str):
        raise TypeError(f"run_name must be a string or None, got {run_name!r}")
    name = run_name.strip()
    if not name:
        raise ValueError("run_name must not be empty (leave it out for no name)")
    if len(name) > MAX_RUN_NAME:
        raise ValueError(f"run_name is {len(name)} characters long; at most {MAX_RUN_NAME}")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"run_name must be one line of printable text, got {run_name!r}")
    return name


def disable_dump_debug_info() -> None:
    """Stops recording, flushes and closes the dump. A no-op when not enabled."""
    with _LOCK:
        writer = _STATE.writer
        if writer is None:
            return
        _STATE.writer = None
        _STATE.dump_args = None
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
                _STATE.session.trace_fused_ops = trace_fused_ops or bool(
                    _STATE.dump_args and _STATE.dump_args.trace_fused_ops
                )
            return
        capture.install()
        vm_wrapper.install()
        _STATE.check = CheckNumerics(trace_fused_ops=trace_fused_ops, inner_origin=inner_origin)
        if _STATE.session is not None:
            _STATE.session.trace_fused_ops = _STATE.session.trace_fused_ops or trace_fused_ops
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
            _STATE.session.trace_fused_ops = bool(_STATE.dump_args.trace_fused_ops)
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
