"""Live debugging in the browser: the digits demo started with live control is stopped at its
first NaN from the dashboard, inspected, stepped and continued to the end; a page of another
site in the same browser cannot resume it.

A real `tensorboard` process, the real demo (examples/debug_digits.py --debug --live) as a
child process, and headless Chromium clicking the Live panel. The page is open before the
program starts: its run is selected by itself; the pause is the current state of every panel
(its call in the timeline, its op in the graph, its line in the source, its NaN in the
alerts, and in the kernel list the paused call's kernels so far, before the dump holds them,
the paused one selected), on screen at 1440x900 and 1000x700; the header follows the
program's exit within a few seconds; a watchpoint hit is a link to its kernel execution; a
state read delivered after a click never sends a keepalive for the pause the click ended; a
keepalive for a pause another dashboard ended after the panel read it is an answer, not an
error in the console.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
e2e = pytest.importorskip("test_dashboard_e2e")  # skips without Chromium or the bundle
from dashboard_checks import assert_in_view, assert_layout_sound  # noqa: E402


def _parse_values(text: str) -> list[float]:
    body = text.strip().strip("[]").replace("…", "")
    return [float(v.replace("Infinity", "inf")) for v in body.split(",") if v.strip()]


HOSTILE_PAGE = """<!doctype html><body>
<form id=f method=post enctype=text/plain action="{url}"><input name='{{"action":"continue","pause_id":1,"op_name":"' value='"}}'></form>
<script>
  const url = "{url}";
  fetch(url, {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
    body: JSON.stringify({{action: "continue", pause_id: 1}})}}).catch(() => null);
  fetch(url, {{method: "POST", headers: {{"Content-Type": "application/json", "X-Tvmdbg-Dashboard": "1"}},
    body: JSON.stringify({{action: "continue", pause_id: 1}})}})
    .then((r) => (document.title = "answered " + r.status), (e) => (document.title = "blocked " + e.name));
  setTimeout(() => document.getElementById("f").submit(), 300);
</script>"""


def _hostile_page_tries_to_resume(browser, tb, run: str) -> None:
    """Another site's page (another origin: the loopback address on another port) posts
    "continue" to the live program: a no-cors simple fetch, a CORS fetch with the dashboard's
    header, and a text/plain form. Only the form navigates, and it lands on a refusal."""
    url = f"{tb.url}/data/plugin/tvmdbg/live/command?run={run}"
    origin = f"http://127.0.0.1:{e2e._free_port()}"
    page = browser.context.new_page()
    try:
        page.route(
            f"{origin}/", lambda route: route.fulfill(body=HOSTILE_PAGE.format(url=url), content_type="text/html")
        )
        page.goto(f"{origin}/")
        page.wait_for_url(f"{tb.url}/**", timeout=30_000)  # the form's navigation
        body = page.locator("body").inner_text()
        assert "refused" in body, body  # the form's POST answered 403
    finally:
        page.close()


@pytest.mark.slow
def test_stop_at_first_nan_from_the_dashboard(tmp_path):
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    tb = e2e.TensorBoardProcess(logdir, tmp_path / "tensorboard.log")
    out_path = tmp_path / "demo.out"
    demo = None
    browser = None
    try:
        # The page is open first, on the empty logdir: the program's run will select itself.
        browser = e2e.Browser()
        posts = []  # the dashboard's own POSTs, with their headers
        browser.page.on("request", lambda r: r.method == "POST" and posts.append((r.url, r.headers)))
        live_posts_sent = []  # (route, pause_id) of the Live panel's keepalives and commands, in order
        browser.page.on(
            "request",
            lambda r: (
                r.method == "POST"
                and re.search(r"/live/(keepalive|command)\?", r.url)
                and live_posts_sent.append((r.url.split("/live/")[1].split("?")[0], r.post_data_json.get("pause_id")))
            ),
        )
        browser.page.set_viewport_size({"width": 1440, "height": 900})
        frame = browser.open_dashboard(tb)
        frame.locator(".empty-logdir").wait_for()
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
        frame.locator("[data-testid=live-state][data-live=true]").wait_for(timeout=30_000)
        assert frame.locator(".run-select").input_value() == run

        status = frame.locator("[data-testid=live-status]")
        # The demo asked to pause at its first kernel, so the dashboard can set watchpoints first.
        status.filter(has_text="paused at").wait_for(timeout=120_000)
        assert "pause requested" in frame.locator("[data-testid=live-paused]").inner_text()
        assert "pause #1)" in status.inner_text()

        # While the dashboard shows the pause it keeps it alive with explicit POSTs (reading the
        # state does not count), each with the header only the dashboard's code sends.
        deadline = time.time() + 30
        while not any("live/keepalive" in url for url, _ in posts):
            assert time.time() < deadline, posts
            time.sleep(0.2)
        _hostile_page_tries_to_resume(browser, tb, run)
        time.sleep(1.0)
        state = tb.api(f"live/state?run={run}")
        assert state["paused"] and state["pause"]["pause_id"] == 1, state  # the other site changed nothing

        frame.locator("[data-testid=wp-condition]").select_option("nan_or_inf")
        frame.locator("[data-testid=wp-add]").click()
        frame.locator("[data-testid=live-watchpoint]").filter(has_text="NaN or Inf on all ops").wait_for(timeout=10_000)

        # A state read answered while paused but delivered after the user clicked: the command
        # waits for it, and no keepalive names the pause the command ends (a 409 in the console).
        held = []

        def hold(route):
            if held:  # one read is held, the others go through
                return route.continue_()
            held.append((route, route.fetch()))

        browser.page.route("**/live/state?*", hold)
        while not held:
            browser.page.wait_for_timeout(100)
        frame.locator("[data-testid=live-next-hit]").click()
        browser.page.wait_for_timeout(500)
        route, response = held[0]
        route.fulfill(response=response)
        browser.page.unroute("**/live/state?*")
        paused = frame.locator("[data-testid=live-paused]")
        paused.filter(has_text="watchpoint #1").wait_for(timeout=60_000)
        op_name = frame.locator("[data-testid=live-paused-op] b").inner_text()
        status_text = status.inner_text()
        assert f"paused at {op_name}" in status_text
        pause_number = int(status_text.split("pause #")[1].split(")")[0])
        pause = tb.api(f"live/state?run={run}")["pause"]
        assert pause["op_name"] == op_name
        ended = live_posts_sent.index(("command", 1))
        assert ("keepalive", 1) not in live_posts_sent[ended:], live_posts_sent

        # The pause is every panel's current state, on screen at both sizes.
        for size in ((1440, 900), (1000, 700)):
            browser.page.set_viewport_size({"width": size[0], "height": size[1]})
            assert_layout_sound(browser)
            alert = frame.locator("[data-testid=paused-alert]")
            assert_in_view(alert, full=False)
            assert op_name in alert.inner_text() and "NaN" in alert.inner_text()
            call = frame.locator(
                f".timeline-panel [data-testid=paused-call].selected[data-index='{pause['execution_index']}']"
            )
            assert_in_view(call, full=True)
            node = frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{op_name}']")
            assert_in_view(node, full=True)
            assert node.locator(".node-tag.tag-paused").count() == 1
            line = frame.locator(f".source-panel .src-line.highlighted[data-line='{pause['source']['line']}']")
            assert_in_view(line, full=False)
            frame.locator("[data-testid=selected-op]", has_text=op_name).wait_for()
            # The kernel list: the call's kernels so far follow the recorded ones, the paused one
            # selected (its output's NaN in its health), though the dump holds none of them yet.
            row = frame.locator(
                f".executions-panel [data-testid=paused-trace].selected[data-call-position='{pause['call_row']}']"
            )
            assert_in_view(row, full=False)
            assert row.get_attribute("data-op-name") == op_name
            assert row.locator(".c-exec").inner_text() == str(pause["execution_index"])
            assert "nonfinite" in row.get_attribute("class") and row.locator(".health-pill.bad").count() == 1
            count = frame.locator(".executions-panel .count")
            assert count.inner_text().endswith(f"+ {pause['call_traces']} of the paused call"), count.inner_text()
        # The paused call's rows are rows like the others: the arrow keys move through them.
        assert pause["call_row"] > 0, pause  # the demo's NaN is not its call's first kernel
        frame.locator(".executions-panel .vlist").focus()
        browser.page.keyboard.press("ArrowUp")
        above = frame.locator(
            f".executions-panel [data-testid=paused-trace].selected[data-call-position='{pause['call_row'] - 1}']"
        )
        assert_in_view(above, full=False)
        above_op = above.get_attribute("data-op-name")
        frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{above_op}']").wait_for(timeout=10_000)
        frame.locator("[data-testid=live-show-op]").click()  # back to the paused kernel
        assert_in_view(frame.locator(f"[data-testid=paused-trace].selected[data-op-name='{op_name}']"), full=False)
        browser.page.set_viewport_size({"width": 1440, "height": 900})
        # A pause flushes the dump: the calls before it show without waiting for the next poll.
        calls = pause["execution_index"]
        frame.locator(".timeline-panel .timeline-nav", has_text=f"of {calls:,} calls").wait_for(timeout=5_000)
        shots = ROOT / "docs" / "screenshots" if os.environ.get("TVMDBG_UPDATE_SCREENSHOTS") == "1" else tmp_path
        browser.page.wait_for_timeout(500)
        browser.page.screenshot(path=str(shots / "live-paused-dashboard.png"))

        # The Op panel shows the paused kernel's inputs as the Live panel does (the program's
        # counts), though the dump holds no trace of the call yet. It shows the paused op again
        # first: the click above reloads it, and under load the previous op's table stays a while.
        shown_op = re.compile(f"^{re.escape(op_name)}$")
        frame.locator(".details-panel [data-testid=selected-op]", has_text=shown_op).wait_for(timeout=10_000)
        op_inputs = frame.locator(".details-panel .io-table tbody tr")
        assert op_inputs.count() == len(pause["inputs"]) >= 1
        for k, tensor in enumerate(pause["inputs"]):
            health = tensor["health"]
            pill = op_inputs.nth(k).locator(".input-health .health-pill")
            said = pill.get_attribute("data-health")
            for label, key in (("NaN", "nan"), ("-∞", "neg_inf"), ("+∞", "pos_inf"), ("zero", "zero")):
                assert f"{label} {health[key]:,}" in said, (k, said, health)
            live_text = frame.locator("[data-testid=live-input]").nth(k).inner_text()
            assert f"nan={health['nan']}" in live_text and f"zero={health['zero']}" in live_text, live_text

        # The origin kernel: its inputs hold only finite values, its output does not.
        inputs = frame.locator("[data-testid=live-input-values]")
        assert inputs.count() >= 1
        for k in range(inputs.count()):
            values = _parse_values(inputs.nth(k).inner_text())
            assert values and all(math.isfinite(v) for v in values), values
        outputs = [_parse_values(t) for t in frame.locator("[data-testid=live-output-values]").all_inner_texts()]
        assert any(not math.isfinite(v) for vals in outputs for v in vals), outputs
        assert frame.locator("[data-testid=live-source]").count() == 1
        frame.locator("[data-panel=live]").screenshot(path=str(shots / "live_paused_at_first_nan.png"))

        frame.locator("[data-testid=live-step]").click()
        status.filter(has_text=f"pause #{pause_number + 1}").wait_for(timeout=30_000)
        assert "step" in paused.inner_text()
        stepped = tb.api(f"live/state?run={run}")["pause"]
        if stepped["execution_index"] == pause["execution_index"]:  # a step inside the call: one more row
            assert stepped["call_row"] > pause["call_row"], (stepped, pause)
        assert_in_view(
            frame.locator(
                f"[data-testid=paused-trace].selected[data-call-position='{stepped['call_row']}']"
                f"[data-op-name='{stepped['op_name']}']"
            ),
            full=False,
        )

        # The pause ends between a state read and its keepalive (another dashboard steps it):
        # the keepalive is answered "over" (no failed request in the console), nothing changes,
        # and the panel shows the pause the program is at.
        held.clear()
        browser.page.route("**/live/state?*", hold)
        while not held:
            browser.page.wait_for_timeout(100)
        route, response = held[0]
        assert response.json()["pause"]["pause_id"] == stepped["pause_id"]
        status_code, answer = tb.post(f"live/command?run={run}", {"action": "step", "pause_id": stepped["pause_id"]})
        assert status_code == 200, answer
        deadline = time.time() + 30
        # Between the step and the next pause the program runs: the state has no pause then.
        while (tb.api(f"live/state?run={run}")["pause"] or {}).get("pause_id") != stepped["pause_id"] + 1:
            assert time.time() < deadline
            time.sleep(0.1)
        with browser.page.expect_response(lambda r: "/live/keepalive?" in r.url) as kept:
            route.fulfill(response=response)
        browser.page.unroute("**/live/state?*")
        assert kept.value.request.post_data_json == {"pause_id": stepped["pause_id"]}
        answer = kept.value.json()
        assert kept.value.status == 200 and answer["over"] and answer["now"] == stepped["pause_id"] + 1, answer
        status.filter(has_text=f"pause #{stepped['pause_id'] + 1})").wait_for(timeout=30_000)
        assert tb.api(f"live/state?run={run}")["pause"]["pause_id"] == stepped["pause_id"] + 1
        assert browser.errors == [], browser.errors

        frame.locator("[data-testid=live-continue]").click()
        assert demo.wait(timeout=180) == 0, out_path.read_text()
        exited = time.time()
        live_posts = [(url, headers) for url, headers in posts if "/live/" in url]
        assert {url.split("/live/")[1].split("?")[0] for url, _ in live_posts} >= {
            "keepalive",
            "watchpoints",
            "command",
        }
        for url, headers in live_posts:
            assert headers.get("x-tvmdbg-dashboard") == "1" and headers.get("content-type") == "application/json", url
        assert "trained 8 steps" in out_path.read_text()
        status.filter(has_text="not live").wait_for(timeout=30_000)
        # The header follows the program within a few seconds of its exit.
        frame.locator("[data-testid=live-state][data-live=false]").wait_for(timeout=15_000)
        assert time.time() - exited < 8, time.time() - exited
        # Once the program is gone the controls go (no 404 for a run that is not live).
        assert frame.locator("[data-testid=live-pause]").is_hidden()

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
        # A hit is a link like an alert: its kernel execution selected in the list and graph.
        link = frame.locator("[data-testid=live-hit]").last
        hit_op, hit_call = re.match(r"#\d+ (\S+):\d+ \(call (\d+)\)", link.inner_text()).groups()
        link.click()
        row = frame.locator(f".executions-panel .vlist-row.selected[data-op-name='{hit_op}']")
        assert_in_view(row, full=False)
        assert row.locator(".c-exec").inner_text() == hit_call
        assert_in_view(frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{hit_op}']"))
        assert browser.errors == [], browser.errors
    finally:
        if browser is not None:
            browser.close()
        if demo is not None and demo.poll() is None:
            demo.kill()
            demo.wait()
        tb.close()
