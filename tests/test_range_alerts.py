"""Range alerts (analysis/ranges.py): float16 outputs heading for overflow are flagged while
still finite. A chain whose activations grow ~4x per layer is flagged at the first layer past
the threshold, before the layer that overflows; its healthy twin, and a float32 model growing
the same way, raise none. Served by the alerts route, `tvmdbg alerts` and `tvmdbg check`."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import trace_paths
from models_ranges import X, doubled, growth_chain, run_calls
from test_plugin import Server

import tvmdbg
from tvmdbg_tb import analysis
from tvmdbg_tb.analysis import ranges
from tvmdbg_tb.cli.main import main as cli_main
from tvmdbg_tb.events import layout

GROWING, HEALTHY = 4.0, 1.0
THRESHOLD = 65504 / ranges.HEADROOM


def _record(logdir, mode: str, build_and_run) -> None:
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode)
    try:
        build_and_run()
    finally:
        tvmdbg.disable_dump_debug_info()


def _chain_run(logdir, gain: float, layers: int = 9, mode: str = "FULL_STATS") -> dict:
    built = {}

    def build_and_run():
        executable, inputs, expected, line = growth_chain(gain, layers)
        built.update(expected=expected, line=line)
        run_calls(executable, [inputs])

    _record(logdir, mode, build_and_run)
    return built


def _open(logdir):
    reader = tvmdbg.DebugDataReader(logdir)
    reader.update()
    return reader


@pytest.fixture(scope="module", params=["compiled", "vm_instrument"])
def growing(request, tmp_path_factory):
    """The growing chain, recorded once per tracing path."""
    logdir = tmp_path_factory.mktemp(f"growing_{request.param}")
    with trace_paths.using(request.param):
        built = _chain_run(logdir, GROWING)
    return logdir, built


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("healthy")
    return logdir, _chain_run(logdir, HEALTHY)


def test_growth_is_flagged_at_the_first_layer_past_the_threshold_before_any_inf(growing):
    logdir, built = growing
    expected = built["expected"]
    past = [i for i, m in enumerate(expected) if m >= THRESHOLD]
    overflow = [i for i, m in enumerate(expected) if not np.isfinite(m)]
    # The model as built: a layer past the threshold, and a later one that overflows.
    assert past and overflow and past[0] < overflow[0], expected
    assert all(abs(m - THRESHOLD) > 0.1 * THRESHOLD for m in expected[: overflow[0]])  # no borderline layer
    with _open(logdir) as reader:
        run = reader.run()
        answer = analysis.alerts(run)
        found = answer["range_alerts"]
        assert found["available"] and found["num_alerts"] == found["near_max_alerts"] >= 1
        first = found["alerts"][0]
        # One fused matmul+add kernel per layer, in order: trace k is layer k.
        assert first["kind"] == "near_max" and first["trace_index"] == past[0], (found["alerts"], expected)
        assert first["dtype"] == "float16" and first["dtype_max"] == 65504.0
        assert first["abs_max"] == pytest.approx(expected[past[0]], rel=1e-2)
        assert first["fraction_of_max"] == pytest.approx(first["abs_max"] / 65504)
        assert first["location"]["file_path"].endswith("models_ranges.py")
        assert first["location"]["line"] == built["line"]
        assert [o["op_type"] for o in first["original_ops"]] == ["relax.matmul", "relax.add"]
        # Every finite layer past the threshold is flagged, and nothing else.
        flagged = sorted(a["trace_index"] for a in found["alerts"])
        assert flagged == [i for i in past if i < overflow[0]]
        # The NaN/Inf alert comes later: the layer that overflowed.
        assert answer["num_alerts"] >= 1
        assert min(a["trace_index"] for a in answer["alerts"]) == overflow[0] > first["trace_index"]
        assert run.trace(first["trace_position"]).op_id == first["op_id"]


def test_healthy_float16_chain_raises_none(healthy):
    logdir, built = healthy
    assert max(built["expected"]) < 8  # the same chain without the growth
    with _open(logdir) as reader:
        answer = analysis.alerts(reader.run())
        assert answer["num_alerts"] == 0
        assert answer["range_alerts"]["available"] and answer["range_alerts"]["num_alerts"] == 0
        assert answer["range_alerts"]["alerts"] == []


def test_growth_across_calls_float16_flagged_float32_not(tmp_path):
    """y = x * 2 called with inputs 4x larger each call: float16 is flagged once the growth
    would overflow within the horizon (abs-max * 4**4 >= 65504), float32 never."""
    scales = [4.0**k for k in range(7)]
    calls = [[(X.astype("float32") * s)] for s in scales]
    expected = [2 * float(np.abs(c[0]).max()) for c in calls]
    for dtype in ("float16", "float32"):
        _record(
            tmp_path / dtype,
            "FULL_STATS",
            lambda dtype=dtype: run_calls(doubled(dtype), [[c[0].astype(dtype)] for c in calls]),
        )
    with _open(tmp_path / "float16") as reader:
        found = analysis.range_alerts(reader.run())
        growth = [a for a in found["alerts"] if a["kind"] == "growth"]
        near = [a for a in found["alerts"] if a["kind"] == "near_max"]
        want_growth = [k for k in range(1, 7) if expected[k] * (expected[k] / expected[k - 1]) ** 4 >= 65504]
        assert len(growth) == 1 and growth[0]["execution_index"] == want_growth[0]
        assert growth[0]["num_calls"] == len(want_growth)
        assert growth[0]["growth"] == pytest.approx(4.0, rel=1e-2)
        assert growth[0]["previous_abs_max"] == pytest.approx(expected[want_growth[0] - 1], rel=1e-2)
        assert growth[0]["calls_to_overflow"] == int(np.ceil(np.log(65504 / growth[0]["abs_max"]) / np.log(4)))
        assert growth[0]["peak_abs_max"] == pytest.approx(expected[-1], rel=1e-2)
        want_near = [k for k in range(7) if expected[k] >= THRESHOLD]
        assert len(near) == 1 and near[0]["execution_index"] == want_near[0]
        assert [a["kind"] for a in found["alerts"]] == ["growth", "near_max"]  # by first call
    with _open(tmp_path / "float32") as reader:
        found = analysis.range_alerts(reader.run())
        assert found["available"] and found["num_alerts"] == 0


def test_other_modes_have_no_range_alerts(tmp_path):
    _chain_run(tmp_path, GROWING, mode="FULL_HEALTH")
    with _open(tmp_path) as reader:
        run = reader.run()
        found = analysis.range_alerts(run)
        assert not found["available"] and found["num_alerts"] == 0
        assert analysis.alerts(run)["num_alerts"] >= 1  # the overflow itself is still an alert


def test_read_in_two_steps_gives_the_same_alerts(growing, tmp_path):
    """A run read while it is written: the first records, then the rest, scanned twice."""
    logdir, _ = growing
    with _open(logdir) as reader:
        run = reader.run()
        whole = analysis.range_alerts(run)
        cut = int(run.trace_digests()["offset"][whole["alerts"][0]["trace_position"]])
        source = run.path
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    traces = copy / layout.file_name(layout.GRAPH_EXECUTION_TRACES)
    data = traces.read_bytes()
    traces.write_bytes(data[:cut])  # up to the first flagged layer, excluded
    with _open(copy) as reader:
        run = reader.run()
        assert analysis.range_alerts(run)["num_alerts"] == 0
        with open(traces, "ab") as f:
            f.write(data[cut:])
        reader.update()
        again = analysis.range_alerts(run)
        keep = ("kind", "op_id", "trace_index", "abs_max", "num_calls", "peak_abs_max")
        assert [{k: a[k] for k in keep} for a in again["alerts"]] == [{k: a[k] for k in keep} for a in whole["alerts"]]


def test_alerts_route_serves_range_alerts_and_pages_them(growing, healthy):
    logdir, _ = growing
    server = Server(logdir)
    try:
        run = server.json("runs")["runs"][0]
        with _open(logdir) as reader:
            expected = json.loads(analysis.dumps(analysis.alerts(reader.run())))
            n = analysis.num_range_alerts(reader.run())
        assert n >= 1 and run["num_range_alerts"] == n
        body = server.json("alerts", run=run["run"])
        assert body == expected
        page = server.json("alerts", run=run["run"], range_offset=1, range_limit=1)["range_alerts"]
        assert page["begin"] == 1 and page["num_alerts"] == n
        assert page["alerts"] == expected["range_alerts"]["alerts"][1:2]
        # The NaN/Inf part is unchanged by the range parameters.
        assert {k: v for k, v in body.items() if k != "range_alerts"} == {
            k: v for k, v in server.json("alerts", run=run["run"], range_limit=0).items() if k != "range_alerts"
        }
        for bad in ({"range_limit": "-1"}, {"range_limit": "10001"}, {"range_offset": "x"}):
            assert "range_" in server.get("alerts", 400, run=run["run"], **bad).get_data(as_text=True)
    finally:
        server.plugin.stop()
    server = Server(healthy[0])
    try:
        name = server.json("runs")["runs"][0]["run"]
        assert server.json("alerts", run=name)["range_alerts"]["num_alerts"] == 0
    finally:
        server.plugin.stop()


def _cli(capsys, *args: str) -> tuple[int, str]:
    code = cli_main(list(args))
    return code, capsys.readouterr().out


def test_cli_alerts_and_check(growing, tmp_path, capsys):
    logdir, built = growing
    code, text = _cli(capsys, "alerts", str(logdir))
    assert code == 0 and "range alert" in text and "near max" in text and "float16" in text
    assert f"models_ranges.py:{built['line']}" in text.split("range alert")[1]
    code, text = _cli(capsys, "alerts", str(logdir), "--json")
    body = json.loads(text)
    with _open(logdir) as reader:
        assert body["range_alerts"] == json.loads(analysis.dumps(analysis.range_alerts(reader.run())))
    # A range alert warns but does not fail check: the chain cut before the overflow is finite.
    finite = tmp_path / "finite"
    built = _chain_run(finite, GROWING, layers=7)
    assert all(np.isfinite(built["expected"]))
    code, text = _cli(capsys, "check", str(finite))
    assert code == 0 and "all finite" in text and "Warning: " in text and "range alert" in text
    code, text = _cli(capsys, "check", str(logdir))
    assert code == 1 and "Warning: " in text


def test_cli_without_stats_prints_no_range_section(healthy, tmp_path, capsys):
    _chain_run(tmp_path, HEALTHY, mode="FULL_HEALTH")
    code, text = _cli(capsys, "alerts", str(tmp_path))
    assert code == 0 and "range" not in text
    code, text = _cli(capsys, "alerts", str(healthy[0]))
    assert "No range alerts" in text
    code, text = _cli(capsys, "check", str(healthy[0]))
    assert code == 0 and "Warning" not in text


@pytest.mark.browser
def test_dashboard_lists_range_alerts_and_selects_the_call(tmp_path):
    """The Alerts panel of a finite float16 run lists its range alerts; a click selects the call."""
    from test_dashboard_e2e import Browser, TensorBoardProcess

    logdir = tmp_path / "logdir"
    _chain_run(logdir, GROWING, layers=7)
    with _open(logdir) as reader:
        expected = analysis.range_alerts(reader.run())["alerts"]
    assert expected
    tb = TensorBoardProcess(logdir, tmp_path / "tensorboard.log")
    b = Browser()
    try:
        frame = b.open_dashboard(tb)
        section = frame.locator("[data-testid=range-alerts]")
        section.wait_for(timeout=60_000)
        assert f"{len(expected)} range alert" in section.inner_text()
        assert "No NaN or ∞ recorded." in frame.locator(".alerts-panel").inner_text()
        items = section.locator(".range-item")
        assert items.count() == len(expected)
        first = items.first.inner_text()
        assert expected[0]["op_name"] in first and "near max" in first and "float16" in first and "65504" in first
        items.first.click()
        frame.locator("[data-testid=selected-op]", has_text=expected[0]["op_name"]).wait_for()
        assert "selected" in items.first.get_attribute("class")
        assert b.errors == []
    finally:
        b.close()
        tb.close()


def _resnet_fp16(logdir, scales: dict[int, float]) -> dict:
    """transformers' ResNet (small config, random weights) with the first convolution of the
    given stages scaled, exported, imported, cast by ToMixedPrecision, compiled with fusion and
    run once in FULL_STATS. Returns eager PyTorch's abs-max (float32) of each scaled stage's
    first conv layer (conv, batch norm, ReLU)."""
    import copy

    import real_models
    import torch
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    model, inputs = real_models.torch_model("resnet")
    model = copy.deepcopy(model)
    layers = {stage: model.encoder.stages[stage].layers[0].layer[0] for stage in scales}
    eager = {}
    with torch.no_grad():
        for stage, scale in scales.items():
            layers[stage].convolution.weight.mul_(scale)
        hooks = [
            layer.register_forward_hook(lambda m, i, o, stage=stage: eager.__setitem__(stage, float(o.abs().max())))
            for stage, layer in layers.items()
        ]
        model(**{k: torch.from_numpy(v) for k, v in inputs.items()})
        for hook in hooks:
            hook.remove()
        exported = torch.export.export(model, (), {k: torch.from_numpy(v) for k, v in inputs.items()})

    def build_and_run():
        mod = relax.transform.ToMixedPrecision()(from_exported_program(exported))
        run_calls(real_models.compile_module(mod, fuse=True), [list(inputs.values())])

    _record(logdir, "FULL_STATS", build_and_run)
    return eager


@pytest.mark.slow
def test_resnet_mixed_precision_growth_flagged_before_the_inf(tmp_path):
    """A model nobody here wrote: ResNet cast to float16 by ToMixedPrecision. Healthy, no range
    alert; with stage 1's first convolution scaled 1000x (eager abs-max ~5.7e3, finite in
    float16) and stage 2's 20x (beyond 65504), a range alert on stage 1's float16 output comes
    before the first NaN/Inf."""
    _resnet_fp16(tmp_path / "healthy", {})
    with _open(tmp_path / "healthy") as reader:
        answer = analysis.alerts(reader.run())
        assert answer["num_alerts"] == 0 and answer["range_alerts"]["num_alerts"] == 0
        assert answer["range_alerts"]["available"]
    eager = _resnet_fp16(tmp_path / "growing", {1: 1000.0, 2: 20.0})
    assert THRESHOLD < eager[1] < 65504 < eager[2], eager
    with _open(tmp_path / "growing") as reader:
        run = reader.run()
        answer = analysis.alerts(run)
        first = answer["range_alerts"]["alerts"][0]
        assert first["kind"] == "near_max" and first["dtype"] == "float16"
        assert first["abs_max"] == pytest.approx(eager[1], rel=1e-2)
        assert "relax.nn.batch_norm" in [o["op_type"] for o in first["original_ops"]]
        assert answer["num_alerts"] >= 1
        assert first["trace_index"] < min(a["trace_index"] for a in answer["alerts"])
