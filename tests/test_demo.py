"""The demo end to end: examples/debug_digits.py run as a user runs it, its dump read back.

The naive loss must be caught at its source: the first origin NaN/Inf alert (the first
non-finite output whose inputs were all finite) is the `log` op, or the fused kernel holding
relax.log, created at the line of examples/debug_digits.py that calls `relax.op.log` (found by
reading the example, not hard-coded), with kernel fusion on and off. The fixed loss must
produce no non-finite value at all and train to at least 90% test accuracy (95.3% measured
after 50 steps).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tvmdbg_tb import analysis
from tvmdbg_tb.events.reader import NONFINITE, DebugDataReader
from tvmdbg_tb.events.summaries import describe
from tvmdbg_tb.proto import debug_event_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "debug_digits.py"
NAN_STEPS = 6  # the naive loss is NaN from step 4 on
FIX_STEPS = 50
FIX_MIN_ACCURACY = 0.9


def example_line(fragment: str) -> int:
    """The 1-based line of the example holding fragment (exactly one must)."""
    hits = [n for n, line in enumerate(EXAMPLE.read_text().splitlines(), 1) if fragment in line]
    assert len(hits) == 1, f"{fragment!r} should be on exactly one line of {EXAMPLE}, found {hits}"
    return hits[0]


LOG_LINE = example_line("relax.op.log(")


def run_example(dump_dir: Path, *flags: str) -> str:
    """Runs the example with dumping into dump_dir; returns its stdout."""
    cmd = [sys.executable, str(EXAMPLE), "--debug", "--dump_dir", str(dump_dir), *flags]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ})
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def losses_and_accuracies(stdout: str) -> tuple[list[float], list[float]]:
    rows = re.findall(r"^step\s+\d+\s+loss\s+(\S+)\s+test accuracy\s+(\S+)$", stdout, re.M)
    return [float(loss) for loss, _ in rows], [float(acc) for _, acc in rows]


def read_run(dump_dir: Path):
    reader = DebugDataReader(dump_dir)
    reader.update()
    run = reader.run()
    assert not run.corruptions
    assert run.num_traces() > 0
    return run


def user_line(run, location: pb.CodeLocation) -> tuple[str, int]:
    frame = run.user_frame(location)
    assert frame is not None, "no user frame recorded"
    return frame.file_path, frame.line


@pytest.fixture(scope="module")
def demo_logdir(tmp_path_factory) -> Path:
    """One logdir holding every run of this module, as scripts/demo.sh lays them out."""
    return tmp_path_factory.mktemp("tvmdbg_logdir")


@pytest.fixture(scope="module")
def nan_fused(demo_logdir):
    stdout = run_example(demo_logdir / "nan", "--fuse", "--steps", str(NAN_STEPS))
    return "--fuse", stdout, read_run(demo_logdir / "nan")


@pytest.fixture(scope="module")
def nan_unfused(demo_logdir):
    stdout = run_example(demo_logdir / "nan_unfused", "--no-fuse", "--steps", str(NAN_STEPS))
    return "--no-fuse", stdout, read_run(demo_logdir / "nan_unfused")


@pytest.fixture(scope="module", params=["nan_fused", "nan_unfused"])
def nan_demo(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def fixed_demo(demo_logdir):
    stdout = run_example(demo_logdir / "fixed", "--fix", "--steps", str(FIX_STEPS))
    return stdout, read_run(demo_logdir / "fixed")


def test_naive_loss_goes_nan_within_a_few_steps(nan_demo):
    _, stdout, _ = nan_demo
    losses, accuracies = losses_and_accuracies(stdout)
    assert len(losses) == NAN_STEPS
    assert np.isfinite(losses[0]) and np.isnan(losses[-1])
    assert accuracies[-1] < 0.2  # chance level once the parameters are NaN


def first_origin_alert(run) -> dict:
    """The first origin alert as the TVM Debugger tab and `tvmdbg alerts` show it."""
    answer = analysis.alerts(run)
    first = answer["first_origin_index"]
    assert first is not None, f"no origin alert among {answer['num_alerts']} alerts"
    alert = answer["alerts"][first]
    assert alert["origin"]
    return alert


def in_example(location: dict | None) -> tuple[Path, int] | None:
    return location and (Path(location["file_path"]).resolve(), location["line"])


def in_example_file(location: dict | None, example: Path) -> int | None:
    """The line of a location when it is in example."""
    found = in_example(location)
    return found[1] if found and found[0] == example else None


def test_first_origin_alert_is_the_log_at_its_source_line(nan_demo):
    fuse, _, run = nan_demo
    alert = first_origin_alert(run)
    assert run.graph(alert["graph_id"]).name == "backbone_loss_adjoint"
    op_types = [o["op_type"] for o in alert["original_ops"]]
    if fuse == "--no-fuse":
        assert op_types == ["relax.log"], alert["kernel"]
    log_ops = [o for o in alert["original_ops"] if o["op_type"] == "relax.log"]
    assert len(log_ops) == 1, f"origin kernel {alert['kernel']} holds {op_types}"
    assert in_example(log_ops[0]["location"]) == (EXAMPLE, LOG_LINE)
    # A click on the alert shows the op's own location: that line too.
    assert in_example(alert["location"]) == (EXAMPLE, LOG_LINE)
    assert alert["neg_inf_count"] > 0  # log(0) = -inf

    # Cross-check without the alerts module: the run's first non-finite value is this one.
    digests = run.trace_digests()
    assert int(np.flatnonzero(digests["flags"] & NONFINITE)[0]) == alert["trace_position"]


def test_origin_inputs_are_finite_and_show_the_underflow(nan_demo):
    """The log's input (the softmax output) is finite, but some probabilities are exactly 0."""
    _, _, run = nan_demo
    alert = first_origin_alert(run)
    op = run.op(alert["op_id"])
    produced = [i for i in op.inputs if i.kind == pb.OpInput.OP_OUTPUT]
    assert produced, f"{op.op_name} has no input produced by a traced op"
    digests = run.trace_digests()
    zeros = 0
    for inp in produced:
        same_execution = [
            i
            for i in run.op_trace_indices(inp.producer_op_id, inp.producer_output_slot)
            if digests[i]["execution_index"] == alert["execution_index"]
        ]
        assert len(same_execution) == 1
        trace = run.trace(int(same_execution[0]))
        health = describe(trace.tensor_debug_mode, list(trace.debug_values))
        assert health["nan"] == health["neg_inf"] == health["pos_inf"] == 0
        zeros += health["zero"]
    assert zeros > 0


def test_fixed_loss_has_no_nonfinite_values_and_trains(fixed_demo):
    stdout, run = fixed_demo
    losses, accuracies = losses_and_accuracies(stdout)
    assert len(losses) == FIX_STEPS and np.isfinite(losses).all()
    assert accuracies[-1] >= FIX_MIN_ACCURACY
    assert not (run.trace_digests()["flags"] & NONFINITE).any()
    assert not (run.execution_digests()["flags"] & NONFINITE).any()
    assert analysis.alerts(run)["num_alerts"] == 0
    assert run.find_ops("relax.nn.log_softmax")
    assert not run.find_ops("relax.log")


TORCH_EXAMPLE = ROOT / "examples" / "debug_torch_inference.py"
HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed")
def test_torch_example_without_torch_says_how_to_install():
    done = subprocess.run([sys.executable, str(TORCH_EXAMPLE)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "needs PyTorch" in done.stderr and "pip install torch" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(not HAS_TORCH, reason="torch (an optional extra) is not installed")
def test_torch_example_ops_point_at_forward(tmp_path):
    cmd = [sys.executable, str(TORCH_EXAMPLE), "--debug", "--dump_dir", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    run = read_run(tmp_path)
    forward = {n for n, line in enumerate(TORCH_EXAMPLE.read_text().splitlines(), 1) if "torch." in line}
    lines = {in_example_file(analysis.location(run, op.code_location), TORCH_EXAMPLE) for op in run.ops()}
    assert lines and lines <= forward, (lines, forward)
    assert analysis.alerts(run)["num_alerts"] == 0


def _screenshot_dir(tmp_path: Path) -> Path:
    """docs/tutorial/ (the README's pictures) with TVMDBG_UPDATE_SCREENSHOTS=1, else tmp_path."""
    if os.environ.get("TVMDBG_UPDATE_SCREENSHOTS") == "1":
        out = ROOT / "docs" / "tutorial"
        out.mkdir(parents=True, exist_ok=True)
        return out
    return tmp_path


@pytest.mark.browser
def test_tutorial_in_the_dashboard(demo_logdir, nan_fused, fixed_demo, tmp_path):
    """The README tutorial, clicked through in headless Chromium: the alert lands on the log line."""
    if not Path("/usr/bin/chromium").exists() or not (ROOT / "tvmdbg_tb_frontend" / "dist" / "index.js").exists():
        pytest.skip("needs /usr/bin/chromium and the built dashboard (bash scripts/setup.sh)")
    pytest.importorskip("playwright.sync_api")
    from test_dashboard_e2e import Browser, TensorBoardProcess  # the dashboard tests' drivers

    shots = _screenshot_dir(tmp_path)
    tb = TensorBoardProcess(demo_logdir, tmp_path / "tensorboard.log")
    browser = Browser()
    try:
        deadline = time.time() + 60
        while len(runs := {r["run"].split("/")[0]: r["run"] for r in tb.api("runs")["runs"]}) < 2:
            assert time.time() < deadline, f"the plugin lists {runs}"
            time.sleep(0.3)
        alert = first_origin_alert(nan_fused[2])
        frame = browser.open_dashboard(tb)
        frame.locator(".run-select").select_option(runs["nan"])
        button = frame.locator("[data-testid=first-origin-alert]:not([disabled])")
        button.wait_for()
        button.click()

        selected = frame.locator("[data-testid=selected-op]")
        selected.wait_for()
        assert selected.inner_text() == alert["op_name"]
        highlighted = frame.locator(".source-panel .src-line.highlighted")
        highlighted.wait_for()
        assert int(highlighted.get_attribute("data-line")) == LOG_LINE
        assert "relax.op.log(probs)" in highlighted.inner_text()
        assert "bad" in frame.locator("[data-testid=selected-health] .health-pill").get_attribute("class")
        details = frame.locator("[data-panel=details]")
        assert "relax.log" in details.inner_text()
        # The README's step 4: the graph lists the kernel's inputs lv, labels and consumer gv2.
        frame.locator("[data-testid=graph-inputs] a").first.wait_for()
        assert frame.locator("[data-testid=graph-inputs]").inner_text() == "inputs: lv, labels"
        assert frame.locator("[data-testid=graph-consumers]").inner_text() == "consumers: gv2"
        browser.page.screenshot(path=str(shots / "dashboard.png"))
        for panel in ("details", "source"):
            frame.locator(f"[data-panel={panel}]").screenshot(path=str(shots / f"{panel}.png"))

        frame.locator(".run-select").select_option(runs["fixed"])
        frame.locator("[data-panel=alerts] .no-alerts").wait_for()
        assert frame.locator("[data-testid=first-origin-alert]:not([disabled])").count() == 0
        browser.page.screenshot(path=str(shots / "fixed.png"))
        assert browser.errors == []
    finally:
        browser.close()
        tb.close()
