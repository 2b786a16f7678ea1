"""Public live-debugging API (re-exported as tvmdbg.add_watchpoint, ...).

    tvmdbg.enable_dump_debug_info(logdir, "FULL_HEALTH", live=True)
    tvmdbg.add_watchpoint("nan_or_inf")                      # all ops
    tvmdbg.add_watchpoint("abs_above", threshold=1e3, op_regex="matmul")

Watchpoints work with or without live=True: hits are always recorded in the dump
(WatchpointHit events); the program pauses at a hit only when live control is on.
Either way kernels are traced by the VM instrument (one callback per kernel).
"""

from __future__ import annotations

import atexit
import threading

from tvmdbg_tb.events.options import LiveOptions
from tvmdbg_tb.live.controller import LiveController
from tvmdbg_tb.live.server import ControlServer
from tvmdbg_tb.tracing import api as instrument_api
from tvmdbg_tb.tracing.state import ACTIVE

__all__ = [
    "add_watchpoint",
    "delete_watchpoint",
    "list_watchpoints",
    "request_pause",
    "watchpoint_hits",
    "watchpoint_hits_since",
]

_LOCK = threading.RLock()


class _Live:
    """Live control's part of the tracing state (TracingState.live)."""

    def __init__(self) -> None:
        self.controller: LiveController | None = None
        self.server: ControlServer | None = None


def _live() -> _Live:
    """Live control's part of the tracing state in force."""
    state = ACTIVE.state
    if state.live is None:
        state.live = _Live()
    return state.live


def _controller(writer) -> LiveController:
    """The process's controller, installed as a session sink (forcing the VM instrument:
    VMs built for the fast path get the per-kernel tracer)."""
    if _live().controller is None:
        _live().controller = LiveController(writer)
        instrument_api.add_tool_sink(_live().controller)
    _live().controller.writer = writer
    return _live().controller


def start_live(writer, options: LiveOptions) -> ControlServer:
    """Opens the control channel of the dump's run (called by enable_dump_debug_info(live=True))."""
    with _LOCK:
        controller = _controller(writer)
        controller.timeout = options.timeout
        if _live().server is None:
            _live().server = ControlServer(controller, writer.run_dir)
            _live().server.start()
        return _live().server


def stop_live() -> None:
    """Closes the channel and forgets the controller (a paused program resumes)."""
    with _LOCK:
        server, _live().server = _live().server, None
        controller, _live().controller = _live().controller, None
        if server is not None:
            server.close()
        if controller is not None:
            controller.close()
            instrument_api.remove_tool_sink(controller)


atexit.register(stop_live)


def add_watchpoint(
    condition: str,
    *,
    threshold: float | None = None,
    min: float | None = None,  # noqa: A002 - the bound's natural name
    max: float | None = None,  # noqa: A002
    op_name: str | None = None,
    op_regex: str | None = None,
    pause: bool = True,
) -> int:
    """Adds a watchpoint and returns its id.

    condition: "nan_or_inf", "abs_above" (threshold), "all_zero", "value_range" (min, max:
        a value outside [min, max] is a hit) or "changed" (threshold, in percent: relative L2
        change of an output since the previous execution of the same op).
    Scope: op_name (one op, exact), op_regex (a search on op name or kernel, with the `regex`
        package; matched once per op name within a time limit) or all ops.
    pause: pause the program at a hit when live control is on.
    Limits (ValueError past them): patterns of at most 1,000 characters that match the known
    op names within 0.25 s, 100 watchpoints, 128 MB of values kept by "changed" watchpoints.
    """
    with _LOCK:
        writer = instrument_api.current_writer()
        if writer is None:
            raise RuntimeError("watchpoints record into the dump: call tvmdbg.enable_dump_debug_info first")
        wp = _controller(writer).add_watchpoint(
            condition, threshold=threshold, min=min, max=max, op_name=op_name, op_regex=op_regex, pause=pause
        )
        return wp.id


def list_watchpoints() -> list[dict]:
    """The watchpoints as dicts (id, condition, parameters, scope, hits, description)."""
    controller = _live().controller
    return controller.list_watchpoints() if controller is not None else []


def delete_watchpoint(watchpoint_id: int) -> None:
    """Removes a watchpoint; KeyError if there is none with this id."""
    controller = _live().controller
    if controller is None:
        raise KeyError(f"no watchpoint #{watchpoint_id}")
    controller.delete_watchpoint(watchpoint_id)


def request_pause() -> None:
    """Pauses the program after its next kernel (e.g. at the start, so the dashboard can set
    watchpoints first). Needs live=True; the pause ends after live_timeout without a dashboard."""
    with _LOCK:
        if _live().server is None:
            raise RuntimeError("request_pause needs tvmdbg.enable_dump_debug_info(..., live=True)")
        _live().controller.pause_requested = True


def watchpoint_hits() -> list[dict]:
    """The watchpoint hits of this process so far, oldest first: the first 10,000 (the dump has
    every hit)."""
    controller = _live().controller
    return list(controller.hits) if controller is not None else []


def watchpoint_hits_since(seen: int) -> tuple[int, dict | None]:
    """How many watchpoint hits this process has had, and the first after the first `seen`
    (for `tvmdbg run --watch`, which stops at each new hit, past the 10,000 kept ones too)."""
    controller = _live().controller
    return controller.hits_since(seen) if controller is not None else (0, None)
