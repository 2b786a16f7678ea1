"""The plugin's live routes (docs/routes.md#live): state, commands and watchpoints are
relayed to the run's program; `live/hits` lists the WatchpointHit records of the dump."""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import urlencode

from tensorboard.backend import http_util
from werkzeug import wrappers

from tvmdbg_tb.live.channel import MAX_BODY, BodyError, parse_body
from tvmdbg_tb.live.relay import LiveUnavailable, relay

logger = logging.getLogger(__name__)
_JSON = "application/json"


def _body(request) -> dict:
    """The JSON object the dashboard sent (at most MAX_BODY bytes are read)."""
    length = request.content_length
    if length is not None and length > MAX_BODY:
        raise BodyError(f"request body larger than {MAX_BODY} bytes", status=413)
    return parse_body(request.stream.read(MAX_BODY + 1))


def live_routes(resolve_run: Callable) -> dict:
    """Route -> WSGI app. resolve_run(request) gives the RunReader of ?run= (or raises the
    plugin's 400/404 errors: ValueError / LookupError)."""
    pauses = _PauseReads()

    def route(methods: tuple[str, ...], handler):
        @wrappers.Request.application
        def app(request):
            return _answer(request, methods, handler, resolve_run)

        app.__doc__ = handler.__doc__
        return app

    return {
        "/live/state": route(("GET",), pauses.state),
        "/live/command": route(("POST",), _command),
        "/live/keepalive": route(("POST",), _keepalive),
        "/live/watchpoints": route(("GET", "POST"), _watchpoints),
        "/live/watchpoints/delete": route(("POST",), _delete),
        "/live/paused_call": route(("GET",), _paused_call),
        "/live/hits": route(("GET",), _hits),
    }


def _answer(request, methods: tuple[str, ...], handler, resolve_run):
    """handler's (status, answer) as the HTTP answer, every failure as its status."""
    try:
        if request.method not in methods:
            return http_util.Respond(request, {"error": f"use {' or '.join(methods)} for this route"}, _JSON, code=405)
        status, answer = handler(request, resolve_run(request))
        return http_util.Respond(request, answer, _JSON, code=status)
    except LiveUnavailable as error:
        answer = {"error": error.reason, "live": False, **error.details}
        return http_util.Respond(request, answer, _JSON, code=error.status)
    except BodyError as error:
        return http_util.Respond(request, {"error": str(error)}, _JSON, code=error.status)
    except ValueError as error:
        return http_util.Respond(request, {"error": str(error)}, _JSON, code=400)
    except LookupError as error:
        message = error.args[0] if error.args else str(error)
        return http_util.Respond(request, {"error": str(message)}, _JSON, code=404)
    except Exception as error:
        logger.exception("tvmdbg live: %s failed", request.path)
        return http_util.Respond(request, {"error": f"live relay failed: {error!r}"}, _JSON, code=502)


class _PauseReads:
    """The live state route, which reads a run up to a pause once it is shown."""

    def __init__(self) -> None:
        self.read: dict[str, int] = {}  # run directory -> the last pause the run was read up to

    def state(self, request, run):
        """The program's live state, or {"live": false, "reason"} when no program answers.

        A pause is shown once the run is read up to it: the program flushes its dump before it
        pauses, and the page asks for the paused op, its graph and its stack right away, which
        must not wait for (and race with) the reader's next poll."""
        try:
            status, answer = relay(run.path, "GET", "/state")
        except LiveUnavailable as error:
            return 200, {"live": False, "reason": error.reason}
        pause = answer.get("pause") if answer.get("paused") else None
        pause_id = pause.get("pause_id") if isinstance(pause, dict) else None
        if pause_id is not None and self.read.get(run.path) != pause_id:
            try:
                run.update()  # incremental, one update at a time with the reader's poll
            except Exception:  # the poll reports the run's read errors; the state still answers
                logger.warning("tvmdbg live: reading %s at a pause failed", run.path, exc_info=True)
            self.read[run.path] = pause_id
        return status, answer


def _command(request, run):
    """POST {"action": pause|continue|step|next_hit|run_to, "pause_id", "op_name"}."""
    return relay(run.path, "POST", "/command", _body(request))


def _keepalive(request, run):
    """POST {"pause_id": int}: the dashboard still shows this pause (its timeout restarts)."""
    return relay(run.path, "POST", "/keepalive", _body(request))


def _watchpoints(request, run):
    """GET: the list; POST {"condition", "threshold", "min", "max", "op_name", "op_regex"}: add."""
    if request.method == "GET":
        return relay(run.path, "GET", "/watchpoints")
    return relay(run.path, "POST", "/watchpoints", _body(request))


def _delete(request, run):
    """POST {"id": int}: delete a watchpoint."""
    return relay(run.path, "POST", "/watchpoints/delete", _body(request))


def _paused_call(request, run):
    """The paused call's kernel traces so far, paged by begin/end like the list routes."""
    params = {}
    for name in ("begin", "end"):
        text = request.args.get(name)
        if text is not None:
            try:
                params[name] = int(text)
            except ValueError:
                raise ValueError(f"parameter {name!r} must be an integer, got {text[:30]!r}") from None
    return relay(run.path, "GET", "/paused_call?" + urlencode(params))


def _hits(request, run):
    """The dump's watchpoint hits (kept after the program ends)."""
    with run.lock:
        recorded = list(run.watchpoint_hits)
    rows = [
        {
            "wall_time": wall_time,
            "watchpoint_id": h.watchpoint_id,
            "condition": h.condition,
            "description": h.description,
            "op_id": h.op_id,
            "graph_id": h.graph_id,
            "op_name": h.op_name,
            "kernel": h.kernel,
            "output_slot": h.output_slot,
            "execution_index": h.execution_index,
            "detail": h.detail,
            "paused": h.paused,
        }
        for wall_time, h in recorded
    ]
    return 200, {"num_hits": len(rows), "hits": rows}
