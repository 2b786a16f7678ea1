"""The public debugging API (re-exported as tvmdbg.*): instrumentation plus the tools on top.

    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH")
    ...compile and run Relax models...
    tvmdbg.disable_dump_debug_info()

This module composes three layers that do not know each other's internals: the
instrumentation (tvmdbg_tb.capture and tvmdbg_tb.tracing: every compile and VM call into a dump), the
fused-kernel replay (tvmdbg_tb.replay: re-runs a fused kernel op by op) and live control
(tvmdbg_tb.live: watchpoints and pausing from the dashboard). Replay and live build on the
instrumentation through its hooks; only this module wires them together. How kernels are
traced, and the listener hook, are described in tvmdbg_tb.tracing.api.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection

from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.live import api as live_control
from tvmdbg_tb.replay.auto import AutoReplay
from tvmdbg_tb.replay.replayer import inner_origin
from tvmdbg_tb.tracing import api as instrument
from tvmdbg_tb.tracing.api import CheckNumericsError, add_execution_listener, remove_execution_listener
from tvmdbg_tb.tracing.session import Session

__all__ = [
    "CheckNumericsError",
    "add_execution_listener",
    "disable_check_numerics",
    "disable_dump_debug_info",
    "enable_check_numerics",
    "enable_dump_debug_info",
    "remove_execution_listener",
]


def _attach_replay(session: Session) -> None:
    """Every dumping session replays its run's first origin kernel (tvmdbg_tb.replay.auto)."""
    session.replay = AutoReplay(session)


if _attach_replay not in instrument.SESSION_HOOKS:
    instrument.SESSION_HOOKS.append(_attach_replay)


def enable_dump_debug_info(
    logdir: str | os.PathLike,
    tensor_debug_mode: str = "NO_TENSOR",
    circular_buffer_size: int = 1000,
    op_regex: str | None = None,
    tensor_dtypes: Collection[str] | Callable[[str], bool] | None = None,
    trace_fused_ops: bool = False,
    live: bool = False,
    live_timeout: float = 60.0,
    param_summaries: str = "every_call",
    run_name: str | None = None,
    circular_buffer_bytes: int | None = None,
    model_code: str | Collection[str] | None = None,
    expected_nonfinite: str | None = None,
    inner_op_check: bool = True,
) -> DebugEventsWriter:
    """Records every Relax compile and VM run of this process under logdir; returns the writer.

    tensor_debug_mode: NO_TENSOR, CURT_HEALTH, CONCISE_HEALTH, FULL_HEALTH, SHAPE,
        FULL_TENSOR or FULL_STATS (statistics for `tvmdbg compare`; layouts in
        protos/tvmdbg/debug_event.proto).
    circular_buffer_size: executions and traces kept (each); <= 0 keeps every record, and
        the dump then grows with the run unless circular_buffer_bytes bounds it.
    op_regex: only kernels whose op name, kernel symbol or original op type/var matches
        (re.search) are traced.
    tensor_dtypes: only outputs of these dtypes ("float32", ...) or for which the callable
        returns True are traced.
    trace_fused_ops: deep mode: every call of a fused kernel is re-run op by op on its
        inputs (tvmdbg_tb.replay), so a NaN/Inf made and masked inside the kernel is recorded
        at its own Relax op and line. Slow (kernels are traced by the VM instrument and each
        fused call runs twice); default False.
    live: let the TensorBoard tab control the program (watchpoints, pause, step, continue;
        see tvmdbg_tb/live). Kernels are then traced by the VM instrument, one by one.
    live_timeout: seconds a paused program waits without any dashboard contact before it
        resumes with a warning.
    param_summaries: "every_call" (default) summarises every tensor argument of every call;
        "once_per_value" (health modes) summarises an argument tensor object once and repeats
        its counts while no write to it is seen (the rule and what it cannot see:
        tvmdbg_tb/tracing/param_cache.py; such summaries carry summarized_in_execution).
    run_name: a name for this run ("baseline", "lr=0.1 fp16"), kept in the dump's metadata
        and shown by the dashboard's run picker and the CLI next to the command line, so runs
        of one script can be told apart. One line, at most 200 characters.
    circular_buffer_bytes: bytes kept in each of the two ring files (executions, traces); the
        oldest records go first. None (default): 256 MiB when circular_buffer_size > 0, no
        byte bound when it keeps everything; 0: no byte bound.
    model_code: which files count as the model's code, where the line shown for an op is
        (the innermost such frame of the stack that made it; docs/source-lines.md). Default
        (None): the user's own files and every installed package except TVM, PyTorch,
        NumPy and tvmdbg, so a transformers model's ops show their modeling_*.py lines, the
        user's call as `called_from`; else the environment variable TVMDBG_MODEL_CODE. Else
        module or package names, files or directories (a list or a comma-separated string):
        the user's own files plus those ("transformers.models", "torch.nn.modules"); "" or
        [] for the user's own files only.
    expected_nonfinite: a regular expression for ops whose non-finite outputs are intended
        (searched in op names, kernels, Relax op types and vars, e.g. "where|masked_fill"):
        their non-finite outputs, and those computed only from them, are listed apart as
        expected instead of alerts. Masks whose -inf the model absorbs need no pattern
        (docs/nonfinite.md).
    inner_op_check: in the health modes (and FULL_STATS), each fused kernel also counts the
        NaN and infinities its own Relax ops make inside it, so a value made and masked there
        (`where(mask, log(x), 0)`) raises an alert at that op's line (docs/inner_ops.md);
        default True. False builds the kernels without that check.
    Calling it again with the same arguments returns the same writer; with different ones
    it raises ValueError (call disable_dump_debug_info() first).
    Never raises for the file system: if logdir cannot be created or written (a regular file
    in the way, permissions, read-only, path too long, disk full) it warns once, the writer's
    `failed` says why, dumping stops and the program runs on unchanged.
    """
    writer = instrument.enable_dump_debug_info(
        logdir,
        tensor_debug_mode,
        circular_buffer_size,
        op_regex,
        tensor_dtypes,
        trace_fused_ops,
        param_summaries,
        run_name,
        circular_buffer_bytes,
        model_code,
        expected_nonfinite,
        inner_op_check,
        extra_args=(bool(live),),
    )
    if live:
        live_control.start_live(writer, timeout=live_timeout)
    return writer


def disable_dump_debug_info() -> None:
    """Stops recording (and live control), flushes and closes the dump. A no-op when not enabled."""
    live_control.stop_live()
    instrument.disable_dump_debug_info()


def enable_check_numerics(trace_fused_ops: bool = False) -> None:
    """Raises CheckNumericsError at the first kernel output holding NaN or Inf. Kernels after
    it in the same VM call are skipped and the error is raised when the call returns.

    trace_fused_ops: also replay every fused kernel op by op and raise at a NaN/Inf made
        inside it even when the kernel's output is finite (the error names the inner op)."""
    instrument.enable_check_numerics(trace_fused_ops, inner_origin=inner_origin)


def disable_check_numerics() -> None:
    instrument.disable_check_numerics()
