"""The run picker and run switches, in real Chromium on a real `tensorboard` serving two real
runs of examples/debug_digits.py laid out as scripts/demo.sh does (nan/: the buggy training,
fixed/: the --fix one, four steps each): the page opens on the run the CLI shows (the one
whose first NaN came first) until the user picks another; the picker tells them apart by
their command line, and a switch refreshes every panel (the Profile tab shows the new run's
total) and resets per-run state (tab, whole-graph box, filter)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from test_dashboard_e2e import ROOT, Browser, TensorBoardProcess

from tvmdbg_tb.events.reader import DebugDataReader

pytestmark = pytest.mark.browser

FIRST_NAN = "the run whose first NaN/Inf was recorded first"


@pytest.fixture(scope="module")
def digits_logdir(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("digits")
    env = dict(os.environ, TVM_NUM_THREADS="1")
    for name, extra in (("nan", []), ("fixed", ["--fix"])):
        cmd = [sys.executable, str(ROOT / "examples" / "debug_digits.py"), "--steps", "4", "--debug"]
        cmd += ["--dump_dir", str(logdir / name), *extra]
        subprocess.run(cmd, check=True, env=env, cwd=str(ROOT), timeout=600)
    return logdir


@pytest.fixture(scope="module")
def tb(digits_logdir, tmp_path_factory):
    server = TensorBoardProcess(digits_logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log")
    yield server
    server.close()


@pytest.fixture(scope="module")
def b():
    browser = Browser()
    yield browser
    browser.close()


def _shown_run(frame, expected: str, timeout: float = 15.0) -> None:
    select = frame.locator(".run-select")
    deadline = time.time() + timeout
    while select.input_value() != expected:
        assert time.time() < deadline, (select.input_value(), expected)
        time.sleep(0.2)


def _filter(frame, text: str) -> None:
    """Types `text` into the kernel list's filter and waits for the answer to it: until then
    the chips shown answer the previous text (a chip of it may be gone a moment later)."""
    frame.locator(".executions-panel .filter-input").fill(text)
    _answered(frame, text)


def _answered(frame, text: str) -> None:
    frame.locator(f".executions-panel .filter-info[data-query='{text}']:not([aria-busy])").wait_for(state="attached")


def _next_poll(frame) -> None:
    """Waits for the dashboard's next refresh of the runs list (every 3 s)."""
    checked = frame.locator("[data-testid=live-state]")
    before = checked.inner_text()
    deadline = time.time() + 10
    while checked.inner_text() == before:
        assert time.time() < deadline, before
        time.sleep(0.2)


@pytest.mark.slow
def test_opens_on_the_run_the_cli_shows(digits_logdir, tb, b, tmp_path):
    """The page opens on DebugDataReader.choose()'s run, as `tvmdbg alerts LOGDIR` does (nan/,
    whose first NaN came first, though fixed/ is newer); the user's pick stays through refreshes.
    Copied under names that sort the other way, the choice does not follow the names."""
    body = tb.settled_runs(2)
    nan = next(r["run"] for r in body["runs"] if r["run"].startswith("nan/"))
    fixed = next(r["run"] for r in body["runs"] if r["run"].startswith("fixed/"))
    with DebugDataReader(digits_logdir) as reader:
        reader.update()
        chosen, why = reader.choose()
    assert (body["default_run"], body["default_run_reason"]) == (chosen.name, why) == (nan, FIRST_NAN)
    starts = {r["run"]: r["start_time"] for r in body["runs"]}
    assert starts[fixed] > starts[nan]  # the newest run is not the one shown

    frame = b.open_dashboard(tb)
    _shown_run(frame, nan)
    select = frame.locator(".run-select")
    assert select.get_attribute("title") == f"opens by default: {nan}, {FIRST_NAN}"
    frame.locator("[data-testid=first-origin-alert]:not([disabled])").wait_for()  # the NaN run's alerts
    select.select_option(fixed)
    frame.locator("[data-panel=alerts] .no-alerts").wait_for()
    _next_poll(frame)
    assert select.input_value() == fixed  # picked: no default overrides it
    b.page.reload()
    frame.locator("body[data-ready=true]").wait_for(timeout=30_000)
    _shown_run(frame, nan)  # a new page opens on the default again

    # The same two runs under names whose order says the opposite: the first NaN still decides.
    other = tmp_path / "renamed"
    shutil.copytree(digits_logdir / "fixed", other / "b_fixed")
    shutil.copytree(digits_logdir / "nan", other / "a_nan")
    renamed = TensorBoardProcess(other, tmp_path / "renamed.log")
    try:
        body = renamed.settled_runs(2)
        a_nan = next(r["run"] for r in body["runs"] if r["run"].startswith("a_nan/"))
        assert body["default_run"] == a_nan and body["runs"][-1]["run"].startswith("b_fixed/")
        frame = b.open_dashboard(renamed)
        _shown_run(frame, a_nan)
    finally:
        b.page.goto("about:blank")  # no request of the page outlives its server
        renamed.close()
    assert b.errors == [], b.errors


@pytest.mark.slow
def test_run_picker_shows_argv_and_switch_refreshes_profile(tb, b):
    runs = tb.settled_runs(2)["runs"]
    assert len(runs) == 2
    fixed = next(r for r in runs if "--fix" in r["argv"])
    buggy = next(r for r in runs if "--fix" not in r["argv"])
    totals = {r["run"]: tb.api(f"profile?run={r['run']}")["total_us"] for r in runs}
    assert totals[fixed["run"]] != totals[buggy["run"]]

    frame = b.open_dashboard(tb)
    select = frame.locator(".run-select")
    labels = {o.get_attribute("value"): o.inner_text() for o in select.locator("option").all()}
    assert "--fix" in labels[fixed["run"]] and "--fix" not in labels[buggy["run"]]
    for r in runs:
        label = labels[r["run"]]
        assert "debug_digits.py" in label and "FULL_HEALTH" in label and f"{r['num_alerts']:,} alert" in label

    def open_profile(run: str) -> float:
        frame.locator(".details-panel [data-tab=profile]").click()
        total = frame.locator(f".profile-total[data-run='{run}']")
        total.wait_for()
        return float(total.get_attribute("data-total-us"))

    select.select_option(buggy["run"])
    frame.locator("[data-testid=whole-graph]").check()
    frame.locator(".executions-panel .filter-input").fill("lv")
    assert open_profile(buggy["run"]) == pytest.approx(totals[buggy["run"]])

    select.select_option(fixed["run"])  # while the Profile tab is open
    frame.locator(".details-panel[data-tab=op]").wait_for()
    assert not frame.locator("[data-testid=whole-graph]").is_checked()
    assert frame.locator(".executions-panel .filter-input").input_value() == ""
    assert open_profile(fixed["run"]) == pytest.approx(totals[fixed["run"]])
    rows = frame.locator(".profile-table tbody tr").count()
    assert rows == len(tb.api(f"profile?run={fixed['run']}")["rows"])
    # The profile's function column names each row's function (graph).
    graphs = tb.api(f"graphs/list?run={fixed['run']}")["graphs"]
    names = {g["name"] for g in graphs}
    shown = {c.inner_text() for c in frame.locator(".profile-table td.profile-function").all()}
    assert shown and shown <= names and len(shown) > 1

    # `lv` is a var name in two functions: the filter offers both, labelled by function,
    # and the one picked is the one listed.
    ops = [
        o
        for g in graphs
        for o in tb.api(f"graphs/graph_info?run={fixed['run']}&graph_id={g['graph_id']}")["ops"]
        if o["op_name"] == "lv"
    ]
    assert len({o["graph_id"] for o in ops}) > 1
    _filter(frame, "lv")
    chips = frame.locator(".executions-panel .filter-info .chip", has_text="lv ·")
    chips.first.wait_for()
    second = ops[-1]
    chip = frame.locator(f".executions-panel .filter-info .chip[data-op-id='{second['op_id']}']")
    assert "·" in chip.inner_text()
    chip.click()
    total = tb.api(f"graph_execution/op_traces?run={fixed['run']}&op_id={second['op_id']}&begin=0&end=0")
    # The head names the op at once ("0 executions of lv") and its count when the backend has
    # counted them: wait for the count.
    frame.locator(".executions-panel .panel-head", has_text=f"{total['num_traces']:,} executions of lv").wait_for()
    assert (
        frame.locator(".executions-panel .panel-head").inner_text().count(f"{total['num_traces']:,} executions of lv")
    )
    row = frame.locator(".executions-panel .vlist-row[data-position]").first
    row.wait_for()
    row.click()
    frame.locator(".details-panel [data-tab=op]").click()
    frame.locator("[data-testid=selected-op]", has_text="lv").wait_for()
    assert frame.locator(".executions-panel .vlist-row.selected").count() == 1

    # An op of the gradient function says tvm.relax.training made it (no user source line).
    adjoint = next(g for g in graphs if g["name"].endswith("_adjoint"))
    grad_op = next(
        o
        for o in tb.api(f"graphs/graph_info?run={fixed['run']}&graph_id={adjoint['graph_id']}")["ops"]
        if not o["stack_frame_ids"]
    )
    # While the search for the new text is out, the chips shown answer the old one and say so
    # (held here: under load it is slow, and a test that clicked such a chip lost it).
    held = []
    b.page.route("**/graphs/search?*", lambda route: held.append(route))
    frame.locator(".executions-panel .filter-input").fill(grad_op["op_name"])
    busy = frame.locator(".executions-panel .filter-info[aria-busy=true][data-query='lv']")
    busy.locator(".chip").first.wait_for()
    while not held:
        b.page.wait_for_timeout(50)
    for route in held:
        route.continue_()
    b.page.unroute("**/graphs/search?*")
    _answered(frame, grad_op["op_name"])
    pick = frame.locator(f".executions-panel .filter-info .chip[data-op-id='{grad_op['op_id']}']")
    if pick.count():
        pick.click()
    frame.locator(".executions-panel .panel-head", has_text=f"executions of {grad_op['op_name']}").wait_for()
    frame.locator(".executions-panel .vlist-row[data-position]").first.click()
    note = frame.locator("[data-testid=no-stack]", has_text="tvm.relax.training")
    note.wait_for()
    assert adjoint["name"] in note.inner_text()
    assert b.errors == []
