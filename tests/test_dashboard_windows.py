"""The dashboard at every window size, in real Chromium on a real `tensorboard` serving real
dumps: the digits demo (its buggy and its fixed run), a float16/float32 pair to compare, a
FULL_TENSOR run and a FULL_STATS run of a planted model. One browser for the module.

At 1000x700, 1440x900 and 1920x1080 no pane overlaps another and the page never scrolls;
after an alert click and a compare row click the selected op's row, graph node and source
line are on screen; every text is >= 11 px; "non-finite only" stays responsive through 30 s
of refreshes on both demo runs with the right count; the node search selects and frames a
node; the keyboard reaches alerts and nodes; pane sizes are remembered; the Tensor tab shows
a histogram and labels by the tensor's own indices; a FULL_STATS op's statistics chart shows
every call; the source browser opens any recorded file and its marked lines select ops."""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from dashboard_checks import (
    assert_answers,
    assert_in_view,
    assert_layout_sound,
    assert_text_legible,
    focused,
    in_view,
    inner_frame,
    rows_in_view,
)
from models import X, Y, blockbuilder_planted, line_of
from test_dashboard_e2e import ROOT, Browser, TensorBoardProcess, _screenshot_dir

import tvmdbg

pytestmark = pytest.mark.browser

WINDOWS = [(1000, 700), (1440, 900)]
STATS_SCALES = (1.0, 2.0, 4.0, 8.0, 16.0)


@pytest.fixture(scope="module")
def tb(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("windows")
    env = dict(os.environ, TVM_NUM_THREADS="1")
    for extra in ([], ["--fix"]):
        cmd = [sys.executable, str(ROOT / "examples" / "debug_digits.py"), "--steps", "8", "--debug"]
        subprocess.run(
            cmd + ["--dump_dir", str(logdir / "demo"), *extra], check=True, env=env, cwd=str(ROOT), timeout=600
        )
    from models_compare import reduction_model, run

    for name, dtype, fuse in (("fp16", "float16", True), ("fp32", "float32", False)):
        tvmdbg.enable_dump_debug_info(str(logdir / name), tensor_debug_mode="FULL_STATS", run_name=f"reduction {dtype}")
        try:
            executable, inputs, _ = reduction_model(dtype, fuse)
            run(executable, inputs)
        finally:
            tvmdbg.disable_dump_debug_info()
    tvmdbg.enable_dump_debug_info(str(logdir / "tensor"), tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1)
    try:
        blockbuilder_planted("log").run()
    finally:
        tvmdbg.disable_dump_debug_info()
    tvmdbg.enable_dump_debug_info(str(logdir / "stats"), tensor_debug_mode="FULL_STATS", circular_buffer_size=-1)
    try:
        import tvm

        model = blockbuilder_planted("log")
        vm = tvm.relax.VirtualMachine(model.executable, tvm.cpu())
        for k in STATS_SCALES:
            vm[model.function](*(tvm.runtime.tensor(a) for a in (X * k, np.zeros_like(Y), model.inputs[2])))
    finally:
        tvmdbg.disable_dump_debug_info()
    server = TensorBoardProcess(logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log")
    server.logdir = logdir
    deadline = time.time() + 90
    while len(server.api("runs")["runs"]) < 6 or not any(r["num_alerts"] for r in server.api("runs")["runs"]):
        assert time.time() < deadline, server.api("runs")
        time.sleep(0.3)
    yield server
    server.close()


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


@pytest.fixture()
def b(browser):
    browser.errors.clear()
    yield browser
    assert browser.errors == []


def runs_of(tb) -> dict[str, dict]:
    """Runs by role: buggy, fixed (the demo), fp16, fp32, tensor, stats."""
    out = {}
    for r in tb.api("runs")["runs"]:
        top = r["run"].split("/")[0]
        if top == "demo":
            out["fixed" if "--fix" in r["argv"] else "buggy"] = r
        else:
            out[top] = r
    return out


def open_at(b, tb, size, run: str | None = None):
    b.page.set_viewport_size({"width": size[0], "height": size[1]})
    b.page.goto("about:blank")  # a fresh page (the same URL again would only move the hash)
    frame = b.open_dashboard(tb)
    if run is not None:
        frame.locator(".run-select").select_option(run)
        frame.locator(".topbar .run-info", has_text="calls").wait_for()
    return frame


def click_first_alert(frame):
    alert = frame.locator("[data-testid=first-origin-alert]:not([disabled])")
    alert.wait_for(timeout=30_000)
    alert.click()


def assert_selection_on_screen(frame, op_name: str, line: int | None) -> None:
    """The selected op's row in the list, its node in the graph and its line in the source,
    each inside the window and inside the panel that scrolls it."""
    row = frame.locator(f".executions-panel .vlist-row.selected[data-op-name='{op_name}']")
    assert_in_view(row, full=False)
    node = frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{op_name}']")
    assert_in_view(node, full=True)
    source = frame.locator(
        ".source-panel .src-line.highlighted"
        if line is None
        else f".source-panel .src-line.highlighted[data-line='{line}']"
    )
    assert_in_view(source, full=False)


@pytest.mark.parametrize("size", [*WINDOWS, (1920, 1080)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_layout_and_alert_click_at_every_size(tb, b, size, tmp_path_factory):
    runs = runs_of(tb)
    run = runs["buggy"]["run"]
    origin = tb.api(
        f"alerts?run={run}&begin={runs['buggy']['first_origin_alert']}&end={runs['buggy']['first_origin_alert'] + 1}"
    )["alerts"][0]
    frame = open_at(b, tb, size, run)
    assert assert_layout_sound(b) >= 7  # navigator, live, timeline, list, details, graph, stack, source
    click_first_alert(frame)
    assert_selection_on_screen(frame, origin["op_name"], origin["location"]["line"])
    # The alert stays in view too, and is the selected one.
    assert_in_view(frame.locator(".alert-item.selected").first, full=False)
    assert_layout_sound(b)
    # Room for what the click shows: the op's health with its counts and its inputs' table
    # (each pill's numbers in view, no hover), the source's lines and the stack's frames.
    assert_in_view(frame.locator("[data-testid=selected-health] .health-pill"), full=True)
    inputs = frame.locator(".details-panel .io-table tbody tr")
    frame.locator(".details-panel .io-table .input-health .pill-counts").first.wait_for()
    lines = rows_in_view(b, ".source-panel .src-line", ".source-panel .source-body")
    frames = rows_in_view(b, ".stack-panel .frame", ".stack-panel .stack-body")
    if size[1] >= 900:
        for k in range(inputs.count()):
            counts = inputs.nth(k).locator(".pill-counts")
            assert_in_view(counts, full=True)
            assert re.search(r"\d", counts.inner_text()), counts.inner_text()
        assert lines >= 12 and frames >= 5, (lines, frames)
    else:
        assert lines >= 6 and frames >= 4, (lines, frames)
    # Text: every panel at the default zoom, each details tab and the Compare tab.
    checked = assert_text_legible(b)
    # Each tab checked once it shows its content (history and profile are fetched).
    for tab, content in (
        ("tensor", ".tensor-view .empty"),
        ("history", ".history-table"),
        ("profile", ".profile-table"),
    ):
        frame.locator(f".details-panel [data-tab={tab}]").click()
        frame.locator(f".details-panel[data-tab={tab}] {content}").wait_for()
        checked += assert_text_legible(b)
    frame.locator(".navigator-tabs [data-tab=compare]").click()
    checked += assert_text_legible(b)
    assert checked > 100
    frame.locator(".navigator-tabs [data-tab=alerts]").click()
    frame.locator(".details-panel [data-tab=op]").click()
    b.page.wait_for_timeout(300)
    b.page.screenshot(path=str(_screenshot_dir(tmp_path_factory) / f"window-{size[0]}x{size[1]}.png"))
    # Scrolled panels still never overlap (each scrolls inside itself).
    inner_frame(b).evaluate(
        "() => document.querySelectorAll('.panel-body, .vlist').forEach((e) => (e.scrollTop = e.scrollHeight))"
    )
    assert_layout_sound(b)


def test_panes_resize_and_remember(tb, b):
    runs = runs_of(tb)
    frame = open_at(b, tb, (1440, 900), runs["buggy"]["run"])
    graph = frame.locator(".graph-panel")
    gutter = frame.locator(".gutter[data-split=strip]")
    try:
        before = graph.bounding_box()["height"]
        box = gutter.bounding_box()
        b.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        b.page.mouse.down()
        b.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 120, steps=5)
        b.page.mouse.up()
        grown = graph.bounding_box()["height"]
        assert grown > before + 80, (before, grown)
        gutter.focus()  # the keyboard resizes too
        b.page.keyboard.press("ArrowUp")
        assert graph.bounding_box()["height"] < grown - 5
        after_keys = graph.bounding_box()["height"]
        frame = open_at(b, tb, (1440, 900))  # a new page: the size is remembered
        frame.locator(".graph-panel").wait_for()
        b.page.wait_for_timeout(300)
        assert abs(frame.locator(".graph-panel").bounding_box()["height"] - after_keys) < 3
        assert_layout_sound(b)
    finally:
        frame.locator(".gutter[data-split=strip]").dblclick()  # back to the default size
    assert abs(frame.locator(".graph-panel").bounding_box()["height"] - before) < 3


@pytest.mark.parametrize("size", WINDOWS, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_row_click_shows_the_compared_op_everywhere(tb, b, size, tmp_path_factory):
    runs = runs_of(tb)
    a, ref = runs["fp16"]["run"], runs["fp32"]["run"]
    from models_compare import reduction_model

    line = line_of(reduction_model.__code__.co_filename, "# planted: large reduction")
    frame = open_at(b, tb, size, a)
    frame.locator(".navigator-tabs [data-tab=compare]").click()
    # Named runs tell the pair apart; the run being looked at is A by default.
    labels = {o.get_attribute("value"): o.inner_text() for o in frame.locator(".compare-run-a option").all()}
    assert labels[a].startswith("reduction float16 · ") and labels[ref].startswith("reduction float32 · ")
    assert frame.locator(".compare-run-a").input_value() == a
    frame.locator(".compare-run-b").select_option(ref)
    frame.locator(".compare-rtol").fill("1e-2")
    frame.locator(".compare-atol").fill("1e-2")
    timeline_width = frame.locator(".timeline-panel").bounding_box()["width"]
    frame.locator(".compare-go").click()
    verdict = frame.locator("[data-testid=compare-verdict]")
    verdict.wait_for(timeout=30_000)
    assert "relax.sum" in verdict.inner_text()
    assert_layout_sound(b)  # the comparison lives in its pane: nothing else moved
    # The results in the timeline's place, as wide; the main panes already on run A's first
    # divergent op, before any click.
    results = frame.locator("[data-testid=compare-results]").bounding_box()
    assert abs(results["width"] - timeline_width) < 2, (results, timeline_width)
    body = tb.api(f"compare?run_a={a}&run_b={ref}&rtol=1e-2&atol=1e-2")
    op_name = body["first_divergence"]["op_name_a"]
    frame.locator("[data-testid=selected-op]", has_text=op_name).wait_for()
    assert_selection_on_screen(frame, op_name, line)
    row = frame.locator(".compare-row.origin")
    row.click()
    # The fused kernel's own line is its first op's; the source shows the reduction's line.
    assert_selection_on_screen(frame, op_name, line)
    assert_in_view(frame.locator(".compare-row.origin.selected"), full=False)
    node = frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{op_name}']")
    assert "mark-cmp-origin" in node.get_attribute("class")
    assert node.locator(".node-tag.tag-cmp-origin").count() == 1
    # The node's health colour is its own (finite); the verdict is the tag, with its legend.
    assert "health-ok" in node.get_attribute("class")
    legend = frame.locator(".graph-panel [data-testid=mark-legend]")
    assert "first divergence" in legend.inner_text()
    assert_in_view(legend, full=False)
    assert_text_legible(b)
    assert_layout_sound(b)
    if size == (1440, 900):
        b.page.screenshot(path=str(_screenshot_dir(tmp_path_factory) / "compare.png"))


@pytest.mark.slow  # 30 s of refreshes each, by design
@pytest.mark.parametrize("role", ["buggy", "fixed"])
def test_nonfinite_only_stays_responsive_with_the_right_count(tb, b, role):
    runs = runs_of(tb)
    run = runs[role]["run"]
    num = tb.api(f"alerts?run={run}&begin=0&end=0")["num_alerts"]
    assert (num > 50) == (role == "buggy")
    frame = open_at(b, tb, WINDOWS[0] if role == "buggy" else WINDOWS[1], run)
    frame.locator("[data-testid=nonfinite-only]").check()
    count = frame.locator(".executions-panel .count")
    expected = f"{num:,} non-finite kernel execution{'' if num == 1 else 's'}"
    count.filter(has_text=expected).wait_for(timeout=10_000)
    inner = inner_frame(b)
    scroll_bottom = (
        "() => { const v = document.querySelector('.executions-panel .vlist'); v.scrollTop = v.scrollHeight; }"
    )
    worst = 0.0
    deadline = time.time() + 30  # ten refreshes of the runs list (every 3 s)
    while time.time() < deadline:
        worst = max(worst, assert_answers(b))
        inner.evaluate(scroll_bottom)
        assert count.inner_text() == expected
        time.sleep(0.4)
    rows = frame.locator(".executions-panel .vlist-row[data-row]")
    if num:
        last = frame.locator(f".executions-panel .vlist-row[data-row='{num - 1}']")
        assert_in_view(last, full=False)
        assert frame.locator(".executions-panel .vlist-row.loading").count() == 0
        assert all(r.get_attribute("class").count("nonfinite") for r in rows.all())
        # Rows say their output's dtype and shape (as compiled).
        assert re.match(r"float32 \(", last.locator(".c-tensor").inner_text()), last.inner_text()
    else:
        frame.locator(".executions-panel .empty", has_text="No non-finite output recorded.").wait_for()
        assert rows.count() == 0
    print(f"slowest answer while scrolling: {worst:.2f} s")  # measured, not asserted (bench/)


def test_graph_search_selects_and_frames_a_node(tb, b, tmp_path_factory):
    runs = runs_of(tb)
    run = runs["buggy"]["run"]
    frame = open_at(b, tb, WINDOWS[0], run)
    search = frame.locator("[data-testid=graph-search]")
    reader = tvmdbg.DebugDataReader(str(tb.logdir))
    try:
        reader.update()
        ops = reader.run(run).ops()
        log_op = next(op for op in ops if "relax.log" in [o.op_type for o in op.original_ops])
        loc = reader.run(run).user_frame(next(o for o in log_op.original_ops if o.op_type == "relax.log").code_location)
    finally:
        reader.close()
    for query, want in (
        ("relax.log", lambda op: "relax.log" in [o.op_type for o in op.original_ops]),
        ("softmax", lambda op: op.kernel == "softmax" or "relax.nn.softmax" in [o.op_type for o in op.original_ops]),
    ):
        expected = {op.op_name for op in ops if want(op)}
        assert expected, query
        search.fill(query)
        results = frame.locator("[data-testid=graph-search-results] .graph-search-result")
        results.first.wait_for()
        assert results.first.locator("b").inner_text() in expected
        search.press("Enter")
        name = results.first.locator("b").inner_text() if results.count() else None
        node = frame.locator(".graph-panel .op-node.role-selected")
        node.wait_for()
        deadline = time.time() + 10
        while node.get_attribute("data-op-name") not in expected and time.time() < deadline:
            time.sleep(0.2)
        assert node.get_attribute("data-op-name") in expected, (query, name)
        assert_in_view(node, full=True)
        frame.locator("[data-testid=selected-op]", has_text=node.get_attribute("data-op-name")).wait_for()
    # A source line finds the op created there.
    search.fill(f"{os.path.basename(loc.file_path)}:{loc.line}")
    result = frame.locator("[data-testid=graph-search-results] .graph-search-result", has_text=log_op.op_name)
    result.first.wait_for()
    frame.locator("[data-panel=graph]").screenshot(path=str(_screenshot_dir(tmp_path_factory) / "graph-search.png"))
    result.first.dispatch_event("mousedown")
    frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{log_op.op_name}']").wait_for()
    # "fit" shows every node drawn; zoom to selection frames the op again.
    frame.locator("[data-testid=graph-fit]").click()
    for node in frame.locator(".graph-panel .op-node").all():
        assert in_view(node, full=True) == "ok"
    frame.locator("[data-testid=graph-zoom-selection]").click()
    assert_in_view(frame.locator(".graph-panel .op-node.role-selected"), full=True)
    assert_text_legible(b)


def test_search_match_in_another_function_moves_every_panel(tb, b):
    """After the alert click (call 9, the loss's gradient function), a node search finds an op of
    the optimizer: every panel moves to one of its executions, the optimizer's call of that same
    step: the timeline's call, the kernel list's row, the op's details with its health, the
    graph's node and the source's line; what was typed stays in the box."""
    runs = runs_of(tb)
    run = runs["buggy"]["run"]
    graphs = tb.api(f"graphs/list?run={run}")["graphs"]
    names = {}
    for g in graphs:
        for op in tb.api(f"graphs/graph_info?run={run}&graph_id={g['graph_id']}")["ops"]:
            names.setdefault(op["op_name"], []).append((g["name"], op))
    optimizer = next(g for g in graphs if g["name"] == "optimizer")
    name, op = next(
        (n, found[0][1])
        for n, found in sorted(names.items())
        if len(found) == 1
        and found[0][0] == "optimizer"
        and tb.api(f"graphs/op_info?run={run}&op_id={found[0][1]['op_id']}")["num_traces"]
    )
    assert op["graph_id"] == optimizer["graph_id"]
    frame = open_at(b, tb, WINDOWS[1], run)
    click_first_alert(frame)
    origin_call = runs["buggy"]["first_origin_alert"]
    frame.locator("[data-testid=selected-op]").wait_for()
    before = int(frame.locator(".timeline-panel .tl-item.selected").get_attribute("data-index"))
    search = frame.locator("[data-testid=graph-search]")
    search.fill(name)
    result = frame.locator(f"[data-testid=graph-search-results] .graph-search-result[data-op-id='{op['op_id']}']")
    result.wait_for()
    result.dispatch_event("mousedown")
    frame.locator("[data-testid=selected-op]", has_text=name).wait_for()
    row = frame.locator(f".executions-panel .vlist-row.selected[data-op-name='{name}']")
    assert_in_view(row, full=False)
    call = int(row.locator(".c-exec").inner_text()) if row.locator(".c-exec").is_visible() else None
    selected_call = frame.locator(".timeline-panel .tl-item.selected")
    deadline = time.time() + 10
    while selected_call.get_attribute("data-index") == str(before) and time.time() < deadline:
        time.sleep(0.2)
    index = int(selected_call.get_attribute("data-index"))
    assert_in_view(selected_call, full=True)
    assert "optimizer" in selected_call.get_attribute("title") and index > before, (index, before)
    assert call in (None, index)
    executions = tb.api(f"execution/digests?run={run}&begin=0&end=-1")["execution_digests"]
    later = [e["index"] for e in executions if e["function_name"] == "optimizer" and e["index"] >= before]
    assert index == later[0]  # the same step's optimizer call, not its first one ever
    frame.locator(".execution-details .exec-head", has_text=f"#{index} optimizer").wait_for()
    assert_in_view(frame.locator("[data-testid=selected-health] .health-pill"), full=True)
    assert_in_view(frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{name}']"), full=True)
    assert_in_view(frame.locator(".source-panel .src-line.highlighted"), full=False)
    assert search.input_value() == name
    assert origin_call is not None


def test_load_and_alert_click_ask_each_answer_once(tb, b):
    """Opening the page and clicking the alert ask no route twice (the polls of the runs list,
    the status and the live state aside), and answer no request with an error."""
    runs = runs_of(tb)
    asked: list[str] = []

    def note(request):
        route = request.url.split("/data/plugin/tvmdbg/")[-1]
        if "/data/plugin/tvmdbg/" in request.url and not route.startswith(("runs", "status", "live/state")):
            asked.append(route)

    b.page.on("request", note)
    try:
        frame = open_at(b, tb, WINDOWS[1], runs["buggy"]["run"])
        click_first_alert(frame)
        frame.locator(".source-panel .src-line.highlighted").wait_for()
        frame.locator(".graph-panel .op-node.role-selected").wait_for()
        b.page.wait_for_timeout(3500)  # a poll of the runs list and of the live state
    finally:
        b.page.remove_listener("request", note)
    twice = {route: n for route, n in collections.Counter(asked).items() if n > 1}
    assert asked and twice == {}, twice


def test_keyboard_reaches_alerts_nodes_and_explains_a_bad_index(tb, b):
    runs = runs_of(tb)
    frame = open_at(b, tb, WINDOWS[1], runs["buggy"]["run"])
    frame.locator("[data-testid=first-origin-alert]:not([disabled])").wait_for()
    inner = inner_frame(b)
    # The timeline is one tab stop (arrows move), so Tab reaches the lists after it quickly.
    frame.locator(".timeline-panel .tl-item").first.wait_for()  # its calls load beside the alerts
    assert inner.evaluate("() => document.querySelectorAll('.tl-item[tabindex=\"0\"]').length") == 1
    frame.locator(".run-select").focus()
    focus = "() => { const a = document.activeElement; return a ? a.className + '|' + (a.dataset.opName ?? '') : '' }"
    for _ in range(40):  # alerts come right after the header
        b.page.keyboard.press("Tab")
        if "alert-item" in inner.evaluate(focus):
            break
    else:
        raise AssertionError("Tab never reached an alert")
    b.page.keyboard.press("Enter")
    frame.locator("[data-testid=selected-op]").wait_for()
    selected_op = frame.locator("[data-testid=selected-op]").inner_text()
    frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{selected_op}']").wait_for()
    # Graph nodes take the focus; Enter on one selects its op.
    other = frame.locator(".graph-panel .op-node:not(.role-selected)").first
    other_name = other.get_attribute("data-op-name")
    other.focus()
    assert other_name in inner.evaluate(focus)
    b.page.keyboard.press("Enter")
    frame.locator("[data-testid=selected-op]", has_text=other_name).wait_for()
    # Go-to-index says why it refuses text that is no row.
    total = runs["buggy"]["num_traces"]
    goto = frame.locator(".goto-input")
    for text in ("abc", "-1", str(total)):
        goto.fill(text)
        goto.press("Enter")
        message = frame.locator("[data-testid=goto-message]")
        message.filter(has_text="is not a kernel execution number").wait_for()
        assert f"0 to {total - 1:,}" in message.inner_text()
    goto.fill("3")
    goto.press("Enter")
    frame.locator(".executions-panel .vlist-row.selected[data-row='3']").wait_for()
    assert frame.locator("[data-testid=goto-message]").inner_text() == ""


def test_keyboard_only_alert_op_graph_node_source(tb, b):
    """Alert -> its op -> an input's producer -> a node of the graph -> its source, with the
    keyboard alone, in fewer than 15 key presses; the focus stays on what Enter selected and
    always shows a ring; each list is one Tab stop that the arrow keys move in."""
    runs = runs_of(tb)
    run = runs["buggy"]["run"]
    alerts = tb.api(f"alerts?run={run}&begin=0&end=3")["alerts"]
    frame = open_at(b, tb, WINDOWS[1], run)
    frame.locator("[data-testid=first-origin-alert]:not([disabled])").wait_for()
    frame.locator(".run-select").focus()  # the user is in the tab, on its first control
    presses = 0

    def press(key: str) -> dict:
        nonlocal presses
        presses += 1
        b.page.keyboard.press(key)
        b.page.wait_for_timeout(150)
        return focused(b)

    # Out of the run picker (the digits choose runs there), "1" jumps to the alerts, the arrow
    # keys move in the list, Enter selects: the focus stays on the alert.
    press("Tab")
    assert "alert-item" in press("1")["cls"]
    at = press("ArrowDown")
    assert alerts[1]["op_name"] in at["text"] and at["ring"].startswith("solid")
    press("Enter")
    frame.locator("[data-testid=selected-op]", has_text=alerts[1]["op_name"]).wait_for()
    b.page.wait_for_timeout(300)
    at = focused(b)
    assert "alert-item" in at["cls"] and "selected" in at["cls"] and alerts[1]["op_name"] in at["text"], at
    assert inner_frame(b).evaluate("() => document.querySelectorAll('.alert-item[tabindex=\"0\"]').length") == 1
    # "n" / "p": the next and previous alert, selected.
    press("n")
    frame.locator("[data-testid=selected-op]", has_text=alerts[2]["op_name"]).wait_for()
    press("p")
    frame.locator("[data-testid=selected-op]", has_text=alerts[1]["op_name"]).wait_for()
    # "4": the op; Tab to its first input's producer, Enter goes there (the focus stays in the panel).
    assert press("4")["panel"] == "details"
    producer = frame.locator(".details-panel .input-link").first.inner_text()
    assert "input-link" in press("Tab")["cls"]
    press("Enter")
    frame.locator("[data-testid=selected-op]", has_text=producer).wait_for()
    assert focused(b)["panel"] == "details"
    # "5": the graph's selected node; an arrow key moves to another node, Enter selects it.
    # The graph draws the producer after the op panel shows it (it asks for its neighbourhood).
    frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{producer}']").wait_for()
    at = press("5")
    assert "op-node" in at["cls"] and at["opName"] == producer and at["ring"] not in ("", "none"), at
    for key in ("ArrowDown", "ArrowRight", "ArrowLeft", "ArrowUp"):
        at = press(key)
        if at["opName"] != producer:
            break
    target = at["opName"]
    assert target and target != producer, at
    press("Enter")
    frame.locator("[data-testid=selected-op]", has_text=target).wait_for()
    frame.locator(f".graph-panel .op-node.role-selected[data-op-name='{target}']").wait_for()
    b.page.wait_for_timeout(300)
    assert focused(b)["opName"] == target  # the focus stays on the node selected
    # "6": the source, the focus on the node's line (its op mark), in view.
    assert press("6")["panel"] == "source"
    assert inner_frame(b).evaluate("() => !!document.activeElement.closest('.src-line.highlighted')")
    assert_in_view(frame.locator(".source-panel .src-line.highlighted"), full=False)
    assert presses <= 15, presses
    # "?" lists the shortcuts; Esc closes them.
    press("?")
    frame.locator(".shortcuts-help:not([hidden])").wait_for()
    press("Escape")
    frame.locator(".shortcuts-help[hidden]").wait_for(state="attached")


def test_filter_without_match_lists_nothing(tb, b):
    runs = runs_of(tb)
    frame = open_at(b, tb, WINDOWS[1], runs["buggy"]["run"])
    frame.locator(".filter-input").fill("no_such_op_anywhere")
    frame.locator("[data-testid=filter-no-match]").wait_for()
    frame.locator(".executions-panel .empty", has_text="No op matches the filter.").wait_for()
    assert frame.locator(".executions-panel .vlist-row[data-row]").count() == 0
    frame.locator(".filter-input").fill("")
    frame.locator(".executions-panel .vlist-row[data-row]").first.wait_for()


def test_tensor_tab_histogram_and_the_tensors_own_indices(tb, b, tmp_path_factory):
    runs = runs_of(tb)
    run = runs["tensor"]["run"]
    frame = open_at(b, tb, WINDOWS[0], run)
    click_first_alert(frame)
    frame.locator("[data-tab=tensor]").click()
    chart = frame.locator("[data-testid=tensor-histogram]")
    chart.wait_for()
    with np.errstate(all="ignore"):
        values = np.log(X - Y).ravel()
    finite = values[np.isfinite(values)]
    assert f"{finite.size} finite values" in chart.inner_text()
    assert f"NaN {int(np.isnan(values).sum())}" in chart.inner_text()
    bars = frame.locator("[data-testid=tensor-histogram] rect.bar-finite")
    assert bars.count() == 30
    assert frame.locator("[data-testid=tensor-histogram] rect.seg-nan").count() == 1
    # A stepped slice: columns are labelled by the tensor's indices, not positions.
    frame.locator(".slice-input").fill("0, 1::3")
    frame.locator(".slice-form button").click()
    frame.locator(".tensor-out", has_text="(3,)").wait_for()
    head = frame.locator(".tensor-table thead th").all_inner_texts()
    assert head == ["", "", "+3", "+6"], head
    assert frame.locator(".tensor-table tbody th").first.inner_text() == "1"
    cells = frame.locator(".tensor-table tbody td").all_inner_texts()
    assert len(cells) == 3 and "1 element" not in frame.locator(".tensor-out").inner_text()
    assert_text_legible(b)
    frame.locator("[data-panel=tensor]").screenshot(
        path=str(_screenshot_dir(tmp_path_factory) / "tensor-histogram.png")
    )


def test_full_stats_op_shows_its_statistics_call_after_call(tb, b, tmp_path_factory):
    runs = runs_of(tb)
    run = runs["stats"]["run"]
    frame = open_at(b, tb, WINDOWS[1], run)
    frame.locator("[data-testid=graph-search]").fill("relax.log")
    frame.locator("[data-testid=graph-search-results] .graph-search-result").first.wait_for()
    frame.locator("[data-testid=graph-search]").press("Enter")
    frame.locator("[data-testid=selected-op]").wait_for()
    frame.locator("[data-tab=history]").click()
    chart = frame.locator("[data-testid=stats-chart]")
    chart.wait_for()
    points = chart.locator("rect.chart-hit")
    assert points.count() == len(STATS_SCALES)
    # Each point says its call's statistics: numpy's on the same inputs.
    for point, k in zip(points.all(), STATS_SCALES):
        title = point.locator("title").text_content()
        shown = {name: float(v) for name, v in re.findall(r"(\|max\||max|mean|min) (-?[\d.e+-]+)", title)}
        out = np.log(X * k).astype(np.float32)
        for name, want in (("min", out.min()), ("max", out.max()), ("mean", out.mean()), ("|max|", np.abs(out).max())):
            assert shown[name] == pytest.approx(float(want), rel=1e-4, abs=1e-6), (title, name)
    # A click on a call selects that execution.
    points.nth(2).click()
    frame.locator(".history-table tr.selected td:first-child").filter(has_text=re.compile(r"^2$")).wait_for()
    assert_text_legible(b)
    frame.locator("[data-panel=history]").screenshot(path=str(_screenshot_dir(tmp_path_factory) / "stats-chart.png"))


def test_source_browser_opens_any_recorded_file(tb, b, tmp_path_factory):
    runs = runs_of(tb)
    run = runs["buggy"]["run"]
    files = tb.api(f"source_files/list?run={run}")["source_files"]
    assert len(files) >= 2
    frame = open_at(b, tb, WINDOWS[1], run)
    picker = frame.locator("[data-testid=source-picker]")
    demo = next(f for f in files if f["file_path"].endswith("debug_digits.py"))
    options = picker.locator("option:not([disabled])")
    options.nth(len(files) - 1).wait_for(state="attached")  # the picker fills after the panel opens
    assert options.count() == len(files)
    picker.select_option(str(demo["index"]))
    marked = frame.locator(".source-panel .src-line.has-ops")
    marked.first.wait_for()
    # The file opens on its first line that made an op; clicking its mark selects that op.
    first_line = int(marked.first.get_attribute("data-line"))
    assert int(frame.locator(".source-panel .src-line.highlighted").get_attribute("data-line")) == first_line
    frame.locator("[data-panel=source]").screenshot(path=str(_screenshot_dir(tmp_path_factory) / "source-browser.png"))
    mark = marked.first.locator(".op-mark")
    op_ids = [int(x) for x in mark.get_attribute("data-ops").split(",")]
    mark.click()
    frame.locator("[data-testid=selected-op]").wait_for()
    op = tb.api(f"graphs/op_info?run={run}&op_id={op_ids[0]}")
    frame.locator("[data-testid=selected-op]", has_text=op["op_name"]).wait_for()
    other = next(f for f in files if f["index"] != demo["index"])
    picker.select_option(str(other["index"]))
    frame.locator(".source-panel .source-path", has_text=os.path.basename(other["file_path"])).wait_for()
    # Only the lines in view are in the page; scrolled to its end, the file's last line shows.
    body = frame.locator(".source-panel .source-body")
    assert frame.locator(".source-panel .src-line").count() < other["num_lines"] or other["num_lines"] < 40
    body.evaluate("el => (el.scrollTop = el.scrollHeight)")
    assert_in_view(frame.locator(f".source-panel .src-line[data-line='{other['num_lines']}']"), full=False)
