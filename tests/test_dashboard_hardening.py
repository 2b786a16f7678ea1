"""The dashboard never runs text from a dump as markup, shows an incomplete dump's banner, and
the NaN of a call that never returned (a program killed while paused at a NaN watchpoint).

Real TensorBoard, real Chromium, a real TVM model whose op names and source file hold
`<img src=x onerror=alert(..)>` and `</script><script>alert(..)</script>`. (TVM refuses such
characters in a VM function's name, so function names cannot carry them.)"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_dashboard_e2e import Browser, TensorBoardProcess  # noqa: F401  (skips without Chromium)

pytestmark = pytest.mark.browser
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("hostile")
    subprocess.run([sys.executable, str(TESTS / "models_hostile.py"), str(logdir / "evil")], check=True, timeout=300)
    # A second run, cut: its traces file lost its last bytes after the writer ended.
    subprocess.run([sys.executable, str(TESTS / "models_hostile.py"), str(logdir / "cut")], check=True, timeout=300)
    (cut_dir,) = (logdir / "cut").iterdir()
    traces = cut_dir / "tvmdbg.graph_execution_traces"
    traces.write_bytes(traces.read_bytes()[:-10])
    _killed_at_nan(logdir / "killed")
    tb = TensorBoardProcess(logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log")
    yield tb
    tb.close()


def _killed_at_nan(logdir: Path) -> None:
    """tests/live_child.py paused by its NaN watchpoint in its first call, then SIGKILLed."""
    from test_live import _child

    from tvmdbg_tb.live.relay import relay

    proc, run_dir = _child(logdir, 600, 3)
    try:
        deadline = time.monotonic() + 120
        while not relay(run_dir, "GET", "/state")[1].get("paused"):
            assert time.monotonic() < deadline, "the program never paused at its NaN"
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_markup_in_op_names_and_sources_shows_as_text_and_never_runs(hostile):
    browser = Browser()
    dialogs = []
    browser.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        frame = browser.open_dashboard(hostile)
        run = next(r["run"] for r in hostile.api("runs")["runs"] if r["run"].startswith("evil"))
        frame.locator(".run-select").select_option(run)
        alert = frame.locator("[data-testid=first-origin-alert]:not([disabled])")
        alert.wait_for()
        alert.click()
        selected = frame.locator("[data-testid=selected-op]")
        selected.wait_for()
        assert selected.inner_text().startswith("op<img src=x onerror=alert(1)></script><script>alert(2)</script>")
        highlighted = frame.locator(".source-panel .src-line.highlighted")
        highlighted.wait_for()
        assert "<img src=x onerror=alert(3)>" in highlighted.inner_text()
        frame.locator(".source-panel .source-body").evaluate("el => (el.scrollTop = 0)")  # line 1, in view
        frame.locator(".source-panel").get_by_text("</script><script>alert(12)</script>", exact=False).first.wait_for()
        assert frame.locator("img[src=x]").count() == 0
        assert frame.locator("script:has-text('alert(')").count() == 0
        browser.page.wait_for_timeout(1000)
        assert dialogs == []
    finally:
        browser.close()


def test_an_incomplete_dump_shows_a_banner(hostile):
    browser = Browser()
    try:
        frame = browser.open_dashboard(hostile)
        runs = {r["run"]: r for r in hostile.api("runs")["runs"]}
        cut = next(name for name in runs if name.startswith("cut"))
        evil = next(name for name in runs if name.startswith("evil"))
        frame.locator(".run-select").select_option(cut)
        banner = frame.locator("[data-testid=completeness-banner]")
        banner.wait_for(state="visible")
        text = banner.inner_text()
        assert "This dump is incomplete" in text and "tvmdbg.graph_execution_traces" in text
        assert banner.locator("li[data-kind=truncated]").count() == 1
        frame.locator(".run-select").select_option(evil)
        banner.wait_for(state="hidden")
    finally:
        browser.close()


def test_the_nan_of_a_call_that_never_returned_is_shown(hostile):
    browser = Browser()
    try:
        frame = browser.open_dashboard(hostile)
        killed = next(r["run"] for r in hostile.api("runs")["runs"] if r["run"].startswith("killed"))
        frame.locator(".run-select").select_option(killed)
        note = frame.locator("[data-testid=unfinished-alerts]")
        note.wait_for(state="visible")
        assert "1 non-finite output in calls that never returned" in note.inner_text()
        assert "tir_log" in note.inner_text() and "NaN 2" in note.inner_text()
        assert "No NaN or ∞ recorded" not in frame.locator(".alerts-panel").inner_text()
    finally:
        browser.close()


@pytest.fixture(scope="module")
def logdir_someone_else_wrote(tmp_path_factory):
    """tests/hostile_dumps.py's logdirs: escapes in every field (a run not UTF-8), every file
    role a FIFO, /dev/zero, a directory, a loop or a link out of the run, headers declaring up
    to 2**64 - 1 bytes in sparse files, dtypes and shapes no tensor has, live files of garbage."""
    import hostile_dumps as hd

    logdir = tmp_path_factory.mktemp("someone_else")
    for build in (hd.escape_runs, hd.file_role_runs, hd.declared_length_runs, hd.values_run):
        build(logdir)
    hd.live_file_runs(logdir, {})
    tb = TensorBoardProcess(logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log")
    yield tb
    tb.close()


@pytest.mark.slow
def test_a_logdir_someone_else_wrote_keeps_the_tab_responsive(logdir_someone_else_wrote):
    """Every hostile run chosen in turn (the escapes model's first alert clicked): the page
    answers at once after each, no main-thread task of the dashboard takes over a second, no
    script error, no dialog, the escapes shown as text, and the header's line per broken run
    never covers the panels (it did: the alert could not be clicked)."""
    from dashboard_checks import assert_answers, assert_layout_sound, inner_frame
    from test_dashboard_big_dumps import LONG_TASK_MS, OBSERVE_LONG_TASKS

    tb = logdir_someone_else_wrote
    browser = Browser()
    browser.context.add_init_script(OBSERVE_LONG_TASKS)
    dialogs = []
    browser.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        frame = browser.open_dashboard(tb)
        select = frame.locator(".run-select")
        runs = select.locator("option").evaluate_all("options => options.map((o) => o.value)")
        assert len(runs) >= 60, runs
        clicked = 0
        for run in runs:
            select.select_option(run)
            frame.locator("body[data-ready=true]").wait_for()
            alert = frame.locator("[data-testid=first-origin-alert]:not([disabled])")
            if run.startswith("escapes/tainted"):  # the real model's copy: its NaN is an alert
                alert.wait_for()
                alert.click()
                frame.locator("[data-testid=selected-op]").wait_for()
                clicked += 1
            assert_answers(browser)
        # A line per broken run (about 80) scrolls within the header: nothing covers the panels.
        assert frame.locator(".problems .problem").count() >= 60
        assert assert_layout_sound(browser) >= 3
        assert clicked == 1
        shown = inner_frame(browser).evaluate("() => document.body.innerText")
        assert "pwned" in shown and "<img" not in inner_frame(browser).content()
        tasks = inner_frame(browser).evaluate("() => window.__longTasks")
        assert max(tasks, default=0) < LONG_TASK_MS, sorted(tasks)[-5:]
        assert [e for e in browser.errors if e.startswith("pageerror")] == [], browser.errors[:5]
        assert dialogs == []
        print(f"{len(runs)} hostile runs shown; longest main-thread task {max(tasks, default=0)} ms")
    finally:
        browser.close()
