"""The Compare view and the `compare` route in real Chromium against a real TensorBoard, on
the three planted cases: (a) a float16 build whose large reduction leaves tolerance first,
(b) a torch-imported model whose tanh converter is skewed on purpose, against PyTorch eager,
(c) fused vs unfused float32, which must come out within tolerance (no false alarm). Each names
the right op and line in the route's JSON and in the dashboard; clicking an op shows both
sides' statistics and the source line."""

from __future__ import annotations

import time
from urllib.parse import urlencode

import pytest
from models import line_of
from models_compare import reduction_model, run, scaled_calls
from test_dashboard_e2e import Browser, TensorBoardProcess  # skips without Chromium or bundle

import tvmdbg

TORCH_FILE = "test_compare_torch.py"


def _record(logdir, build) -> None:
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_STATS")
    try:
        build()
    finally:
        tvmdbg.disable_dump_debug_info()


def _reduction(dtype: str, fuse: bool):
    def build():
        executable, inputs, _ = reduction_model(dtype, fuse)
        run(executable, inputs)

    return build


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("compare_logdir")
    for name, dtype, fuse in (("fp16", "float16", True), ("fp32", "float32", False), ("fp32fused", "float32", True)):
        _record(logdir / name, _reduction(dtype, fuse))
    _record(logdir / "callsA", scaled_calls([1.0, 1.5, 1.0]))
    _record(logdir / "callsB", scaled_calls([1.0, 1.0]))
    _record(logdir / "manyA", scaled_calls([1.5 if i == 30 else 1.0 for i in range(45)]))
    _record(logdir / "manyB", scaled_calls([1.0] * 45))
    expected = 7
    torch_lines = None
    try:
        import test_compare_torch
        import torch
        from test_compare_torch import X, _Net, _tvm_run
    except (ImportError, pytest.skip.Exception):  # test_compare_torch skips itself without torch
        pass
    else:  # (b): the planted tanh, unfused, against eager
        _tvm_run(logdir / "torchtvm", fuse=False, planted=True)
        exported = torch.export.export(_Net(), (torch.from_numpy(X),))
        tvmdbg.record_torch_reference(exported, (torch.from_numpy(X),), logdir / "torchref")
        torch_lines = line_of(test_compare_torch.__file__, "# planted: tanh")
        expected = 9
    tb = TensorBoardProcess(logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log")
    deadline = time.time() + 60
    while len(tb.api("runs")["runs"]) < expected:
        assert time.time() < deadline, "the plugin never listed every run"
        time.sleep(0.3)
    runs = {r["run"].split("/")[0]: r["run"] for r in tb.api("runs")["runs"]}
    yield tb, runs, torch_lines
    tb.close()


def _route(tb, a: str, b: str, rtol: str, atol: str) -> dict:
    return tb.api("compare?" + urlencode({"run_a": a, "run_b": b, "rtol": rtol, "atol": atol}))


def _compare_in_browser(browser: Browser, tb, a: str, b: str, rtol: str, atol: str):
    frame = browser.open_dashboard(tb)
    frame.locator(".navigator-tabs [data-tab=compare]").click()
    frame.locator(".compare-run-a").select_option(a)
    frame.locator(".compare-run-b").select_option(b)
    frame.locator(".compare-rtol").fill(rtol)
    frame.locator(".compare-atol").fill(atol)
    frame.locator(".compare-go").click()
    frame.locator("[data-testid=compare-verdict]").wait_for(timeout=30_000)
    return frame


REDUCTION_LINE = line_of(reduction_model.__code__.co_filename, "# planted: large reduction")


def test_float16_reduction_named_by_route_and_view(tensorboard):
    """(a) float16 vs float32: relax.sum at its line, in the route and the dashboard."""
    tb, runs, _ = tensorboard
    body = _route(tb, runs["fp16"], runs["fp32"], "1e-2", "1e-2")
    first = body["first_divergence"]
    assert body["status"] == "divergent" and first["op_type"] == "relax.sum"
    assert first["location"]["line"] == REDUCTION_LINE and first["location"]["file_path"].endswith("models_compare.py")
    browser = Browser()
    try:
        frame = _compare_in_browser(browser, tb, runs["fp16"], runs["fp32"], "1e-2", "1e-2")
        verdict = frame.locator("[data-testid=compare-verdict]").inner_text()
        assert "relax.sum" in verdict and f"models_compare.py:{REDUCTION_LINE}" in verdict
        first_row = frame.locator(".compare-row").first
        assert "divergent" in first_row.get_attribute("class") and "origin" in first_row.get_attribute("class")
        first_row.click()
        location = frame.locator("[data-testid=compare-location]")
        location.wait_for(timeout=10_000)
        assert location.inner_text().endswith(f"models_compare.py:{REDUCTION_LINE} (reduction_model)")
        frame.locator(".compare-source").filter(has_text="planted: large reduction").wait_for(timeout=10_000)
        stats = frame.locator(".compare-stats").inner_text()
        assert "mean" in stats and "l2_norm" in stats
        # The graph of run A, coloured by error: the planted reduction as the first
        # divergence, the multiply before it (within tolerance) not.
        multiply = next(r for r in body["ops"] if r["op_type"] == "relax.multiply")
        origin_node = frame.locator(f'.graph-panel .op-node[data-op-id="{first["op_id_a"]}"]')
        origin_node.wait_for(timeout=15_000)
        assert "mark-cmp-origin" in origin_node.get_attribute("class")
        assert "first divergence" in origin_node.locator("title").first.text_content()
        within_node = frame.locator(f'.graph-panel .op-node[data-op-id="{multiply["op_id_a"]}"]')
        within_class = within_node.get_attribute("class")
        assert (
            "mark-cmp-within" in within_class
            and "cmp-origin" not in within_class
            and "cmp-divergent" not in within_class
        )
        # Clicking a node in the graph shows that op's comparison.
        within_node.click()
        frame.locator(".compare-op-title").filter(has_text="relax.multiply").wait_for(timeout=10_000)
        assert (
            frame.locator("[data-testid=compare-location]")
            .inner_text()
            .endswith(f"models_compare.py:{multiply['location']['line']} (reduction_model)")
        )
        assert not browser.errors, browser.errors
    finally:
        browser.close()


def test_planted_torch_op_named_by_route_and_view(tensorboard):
    """(b) torch-imported model with a skewed tanh vs PyTorch eager: relax.tanh at the
    forward line holding torch.tanh, in the route and the dashboard."""
    tb, runs, line = tensorboard
    if line is None:
        pytest.skip("torch is not installed")
    body = _route(tb, runs["torchtvm"], runs["torchref"], "1e-4", "1e-5")
    info = {r["run"]: r for r in tb.api("runs")["runs"]}
    assert info[runs["torchref"]]["reference"] and info[runs["torchref"]]["run_name"] == "PyTorch eager reference"
    assert not info[runs["torchtvm"]]["reference"]
    first = body["first_divergence"]
    assert body["status"] == "divergent" and first["op_type"] == "relax.tanh"
    assert first["location"]["line"] == line and first["location"]["file_path"].endswith(TORCH_FILE)
    matmul = [r for r in body["ops"] if r["op_type"] == "relax.matmul"]
    assert matmul and matmul[0]["status"] == "within"  # before the planted op, eager agrees
    browser = Browser()
    try:
        frame = _compare_in_browser(browser, tb, runs["torchtvm"], runs["torchref"], "1e-4", "1e-5")
        verdict = frame.locator("[data-testid=compare-verdict]").inner_text()
        assert "relax.tanh" in verdict and f"{TORCH_FILE}:{line}" in verdict
        first_row = frame.locator(".compare-row").first
        assert "origin" in first_row.get_attribute("class")
        first_row.click()
        location = frame.locator("[data-testid=compare-location]")
        location.wait_for(timeout=10_000)
        assert location.inner_text().endswith(f"{TORCH_FILE}:{line} (forward)")
        frame.locator(".compare-source").filter(has_text="planted: tanh").wait_for(timeout=10_000)
        stats = frame.locator(".compare-stats").inner_text()
        assert "abs_max" in stats and "B (reference)" in stats
        assert not browser.errors, browser.errors
    finally:
        browser.close()


def test_fused_vs_unfused_is_within_tolerance_in_route_and_view(tensorboard):
    """(c) fused vs unfused float32 at a tight tolerance: no false alarm anywhere; the
    reduction is listed as within tolerance at its line, the fused-away divide as not
    comparable (never as equal)."""
    tb, runs, _ = tensorboard
    body = _route(tb, runs["fp32fused"], runs["fp32"], "1e-5", "1e-6")
    assert body["status"] == "within" and body["first_divergence"] is None
    reduction = [r for r in body["ops"] if r["op_type"] == "relax.sum"]
    assert reduction[0]["status"] == "within" and reduction[0]["location"]["line"] == REDUCTION_LINE
    browser = Browser()
    try:
        frame = _compare_in_browser(browser, tb, runs["fp32fused"], runs["fp32"], "1e-5", "1e-6")
        assert frame.locator("[data-testid=compare-verdict]").inner_text().startswith("Within tolerance")
        assert frame.locator(".compare-row.divergent").count() == 0
        row = frame.locator(".compare-row").filter(has_text="relax.sum")
        assert "within" in row.get_attribute("class") and f"models_compare.py:{REDUCTION_LINE}" in row.inner_text()
        assert frame.locator(".compare-row.not_comparable").count() == body["matched"]["a_only"]
        row.click()  # shows the fused run's graph, no node coloured as divergent
        node = frame.locator(f'.graph-panel .op-node[data-op-id="{reduction[0]["op_id_a"]}"]')
        node.wait_for(timeout=15_000)
        assert "mark-cmp-within" in node.get_attribute("class")
        assert frame.locator(".graph-panel .op-node.mark-cmp-within").count() >= 2
        assert frame.locator(".graph-panel .mark-cmp-divergent, .graph-panel .mark-cmp-origin").count() == 0
        assert not browser.errors, browser.errors
    finally:
        browser.close()


def test_calls_paired_by_order_pickable_in_route_and_view(tensorboard):
    """A calls main three times (the second scaled), B twice: the first divergent call is
    shown, the third call of A is listed as unpaired, and the user picks another call."""
    tb, runs, _ = tensorboard
    body = _route(tb, runs["callsA"], runs["callsB"], "1e-4", "1e-5")
    assert body["status"] == "divergent" and body["call"] == 1
    assert [(c["call"], c["status"]) for c in body["calls"]] == [(0, "within"), (1, "divergent"), (2, "unpaired")]
    assert any("called 3 times in A and 2 times in B" in n for n in body["notes"])
    picked = tb.api("compare?" + urlencode({"run_a": runs["callsA"], "run_b": runs["callsB"], "call": 0}))
    assert picked["call"] == 0 and picked["status"] == "within"
    missing = tb.api("compare?" + urlencode({"run_a": runs["callsA"], "run_b": runs["callsB"], "call": 2}))
    assert missing["status"] == "cannot_compare" and "no paired call 2" in missing["error"]
    browser = Browser()
    try:
        frame = _compare_in_browser(browser, tb, runs["callsA"], runs["callsB"], "1e-4", "1e-5")
        assert frame.locator("[data-testid=compare-verdict]").inner_text().startswith("First divergent op")
        strip = frame.locator("[data-testid=compare-calls]")
        assert "main 2: unpaired (missing in B)" in strip.inner_text()
        assert "shown" in strip.locator('[data-call="main:1"]').get_attribute("class")
        strip.locator('[data-call="main:0"]').click()
        frame.locator("[data-testid=compare-verdict]").filter(has_text="Within tolerance").wait_for(timeout=30_000)
        assert "shown" in frame.locator('[data-testid=compare-calls] [data-call="main:0"]').get_attribute("class")
        assert not browser.errors, browser.errors
    finally:
        browser.close()


def test_many_calls_pick_from_a_drop_down(tensorboard):
    """45 calls: the first divergent one (call 30) is shown, the others are one drop-down."""
    tb, runs, _ = tensorboard
    browser = Browser()
    try:
        frame = _compare_in_browser(browser, tb, runs["manyA"], runs["manyB"], "1e-4", "1e-5")
        calls = frame.locator("[data-testid=compare-calls]")
        assert calls.inner_text().startswith("45 calls (call i of A vs call i of B): 1 divergent, 0 unpaired")
        select = calls.locator("select.compare-call-select")
        assert select.input_value() == "30" and "main call 30:" in frame.locator(".compare-body").inner_text()
        select.select_option("3")
        frame.locator("[data-testid=compare-verdict]").filter(has_text="Within tolerance").wait_for(timeout=30_000)
        assert "main call 3:" in frame.locator(".compare-body").inner_text()
        assert not browser.errors, browser.errors
    finally:
        browser.close()
