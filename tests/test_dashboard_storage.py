"""The TVM Debugger tab on an s3:// logdir, in real Chromium on a real `tensorboard --logdir
s3://...` against moto's S3 server (started here on 127.0.0.1): a 2-worker disco job written to
the bucket, rank 1 making the NaN. The tab opens on rank 1 (its first NaN/Inf came first), the
ranks bar lists both ranks, and the first origin lands on rank 1's op and source line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from object_store import s3_server
from test_dashboard_e2e import ROOT, Browser, TensorBoardProcess

pytestmark = pytest.mark.browser
CHILD = ROOT / "tests" / "disco_child.py"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """(logdir URL, line of the log op), the S3 server running (its environment set)."""
    base = tmp_path_factory.mktemp("disco_s3")
    with s3_server() as s3:
        logdir = s3.bucket() + "/logs"
        env = {
            **os.environ,
            "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "TVM_NUM_THREADS": "1",
        }
        done = subprocess.run(
            [sys.executable, str(CHILD), logdir, str(base / "model.so")],
            capture_output=True, text=True, timeout=300, env=env, cwd=base,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        yield logdir, int(done.stdout.split("LINE", 1)[1].split()[0])


@pytest.fixture(scope="module")
def tb(job, tmp_path_factory):
    server = TensorBoardProcess(job[0], tmp_path_factory.mktemp("tb") / "tensorboard.log")
    yield server
    server.close()


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


def test_the_tab_on_an_s3_logdir_shows_the_ranks_and_rank_1s_origin(job, tb, browser):
    _, line = job
    body = tb.settled_runs(2)
    rank1 = next(r["run"] for r in body["runs"] if r["disco"]["rank"] == 1)
    assert body["default_run"] == rank1

    frame = browser.open_dashboard(tb)
    ranks = frame.locator("[data-testid=ranks]")
    ranks.locator("button.rank.current[data-rank='1']").wait_for(timeout=30_000)
    labels = ranks.locator("button.rank").all_inner_texts()
    assert len(labels) == 2 and labels[0].startswith("rank 0") and "first NaN/Inf" in labels[1], labels
    assert "2 of 2 ranks" in ranks.inner_text()
    # The run picker names each rank and the job's script (rank 0's), not the worker's argv.
    options = frame.locator(".run-select option").all_inner_texts()
    assert any(o.startswith("rank 1 of 2 · disco_child.py") for o in options), options

    frame.locator("[data-testid=first-origin-alert]:not([disabled])").click()
    frame.locator("[data-testid=selected-op]").wait_for()
    highlighted = frame.locator(".source-panel .src-line.highlighted")
    highlighted.wait_for()
    assert int(highlighted.get_attribute("data-line")) == line
    assert "relax.op.log(x)" in highlighted.inner_text()

    ranks.locator("button.rank[data-rank='0']").click()  # rank 0's run: finite
    frame.locator("[data-panel=alerts] .no-alerts").wait_for()
    assert frame.locator(".run-select").input_value() != rank1
    assert browser.errors == [], browser.errors
