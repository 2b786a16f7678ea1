"""Live debugging in the browser: the digits demo started with live control is stopped at its
first NaN from the dashboard, inspected, stepped and continued to the end.

A real `tensorboard` process, the real demo (examples/debug_digits.py --debug --live) as a
child process, and headless Chromium clicking the Live panel.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
e2e = pytest.importorskip("test_dashboard_e2e")  # skips without Chromium or the bundle


def _parse_values(text: str) -> list[float]:
    body = text.strip().strip("[]").replace("…", "")
    return [float(v.replace("Infinity", "inf")) for v in body.split(",") if v.strip()]


def test_stop_at_first_nan_from_the_dashboard(tmp_path):
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    tb = e2e.TensorBoardProcess(logdir, tmp_path / "tensorboard.log")
    out_path = tmp_path / "demo.out"
    demo = None
    browser = None
    try:
        cmd = [sys.executable, str(ROOT / "examples" / "debug_digits.py"), "--debug", "--live"]
        cmd += ["--dump_dir", str(logdir), "--steps", "8"]
        with open(out_path, "w") as out:
            demo = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT), env=dict(os.environ))
        deadline = time.time() + 120
        while not tb.api("runs")["runs"]:
            assert demo.poll() is None, out_path.read_text()
            assert time.time() < deadline, "the demo's run never appeared"
            time.sleep(0.3)
        run = tb.api("runs")["runs"][0]["run"]

        browser = e2e.Browser()
        frame = browser.open_dashboard(tb)
        frame.locator(".run-select").select_option(run)
        status = frame.locator("[data-testid=live-status]")
        # The demo asked to pause at its first kernel, so the dashboard can set watchpoints first.
        status.filter(has_text="paused at").wait_for(timeout=120_000)
        assert "pause requested" in frame.locator("[data-testid=live-paused]").inner_text()

        frame.locator("[data-testid=wp-condition]").select_option("nan_or_inf")
        frame.locator("[data-testid=wp-add]").click()
        frame.locator("[data-testid=live-watchpoint]").filter(has_text="NaN or Inf on all ops").wait_for(timeout=10_000)

        frame.locator("[data-testid=live-next-hit]").click()
        paused = frame.locator("[data-testid=live-paused]")
        paused.filter(has_text="watchpoint #1").wait_for(timeout=60_000)
        op_name = frame.locator("[data-testid=live-paused-op] b").inner_text()
        status_text = status.inner_text()
        assert f"paused at {op_name}" in status_text
        pause_number = int(status_text.split("pause #")[1].split(")")[0])

        # The origin kernel: its inputs hold only finite values, its output does not.
        inputs = frame.locator("[data-testid=live-input-values]")
        assert inputs.count() >= 1
        for k in range(inputs.count()):
            values = _parse_values(inputs.nth(k).inner_text())
            assert values and all(math.isfinite(v) for v in values), values
        outputs = [_parse_values(t) for t in frame.locator("[data-testid=live-output-values]").all_inner_texts()]
        assert any(not math.isfinite(v) for vals in outputs for v in vals), outputs
        assert frame.locator("[data-testid=live-source]").count() == 1
        shots = ROOT / "docs" / "screenshots" if os.environ.get("TVMDBG_UPDATE_SCREENSHOTS") == "1" else tmp_path
        frame.locator("[data-panel=live]").screenshot(path=str(shots / "live_paused_at_first_nan.png"))

        frame.locator("[data-testid=live-step]").click()
        status.filter(has_text=f"pause #{pause_number + 1}").wait_for(timeout=30_000)
        assert "step" in paused.inner_text()

        frame.locator("[data-testid=live-continue]").click()
        assert demo.wait(timeout=180) == 0, out_path.read_text()
        assert "trained 8 steps" in out_path.read_text()
        status.filter(has_text="not live").wait_for(timeout=30_000)

        # The dump keeps the hits, and the first one is where the NaN alerts say the NaN was born.
        deadline = time.time() + 30
        while True:
            hits = tb.api(f"live/hits?run={run}")["hits"]
            alerts = tb.api(f"alerts?run={run}")
            if hits and alerts.get("first_origin_index") is not None:
                break
            assert time.time() < deadline, (hits, alerts)
            time.sleep(0.5)
        assert hits[0]["op_name"] == op_name and hits[0]["paused"]
        # the panel lists the dump's hits once the program is gone
        frame.locator("[data-testid=live-hits]").filter(has_text=f"{len(hits)} watchpoint hits").wait_for(
            timeout=10_000
        )
        origin = alerts["alerts"][alerts["first_origin_index"]]
        assert origin["op_name"] == op_name
    finally:
        if browser is not None:
            browser.close()
        if demo is not None and demo.poll() is None:
            demo.kill()
            demo.wait()
        tb.close()
