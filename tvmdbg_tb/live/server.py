"""The program's end of the control channel: a tiny HTTP server on 127.0.0.1.

The program listens on an ephemeral port of the loopback interface and writes the port, its
pid and a random token into `tvmdbg.live.json` in its run directory (readable only by the
user). Every request must carry the token in the `X-Tvmdbg-Token` header; others are
refused (401 without a token, 403 with a wrong one, e.g. a stale file of an earlier program).
Bodies are checked field by field (400 naming the field); a client that leaves early is a
debug log line, never a traceback on the program's stderr.
The TensorBoard plugin reads the file and relays the dashboard's requests (relay.py).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tvmdbg_tb.live.channel import (
    DEADLINE_HEADER,
    LIVE_FILE,
    MAX_BODY,
    REQUEST_ID_HEADER,
    TOKEN_HEADER,
    BodyError,
    parse_body,
    parse_deadline,
)
from tvmdbg_tb.live.controller import CommandError, LiveController
from tvmdbg_tb.live.watchpoints import WatchpointError

logger = logging.getLogger("tvmdbg.live")

_WATCHPOINT_OPTIONS = ("threshold", "min", "max", "op_name", "op_regex", "pause")
_FIELDS = {  # POST route -> the body's fields (any other is refused)
    "/command": ("action", "pause_id", "op_name"),
    "/keepalive": ("pause_id",),
    "/watchpoints": ("condition", *_WATCHPOINT_OPTIONS),
    "/watchpoints/delete": ("id",),
}


def _cleanse(value):
    """JSON without NaN/Infinity literals (the routes' convention: "NaN", "Infinity")."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: _cleanse(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cleanse(v) for v in value]
    return value


def _check_fields(body: dict, allowed: tuple[str, ...]) -> None:
    for key in body:
        if key not in allowed:
            raise CommandError(f"unknown field {key[:60]!r}; the fields are {', '.join(allowed)}", status=400)


def _integer(body: dict, name: str, required: bool) -> int | None:
    value = body.get(name)
    if value is None:
        if required:
            raise CommandError(f"missing field {name!r}", status=400)
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        text = repr(value)[:60]
        raise CommandError(f"field {name!r} must be an integer, got {type(value).__name__} {text}", status=400)
    return value


def _string(body: dict, name: str, required: bool) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise CommandError(f"missing field {name!r}", status=400)
        return None
    if not isinstance(value, str):
        text = repr(value)[:60]
        raise CommandError(f"field {name!r} must be a string, got {type(value).__name__} {text}", status=400)
    return value


def _query_integer(query: dict[str, list[str]], name: str, default: int) -> int:
    values = query.get(name)
    if not values:
        return default
    text = values[-1].strip()
    if not text.lstrip("-").isdigit() or len(text) > 18:
        raise ValueError(f"parameter {name!r} must be an integer, got {text[:30]!r}")
    return int(text)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10  # seconds a client may take to send its request (a stalled one frees its thread)

    def log_message(self, *args) -> None:  # no request log on the user's stderr
        return None

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(_cleanse(body)).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError as error:  # the client went away: nothing to tell it
            logger.debug("tvmdbg live: client left before the answer to %s: %r", self.path[:100], error)
            self.close_connection = True

    def _authorised(self) -> bool:
        token = self.headers.get(TOKEN_HEADER)
        if not token:
            self._answer(401, {"error": f"missing {TOKEN_HEADER}: this program only obeys its run directory's token"})
            return False
        if not hmac.compare_digest(token.encode(), self.server.token.encode()):
            self._answer(403, {"error": "wrong token: the live file is stale or belongs to another program"})
            return False
        return True

    def _body(self) -> dict:
        raw_length = self.headers.get("Content-Length") or "0"
        if not raw_length.strip().isdigit():
            raise CommandError(f"bad Content-Length {raw_length[:30]!r}", status=400)
        length = int(raw_length)
        if length > MAX_BODY:
            raise CommandError(f"request body larger than {MAX_BODY} bytes", status=413)
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:
            raise CommandError("request body shorter than its Content-Length (the client left?)", status=400)
        return parse_body(raw)

    def do_GET(self) -> None:
        if not self._authorised():
            return
        controller = self.server.controller
        url = urlsplit(self.path)
        if self.path == "/state":
            self._answer(200, {"live": True, "pid": os.getpid(), **controller.state()})
        elif self.path == "/watchpoints":
            self._answer(200, {"watchpoints": controller.list_watchpoints()})
        elif url.path == "/paused_call":
            try:
                query = parse_qs(url.query)
                begin, end = (_query_integer(query, name, default) for name, default in (("begin", 0), ("end", -1)))
                self._answer(200, controller.paused_call(begin, end))
            except CommandError as error:
                self._answer(error.status, {"error": str(error)})
            except ValueError as error:
                self._answer(400, {"error": str(error)})
        else:
            self._answer(404, {"error": f"no such live route: {self.path[:100]!r}"})

    def do_POST(self) -> None:
        if not self._authorised():
            return
        try:
            if self.path not in _FIELDS:
                self._answer(404, {"error": f"no such live route: {self.path[:100]!r}"})
                return
            body = self._body()
            _check_fields(body, _FIELDS[self.path])
            deadline = parse_deadline(self.headers.get(DEADLINE_HEADER))
            request_id = (self.headers.get(REQUEST_ID_HEADER) or "")[:64]
            with self.server.controller.applying(deadline, request_id, self.path, body.get("action")):
                status, answer = self._apply(body)
            self._answer(status, answer)
        except (CommandError, BodyError) as error:
            self._answer(error.status, {"error": str(error)})
        except WatchpointError as error:
            self._answer(error.status, {"error": str(error)})
        except KeyError as error:
            self._answer(404, {"error": str(error.args[0]) if error.args else "not found"})
        except OSError as error:  # the client went away while sending
            logger.debug("tvmdbg live: reading a request to %s failed: %r", self.path[:100], error)
            self.close_connection = True
        except Exception as error:  # never a traceback to the client, never a dead server
            logger.debug("tvmdbg live: %s failed", self.path[:100], exc_info=True)
            self._answer(400, {"error": f"could not apply the request: {error!r}"})

    def _apply(self, body: dict) -> tuple[int, dict]:
        """Applies a checked POST body (under the controller's lock, within its deadline)."""
        controller = self.server.controller
        if self.path == "/command":
            action = _string(body, "action", required=True)
            pause_id = _integer(body, "pause_id", required=False)
            return 200, controller.command(action, pause_id, _string(body, "op_name", required=False))
        if self.path == "/keepalive":
            return 200, controller.keepalive(_integer(body, "pause_id", required=True))
        if self.path == "/watchpoints":
            options = {k: body[k] for k in _WATCHPOINT_OPTIONS if body.get(k) is not None}
            condition = _string(body, "condition", required=True)
            wp = controller.add_watchpoint(condition, strict_scope=True, **options)
            return 200, {"watchpoint": wp.to_json()}
        ident = _integer(body, "id", required=True)  # /watchpoints/delete
        controller.delete_watchpoint(ident)
        return 200, {"ok": True, "deleted": ident}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, controller: LiveController, token: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.controller = controller
        self.token = token

    def handle_error(self, request, client_address) -> None:
        """A connection that failed (reset, closed early): a debug log line, never a traceback
        on the user's program's stderr (socketserver's default)."""
        logger.debug("tvmdbg live: a request from %s failed", client_address, exc_info=True)


class ControlServer:
    """Serves one controller; start() writes the live file, close() removes it."""

    def __init__(self, controller: LiveController, run_dir: str):
        self.controller = controller
        self.run_dir = run_dir
        self.token = secrets.token_hex(16)
        self.path = os.path.join(run_dir, LIVE_FILE)
        self._server = _Server(controller, self.token)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="tvmdbg-live", daemon=True)

    def start(self) -> None:
        self._thread.start()
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"host": "127.0.0.1", "port": self.port, "token": self.token, "pid": os.getpid()}, handle)
        os.replace(tmp, self.path)
        self.controller.serving = True

    def close(self) -> None:
        self.controller.serving = False
        self.controller.close()  # a paused program resumes
        try:
            with open(self.path) as handle:
                mine = json.load(handle).get("token") == self.token
            if mine:
                os.remove(self.path)
        except (OSError, ValueError):
            pass
        self._server.shutdown()
        self._server.server_close()
