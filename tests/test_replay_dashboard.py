"""The dashboard lands an alert on the inner op of a fused kernel that made the NaN (replay):
a real tensorboard process, a real dump, headless Chromium (see test_dashboard_e2e.py)."""

from __future__ import annotations

import time

import models_masked as mm
import pytest
from test_dashboard_e2e import Browser, TensorBoardProcess

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    import tvm
    from models import compile_module
    from tvm import relax

    import tvmdbg

    logdir = tmp_path_factory.mktemp("replay_dashboard")
    tvmdbg.enable_dump_debug_info(str(logdir / "leaked"), tensor_debug_mode="FULL_HEALTH")
    try:
        vm = relax.VirtualMachine(compile_module(mm.LeakedLog, fuse=True), tvm.cpu())
        vm["main"](*[tvm.runtime.tensor(a) for a in mm.inputs("LeakedLog")])
    finally:
        tvmdbg.disable_dump_debug_info()
    tb = TensorBoardProcess(logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log")
    deadline = time.time() + 60
    while not tb.api("runs")["runs"] or tb.api("runs")["runs"][0]["num_alerts"] < 1:
        assert time.time() < deadline, "the plugin never read the run"
        time.sleep(0.3)
    yield tb
    tb.close()


def test_alert_click_selects_the_inner_op_that_made_the_nan(tensorboard):
    run = tensorboard.api("runs")["runs"][0]["run"]
    [alert] = tensorboard.api(f"alerts?run={run}")["alerts"]
    assert alert["confirmed"] == "replay" and alert["inner_op"]["op_type"] == "relax.log"
    browser = Browser()
    try:
        frame = browser.open_dashboard(tensorboard)
        frame.locator(".run-select").select_option(run)
        first = frame.locator("[data-testid=first-origin-alert]:not([disabled])")
        first.wait_for()
        first.click()
        selected = frame.locator("[data-testid=inner-op].selected")
        selected.wait_for(timeout=30_000)
        assert selected.get_attribute("data-inner-index") == str(alert["inner_op"]["index"])
        assert selected.get_attribute("data-health") == "nonfinite"
        assert "relax.log" in selected.inner_text()
        # Its operands' health, from the replay: the log reads the subtract's finite output.
        [replay] = tensorboard.api(f"replays?run={run}")["replays"]
        log = replay["ops"][alert["inner_op"]["index"]]
        operand = replay["ops"][log["input_refs"][0]]
        # Named as in the kernel's list of original Relax ops (the fused function's own
        # binding names, such as its last `gv`, would not match that list).
        originals = tensorboard.api(f"graphs/op_info?run={run}&op_id={alert['op_id']}")["original_ops"]
        same_type = [o["var_name"] for o in originals if o["op_type"] == operand["op_type"]]
        earlier = sum(1 for o in replay["ops"][: log["input_refs"][0]] if o["op_type"] == operand["op_type"])
        assert selected.locator(".inner-op-reads").inner_text() == f"reads {same_type[earlier]} (finite)"
        inner = frame.locator("[data-testid=inner-op]")
        names = [o["var_name"] for o in originals]
        shown = [inner.nth(i).locator("code").inner_text().split(" = ")[0] for i in range(inner.count())]
        assert shown and all(n in names for n in shown), (shown, names)
        assert inner.count() == 4  # subtract, log, multiply, sum
        assert [inner.nth(i).get_attribute("data-health") for i in range(4)] == [
            "finite",
            "nonfinite",
            "nonfinite",
            "nonfinite",
        ]
        # The source view shows the inner op's own line, not the kernel's first op.
        highlighted = frame.locator(".source-panel .src-line.highlighted")
        highlighted.wait_for()
        deadline = time.time() + 10
        while int(highlighted.get_attribute("data-line")) != mm.LEAKED_LOG_LINE and time.time() < deadline:
            time.sleep(0.2)
        assert int(highlighted.get_attribute("data-line")) == mm.LEAKED_LOG_LINE
        assert "R.log(h)" in highlighted.inner_text()
        assert not browser.errors, browser.errors
    finally:
        browser.close()
