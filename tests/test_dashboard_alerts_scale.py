"""The Alerts panel at scale, in real Chromium on a real `tensorboard`: a run with 153k alerts
shows counts by kind equal to the reader's totals (not the first page's), pages through the
list, and a run whose start the circular buffer dropped with nothing to vouch for it (a dump
written before the ring kept the first NaN calls) says so with the fix."""

from __future__ import annotations

import pytest
from dump_records import strip_identity
from test_alerts_scale import write_many_alerts, write_small_buffer
from test_dashboard_e2e import Browser, TensorBoardProcess

from tvmdbg_tb.events.reader import DebugDataReader

pytestmark = pytest.mark.browser


def test_alert_counts_paging_and_dropped_start_banner(tmp_path):
    logdir = tmp_path / "logdir"
    write_many_alerts(logdir, "big")
    write_small_buffer(logdir, "small")
    strip_identity(logdir / "small")
    with DebugDataReader(logdir) as reader:
        reader.update()
        digests = reader.run("big").trace_digests()
        totals = {
            k: int((digests[f] > 0).sum()) for k, f in (("nan", "nan"), ("neg-inf", "neg_inf"), ("pos-inf", "pos_inf"))
        }
        num = int(((digests["nan"] > 0) | (digests["neg_inf"] > 0) | (digests["pos_inf"] > 0)).sum())
    assert num > 150_000
    tb = TensorBoardProcess(logdir, tmp_path / "tensorboard.log")
    b = Browser()
    try:
        frame = b.open_dashboard(tb)
        frame.locator(".run-select").select_option("big")
        summary = frame.locator("[data-testid=first-origin-alert]", has_text=f"{num:,} NaN/∞ alerts")
        summary.wait_for(timeout=60_000)
        for kind, total in totals.items():
            assert summary.locator(f"[data-kind={kind}]").inner_text().endswith(f" {total:,}"), kind
        pager = frame.locator("[data-testid=alert-pager]")
        assert f"1–200 of {num:,}" in pager.inner_text()
        pager.locator("button", has_text="›").click()
        frame.locator("[data-testid=alert-pager]", has_text=f"201–400 of {num:,}").wait_for()
        assert frame.locator(".alert-list .alert-item").count() == 200
        assert frame.locator("[data-testid=start-dropped]").count() == 0

        # "non-finite only": the kernel list pages over the alerts; the first finite trace of
        # every call (i % 10 == 9) is gone from it.
        executions = frame.locator(".executions-panel")
        frame.locator("[data-testid=nonfinite-only]").check()
        executions.locator(".panel-head", has_text=f"{num:,} non-finite kernel executions").wait_for()
        rows = executions.locator(".vlist-row[data-position]")
        rows.first.wait_for()
        positions = [int(rows.nth(i).get_attribute("data-position")) for i in range(min(rows.count(), 12))]
        assert len(positions) >= 6 and positions == [p for p in range(14) if p % 10 != 9][: len(positions)]
        assert all("nonfinite" in rows.nth(i).get_attribute("class") for i in range(len(positions)))
        goto = executions.locator(".goto-input")  # row 9 is position 10: selected, the list stays filtered
        goto.fill("9")
        goto.press("Enter")
        frame.locator("[data-testid=selected-op]").wait_for()
        assert "selected" in executions.locator(".vlist-row[data-position='10']").get_attribute("class")
        frame.locator("[data-testid=nonfinite-only]").uncheck()
        executions.locator(".panel-head", has_text=f"{len(digests):,} kernel executions").wait_for()

        frame.locator(".run-select").select_option("small")
        banner = frame.locator("[data-testid=start-dropped]")
        banner.wait_for(timeout=30_000)
        assert "circular_buffer_size=-1" in banner.inner_text()
        assert b.errors == []
    finally:
        b.close()
        tb.close()
