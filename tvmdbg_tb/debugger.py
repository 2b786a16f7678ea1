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
from typing import Any

from tvmdbg_tb import storage
from tvmdbg_tb.events.options import DumpOptions, public_doc, public_signature
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


def enable_dump_debug_info(logdir: str | os.PathLike, *args: Any, **kwargs: Any) -> DebugEventsWriter:
    """Records every Relax compile and VM run of this process under logdir; returns the writer.

    {options}

    Calling it again with the same arguments returns the same writer; with different ones
    it raises ValueError (call disable_dump_debug_info() first).
    Never raises for the file system: if logdir cannot be created or written (a regular file
    in the way, permissions, read-only, path too long, disk full) it warns once, the writer's
    `failed` says why, dumping stops and the program runs on unchanged.
    """
    options = DumpOptions.from_call(*args, **kwargs)
    if options.live.enabled and storage.is_url(logdir):
        raise ValueError(
            f"live control needs a local logdir (the dashboard reaches the program through a file), got {logdir!r}"
        )
    writer = instrument.enable_dump_debug_info(logdir, options)
    if options.live.enabled:
        live_control.start_live(writer, options.live)
    return writer


# The options are declared once, in DumpOptions: the signature and their documentation here
# are made from it (help(tvmdbg.enable_dump_debug_info) and inspect.signature show them).
enable_dump_debug_info.__signature__ = public_signature()
enable_dump_debug_info.__doc__ = enable_dump_debug_info.__doc__.replace(
    "{options}", public_doc().replace("\n", "\n    ")
)


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
