"""The dashboard on a model nobody here wrote: GPT-2 from transformers' config (random weights,
no download), exported with torch.export, imported with from_exported_program and compiled
unfused (a graph of about two hundred kernels), run three times under FULL_STATS and once
under FULL_TENSOR (the Tensor tab's histogram of a real activation). In real
Chromium on a real `tensorboard`: the named run in the picker, the node search by Relax op type
and by kernel selects and frames a node of the big graph, the whole graph lays out and fits
without freezing the page, the source browser opens the library's own modeling file, a
matmul's statistics show its three calls, and the layout stays sound with legible text."""

from __future__ import annotations

import os
import time

import pytest
from dashboard_checks import assert_answers, assert_in_view, assert_layout_sound, assert_text_legible, in_view
from test_dashboard_e2e import Browser, TensorBoardProcess

import tvmdbg

pytestmark = [pytest.mark.browser, pytest.mark.slow]
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CALLS = 3


@pytest.fixture(scope="module")
def tb(tmp_path_factory):
    import numpy as np
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = transformers.GPT2Config(n_layer=4, n_embd=64, n_head=2, vocab_size=256, n_positions=64, use_cache=False)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()

    class Logits(torch.nn.Module):
        """GPT-2 with an explicit attention mask (without one TVM's codegen fails on a bool cumsum)."""

        def __init__(self):
            super().__init__()
            self.gpt2 = model

        def forward(self, ids, mask):
            return self.gpt2(input_ids=ids, attention_mask=mask).logits

    logdir = tmp_path_factory.mktemp("gpt2")
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(0, 256, (1, 16)))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        exported = torch.export.export(Logits(), (ids, mask))
    # Statistics of three calls, then the values of one (each compiled in its own session).
    for name, mode, calls in (("stats", "FULL_STATS", CALLS), ("values", "FULL_TENSOR", 1)):
        tvmdbg.enable_dump_debug_info(
            str(logdir / name), tensor_debug_mode=mode, circular_buffer_size=-1, run_name=f"gpt2 tiny {mode}"
        )
        try:
            executable = tvm.compile(from_exported_program(exported), "llvm")
            vm = relax.VirtualMachine(executable, tvm.cpu())
            for _ in range(calls):
                tokens = rng.integers(0, 256, (1, 16))
                vm["main"](tvm.runtime.tensor(tokens), tvm.runtime.tensor(mask.numpy()))
        finally:
            tvmdbg.disable_dump_debug_info()
    server = TensorBoardProcess(logdir, tmp_path_factory.mktemp("tb") / "tensorboard.log")
    deadline = time.time() + 90
    while sorted(r["num_executions"] for r in server.api("runs")["runs"]) != [1, CALLS]:
        assert time.time() < deadline, server.api("runs")
        time.sleep(0.3)
    yield server
    server.close()


def _run(tb, mode: str) -> dict:
    return next(r for r in tb.api("runs")["runs"] if r["tensor_debug_mode"] == mode)


def test_big_graph_search_fit_source_and_statistics(tb):
    run = _run(tb, "FULL_STATS")
    assert run["run_name"] == "gpt2 tiny FULL_STATS" and run["num_ops"] >= 150
    (graph,) = [g for g in tb.api(f"graphs/list?run={run['run']}")["graphs"] if g["num_ops"] == run["num_ops"]]
    ops = tb.api(f"graphs/graph_info?run={run['run']}&graph_id={graph['graph_id']}")["ops"]
    matmuls = [o for o in ops if any(x["op_type"] == "relax.matmul" for x in o["original_ops"])]
    assert len(matmuls) >= 8
    b = Browser()
    try:
        b.page.set_viewport_size({"width": 1440, "height": 900})
        frame = b.open_dashboard(tb)
        frame.locator(".run-select").select_option(run["run"])
        labels = frame.locator(".run-select option").all_inner_texts()
        assert sorted(label.split(" · ")[0] for label in labels) == ["gpt2 tiny FULL_STATS", "gpt2 tiny FULL_TENSOR"]
        # By Relax op type: the first matmul, selected and framed.
        search = frame.locator("[data-testid=graph-search]")
        search.fill("relax.matmul")
        results = frame.locator("[data-testid=graph-search-results] .graph-search-result")
        results.first.wait_for()
        assert results.count() >= 8
        search.press("Enter")
        node = frame.locator(".graph-panel .op-node.role-selected")
        node.wait_for(timeout=30_000)
        assert node.get_attribute("data-op-name") in {o["op_name"] for o in matmuls}
        assert_in_view(node, full=True)
        assert_answers(b)
        # By kernel: the last matmul's symbol (deduplicated kernels serve several ops).
        kernel = matmuls[-1]["kernel"]
        same_kernel = {o["op_name"] for o in ops if o["kernel"] == kernel}
        search.fill(kernel)
        frame.locator("[data-testid=graph-search-results] .graph-search-result").first.wait_for()
        search.press("Enter")
        deadline = time.time() + 30
        while node.get_attribute("data-op-name") not in same_kernel and time.time() < deadline:
            time.sleep(0.2)
        assert node.get_attribute("data-op-name") in same_kernel
        assert_in_view(node, full=True)
        assert_layout_sound(b)
        assert_text_legible(b)
        # Its statistics call after call (FULL_STATS): one point per call.
        frame.locator("[data-tab=history]").click()
        chart = frame.locator("[data-testid=stats-chart]")
        chart.wait_for(timeout=30_000)
        assert chart.locator("rect.chart-hit").count() == CALLS
        # The whole graph: laid out and fitted, the page answering throughout.
        started = time.time()
        frame.locator("[data-testid=whole-graph]").check()
        frame.locator(".graph-panel .op-node").nth(150).wait_for(timeout=60_000)
        laid_out = time.time() - started
        assert_answers(b)
        nodes = frame.locator(".graph-panel .op-node")
        assert nodes.count() == run["num_ops"]
        for k in (0, nodes.count() // 2, nodes.count() - 1):
            assert in_view(nodes.nth(k), full=True) == "ok", k
        print(f"whole graph laid out in {laid_out:.1f} s")  # measured, not asserted (bench/)
        # The library's own file, from the source browser.
        files = tb.api(f"source_files/list?run={run['run']}")["source_files"]
        modeling = next(f for f in files if f["file_path"].endswith("modeling_gpt2.py"))
        frame.locator("[data-testid=source-picker]").select_option(str(modeling["index"]))
        frame.locator(".source-panel .source-path", has_text="modeling_gpt2.py").wait_for()
        # Only the lines in view are in the page; scrolled to its end, the file's last line shows.
        assert frame.locator(".source-panel .src-line").count() < modeling["num_lines"]
        frame.locator(".source-panel .source-body").evaluate("el => (el.scrollTop = el.scrollHeight)")
        assert_in_view(frame.locator(f".source-panel .src-line[data-line='{modeling['num_lines']}']"), full=False)
        assert b.errors == [], b.errors
    finally:
        b.close()


def test_tensor_histogram_of_a_real_activation(tb):
    """The Tensor tab's histogram of a GPT-2 matmul output: the route's counts are numpy's over
    the stored values, and the dashboard draws them beside the table."""
    import numpy as np

    run = _run(tb, "FULL_TENSOR")
    (graph,) = tb.api(f"graphs/list?run={run['run']}")["graphs"]
    ops = tb.api(f"graphs/graph_info?run={run['run']}&graph_id={graph['graph_id']}")["ops"]
    matmul = next(o for o in ops if any(x["op_type"] == "relax.matmul" for x in o["original_ops"]))
    (trace,) = tb.api(f"graph_execution/op_traces?run={run['run']}&op_id={matmul['op_id']}")["traces"]
    value = tb.api(f"tensor/value?run={run['run']}&trace={trace['position']}&max_elements=1000000")
    values = np.asarray(value["values"], dtype=np.float64).ravel()
    assert values.size == int(np.prod(value["shape"])) > 100
    body = tb.api(f"tensor/histogram?run={run['run']}&trace={trace['position']}&bins=30")
    counts, edges = np.histogram(values, bins=30, range=(values.min(), values.max()))
    assert body["counts"] == counts.tolist() and np.allclose(body["edges"], edges)
    b = Browser()
    try:
        frame = b.open_dashboard(tb)
        frame.locator(".run-select").select_option(run["run"])
        frame.locator("[data-testid=graph-search]").fill(matmul["op_name"])
        frame.locator("[data-testid=graph-search-results] .graph-search-result").first.wait_for()
        frame.locator("[data-testid=graph-search]").press("Enter")
        frame.locator("[data-testid=selected-op]", has_text=matmul["op_name"]).wait_for()
        frame.locator("[data-tab=tensor]").click()
        chart = frame.locator("[data-testid=tensor-histogram]")
        chart.wait_for(timeout=30_000)
        assert chart.locator("rect.bar-finite").count() == 30
        assert f"{values.size:,} finite values" in chart.inner_text()
        assert_text_legible(b)
        assert b.errors == [], b.errors
    finally:
        b.close()
