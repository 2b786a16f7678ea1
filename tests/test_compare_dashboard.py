"""The Compare view in real Chromium: the planted float16 reduction is named with its line,
and clicking it shows both sides' statistics and the source line."""

from __future__ import annotations

import time

import pytest
from models_compare import reduction_model, run
from test_dashboard_e2e import Browser, TensorBoardProcess  # skips without Chromium or bundle

import tvmdbg


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("compare_logdir")
    for name, dtype, fuse in (("fp16", "float16", True), ("fp32", "float32", False)):
        tvmdbg.enable_dump_debug_info(str(logdir / name), tensor_debug_mode="FULL_STATS")
        try:
            executable, inputs, line = reduction_model(dtype, fuse)
            run(executable, inputs)
        finally:
            tvmdbg.disable_dump_debug_info()
    tb = TensorBoardProcess(logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log")
    deadline = time.time() + 60
    while len(tb.api("runs")["runs"]) < 2:
        assert time.time() < deadline, "the plugin never listed both runs"
        time.sleep(0.3)
    yield tb, line
    tb.close()


def test_compare_view_names_the_planted_reduction(tensorboard):
    tb, line = tensorboard
    runs = [r["run"] for r in tb.api("runs")["runs"]]
    fp16 = next(r for r in runs if r.startswith("fp16"))
    fp32 = next(r for r in runs if r.startswith("fp32"))
    browser = Browser()
    try:
        frame = browser.open_dashboard(tb)
        frame.locator(".compare-panel > summary").click()
        frame.locator(".compare-run-a").select_option(fp16)
        frame.locator(".compare-run-b").select_option(fp32)
        frame.locator(".compare-rtol").fill("1e-2")
        frame.locator(".compare-atol").fill("1e-2")
        frame.locator(".compare-go").click()
        verdict = frame.locator("[data-testid=compare-verdict]")
        verdict.wait_for(timeout=30_000)
        assert "relax.sum" in verdict.inner_text() and f"models_compare.py:{line}" in verdict.inner_text()
        first_row = frame.locator(".compare-row").first
        assert "divergent" in first_row.get_attribute("class") and "origin" in first_row.get_attribute("class")
        first_row.click()
        location = frame.locator("[data-testid=compare-location]")
        location.wait_for(timeout=10_000)
        assert location.inner_text().endswith(f"models_compare.py:{line} (reduction_model)")
        frame.locator(".compare-source").filter(has_text="planted: large reduction").wait_for(timeout=10_000)
        stats = frame.locator(".compare-stats").inner_text()
        assert "mean" in stats and "l2_norm" in stats
        assert not browser.errors, browser.errors
    finally:
        browser.close()
