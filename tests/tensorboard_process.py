"""`tensorboard --logdir` in a process of its own on 127.0.0.1 (the dashboard's browser tests,
and the hostile-logdir tests that bound its memory), with the plugin of this checkout."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tvmdbg_tb.plugin.guard import DASHBOARD_HEADER

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


class TensorBoardProcess:
    """`tensorboard --logdir` on 127.0.0.1 with a port of its own, stopped by close()."""

    def __init__(self, logdir: Path, log_path: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "w")
        cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--load_fast", "false", "--reload_interval", "1"]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
        self.log_path = log_path
        deadline = time.time() + 90
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tensorboard exited: {log_path.read_text()[-3000:]}")
            try:
                listing = _get_json(f"{self.url}/data/plugins_listing")
                if "tvmdbg" in listing:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"tensorboard did not answer: {log_path.read_text()[-3000:]}")
            time.sleep(0.3)

    def api(self, route: str):
        return _get_json(f"{self.url}/data/plugin/tvmdbg/{route}")

    def settled_runs(self, count: int = 1) -> dict:
        """The runs route once the plugin has read every run (its default run is known) and
        lists at least count: a fresh TensorBoard answers before its reader has read the logdir."""
        deadline = time.time() + 60
        while (body := self.api("runs"))["default_run"] is None or len(body["runs"]) < count:
            assert time.time() < deadline, body
            time.sleep(0.3)
        return body

    def post(self, route: str, body: dict) -> tuple[int, dict]:
        """(status, JSON answer) of a POST sent as a dashboard sends it (JSON, its header)."""
        request = urllib.request.Request(
            f"{self.url}/data/plugin/tvmdbg/{route}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", DASHBOARD_HEADER: "1"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
