"""The dashboard end to end: a real `tensorboard` process serving a real dump (tiny TVM models
with a planted NaN, run through tvmdbg's instrumentation), driven in headless Chromium.

One click on the NaN alert must land on the op that made the first non-finite value: selected in
the executions list, centred in the graph, its creation line highlighted in the source view and
its health pill showing the counts numpy gives for the same computation. Screenshots of every
panel go to a temporary directory, or to docs/screenshots/ with TVMDBG_UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
BUNDLE = ROOT / "tvmdbg_tb_frontend" / "dist" / "index.js"
# Safe inputs for the planted model: x - y > 0 everywhere, so log stays finite.
SAFE_Y = np.zeros((1, 8), dtype="float32")

if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (scripts/setup.sh installs Debian's chromium as root)", allow_module_level=True)
if not BUNDLE.exists():
    pytest.skip("the dashboard bundle is not built: run bash tvmdbg_tb_frontend/build.sh", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api")

from tensorboard_process import TensorBoardProcess, _free_port, _get_json  # noqa: E402, F401


def _screenshot_dir(tmp_path_factory) -> Path:
    if os.environ.get("TVMDBG_UPDATE_SCREENSHOTS") == "1":
        out = ROOT / "docs" / "screenshots"
        out.mkdir(parents=True, exist_ok=True)
        return out
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    """Two runs of real TVM models: FULL_HEALTH (a finite call, then the planted log NaN, then a
    fused model) and FULL_TENSOR (the planted model once), each a run directory of its own."""
    import tvm
    from models import SHAPE, nn_planted, planted

    import tvmdbg

    logdir = tmp_path_factory.mktemp("dashboard_logdir")
    health_dir, tensor_dir = logdir / "health", logdir / "tensor"
    tvmdbg.enable_dump_debug_info(str(health_dir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        model = nn_planted("log", fuse=False)
        vm = tvm.relax.VirtualMachine(model.executable, tvm.cpu())
        x, y, w = model.inputs
        vm[model.function](*(tvm.runtime.tensor(a) for a in (x, SAFE_Y, w)))  # finite call
        vm[model.function](*(tvm.runtime.tensor(a) for a in model.inputs))  # NaN is born in log
        fused = planted("blockbuilder", "sqrt", fuse=True)
        fused.run()
    finally:
        tvmdbg.disable_dump_debug_info()
    tvmdbg.enable_dump_debug_info(str(tensor_dir), tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1)
    try:
        nn_planted("log", fuse=False).run()
    finally:
        tvmdbg.disable_dump_debug_info()
    with np.errstate(all="ignore"):
        expected_log = np.log(x - model.inputs[1])
    assert expected_log.shape == SHAPE
    return {"logdir": logdir, "model": model, "fused": fused, "expected_log": expected_log}


@pytest.fixture(scope="module")
def tensorboard(dump, tmp_path_factory):
    tb = TensorBoardProcess(dump["logdir"], tmp_path_factory.mktemp("tb") / "tensorboard.log")
    deadline = time.time() + 60
    while len(tb.api("runs")["runs"]) < 2:  # the plugin's reader picks both runs up
        assert time.time() < deadline, "the plugin never listed both runs"
        time.sleep(0.3)
    yield tb
    tb.close()


class Browser:
    """Headless Chromium with a fresh profile; records console errors and page errors."""

    def __init__(self, color_scheme: str = "light"):
        self._pw = playwright_api.sync_playwright().start()
        self._profile = tempfile.mkdtemp(prefix="tvmdbg-chromium-")
        self.context = self._pw.chromium.launch_persistent_context(
            self._profile,
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000},
            color_scheme=color_scheme,
        )
        self.errors: list[str] = []
        self.page = self.context.pages[0] if self.context.pages else self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text} {m.location}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("response", lambda r: r.status >= 400 and self.errors.append(f"HTTP {r.status} {r.url}"))

    def open_dashboard(self, tb: TensorBoardProcess):
        """TensorBoard's own page on the TVM Debugger tab; returns the plugin's iframe."""
        self.page.goto(f"{tb.url}/#tvmdbg")
        frame = self.page.frame_locator('iframe[src*="plugin_entry.html?name=tvmdbg"]')
        frame.locator("body[data-ready=true]").wait_for(timeout=30_000)
        return frame

    def close(self):
        self.context.close()
        self._pw.stop()
        shutil.rmtree(self._profile, ignore_errors=True)


@pytest.fixture()
def browser():
    b = Browser()
    yield b
    b.close()


def _run_named(tb: TensorBoardProcess, mode: str) -> str:
    return next(r["run"] for r in tb.api("runs")["runs"] if r["tensor_debug_mode"] == mode)


def _health_text(values: np.ndarray) -> str:
    """The pill's text for an array, computed with numpy (the dashboard's own format)."""
    finite = values[np.isfinite(values)]
    counts = [
        ("NaN", np.isnan(values).sum()),
        ("-∞", np.isneginf(values).sum()),
        ("+∞", np.isposinf(values).sum()),
        ("neg", (finite < 0).sum()),
        ("zero", (finite == 0).sum()),
        ("pos", (finite > 0).sum()),
    ]
    return " · ".join(f"{label} {int(n)}" for label, n in counts)


def _expected_origin_op(logdir: Path, run: str):
    """The op whose only original op is the planted relax.log, read with tvmdbg's reader."""
    import tvmdbg

    reader = tvmdbg.DebugDataReader(str(logdir))
    try:
        reader.update()
        ops = [op for op in reader.run(run).ops() if [o.op_type for o in op.original_ops] == ["relax.log"]]
    finally:
        reader.close()
    assert len(ops) == 1, [op.op_name for op in ops]
    return ops[0]


def test_alert_click_lands_on_origin_op_line_and_health(dump, tensorboard, browser, tmp_path_factory):
    run = _run_named(tensorboard, "FULL_HEALTH")
    origin = _expected_origin_op(dump["logdir"], run)
    model = dump["model"]
    frame = browser.open_dashboard(tensorboard)
    frame.locator(".run-select").select_option(run)
    alert = frame.locator("[data-testid=first-origin-alert]:not([disabled])")
    alert.wait_for()
    alerts = tensorboard.api(f"alerts?run={run}")["alerts"]
    for kind, field in (("nan", "nan_count"), ("neg-inf", "neg_inf_count"), ("pos-inf", "pos_inf_count")):
        shown = alert.locator(f"[data-kind={kind}]").inner_text()
        assert shown.endswith(f" {sum(1 for a in alerts if a[field] != 0)}"), (kind, shown)
    alert.click()

    # The op: selected in the details, in the executions list and in the graph.
    selected_op = frame.locator("[data-testid=selected-op]")
    selected_op.wait_for()
    assert selected_op.inner_text() == origin.op_name
    row = frame.locator(".executions-panel .vlist-row.selected")
    row.wait_for()
    assert row.get_attribute("data-op-name") == origin.op_name
    assert "nonfinite" in row.get_attribute("class")

    # Its health pill: the counts numpy finds in log(x - y).
    pill = frame.locator("[data-testid=selected-health] .health-pill")
    assert pill.get_attribute("data-health") == _health_text(dump["expected_log"])
    assert "bad" in pill.get_attribute("class")

    # The source line that created it, highlighted; the stack lists the user's frame first.
    highlighted = frame.locator(".source-panel .src-line.highlighted")
    highlighted.wait_for()
    assert int(highlighted.get_attribute("data-line")) == model.fault_line
    assert "nn.op.log(h)" in highlighted.inner_text()
    assert frame.locator(".source-path").inner_text().endswith(f"{Path(model.fault_file).name}:{model.fault_line}")
    first_frame = frame.locator(".stack-panel .frame").first
    assert "user-frame" in first_frame.get_attribute("class")
    assert first_frame.locator(".frame-file").inner_text() == f"{Path(model.fault_file).name}:{model.fault_line}"

    # The graph: nodes laid out, the op selected, its input (x - y) finite and highlighted.
    selected_node = frame.locator(".graph-panel .op-node.role-selected")
    selected_node.wait_for()
    assert selected_node.get_attribute("data-op-name") == origin.op_name
    assert "health-bad" in selected_node.get_attribute("class")
    assert frame.locator(".graph-panel .op-node").count() >= 5
    producer = next(i.producer_op_id for i in origin.inputs if i.kind == 1)  # OP_OUTPUT
    input_node = frame.locator(f".graph-panel .op-node[data-op-id='{producer}']")
    assert "role-input" in input_node.get_attribute("class")
    assert "health-ok" in input_node.get_attribute("class")
    # The function's parameters x, y, w, coloured by the call's recorded input health (finite).
    frame.locator(".graph-panel .param-node.health-ok").nth(2).wait_for()
    assert frame.locator(".graph-panel .param-node.health-bad").count() == 0

    # The alert is in the second call: the timeline marks it (though maximum() hid the NaN from
    # the call's output), the first call is clean, and the second is the one selected.
    items = frame.locator(".timeline-panel .tl-item")
    frame.locator(".timeline-panel .tl-item.selected").wait_for()
    assert items.count() == 3
    assert "alerted" not in items.nth(0).get_attribute("class")
    assert "alerted" in items.nth(1).get_attribute("class")
    assert "nonfinite" not in items.nth(1).get_attribute("class")
    assert "selected" in items.nth(1).get_attribute("class")

    shots = _screenshot_dir(tmp_path_factory)
    for panel in ("alerts", "timeline", "graph-executions", "graph", "details", "stack-trace", "source"):
        frame.locator(f"[data-panel={panel}]").screenshot(path=str(shots / f"{panel}.png"))
    browser.page.screenshot(path=str(shots / "dashboard.png"))

    # Op history (the finite call, then the NaN one) and the profile table, sortable.
    frame.locator("[data-tab=history]").click()
    rows = frame.locator(".history-table tbody tr")
    rows.first.wait_for()
    assert rows.count() == 2
    assert "changed" in rows.nth(0).inner_text()
    frame.locator("[data-panel=history]").screenshot(path=str(shots / "op-history.png"))
    frame.locator("[data-tab=profile]").click()
    frame.locator(".profile-table tbody tr").first.wait_for()
    frame.locator(".profile-table th[data-sort=calls]").click()
    calls = [
        int(c.replace(",", "")) for c in frame.locator(".profile-table tbody tr td:nth-child(4)").all_inner_texts()
    ]
    assert calls == sorted(calls, reverse=True) and len(calls) >= 5
    frame.locator("[data-panel=profile]").screenshot(path=str(shots / "profile.png"))

    assert browser.errors == []


def test_fused_kernel_expands_and_filter_and_goto(dump, tensorboard, browser, tmp_path_factory):
    run = _run_named(tensorboard, "FULL_HEALTH")
    frame = browser.open_dashboard(tensorboard)
    frame.locator(".run-select").select_option(run)
    # The fused model's call is the last one; its first non-finite kernel holds relax.sqrt.
    last = frame.locator(".timeline-panel .tl-item").last
    index = last.get_attribute("data-index")
    last.click()
    # The details still show the call opened before (the alerts open the first bad one, whose
    # log kernel is non-finite too) until the last call's kernels arrive: wait for its head.
    frame.locator(".execution-details .exec-head", has_text=f"#{index} ").wait_for()
    chip = frame.locator(".exec-kernels .kchip.nonfinite").first
    chip.wait_for()
    chip.click()
    node = frame.locator(".graph-panel .op-node.role-selected")
    node.wait_for()
    toggle = node.locator(".node-toggle")
    assert toggle.text_content().startswith("+")
    toggle.click()
    node = frame.locator(".graph-panel .op-node.role-selected")
    node.locator(".orig-op").first.wait_for()
    originals = node.locator(".orig-op").all_text_contents()
    assert any("sqrt" in t for t in originals), originals
    shots = _screenshot_dir(tmp_path_factory)
    frame.locator("[data-panel=graph]").screenshot(path=str(shots / "graph-fused-expanded.png"))

    # Filter by op name, then go to an index of the filtered list.
    name = node.get_attribute("data-op-name")
    frame.locator(".filter-input").fill(name)
    head = frame.locator(".executions-panel .panel-head")
    head.filter(has_text=re.compile(rf"executions? of {re.escape(name)}")).wait_for()
    rows = frame.locator(".executions-panel .vlist-row[data-row]")
    # The head can show the filter a frame before the list draws its rows: wait for rows, then check them all.
    rows.first.wait_for()
    assert set(rows.evaluate_all("els => els.map(e => e.dataset.opName)")) == {name}
    frame.locator(".filter-input").fill("")
    total = next(r["num_traces"] for r in tensorboard.api("runs")["runs"] if r["run"] == run)
    frame.locator(".goto-input").fill(str(total - 1))
    frame.locator(".goto-input").press("Enter")
    frame.locator(f".vlist-row.selected[data-row='{total - 1}']").wait_for()
    frame.locator(".goto-input").fill(str(total))  # out of range: refused, not selected
    frame.locator(".goto-input").press("Enter")
    assert "invalid" in frame.locator(".goto-input").get_attribute("class")
    assert browser.errors == []


def test_tensor_view_highlights_non_finite_values(dump, tensorboard, browser, tmp_path_factory):
    run = _run_named(tensorboard, "FULL_TENSOR")
    frame = browser.open_dashboard(tensorboard)
    frame.locator(".run-select").select_option(run)
    frame.locator("[data-testid=first-origin-alert]:not([disabled])").click()
    frame.locator("[data-testid=selected-op]").wait_for()
    frame.locator("[data-tab=tensor]").click()
    table = frame.locator(".tensor-table")
    table.wait_for()
    expected = dump["expected_log"]
    cells = frame.locator(".tensor-table tbody td")
    assert cells.count() == expected.size
    bad = frame.locator(".tensor-table td.nonfinite-value").all_inner_texts()
    assert sorted(bad) == sorted("NaN" if np.isnan(v) else "-Inf" for v in expected.ravel() if not np.isfinite(v))
    frame.locator(".slice-input").fill("0, 2:4")
    frame.locator(".slice-form button").click()
    frame.locator(".tensor-out").filter(has_text="(2,)").wait_for()
    assert frame.locator(".tensor-table td.nonfinite-value").all_inner_texts() == ["NaN"]  # log(-2)
    frame.locator(".slice-input").fill("0, 99")  # out of bounds: the backend's message is shown
    frame.locator(".slice-form button").click()
    frame.locator(".tensor-out .error-box").wait_for()
    frame.locator(".slice-input").fill("")
    frame.locator(".slice-form button").click()
    frame.locator(".tensor-table td.nonfinite-value").first.wait_for()
    frame.locator("[data-panel=tensor]").screenshot(path=str(_screenshot_dir(tmp_path_factory) / "tensor.png"))
    # The 400 for the bad slice is expected; nothing else may fail.
    assert [e for e in browser.errors if "tensor/value" not in e] == []


def test_dark_mode_follows_tensorboard(dump, tensorboard, tmp_path_factory):
    b = Browser(color_scheme="dark")
    try:
        frame = b.open_dashboard(tensorboard)
        assert "dark-mode" in b.page.evaluate("document.body.className")
        frame.locator("body.dark").wait_for()
        frame.locator(".run-select").select_option(_run_named(tensorboard, "FULL_HEALTH"))
        frame.locator("[data-testid=first-origin-alert]:not([disabled])").click()
        frame.locator(".source-panel .src-line.highlighted").wait_for()
        frame.locator(".graph-panel .op-node.role-selected").wait_for()
        bg = frame.locator(".panel").first.evaluate("e => getComputedStyle(e).backgroundColor")
        assert bg == "rgb(42, 43, 46)", bg
        b.page.screenshot(path=str(_screenshot_dir(tmp_path_factory) / "dashboard-dark.png"))
        assert b.errors == []
    finally:
        b.close()


def test_empty_logdir_explains_then_goes_live(tmp_path, tmp_path_factory):
    """An empty logdir shows the one-line call; a program that starts writing appears by polling,
    marked live."""
    import tvmdbg

    logdir = tmp_path / "logdir"
    logdir.mkdir()
    tb = TensorBoardProcess(logdir, tmp_path / "tensorboard.log")
    b = Browser()
    try:
        frame = b.open_dashboard(tb)
        empty = frame.locator(".empty-logdir")
        empty.wait_for()
        assert "tvmdbg.enable_dump_debug_info(" in empty.inner_text()
        assert str(logdir) in empty.inner_text()
        frame.locator(".empty-logdir").screenshot(path=str(_screenshot_dir(tmp_path_factory) / "empty-logdir.png"))

        from models import nn_planted

        tvmdbg.enable_dump_debug_info(str(logdir / "live"), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            nn_planted("log", fuse=False).run()
            tvmdbg.enable_dump_debug_info(
                str(logdir / "live"), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1
            ).flush()
            live = frame.locator("[data-testid=live-state][data-live=true]")
            live.wait_for(timeout=30_000)
            assert "live" in live.inner_text()
            frame.locator("[data-testid=first-origin-alert]:not([disabled])").wait_for(timeout=30_000)
        finally:
            tvmdbg.disable_dump_debug_info()
        assert b.errors == []
        # TensorBoard goes away: the dashboard says so instead of freezing silently.
        tb.close()
        frame.locator("[data-testid=backend-error]").filter(has_text="cannot reach TensorBoard").wait_for(
            timeout=15_000
        )
    finally:
        b.close()
        if tb.proc.poll() is None:
            tb.close()


def test_corrupt_record_is_reported_not_hidden(dump, tensorboard, browser):
    """A damaged record in a run's traces shows up as a warning in the dashboard (the reader
    skips it and goes on), instead of a silently shorter list."""
    source = dump["logdir"] / "health"
    run_dir = next(p for p in source.iterdir() if p.is_dir())
    damaged = dump["logdir"] / "zz_damaged" / run_dir.name
    shutil.copytree(run_dir, damaged)
    traces = damaged / "tvmdbg.graph_execution_traces"
    data = bytearray(traces.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside some record's payload: its CRC no longer matches
    traces.write_bytes(bytes(data))
    name = f"zz_damaged/{run_dir.name}"
    deadline = time.time() + 60
    while not any(r["run"] == name and r["num_corruptions"] > 0 for r in tensorboard.api("status")["runs"]):
        assert time.time() < deadline, "the plugin never reported the damaged record"
        time.sleep(0.5)
    frame = browser.open_dashboard(tensorboard)
    frame.locator(".run-select").select_option(name)
    problem = frame.locator(".problems .problem").filter(has_text="corrupt record")
    problem.wait_for()
    assert "tvmdbg.graph_execution_traces" in problem.inner_text()
    assert browser.errors == []


def test_input_link_keeps_an_execution(dump, tensorboard, browser):
    """One navigation model: after the alert click, the Op tab's input link selects the
    producing kernel's execution in the same call, as a graph click does: its health shows (not
    "—") and the executions list follows."""
    run = _run_named(tensorboard, "FULL_HEALTH")
    origin = _expected_origin_op(dump["logdir"], run)
    frame = browser.open_dashboard(tensorboard)
    frame.locator(".run-select").select_option(run)
    frame.locator("[data-testid=first-origin-alert]:not([disabled])").click()
    frame.locator("[data-testid=selected-op]", has_text=origin.op_name).wait_for()
    frame.locator("[data-testid=selected-health] .health-pill").wait_for()
    call = int(frame.locator(".executions-panel .vlist-row.selected .c-exec").inner_text())
    link = frame.locator(".details-panel a.input-link").first
    producer = link.inner_text()
    assert producer != origin.op_name
    link.click()
    frame.locator("[data-testid=selected-op]", has_text=producer).wait_for()
    pill = frame.locator("[data-testid=selected-health] .health-pill")
    pill.wait_for()
    assert pill.get_attribute("data-health")
    row = frame.locator(".executions-panel .vlist-row.selected")
    row.wait_for()
    assert row.get_attribute("data-op-name") == producer
    assert int(row.locator(".c-exec").inner_text()) == call  # the execution that fed the origin
    assert browser.errors == []


def test_alert_click_frames_the_op_with_its_inputs(dump, tensorboard, browser):
    """After the alert click the graph panel frames the selected op with its inputs and
    consumers: every such node lies inside the panel's visible canvas."""
    run = _run_named(tensorboard, "FULL_HEALTH")
    origin = _expected_origin_op(dump["logdir"], run)
    frame = browser.open_dashboard(tensorboard)
    frame.locator(".run-select").select_option(run)
    frame.locator("[data-testid=first-origin-alert]:not([disabled])").click()
    frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{origin.op_name}']").wait_for()
    canvas = frame.locator(".graph-panel .graph-canvas").bounding_box()
    framed = frame.locator(".graph-panel .op-node.role-input, .graph-panel .op-node.role-consumer")
    assert framed.count() >= 1
    for i in range(framed.count()):
        box = framed.nth(i).bounding_box()
        assert box["x"] >= canvas["x"] - 1 and box["y"] >= canvas["y"] - 1, (i, box, canvas)
        assert box["x"] + box["width"] <= canvas["x"] + canvas["width"] + 1, (i, box, canvas)
        assert box["y"] + box["height"] <= canvas["y"] + canvas["height"] + 1, (i, box, canvas)
    assert browser.errors == []
