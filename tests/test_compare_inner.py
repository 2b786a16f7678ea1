"""Compare down to the Relax op (compare/inner.py): a ToMixedPrecision build whose float16
overflow happens inside one fused matmul+relu+multiply+divide kernel is compared with float32
builds; the kernel is replayed op by op from the recorded inputs and `h * h` is named at its
line, not the divide that ends the kernel. Fused on one side, on the other, on both; from
statistics only, the answer offers the targeted re-run, which then finds it. The same through
the CLI, the compare route and the dashboard, and on transformers' ResNet."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from urllib.parse import urlencode

import pytest
from models_mixed import DIVIDE_LINE, PLANTED_LINE, expected, squared_relu
from models_ranges import run_calls

import tvmdbg
from tvmdbg_tb import analysis

TOL = {"rtol": 1e-2, "atol": 1e-2}


def _record(logdir, mixed: bool, fuse: bool, mode: str = "FULL_TENSOR", op_regex: str | None = None) -> str:
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode=mode, op_regex=op_regex)
    try:
        executable, inputs = squared_relu(mixed, fuse)
        run_calls(executable, [inputs])
    finally:
        tvmdbg.disable_dump_debug_info()
    return str(logdir)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inner")
    built = {
        "mixed_fused": (True, True),
        "mixed_unfused": (True, False),
        "fp32_fused": (False, True),
        "fp32_unfused": (False, False),
    }
    return {name: _record(root / name, *args) for name, args in built.items()}


def test_the_model_overflows_float16_at_h_times_h():
    """The planted fault as numpy sees it, independently of TVM: h fits float16, h * h not."""
    e = expected()
    assert e["h_max"] < 65504 < e["sq_max"] and e["overflows_float16"]


@pytest.mark.parametrize("reference", ["fp32_unfused", "fp32_fused"])
def test_names_h_times_h_inside_the_fused_kernel(runs, reference):
    result = analysis.compare(runs["mixed_fused"], runs[reference], **TOL)
    first = result["first_divergence"]
    # The kernel-level answer: the fused kernel, known by the divide that ends it.
    assert first["op_type"] == "relax.divide" and first["location"]["line"] == DIVIDE_LINE
    assert "multiply" in first["kernel_a"] and "relu" in first["kernel_a"]
    inner = first["inner"]
    assert inner["status"] == "found" and inner["walked"] == "A"
    op = inner["op"]
    assert op["op_type"] == "relax.multiply" and op["location"]["line"] == PLANTED_LINE
    assert op["location"]["file_path"].endswith("models_mixed.py")
    assert op["status"] == "divergent" and op["max_abs_error"] == float("inf")
    # What it read was within tolerance: the ReLU before it, compared value by value.
    relu = next(r for r in inner["ops"] if r["op_type"] == "relax.nn.relu")
    assert relu["status"] == "within" and relu["basis"] == "values" and relu["index"] < op["index"]
    # Which sides were replayed: B only when its kernel is fused too.
    assert inner["replayed"] == (["A", "B"] if reference == "fp32_fused" else ["A"])
    assert relu["counterpart_replayed"] == (reference == "fp32_fused")


def test_names_it_when_only_the_reference_is_fused(runs):
    """A unfused (every op a kernel), B fused: B's kernel is replayed and walked."""
    result = analysis.compare(runs["mixed_unfused"], runs["fp32_fused"], **TOL)
    inner = result["first_divergence"]["inner"]
    assert inner["walked"] == "B" and inner["replayed"] == ["B"]
    assert inner["status"] == "found" and inner["op"]["op_type"] == "relax.multiply"
    assert inner["op"]["location"]["line"] == PLANTED_LINE


def test_unfused_on_both_sides_needs_no_inner_answer(runs):
    result = analysis.compare(runs["mixed_unfused"], runs["fp32_unfused"], **TOL)
    first = result["first_divergence"]
    assert first["op_type"] == "relax.multiply" and first["location"]["line"] == PLANTED_LINE
    assert first["inner"] is None


def test_statistics_only_offer_the_targeted_rerun_that_finds_it(tmp_path):
    """FULL_STATS on both sides: nothing to replay; the answer's op_regex re-runs find it."""
    a = _record(tmp_path / "a", True, True, "FULL_STATS")
    b = _record(tmp_path / "b", False, False, "FULL_STATS")
    inner = analysis.compare(a, b, **TOL)["first_divergence"]["inner"]
    assert inner["status"] == "needs_values" and inner["replayed"] == [] and inner["op"] is None
    assert "statistics only" in inner["reason"]
    regexes = dict(
        re.findall(
            r"\b([AB]) with tvmdbg\.enable_dump_debug_info\(logdir, [^)]*op_regex='([^']+)'", inner["suggestion"]
        )
    )
    assert set(regexes) == {"A", "B"} and "FULL_TENSOR" in inner["suggestion"]
    a2 = _record(tmp_path / "a2", True, True, "FULL_TENSOR", regexes["A"])
    b2 = _record(tmp_path / "b2", False, False, "FULL_TENSOR", regexes["B"])
    again = analysis.compare(a2, b2, **TOL)["first_divergence"]["inner"]
    assert again["status"] == "found" and again["op"]["op_type"] == "relax.multiply"
    assert again["op"]["location"]["line"] == PLANTED_LINE


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())", "compare", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_names_the_inner_op(runs):
    done = _cli(runs["mixed_fused"], runs["fp32_fused"], "--rtol", "1e-2", "--atol", "1e-2")
    assert done.returncode == 1, done.stderr
    # The report comes at once, saying the kernel is being opened; its inside follows the table.
    said = [line for line in done.stdout.splitlines() if line.startswith("  Inside ")]
    assert len(said) == 2 and "replaying its Relax ops one by one" in said[0], said
    head = said[1]
    lines = done.stdout.splitlines()
    assert (
        lines.index(said[0]) < next(i for i, line in enumerate(lines) if line.startswith("status ")) < lines.index(head)
    )
    assert re.search(
        rf"relax\.multiply lv2( \(by ToMixedPrecision\))? at \S*/models_mixed\.py:{PLANTED_LINE} ", head
    ), head
    assert "replayed op by op: A and B" in head
    # The headline names the kernel whose output (the divide) only carries the inf; the op
    # named as the first divergent one is the float16 multiply that overflowed, never the divide.
    headline = next(line for line in lines if line.startswith("First divergent "))
    assert headline.startswith("First divergent kernel: fused_") and "relax.divide" in headline, headline
    named = [line for line in lines if line.startswith("First divergent op: ")]
    assert len(named) == 1 and named[0] == lines[-1], named
    assert re.search(
        rf"relax\.multiply lv2( \(by ToMixedPrecision\))? at \S*/models_mixed\.py:{PLANTED_LINE}", named[0]
    )
    done = _cli(runs["mixed_fused"], runs["fp32_unfused"], "--rtol", "1e-2", "--atol", "1e-2", "--json")
    inner = json.loads(done.stdout)["first_divergence"]["inner"]
    assert inner["op"]["location"]["line"] == PLANTED_LINE and inner["replayed"] == ["A"]


@pytest.mark.browser  # imports the Browser inside, where conftest's module rule cannot see it
def test_route_and_dashboard_show_the_inner_op(runs, tmp_path):
    """The compare route's JSON and the Compare view, in Chromium on a real TensorBoard."""
    import shutil

    from test_compare_dashboard import _compare_in_browser
    from test_dashboard_e2e import Browser, TensorBoardProcess

    logdir = tmp_path / "logdir"
    for name in ("mixed_fused", "fp32_unfused"):
        shutil.copytree(runs[name], logdir / name)
    tb = TensorBoardProcess(logdir, tmp_path / "tensorboard.log")
    browser = Browser()
    try:
        deadline = time.time() + 60
        while len(tb.api("runs")["runs"]) < 2:
            assert time.time() < deadline, "the plugin never listed both runs"
            time.sleep(0.3)
        names = {r["run"].split("/")[0]: r["run"] for r in tb.api("runs")["runs"]}
        a, b = names["mixed_fused"], names["fp32_unfused"]
        query = urlencode({"run_a": a, "run_b": b, "rtol": "1e-2", "atol": "1e-2"})
        # The first answer comes at once, the fused kernel "pending": the replay (TVM's import,
        # a build of the kernel's ops in the TensorBoard process) runs in the background and a
        # later request for the same comparison gets it.
        with urllib.request.urlopen(f"{tb.url}/data/plugin/tvmdbg/compare?{query}", timeout=300) as response:
            body = json.loads(response.read())
        assert body["first_divergence"]["inner"]["status"] == "pending"
        deadline = time.time() + 300
        while body["first_divergence"]["inner"]["status"] == "pending":
            assert time.time() < deadline
            time.sleep(0.5)
            with urllib.request.urlopen(f"{tb.url}/data/plugin/tvmdbg/compare?{query}", timeout=300) as response:
                body = json.loads(response.read())
        inner = body["first_divergence"]["inner"]
        assert inner["op"]["op_type"] == "relax.multiply" and inner["op"]["location"]["line"] == PLANTED_LINE
        frame = _compare_in_browser(browser, tb, a, b, "1e-2", "1e-2")
        shown = frame.locator("[data-testid=compare-inner]")
        shown.wait_for(timeout=60_000)
        text = shown.inner_text()
        assert f"relax.multiply lv2 at models_mixed.py:{PLANTED_LINE}" in text and "replayed op by op: A" in text
        frame.locator(".compare-inner-op.origin").click()  # its line in the source view
        frame.locator(".source-panel").filter(has_text="planted: h * h").wait_for(timeout=15_000)
        assert browser.errors == []
    finally:
        browser.close()
        tb.close()


def _resnet(logdir, mixed: bool) -> dict:
    """transformers' ResNet (small config, random weights) with stage 1's first convolution
    scaled 2e4x, exported, imported (cast by ToMixedPrecision when mixed), compiled with
    fusion and run once in FULL_TENSOR. Returns eager PyTorch's abs-max of that convolution's
    input and output."""
    import copy

    import real_models
    import torch
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    model, inputs = real_models.torch_model("resnet")
    model = copy.deepcopy(model)
    conv = model.encoder.stages[1].layers[0].layer[0].convolution
    seen = {}
    with torch.no_grad():
        conv.weight.mul_(2e4)
        hook = conv.register_forward_hook(
            lambda m, i, o: seen.update(input=float(i[0].abs().max()), output=float(o.abs().max()))
        )
        model(**{k: torch.from_numpy(v) for k, v in inputs.items()})
        hook.remove()
        exported = torch.export.export(model, (), {k: torch.from_numpy(v) for k, v in inputs.items()})
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_TENSOR")
    try:
        mod = from_exported_program(exported)
        if mixed:
            mod = relax.transform.ToMixedPrecision()(mod)
        run_calls(real_models.compile_module(mod, fuse=True), [list(inputs.values())])
    finally:
        tvmdbg.disable_dump_debug_info()
    return seen


@pytest.mark.slow
def test_resnet_mixed_precision_overflow_named_inside_its_kernel(tmp_path):
    """A model nobody here wrote: ResNet cast by ToMixedPrecision, one convolution scaled so
    that its output passes 65504 (eager PyTorch says so). Compared with the float32 build,
    compare opens the convolution's fused kernel (the first divergent one, or reached back
    from it through inputs without counterpart) and names the cast to float16 that turned the
    convolution's finite output into Inf, in the convolution's layer of modeling_resnet.py."""
    import inspect

    from transformers.models.resnet import modeling_resnet

    seen = _resnet(tmp_path / "mixed", mixed=True)
    _resnet(tmp_path / "fp32", mixed=False)
    assert seen["input"] < 65504 < seen["output"], seen
    lines, start = inspect.getsourcelines(modeling_resnet.ResNetConvLayer.forward)
    conv_line = start + next(i for i, text in enumerate(lines) if "self.convolution(" in text)
    result = analysis.compare(str(tmp_path / "mixed"), str(tmp_path / "fp32"), **TOL)
    inner = result["first_divergence"]["inner"]
    assert inner["status"] == "found", inner["reason"]
    op = inner["op"]
    # The cast to float16 (ToMixedPrecision's op; it may carry the convolution's type and var
    # with rewritten_by saying what it is) reading the convolution's output.
    assert op["made_nonfinite"] and "relax.astype" in (op["op_type"], (op["rewritten_by"] or "").split(": ")[-1])
    conv = inner["ops"][op["input_refs"][0]]
    assert len(op["input_refs"]) == 1 and "conv2d" in inner["kernel"]
    assert "relax.nn.conv2d" in (conv["op_type"], (conv["rewritten_by"] or "").split(": ")[-1])
    # The kernel of the scaled convolution: its replayed output is eager's, finite in float32.
    assert conv["abs_max"] == pytest.approx(seen["output"], rel=1e-2) and not conv["nonfinite"]
    # At the convolution's line (modeling_resnet.py, ResNetConvLayer.forward).
    assert op["location"]["file_path"].endswith("modeling_resnet.py") and op["location"]["line"] == conv_line
