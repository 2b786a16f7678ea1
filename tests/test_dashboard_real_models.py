"""A model nobody here wrote in the dashboard (real `tensorboard`, headless Chromium): GPT-2
from its config (tests/real_models.py), healthy. Its masks' -inf is no alert but a note
("intended masking ... absorbed by softmax"); its graph is one connected piece, so "whole
graph" draws every kernel; an input that is a reshape of another kernel's output (no kernel
itself) shows that kernel's health."""

from __future__ import annotations

import pytest
from test_dashboard_e2e import Browser, TensorBoardProcess

real_models = pytest.importorskip("real_models")

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _reads_a_view(logdir: str) -> tuple[str, int]:
    """(op name, input slot) of a kernel input that is a reshape of another kernel's output."""
    import tvmdbg
    from tvmdbg_tb.proto import debug_event_pb2 as pb

    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        for op in run.ops():
            for slot, inp in enumerate(op.inputs):
                if inp.kind == pb.OpInput.OP_OUTPUT:
                    made = run.op(inp.producer_op_id).outputs[inp.producer_output_slot]
                    if tuple(made.shape) != tuple(inp.spec.shape):
                        return op.op_name, slot
    raise AssertionError("no kernel reads a reshape")


@pytest.fixture(scope="module")
def gpt2_logdir(tmp_path_factory):
    built = real_models.build("gpt2", fuse=False)
    return real_models.record(built, tmp_path_factory.mktemp("gpt2"))


def test_gpt2_masks_are_a_note_and_its_graph_is_one_piece_with_health(gpt2_logdir, tmp_path):
    tb = TensorBoardProcess(gpt2_logdir, tmp_path / "tensorboard.log")
    browser = Browser()
    try:
        (run,) = tb.settled_runs()["runs"]  # every run read once: its graphs are listed
        (graph,) = tb.api(f"graphs/list?run={run['run']}")["graphs"]
        ops = tb.api(f"graphs/graph_info?run={run['run']}&graph_id={graph['graph_id']}")["ops"]
        assert len(ops) > 60  # more than the dashboard draws whole by default
        frame = browser.open_dashboard(tb)

        note = frame.locator("[data-panel=alerts] [data-testid=benign-note]")
        note.wait_for()
        assert "Intended masking" in note.inner_text() and "softmax" in note.inner_text()
        assert "No NaN or ∞ alert" in frame.locator("[data-panel=alerts] .no-alerts").inner_text()

        # A kernel reading a reshape of another's output: its input shows that kernel's health.
        name, slot = _reads_a_view(gpt2_logdir)
        frame.locator(".executions-panel .filter-input").fill(name)
        frame.locator(f".executions-panel .vlist-row[data-op-name='{name}']").first.click()
        frame.locator(f"[data-testid=selected-op]:text-is('{name}')").wait_for()
        cell = frame.locator(".details-panel .input-health").nth(slot)
        cell.locator(".health-pill").wait_for()

        frame.locator("[data-testid=whole-graph]").check()
        nodes = frame.locator(".graph-panel .op-node")
        nodes.nth(len(ops) - 1).wait_for()
        assert nodes.count() == len(ops)  # one connected piece: every kernel is drawn
        assert not browser.errors, browser.errors
    finally:
        browser.close()
        tb.close()
