"""The TensorBoard side of the control channel: relays the dashboard's requests to the program.

The plugin never holds state about programs: each request reads the run directory's live
file (port, token, pid) and forwards to 127.0.0.1 with the token, so a restarted
TensorBoard, or two of them, work the same. Every failure becomes a clear JSON message.

Neither the live file nor what answers on its port is trusted (the logdir may be someone
else's): the file must be a small regular file of the run (no symlink, FIFO or device); an
answer is read within one overall deadline and up to a size, whatever trickles or floods in.

A request that changes the program carries a deadline (channel.DEADLINE_HEADER): the program
applies it only before then. A request not answered in time is therefore withdrawn: if the
program was frozen (SIGSTOP) and reads it later, it refuses it. Only a request the program
applied just before its deadline and then froze before answering may have happened; the
answer says so, with the request's id, and the program's state lists the requests it applied
(`applied`), so the dashboard can show when it did.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import socket
import threading
import time

from tvmdbg_tb.live.channel import (
    DEADLINE_HEADER,
    LIVE_FILE,
    MAX_ANSWER,
    MAX_LIVE_FILE,
    REQUEST_ID_HEADER,
    TOKEN_HEADER,
    apply_margin,
    clock,
)
from tvmdbg_tb.storage.files import UnreadableStreamError, open_regular

TIMEOUT = 5.0  # seconds for the whole exchange with the program (it answers from its own thread)


class LiveUnavailable(Exception):
    """No program answers for this run; `reason` says why, `status` is the HTTP status, and
    `details` go into the answer beside the reason."""

    def __init__(self, reason: str, status: int = 404, **details):
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.details = details


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _not_a_program(port: int, why: str) -> LiveUnavailable:
    """What answers on the live file's port is no tvmdbg program (the file is stale, or was
    written by someone else): no live program for this run, as for a missing file (404)."""
    return LiveUnavailable(f"no tvmdbg program answers on port {port} of this run's live file ({why})")


def _unreadable(error: object) -> LiveUnavailable:
    return LiveUnavailable(f"the live file {LIVE_FILE} of this run is unreadable: {error}")


def read_live_file(run_dir: str) -> dict:
    """The live file's {"port", "token", "pid"}: a regular file of at most MAX_LIVE_FILE bytes
    opened without following a symlink and without blocking (a FIFO or a device is refused)."""
    path = os.path.join(run_dir, LIVE_FILE)
    try:
        fd = open_regular(path, follow_symlinks=False)
    except FileNotFoundError:
        raise LiveUnavailable(
            "this run has no live program: start it with tvmdbg.enable_dump_debug_info(..., live=True) "
            "(a live program removes its live file when it ends)"
        ) from None
    except UnreadableStreamError as error:
        raise _unreadable(error) from None
    except OSError as error:
        raise _unreadable(error.strerror or error) from None
    try:
        raw = os.read(fd, MAX_LIVE_FILE + 1)
    except OSError as error:
        raise _unreadable(error.strerror or error) from None
    finally:
        os.close(fd)
    if len(raw) > MAX_LIVE_FILE:
        raise _unreadable(f"larger than {MAX_LIVE_FILE} bytes")
    try:
        info = json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise _unreadable(error) from None
    port, token, pid = (info.get(k) for k in ("port", "token", "pid")) if isinstance(info, dict) else (None,) * 3
    if (
        not isinstance(port, int)
        or not 0 < port < 65536
        or not isinstance(token, str)
        or not 0 < len(token) <= 256
        or not token.isascii()
        or not token.isalnum()
        or (pid is not None and not (isinstance(pid, int) and 0 < pid < 1 << 31))
    ):
        raise LiveUnavailable(f"the live file {LIVE_FILE} of this run is malformed")
    return {"port": port, "token": token, "pid": pid}


class _Exchange:
    """One request and its answer within one deadline: a timer shuts the socket down when it
    passes, which ends any read a trickling server would stretch out byte by byte."""

    def __init__(self, port: int, deadline: float):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=max(deadline - clock(), 0.01))
        self.deadline = deadline
        self.expired = False
        self._timer = threading.Timer(max(deadline - clock(), 0.0), self._expire)
        self._timer.daemon = True

    def _expire(self) -> None:
        self.expired = True
        sock = self.connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def run(self, method: str, path: str, data: bytes | None, headers: dict) -> tuple[int, bytes]:
        self._timer.start()
        try:
            self.connection.request(method, path, body=data, headers=headers)
            response = self.connection.getresponse()
            length = response.getheader("Content-Length")
            if length is not None and length.strip().isdigit() and int(length) > MAX_ANSWER:
                raise ValueError(f"the program's answer is {int(length)} bytes, more than {MAX_ANSWER}")
            raw = response.read(MAX_ANSWER + 1)
            if len(raw) > MAX_ANSWER:
                raise ValueError(f"the program's answer is larger than {MAX_ANSWER} bytes")
            return response.status, raw
        finally:
            self._timer.cancel()
            self.connection.close()


def relay(run_dir: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """(status, JSON answer) of the run's program for one request; LiveUnavailable if none.
    A POST carries a request id and the deadline before which the program may apply it."""
    info = read_live_file(run_dir)
    pid = info["pid"]
    start = clock()
    deadline = start + TIMEOUT
    headers = {TOKEN_HEADER: info["token"]}
    request_id = None
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if method == "POST":
        request_id = secrets.token_hex(8)
        headers[REQUEST_ID_HEADER] = request_id
        headers[DEADLINE_HEADER] = repr(deadline - apply_margin(TIMEOUT))
    exchange = _Exchange(info["port"], deadline)
    try:
        status, raw = exchange.run(method, path, data, headers)
    except ConnectionRefusedError:
        gone = isinstance(pid, int) and not _pid_alive(pid)
        raise LiveUnavailable(
            f"the program (pid {pid}) has exited; its live file is stale"
            if gone
            else f"the program (pid {pid}) does not accept connections on port {info['port']} (stale live file?)"
        ) from None
    except ValueError as error:
        raise _not_a_program(info["port"], str(error)) from None
    except (TimeoutError, OSError, http.client.HTTPException) as error:
        if not (exchange.expired or isinstance(error, TimeoutError) or clock() >= deadline):
            raise LiveUnavailable(f"could not reach the program (pid {pid}): {error}", status=502) from None
        if request_id is None:
            raise LiveUnavailable(f"the program (pid {pid}) did not answer within {TIMEOUT:g} s", status=504) from None
        applied_by = time.time() + (deadline - apply_margin(TIMEOUT) - clock())
        raise LiveUnavailable(
            f"the program (pid {pid}) did not answer within {TIMEOUT:g} s (frozen or busy); the request was "
            "withdrawn: the program refuses it from now on. It took effect only if the program applied it "
            "before it froze; its state lists the requests it applied (applied)",
            status=504,
            request_id=request_id,
            withdrawn=True,
            applied_only_before=applied_by,
        ) from None
    try:
        answer = json.loads(raw)
    except (ValueError, RecursionError):
        raise _not_a_program(info["port"], "not JSON") from None
    if not isinstance(answer, dict) or not 200 <= status < 500:
        raise _not_a_program(info["port"], f"HTTP {status}")
    if status in (401, 403):
        answer = {"error": f"the program refused the live file's token (stale file?): {answer.get('error', '')}"}
    if request_id is not None:
        answer.setdefault("request_id", request_id)
    return status, answer
