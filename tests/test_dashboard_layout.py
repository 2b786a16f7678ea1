"""The dashboard as a user sees it on the demo (examples/debug_digits.py, buggy run, real TVM
training that goes NaN), in real Chromium on a real `tensorboard`: after the alert click the
graph names are legible and the op's inputs are in view, a text list names inputs and consumers
(links that keep an execution), the graph can be enlarged, the timeline and kernel list open on
the first bad call, the header stays on one line at 1000 px and the alert click keeps the alert
in view there; a missing logdir is reported once."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from test_dashboard_e2e import ROOT, Browser, TensorBoardProcess, _screenshot_dir

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("demo")
    env = dict(os.environ, TVM_NUM_THREADS="1")
    cmd = [sys.executable, str(ROOT / "examples" / "debug_digits.py"), "--steps", "8", "--debug"]
    subprocess.run(cmd + ["--dump_dir", str(logdir)], check=True, env=env, cwd=str(ROOT), timeout=600)
    tb = TensorBoardProcess(logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log")
    deadline = time.time() + 60
    while not [r for r in tb.api("runs")["runs"] if r["num_alerts"] > 0]:  # the loss went NaN
        assert time.time() < deadline, tb.api("runs")
        time.sleep(0.3)
    (run,) = tb.api("runs")["runs"]
    yield tb, run["run"]
    tb.close()


def _first_origin(tb, run):
    page = tb.api(f"alerts?run={run}&begin=0&end=0")
    fo = page["first_origin_index"]
    return tb.api(f"alerts?run={run}&begin={fo}&end={fo + 1}")["alerts"][0]


def _click_first_alert(frame):
    alert = frame.locator("[data-testid=first-origin-alert]:not([disabled])")
    alert.wait_for()
    alert.click()
    return alert


def _inside(box, area) -> bool:
    return (
        box["x"] >= area["x"] - 1
        and box["y"] >= area["y"] - 1
        and box["x"] + box["width"] <= area["x"] + area["width"] + 1
        and box["y"] + box["height"] <= area["y"] + area["height"] + 1
    )


# Effective on-screen size of an SVG text: its CSS font size times the SVG's current scale.
RENDERED_FONT_PX = """el => parseFloat(getComputedStyle(el).fontSize) * el.ownerSVGElement.getScreenCTM().a"""


@pytest.mark.slow
@pytest.mark.parametrize("viewport", [(1600, 1000), (1000, 700)])
def test_alert_click_graph_is_legible_with_inputs_in_view_and_listed(demo, viewport):
    tb, run = demo
    origin = _first_origin(tb, run)
    graph = tb.api(f"graphs/graph_info?run={run}&graph_id={origin['graph_id']}")
    names = {o["op_id"]: o["op_name"] for o in graph["ops"]}
    producers = {
        e["src_op_id"] for e in graph["edges"] if e["dst_op_id"] == origin["op_id"] and e["src_op_id"] is not None
    }
    consumers = {e["dst_op_id"] for e in graph["edges"] if e["src_op_id"] == origin["op_id"]}
    assert producers, "the origin op has no producing op: the test would check nothing"
    b = Browser()
    try:
        b.page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
        frame = b.open_dashboard(tb)
        _click_first_alert(frame)
        node = frame.locator(f".graph-panel .op-node.role-selected[data-op-id='{origin['op_id']}']")
        node.wait_for()
        size = node.locator("text.node-name").evaluate(RENDERED_FONT_PX)
        assert size >= 10, f"selected node's label renders at {size:.1f} px"
        canvas = frame.locator(".graph-panel .graph-canvas")
        canvas.scroll_into_view_if_needed()
        area = canvas.bounding_box()
        assert _inside(node.bounding_box(), area)
        for op_id in producers:
            box = frame.locator(f".graph-panel .op-node.role-input[data-op-id='{op_id}']").bounding_box()
            assert box is not None and _inside(box, area), (names[op_id], box, area)

        # The source box scrolls to the creating line, never sideways.
        frame.locator(".source-panel .src-line.highlighted").wait_for()
        assert frame.locator(".source-panel .source-body").evaluate("el => el.scrollLeft") == 0

        # Shapes read as numbers: the route's "(T.int64(1437), T.int64(10))" shows as (1437, 10).
        op_info = tb.api(f"graphs/op_info?run={run}&op_id={origin['op_id']}")
        assert any("T.int64" in i["shape_expr"] for i in op_info["inputs"])
        frame.locator("[data-testid=selected-op]", has_text=origin["op_name"]).wait_for()
        details = frame.locator(".details-panel").inner_text()
        assert "T.int64" not in details
        first = op_info["inputs"][0]
        assert f"{first['name']} {first['dtype']} ({', '.join(map(str, first['shape']))})" in details, details

        # The text list names every producing op and every consumer, as links.
        listed_in = {int(a.get_attribute("data-op-id")) for a in frame.locator("[data-testid=graph-inputs] a").all()}
        listed_out = {
            int(a.get_attribute("data-op-id")) for a in frame.locator("[data-testid=graph-consumers] a").all()
        }
        assert listed_in == producers and listed_out == consumers
        # A link keeps an execution: the producer in the same call, with its health.
        call = int(frame.locator(".executions-panel .vlist-row.selected .c-exec").inner_text())
        producer = min(producers)
        frame.locator(f"[data-testid=graph-inputs] a[data-op-id='{producer}']").click()
        frame.locator(f".graph-panel .op-node.role-selected[data-op-id='{producer}']").wait_for()
        frame.locator("[data-testid=selected-op]", has_text=names[producer]).wait_for()
        frame.locator("[data-testid=selected-health] .health-pill").wait_for()
        row = frame.locator(".executions-panel .vlist-row.selected")
        row.wait_for()
        assert row.get_attribute("data-op-name") == names[producer]
        assert int(row.locator(".c-exec").inner_text()) == call
        assert b.errors == []
    finally:
        b.close()


def test_graph_can_be_enlarged(demo, tmp_path_factory):
    tb, run = demo
    b = Browser()
    try:
        frame = b.open_dashboard(tb)
        _click_first_alert(frame)
        frame.locator(".graph-panel .op-node.role-selected").wait_for()
        before = frame.locator(".graph-panel .graph-canvas").bounding_box()
        frame.locator("[data-testid=graph-enlarge]").click()
        frame.locator(".graph-panel.enlarged .op-node.role-selected").wait_for()
        after = frame.locator(".graph-panel .graph-canvas").bounding_box()
        assert after["width"] * after["height"] > 2 * before["width"] * before["height"], (before, after)
        svg = frame.locator(".graph-panel .graph-svg").bounding_box()
        assert svg["width"] >= after["width"] - 1 and svg["height"] >= after["height"] - 1  # drawn at the new size
        b.page.screenshot(path=str(_screenshot_dir(tmp_path_factory) / "graph-enlarged.png"))
        b.page.keyboard.press("Escape")
        frame.locator(".graph-panel:not(.enlarged)").wait_for()
        again = frame.locator(".graph-panel .graph-canvas").bounding_box()
        assert abs(again["width"] - before["width"]) < 2 and abs(again["height"] - before["height"]) < 2
        assert b.errors == []
    finally:
        b.close()


def test_timeline_and_kernel_list_open_on_the_first_bad_call(demo):
    tb, run = demo
    origin = _first_origin(tb, run)
    info = tb.api("runs")["runs"][0]
    assert info["num_executions"] > 100 or origin["execution_position"] < info["num_executions"]
    b = Browser()
    try:
        frame = b.open_dashboard(tb)
        selected = frame.locator(".timeline-panel .tl-item.selected")
        selected.wait_for()
        assert int(selected.get_attribute("data-index")) == origin["execution_index"]
        # Its details show (the call's kernels), and the kernel list shows the first bad kernel.
        frame.locator(".execution-details .exec-head", has_text=f"#{origin['execution_index']} ").wait_for()
        row = frame.locator(f".executions-panel .vlist-row[data-position='{origin['trace_position']}']")
        row.wait_for()
        assert row.is_visible() and row.get_attribute("data-op-name") == origin["op_name"]
        scroller = frame.locator(".executions-panel .vlist").bounding_box()
        assert _inside(row.bounding_box(), scroller)
        assert b.errors == []
    finally:
        b.close()


def test_narrow_window_header_one_line_and_alert_click_keeps_alert_in_view(demo):
    tb, run = demo
    b = Browser()
    try:
        b.page.set_viewport_size({"width": 1000, "height": 700})
        frame = b.open_dashboard(tb)
        bar = frame.locator(".topbar")
        frame.locator(".topbar .run-info", has_text="calls").wait_for()
        children = bar.locator(":scope > *").all()
        tops = [c.bounding_box()["y"] for c in children if c.bounding_box() and c.bounding_box()["height"] > 0]
        heights = [c.bounding_box()["height"] for c in children if c.bounding_box()]
        box = bar.bounding_box()
        assert max(tops) - min(tops) < 8, tops  # all on one line
        assert box["height"] < 2 * max(20, min(h for h in heights if h > 0)) and box["height"] < 44, (box, heights)
        assert bar.evaluate("el => el.scrollWidth <= el.clientWidth + 1")

        alert = frame.locator("[data-testid=first-origin-alert]:not([disabled])")
        alert.wait_for()
        before = alert.bounding_box()
        alert.click()
        frame.locator(".source-panel .src-line.highlighted").wait_for()
        frame.locator(".graph-panel .op-node.role-selected").wait_for()
        b.page.wait_for_timeout(500)  # any late scroll would have happened by now
        after = alert.bounding_box()
        assert abs(after["y"] - before["y"]) < 2, (before, after)
        # The source box scrolled to the line, not sideways (the line's start stays readable).
        assert frame.locator(".source-panel .source-body").evaluate("el => el.scrollLeft") == 0
        assert after["y"] >= 0 and after["y"] + after["height"] <= 700
        assert b.errors == []
    finally:
        b.close()


def test_missing_logdir_is_reported_once(tmp_path):
    missing = tmp_path / "not_there"
    tb = TensorBoardProcess(missing, tmp_path / "tensorboard.log")
    b = Browser()
    try:
        frame = b.open_dashboard(tb)
        frame.locator(".empty-logdir").wait_for()
        frame.locator("text=does not exist").first.wait_for()
        text = frame.locator("body").inner_text()
        assert text.count("does not exist") == 1, text
        assert b.errors == []
    finally:
        b.close()
        tb.close()


# Records, after every DOM change, the call count the header shows and the timeline's.
WATCH_COUNTS = """() => {
  const parse = (sel, re) => {
    const m = (document.querySelector(sel)?.textContent ?? "").match(re);
    return m ? Number(m[1].replace(/,/g, "")) : null;
  };
  window.__counts = [];
  const record = () => {
    const header = parse(".topbar .run-info", /([\\d,]+) calls/);
    const timeline = parse(".timeline-panel .timeline-nav", /of ([\\d,]+) calls/);
    if (header !== null && timeline !== null) window.__counts.push([header, timeline]);
  };
  new MutationObserver(record).observe(document.body, { subtree: true, childList: true, characterData: true });
}"""


def test_growing_run_header_and_timeline_agree_on_the_call_count(tmp_path):
    """A live run grows between refreshes: at every DOM change the header and the timeline show
    the same number of calls (both read the store's one snapshot of the run)."""
    import tvm
    from models import nn_planted

    import tvmdbg

    logdir = tmp_path / "logdir"
    model = nn_planted("log", fuse=False)
    writer = tvmdbg.enable_dump_debug_info(
        str(logdir / "grow"), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1
    )
    tb = b = None
    try:
        vm = tvm.relax.VirtualMachine(model.executable, tvm.cpu())
        args = [tvm.runtime.tensor(a) for a in model.inputs]
        vm[model.function](*args)
        writer.flush()
        tb = TensorBoardProcess(logdir, tmp_path / "tensorboard.log")
        b = Browser()
        frame = b.open_dashboard(tb)
        frame.locator(".timeline-panel .timeline-nav", has_text="calls").wait_for()
        inner = next(f for f in b.page.frames if "plugin_entry.html" in f.url)
        inner.evaluate(WATCH_COUNTS)
        deadline = time.time() + 9  # three polls of the dashboard
        calls = 1
        while time.time() < deadline:
            for _ in range(5):
                vm[model.function](*args)
            calls += 5
            writer.flush()
            time.sleep(0.15)
        frame.locator(".topbar .run-info", has_text=f"{calls:,} calls").wait_for(timeout=15_000)
        frame.locator(".timeline-panel .timeline-nav", has_text=f"of {calls:,} calls").wait_for(timeout=15_000)
        counts = inner.evaluate("() => window.__counts")
        assert len({h for h, _ in counts}) >= 3, counts  # the run grew while the page watched
        disagree = [c for c in counts if c[0] != c[1]]
        assert disagree == [], disagree[:10]
        assert b.errors == []
    finally:
        tvmdbg.disable_dump_debug_info()
        if b:
            b.close()
        if tb:
            tb.close()
