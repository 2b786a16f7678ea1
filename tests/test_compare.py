"""Op-by-op comparison of real runs: planted float16 reduction, fused vs unfused, bad input."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from models import blockbuilder_planted
from models_compare import compare_cli, reduction_model, run, scaled_calls

import tvmdbg
from tvmdbg_tb import analysis

TOL = ["--rtol", "1e-2", "--atol", "1e-2"]


def _record(logdir, mode: str, build) -> str:
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode)
    try:
        build()
    finally:
        tvmdbg.disable_dump_debug_info()
    return str(logdir)


def _reduction(logdir, dtype, fuse, mode="FULL_STATS"):
    def build():
        executable, inputs, _ = reduction_model(dtype, fuse)
        run(executable, inputs)

    return _record(logdir, mode, build)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    return {
        "fp16_fused": _reduction(root / "fp16_fused", "float16", True),
        "fp32": _reduction(root / "fp32", "float32", False),
        "fp32_fused": _reduction(root / "fp32_fused", "float32", True),
    }


def test_float16_build_first_divergence_is_the_large_reduction(runs):
    line = reduction_model.__globals__["line_of"](reduction_model.__code__.co_filename, "# planted: large reduction")
    result = analysis.compare(runs["fp16_fused"], runs["fp32"], rtol=1e-2, atol=1e-2)
    assert result["status"] == "divergent"
    first = result["first_divergence"]
    assert first["op_type"] == "relax.sum" and first["location"]["line"] == line
    assert first["location"]["file_path"].endswith("models_compare.py")
    # The multiply before it was within tolerance in float16.
    before = [r for r in result["ops"] if r["op_type"] == "relax.multiply"]
    assert before and before[0]["status"] == "within"
    cli = compare_cli(runs["fp16_fused"], runs["fp32"], *TOL, "--json")
    assert cli.returncode == 1, cli.stderr
    payload = json.loads(cli.stdout)
    assert payload["first_divergence"]["location"]["line"] == line
    assert set(payload["first_divergence"]["location"]) == {"file_path", "line", "function"}
    text = compare_cli(runs["fp16_fused"], runs["fp32"], *TOL)
    assert text.returncode == 1 and f"models_compare.py:{line}" in text.stdout


def test_fused_and_unfused_agree_without_false_alarm(runs):
    result = analysis.compare(runs["fp32_fused"], runs["fp32"], rtol=1e-5, atol=1e-6)
    assert result["status"] == "within" and result["first_divergence"] is None
    assert result["matched"]["aligned"] >= 3 and result["matched"]["b_only"] >= 1  # divide fused away
    assert result["suggestion"] and "FULL_TENSOR" in result["suggestion"]
    cli = compare_cli(runs["fp32_fused"], runs["fp32"], "--json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["first_divergence"] is None


def test_full_tensor_runs_compare_values(tmp_path):
    a = _reduction(tmp_path / "a", "float16", False, mode="FULL_TENSOR")
    b = _reduction(tmp_path / "b", "float32", False, mode="FULL_TENSOR")
    result = analysis.compare(a, b, rtol=1e-2, atol=1e-2)
    first = result["first_divergence"]
    assert first["op_type"] == "relax.sum" and first["basis"] == "values"
    assert 0.99 < first["cosine_similarity"] <= 1.0 + 1e-12  # same direction, wrong magnitude
    divide = [r for r in result["ops"] if r["op_type"] == "relax.divide"][0]
    # h / s is ~1e-4: wrong by a factor (rel error) yet within atol=1e-2, as allclose says.
    assert divide["max_rel_error"] > 0.5 and divide["status"] == "within" and not divide.get("origin")


def test_different_models_cannot_be_compared(runs, tmp_path):
    other = _record(tmp_path / "other", "FULL_STATS", lambda: blockbuilder_planted("log").run())
    with pytest.raises(analysis.CompareError, match="different models"):
        analysis.compare(runs["fp32"], other)
    cli = compare_cli(runs["fp32"], other, "--json")
    assert cli.returncode == 2 and "different models" in cli.stderr
    assert json.loads(cli.stdout)["first_divergence"] is None


def test_run_without_statistics_says_so(runs, tmp_path):
    health = _reduction(tmp_path / "health", "float32", False, mode="FULL_HEALTH")
    cli = compare_cli(health, runs["fp32"])
    assert cli.returncode == 2 and "FULL_HEALTH" in cli.stderr and "FULL_STATS" in cli.stderr
    assert compare_cli(str(tmp_path / "missing"), runs["fp32"]).returncode == 2


def test_nan_on_one_side_only_is_a_divergence(runs, tmp_path):
    bad = _reduction(tmp_path / "nan", "float32", False)

    # Same model, an input with one NaN: the input itself is the first divergence.
    def build():
        executable, inputs, _ = reduction_model("float32", False)
        x = inputs[0].copy()
        x[0, 5] = np.nan
        run(executable, [x])

    nan = _record(tmp_path / "nan_input", "FULL_STATS", build)
    result = analysis.compare(nan, bad)
    assert result["status"] == "divergent"
    first = result["first_divergence"]
    assert first["kind"] == "input" and "NaN" in first["reason"]
    assert os.path.isdir(nan)


def test_compare_route(runs, tmp_path):
    """The plugin's compare route over a logdir holding both runs (real HTTP via werkzeug)."""
    import shutil

    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin

    logdir = tmp_path / "logdir"
    for name in ("fp16_fused", "fp32"):
        (run,) = os.listdir(runs[name])
        shutil.copytree(os.path.join(runs[name], run), logdir / name)
    plugin = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(logdir)), start_reader=False)
    plugin._reader.update()
    client = Client(plugin.get_plugin_apps()["/compare"])
    answer = client.get("/compare?run_a=fp16_fused&run_b=fp32&rtol=1e-2&atol=1e-2")
    assert answer.status_code == 200
    body = json.loads(answer.get_data())
    assert body["first_divergence"]["op_type"] == "relax.sum"
    assert body["first_divergence"]["location"]["file_path"].endswith("models_compare.py")
    assert client.get("/compare?run_a=fp16_fused").status_code == 400
    assert client.get("/compare?run_a=fp16_fused&run_b=nope").status_code == 404
    assert client.get("/compare?run_a=fp16_fused&run_b=fp32&rtol=x").status_code == 400
    same = json.loads(client.get("/compare?run_a=fp32&run_b=fp32").get_data())
    assert same["status"] == "within"
    assert client.get("/compare?run_a=fp32&run_b=fp32&call=-1").status_code == 400
    assert client.get("/compare?run_a=fp32&run_b=fp32&call=x").status_code == 400
    picked = json.loads(client.get("/compare?run_a=fp32&run_b=fp32&call=0&function=main").get_data())
    assert picked["call"] == 0 and picked["calls"] == [
        {"function": "main", "call": 0, "execution_index_a": 0, "execution_index_b": 0, "status": "within"}
    ]
    missing = json.loads(client.get("/compare?run_a=fp32&run_b=fp32&function=nope").get_data())
    assert missing["status"] == "cannot_compare" and "nope" in missing["error"]


def test_first_divergent_call_is_shown(tmp_path):
    """Three calls each: only the third call of A differs (its input), found by the bulk scan."""

    a = _record(tmp_path / "a", "FULL_STATS", scaled_calls([1.0, 1.0, 1.5]))
    b = _record(tmp_path / "b", "FULL_STATS", scaled_calls([1.0, 1.0, 1.0]))
    result = analysis.compare(a, b)
    assert result["call"] == 2 and result["executions_compared"] == 3
    assert result["first_divergence"]["kind"] == "input"
    assert [c["status"] for c in result["calls"]] == ["within", "within", "divergent"]
    assert analysis.compare(b, b)["status"] == "within"
    # Call i of A against call i of B, picked by the user.
    picked = analysis.compare(a, b, call=1)
    assert picked["call"] == 1 and picked["status"] == "within" and picked["first_divergence"] is None
    assert analysis.compare(a, b, call=2, function="main")["first_divergence"]["kind"] == "input"
    with pytest.raises(analysis.CompareError, match="no paired call 3"):
        analysis.compare(a, b, call=3)
    with pytest.raises(analysis.CompareError, match="no paired function 'nope'"):
        analysis.compare(a, b, function="nope")
    assert compare_cli(a, b, "--call", "0").returncode == 0
    text = compare_cli(a, b, "--all-calls")
    assert text.returncode == 1 and "main call 2" in text.stdout and "1 divergent (main 2)" in text.stdout
    assert [line.split()[0] for line in text.stdout.splitlines() if line.split()[1:3] == ["main", "1"]] == ["within"]
    assert compare_cli(a, b, "--call", "9").returncode == 2


def test_call_count_mismatch_is_reported(tmp_path):
    """A calls main three times, B twice: the third call of A is listed as unpaired and a
    note says so; the two pairs are compared (the second one diverges)."""

    a = _record(tmp_path / "a", "FULL_STATS", scaled_calls([1.0, 1.5, 1.0]))
    b = _record(tmp_path / "b", "FULL_STATS", scaled_calls([1.0, 1.0]))
    result = analysis.compare(a, b)
    assert result["call"] == 1 and result["status"] == "divergent"
    assert result["executions_paired"] == 2
    assert result["calls"][-1] == {"function": "main", "call": 2, "status": "unpaired", "missing_in": "B"}
    assert any("called 3 times in A and 2 times in B" in note for note in result["notes"])
    # Swapped: the extra call is missing in A.
    swapped = analysis.compare(b, a)
    assert swapped["calls"][-1]["missing_in"] == "A"
    text = compare_cli(a, b)
    assert "1 unpaired (not compared)" in text.stdout and "called 3 times in A and 2 times in B" in text.stdout


def test_different_modes_compare_what_both_have(runs, tmp_path):
    """FULL_TENSOR against FULL_STATS: statistics computed from the values, compared as stats."""
    values = _reduction(tmp_path / "values", "float32", False, mode="FULL_TENSOR")
    result = analysis.compare(values, runs["fp32"])
    assert result["status"] == "within" and result["mode_a"] == "FULL_TENSOR"
    assert {r["basis"] for r in result["ops"] if r["status"] != "not_comparable"} == {"stats"}
    diverged = analysis.compare(runs["fp16_fused"], values, rtol=1e-2, atol=1e-2)
    assert diverged["first_divergence"]["op_type"] == "relax.sum"


def test_equal_statistics_different_values_suggest_and_decide_by_full_tensor(tmp_path):
    """Each row of the input reversed: every op's min, max, mean, L2 norm and abs-max are the
    same as the reference's, so statistics cannot tell. The report says so (CLI note, JSON
    `suggestion`) and names a FULL_TENSOR re-dump; following it, the values decide: the input
    is the first divergence."""
    import re

    def build(flip: bool, mode: str, op_regex=None):
        def body():
            executable, inputs, _ = reduction_model("float32", False)
            x = inputs[0][:, ::-1].copy() if flip else inputs[0]
            run(executable, [x])

        tvmdbg.enable_dump_debug_info(tmp_path / f"{mode}_{flip}", tensor_debug_mode=mode, op_regex=op_regex)
        try:
            body()
        finally:
            tvmdbg.disable_dump_debug_info()
        return str(tmp_path / f"{mode}_{flip}")

    a, b = build(True, "FULL_STATS"), build(False, "FULL_STATS")
    result = analysis.compare(a, b)
    assert result["status"] == "within"  # statistics agree everywhere...
    assert "equal statistics can hide different values" in result["suggestion"]  # ...and the report says so
    cli = compare_cli(a, b, "--json")
    assert cli.returncode == 0 and json.loads(cli.stdout)["suggestion"] == result["suggestion"]
    text = compare_cli(a, b)
    assert "note: " in text.stdout and "tensor_debug_mode='FULL_TENSOR'" in text.stdout
    op_regex = re.search(r"op_regex='([^']+)'", result["suggestion"]).group(1)
    assert re.search(op_regex, "lv1")  # the suspects include kernel outputs by name
    values_a, values_b = build(True, "FULL_TENSOR", op_regex), build(False, "FULL_TENSOR", op_regex)
    decided = analysis.compare(values_a, values_b)
    assert decided["status"] == "divergent" and decided["first_divergence"]["basis"] == "values"
    assert decided["first_divergence"]["key"] == "main:input 0"
    assert decided["suggestion"] is None
