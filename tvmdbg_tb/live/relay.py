"""The TensorBoard side of the control channel: relays the dashboard's requests to the program.

The plugin never holds state about programs: each request reads the run directory's live
file (port, token, pid) and forwards to 127.0.0.1 with the token, so a restarted
TensorBoard, or two of them, work the same. Every failure becomes a clear JSON message.
"""

from __future__ import annotations

import http.client
import json
import os

from tvmdbg_tb.live.channel import LIVE_FILE, TOKEN_HEADER

TIMEOUT = 5.0  # seconds to wait for the program's answer (it answers from its own thread)


class LiveUnavailable(Exception):
    """No program answers for this run; `reason` says why, `status` is the HTTP status."""

    def __init__(self, reason: str, status: int = 404):
        super().__init__(reason)
        self.reason = reason
        self.status = status


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def read_live_file(run_dir: str) -> dict:
    path = os.path.join(run_dir, LIVE_FILE)
    try:
        with open(path) as handle:
            info = json.load(handle)
    except FileNotFoundError:
        raise LiveUnavailable(
            "this run has no live program: start it with tvmdbg.enable_dump_debug_info(..., live=True) "
            "(a live program removes its live file when it ends)"
        ) from None
    except (OSError, ValueError) as error:
        raise LiveUnavailable(f"the live file {LIVE_FILE} of this run is unreadable: {error}") from None
    if not isinstance(info, dict) or not isinstance(info.get("port"), int) or not isinstance(info.get("token"), str):
        raise LiveUnavailable(f"the live file {LIVE_FILE} of this run is malformed")
    return info


def relay(run_dir: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """(status, JSON answer) of the run's program for one request; LiveUnavailable if none."""
    info = read_live_file(run_dir)
    pid = info.get("pid")
    connection = http.client.HTTPConnection("127.0.0.1", info["port"], timeout=TIMEOUT)
    headers = {TOKEN_HEADER: info["token"]}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        status, raw = response.status, response.read()
    except ConnectionRefusedError:
        gone = isinstance(pid, int) and not _pid_alive(pid)
        raise LiveUnavailable(
            f"the program (pid {pid}) has exited; its live file is stale"
            if gone
            else f"the program (pid {pid}) does not accept connections on port {info['port']} (stale live file?)"
        ) from None
    except TimeoutError:
        raise LiveUnavailable(f"the program (pid {pid}) did not answer within {TIMEOUT:g} s", status=504) from None
    except OSError as error:
        raise LiveUnavailable(f"could not reach the program (pid {pid}): {error}", status=502) from None
    finally:
        connection.close()
    try:
        answer = json.loads(raw)
    except ValueError:
        raise LiveUnavailable(f"the program's answer on port {info['port']} is not JSON", status=502) from None
    if status in (401, 403):
        answer = {"error": f"the program refused the live file's token (stale file?): {answer.get('error', '')}"}
    return status, answer
