"""Only the dashboard drives a live program, and nothing sent to it can hurt the program.

A real `tensorboard` process and a real training loop (tests/live_trainer.py: the digits MLP,
fused build, live=True) in a child process. Requests are raw HTTP, as a hostile page, a
rebinding DNS name or a broken client would send them: cross-site simple and form POSTs,
foreign Host and Origin headers, catastrophic and huge patterns, 500 watchpoints, malformed
bodies, clients that leave early. Each test checks the program's state, that its training
loop keeps stepping, and at the end that its stderr holds no traceback.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tvmdbg_tb.live.channel import LIVE_FILE, TOKEN_HEADER
from tvmdbg_tb.live.controller import MAX_WATCHPOINTS
from tvmdbg_tb.live.watchpoints import MAX_PATTERN_CHARS
from tvmdbg_tb.plugin.guard import DASHBOARD_HEADER

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "/data/plugin/tvmdbg/"
e2e = pytest.importorskip("test_dashboard_e2e")  # TensorBoardProcess (skips without the bundle)
JSON = {"Content-Type": "application/json"}
DASHBOARD = {**JSON, DASHBOARD_HEADER: "1"}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class Program:
    """The training child, TensorBoard, and raw HTTP to both."""

    def __init__(self, tmp: Path):
        self.logdir = tmp / "logdir"
        self.logdir.mkdir()
        self.stderr_path = tmp / "trainer.stderr"
        self.tb = e2e.TensorBoardProcess(self.logdir, tmp / "tensorboard.log")
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
        )
        self._stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "live_trainer.py"), str(self.logdir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=env,
        )
        line = self.proc.stdout.readline()
        assert line.startswith("READY"), (line, self.stderr_path.read_text())
        self.run_dir = line.split()[1]
        self.run = os.path.relpath(self.run_dir, self.logdir)
        self.steps = 0
        threading.Thread(target=self._count_steps, daemon=True).start()
        deadline = time.time() + 120
        while self.run not in [r["run"] for r in self.tb.api("runs")["runs"]] or self.steps < 3:
            assert time.time() < deadline, ("the run never appeared in TensorBoard or never trained", self.steps)
            assert self.proc.poll() is None, self.stderr_path.read_text()
            time.sleep(0.2)

    def _count_steps(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("STEP"):
                self.steps = int(line.split()[1])

    def request(self, method: str, route: str, body=None, headers=None, host: str | None = None):
        """(status, JSON answer) of TensorBoard for one raw request."""
        connection = http.client.HTTPConnection("127.0.0.1", self.tb.port, timeout=30)
        sent = dict(headers or {})
        if host is not None:
            sent["Host"] = host
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        try:
            connection.request(method, f"{PREFIX}{route}?run={self.run}", body=data, headers=sent)
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, {"raw": raw[:200]}

    def dashboard(self, route: str, body):
        return self.request("POST", route, body, {**DASHBOARD, "Origin": self.tb.url})

    def state(self) -> dict:
        status, state = self.request("GET", "live/state")
        assert status == 200 and state["live"], state
        return state

    def stepping(self, seconds: float) -> int:
        """Training steps made in the next `seconds` (0 while paused)."""
        start = self.steps
        time.sleep(seconds)
        return self.steps - start

    def advances(self, timeout: float = 60.0) -> bool:
        """Whether the loop makes a training step within `timeout` (it is not stalled; generous,
        since a step can take seconds on a loaded machine)."""
        start, deadline = self.steps, time.time() + timeout
        while self.steps == start:
            if time.time() > deadline:
                return False
            time.sleep(0.05)
        return True

    def rate(self, steps: int = 5, timeout: float = 120.0) -> float:
        """Training steps per second over the next `steps` steps (or `timeout`)."""
        start, began = self.steps, time.time()
        while self.steps < start + steps and time.time() < began + timeout:
            time.sleep(0.05)
        return (self.steps - start) / (time.time() - began)

    def close(self) -> str:
        """Stops the child; returns its stderr."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.tb.close()
            self._stderr.close()
        return self.stderr_path.read_text()


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    program = Program(tmp_path_factory.mktemp("trust"))
    try:
        yield program
    finally:
        stderr = program.close()
        assert program.proc.returncode == 0, stderr
        assert "Traceback" not in stderr, stderr


def test_cross_site_posts_are_refused_with_no_effect(program):
    evil = {"Origin": "http://evil.example"}
    pause = json.dumps({"action": "pause"}).encode()
    attempts = [
        ({**evil, "Content-Type": "text/plain"}, pause, 403),  # a cross-site "simple" fetch/XHR
        ({**evil, "Content-Type": "application/x-www-form-urlencoded"}, b"action=pause", 403),  # a form
        ({"Content-Type": "text/plain"}, pause, 415),  # no Origin (an old browser): not JSON
        (JSON, pause, 403),  # JSON without the dashboard's header
        ({**DASHBOARD, **evil}, pause, 403),  # all headers, but from another site's page
        ({**DASHBOARD, "Origin": "null"}, pause, 403),  # a sandboxed frame or a file:// page
    ]
    for headers, body, expected in attempts:
        status, answer = program.request("POST", "live/command", body, headers)
        assert status == expected, (headers, status, answer)
        assert answer["error"].startswith("refused: "), answer
    status, answer = program.request(
        "POST", "live/watchpoints", {"condition": "all_zero"}, {**evil, "Content-Type": "text/plain"}
    )
    assert status == 403
    status, _ = program.request("GET", "live/command", None, evil)  # a GET never changes state
    assert status == 403
    status, _ = program.request("GET", "live/command")
    assert status == 405
    assert program.advances()
    state = program.state()
    assert not state["paused"] and not state["pause_requested"] and state["watchpoints"] == []

    # The dashboard's own request (JSON, its header, its own Origin) still works.
    status, answer = program.dashboard("live/command", {"action": "pause"})
    assert status == 200, answer
    deadline = time.time() + 30
    while not (state := program.state())["paused"]:
        assert time.time() < deadline, state
        time.sleep(0.1)
    pause_id = state["pause"]["pause_id"]
    assert program.stepping(1.0) == 0  # paused for real
    status, answer = program.dashboard("live/keepalive", {"pause_id": pause_id})
    assert status == 200 and answer["pause_id"] == pause_id, answer
    status, answer = program.dashboard("live/command", {"action": "continue", "pause_id": pause_id})
    assert status == 200, answer
    assert program.advances()


def test_foreign_host_is_refused_on_read_and_live_routes(program):
    port = program.tb.port
    for route in ("runs", "live/state", "source_files/list", "index.js"):
        status, answer = program.request("GET", route, host=f"evil.example:{port}")
        assert status == 403 and "Host 'evil.example:" in answer["error"], (route, status, answer)
        status, answer = program.request("GET", route, host=f"localhost.evil.example:{port}")
        assert status == 403, (route, status, answer)
    status, answer = program.request(
        "POST", "live/command", {"action": "pause"}, DASHBOARD, host=f"attacker.example:{port}"
    )
    assert status == 403 and "rebinding" in answer["error"], answer
    assert not program.state()["pause_requested"]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST.:{port}", "localhost"):
        status, answer = program.request("GET", "runs", host=host)
        assert status == 200 and answer["runs"], (host, answer)
    status, answer = program.request("GET", "runs", headers={"Origin": "http://evil.example"})
    assert status == 403 and "evil.example" in answer["error"]
    status, answer = program.request("GET", "runs", headers={"Origin": program.tb.url})
    assert status == 200


def test_hostile_patterns_never_stall_the_training_loop(program):
    before = program.rate()
    assert before > 0
    long_pattern = "a" * 10_000
    status, answer = program.dashboard("live/watchpoints", {"condition": "nan_or_inf", "op_regex": long_pattern})
    assert status == 400 and f"at most {MAX_PATTERN_CHARS}" in answer["error"] and "op_regex" in answer["error"]
    status, answer = program.dashboard("live/watchpoints", {"condition": "nan_or_inf", "op_regex": r"(\w+)+#"})
    assert status == 200, answer  # the regex engine proves quickly that no name matches
    wp = answer["watchpoint"]["id"]
    # exponential on the fused kernels' names (3^21 paths on "fused_matmul_add_relu"): refused in bounded time
    started = time.time()
    status, answer = program.dashboard("live/watchpoints", {"condition": "nan_or_inf", "op_regex": r"(\w|\w|\w)+(?=#)"})
    assert status == 400 and "takes longer than" in answer["error"], answer
    assert time.time() - started < 10
    after = program.rate()
    print(f"training steps per second: {before:.1f} before the hostile patterns, {after:.1f} after")
    assert after >= before / 5, (before, after)  # still training at a comparable pace
    assert program.dashboard("live/watchpoints/delete", {"id": wp})[0] == 200


def test_500_watchpoint_posts_keep_the_program_small(program):
    rss_before = _rss_mb(program.proc.pid)
    bodies = [
        {"condition": "changed", "threshold": 0.0},  # keeps a copy of every output
        {"condition": "abs_above", "threshold": 1e9, "op_regex": "matmul|add", "pause": False},
        {"condition": "value_range", "min": -1e9, "max": 1e9},
        {"condition": "nan_or_inf", "pause": False},
    ]
    statuses = []
    for k in range(500):
        status, answer = program.dashboard("live/watchpoints", bodies[k % len(bodies)])
        statuses.append(status)
        if status != 200:
            assert status == 409 and "delete some first" in answer["error"], answer
    assert statuses.count(200) == MAX_WATCHPOINTS and statuses.count(409) == 500 - MAX_WATCHPOINTS
    assert program.advances()
    state = program.state()
    assert len(state["watchpoints"]) == MAX_WATCHPOINTS
    kept = sum(w["kept_bytes"] for w in state["watchpoints"])
    assert kept <= 128 << 20
    growth = _rss_mb(program.proc.pid) - rss_before
    print(f"program RSS {rss_before:.0f} MB -> +{growth:.0f} MB after 500 watchpoint POSTs ({kept >> 20} MB kept)")
    assert growth < 300, growth
    for watchpoint in state["watchpoints"]:
        assert program.dashboard("live/watchpoints/delete", {"id": watchpoint["id"]})[0] == 200
    assert program.state()["watchpoints"] == []


def test_malformed_bodies_are_4xx_and_leave_no_traceback(program):
    deep = b"[" * 100_000 + b"]" * 100_000
    cases = {
        "live/command": [
            deep[:60_000],
            b'{"action": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
            b"{not json",
            b"[]",
            b'"pause"',
            b"null",
            b'{"action": ["pause"]}',
            b'{"action": "continue", "pause_id": "1"}',
            b'{"action": "continue", "pause_id": true}',
            b'{"action": "run_to", "op_name": 5}',
            b'{"action": "fly"}',
            b"{}",
            b'{"action": "pause", "extra": 1}',
            b"x" * 70_000,
        ],
        "live/keepalive": [b"{}", b'{"pause_id": 1.5}', b'{"pause_id": 0}', b'{"pause_id": 99}'],
        "live/watchpoints": [
            b'{"condition": "changed", "threshold": 1, "pause": "false"}',
            b'{"condition": 5}',
            b'{"condition": {"a": [[[[1]]]]}}',
            b'{"condition": "abs_above", "threshold": "big"}',
            b'{"condition": "abs_above", "threshold": NaN}',
            b'{"condition": "value_range", "min": 2, "max": 1}',
            b'{"condition": "nan_or_inf", "op_regex": ["x"]}',
            b'{"condition": "nan_or_inf", "op_regex": "("}',
            b'{"condition": "nan_or_inf", "op_name": "no_such_op"}',
            b'{"condition": "nan_or_inf", "treshold": 1}',
        ],
        "live/watchpoints/delete": [b'{"id": "1"}', b'{"id": 12345}', b"{}"],
    }
    for route, bodies in cases.items():
        for body in bodies:
            status, answer = program.request("POST", route, body, {**DASHBOARD, "Origin": program.tb.url})
            assert 400 <= status < 500, (route, body[:80], status, answer)
            assert answer.get("error"), (route, body[:80], answer)
    status, answer = program.dashboard("live/watchpoints", {"condition": "changed", "threshold": 1, "pause": "false"})
    assert status == 400 and "pause must be true or false" in answer["error"]
    status, answer = program.dashboard("live/watchpoints", {"condition": "abs_above", "threshold": "big"})
    assert status == 400 and "'threshold' must be a number" in answer["error"]
    status, answer = program.dashboard("live/watchpoints", {"condition": "nan_or_inf", "treshold": 1})
    assert status == 400 and "unknown field 'treshold'" in answer["error"]
    status, answer = program.dashboard("live/command", {"action": "continue", "pause_id": "1"})
    assert status == 400 and "'pause_id' must be an integer" in answer["error"]
    assert program.state()["watchpoints"] == []

    # Straight to the program's port (with its token): clients that leave early.
    info = json.loads(Path(program.run_dir, LIVE_FILE).read_text())
    for request in (
        f"POST /command HTTP/1.1\r\nHost: x\r\n{TOKEN_HEADER}: {info['token']}\r\nContent-Length: 1000\r\n\r\n{{",
        f"POST /command HTTP/1.1\r\nHost: x\r\n{TOKEN_HEADER}: {info['token']}\r\nContent-Length: -5\r\n\r\n",
        f"GET /state HTTP/1.1\r\nHost: x\r\n{TOKEN_HEADER}: {info['token']}\r\n\r\n",  # leaves before the answer
        "GET /sta",
    ):
        with socket.create_connection(("127.0.0.1", info["port"]), timeout=10) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
            sock.sendall(request.encode())
    assert program.advances()
    assert program.state()["live"]
    assert "Traceback" not in program.stderr_path.read_text()
