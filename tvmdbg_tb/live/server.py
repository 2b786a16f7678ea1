"""The program's end of the control channel: a tiny HTTP server on 127.0.0.1.

The program listens on an ephemeral port of the loopback interface and writes the port, its
pid and a random token into `tvmdbg.live.json` in its run directory (readable only by the
user). Every request must carry the token in the `X-Tvmdbg-Token` header; others are
refused (401 without a token, 403 with a wrong one, e.g. a stale file of an earlier program).
The TensorBoard plugin reads the file and relays the dashboard's requests (relay.py).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tvmdbg_tb.live.channel import LIVE_FILE, TOKEN_HEADER
from tvmdbg_tb.live.controller import CommandError, LiveController
from tvmdbg_tb.live.watchpoints import WatchpointError

MAX_BODY = 64 * 1024
_WATCHPOINT_OPTIONS = ("threshold", "min", "max", "op_name", "op_regex", "pause")


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


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args) -> None:  # no request log on the user's stderr
        return None

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(_cleanse(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

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
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise CommandError(f"request body larger than {MAX_BODY} bytes", status=400)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError as error:
            raise CommandError(f"request body is not JSON: {error}", status=400) from None
        if not isinstance(body, dict):
            raise CommandError("request body must be a JSON object", status=400)
        return body

    def do_GET(self) -> None:
        if not self._authorised():
            return
        controller = self.server.controller
        if self.path == "/state":
            self._answer(200, {"live": True, "pid": os.getpid(), **controller.state()})
        elif self.path == "/watchpoints":
            self._answer(200, {"watchpoints": controller.list_watchpoints()})
        else:
            self._answer(404, {"error": f"no such live route: {self.path[:100]!r}"})

    def do_POST(self) -> None:
        if not self._authorised():
            return
        controller = self.server.controller
        try:
            body = self._body()
            if self.path == "/command":
                pause_id = body.get("pause_id")
                if pause_id is not None and (isinstance(pause_id, bool) or not isinstance(pause_id, int)):
                    raise CommandError(f"pause_id must be an integer, got {pause_id!r}", status=400)
                answer = controller.command(str(body.get("action", "")), pause_id, body.get("op_name"))
                self._answer(200, answer)
            elif self.path == "/watchpoints":
                options = {k: body[k] for k in _WATCHPOINT_OPTIONS if body.get(k) not in (None, "")}
                wp = controller.add_watchpoint(str(body.get("condition", "")), strict_scope=True, **options)
                self._answer(200, {"watchpoint": wp.to_json()})
            elif self.path == "/watchpoints/delete":
                ident = body.get("id")
                if isinstance(ident, bool) or not isinstance(ident, int):
                    raise CommandError(f"id must be an integer, got {ident!r}", status=400)
                controller.delete_watchpoint(ident)
                self._answer(200, {"ok": True, "deleted": ident})
            else:
                self._answer(404, {"error": f"no such live route: {self.path[:100]!r}"})
        except CommandError as error:
            self._answer(error.status, {"error": str(error)})
        except WatchpointError as error:
            self._answer(400, {"error": str(error)})
        except KeyError as error:
            self._answer(404, {"error": str(error.args[0]) if error.args else "not found"})
        except Exception as error:  # never a traceback to the client, never a dead server
            self._answer(400, {"error": f"could not apply the request: {error!r}"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, controller: LiveController, token: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.controller = controller
        self.token = token


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
