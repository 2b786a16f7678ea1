"""The routes the dashboard's views are built on, on dumps of real TVM runs: a run's user-given
name (enable_dump_debug_info(run_name=...)) in the runs route and the CLI, the live flag that
follows the writing program (not a file age), a FULL_TENSOR value's histogram and the slice's
axes that label it by the tensor's own indices, one op's per-call statistics in FULL_STATS
runs, and alerts that carry their output's dtype and shape. Expected values come from numpy
on the same inputs."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import tvm
from models import X, Y, blockbuilder_planted
from test_cli import tvmdbg as tvmdbg_cli
from test_plugin import Server

import tvmdbg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCALES = (1.0, 3.0, 0.5)


def _ops_of_type(logdir, run: str, op_type: str):
    reader = tvmdbg.DebugDataReader(str(logdir))
    try:
        reader.update()
        return [op for op in reader.run(run).ops() if [o.op_type for o in op.original_ops] == [op_type]]
    finally:
        reader.close()


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Three runs of the planted model (unfused, log(x - y) holds NaN and -inf): FULL_TENSOR
    once, named; FULL_STATS three times with x scaled (y = 0: every log finite)."""
    logdir = tmp_path_factory.mktemp("routes")
    tvmdbg.enable_dump_debug_info(
        str(logdir / "tensor"), tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1, run_name="planted log"
    )
    try:  # compiled while tvmdbg records: its ops keep their Relax op and line
        blockbuilder_planted("log").run()
    finally:
        tvmdbg.disable_dump_debug_info()
    tvmdbg.enable_dump_debug_info(str(logdir / "stats"), tensor_debug_mode="FULL_STATS", circular_buffer_size=-1)
    try:
        model = blockbuilder_planted("log")
        vm = tvm.relax.VirtualMachine(model.executable, tvm.cpu())
        for k in SCALES:
            args = [X * k, np.zeros_like(Y), model.inputs[2]]
            vm[model.function](*(tvm.runtime.tensor(a) for a in args))
    finally:
        tvmdbg.disable_dump_debug_info()
    server = Server(logdir)
    runs = {r["run"].split("/")[0]: r for r in server.json("runs")["runs"]}
    return {"logdir": logdir, "server": server, "runs": runs}


def test_run_name_in_runs_route_and_cli(dumps):
    runs = dumps["runs"]
    assert runs["tensor"]["run_name"] == "planted log"
    assert runs["stats"]["run_name"] is None
    info = tvmdbg_cli("analyze", dumps["logdir"] / "tensor", "-x", "ri")
    assert "  name           planted log" in info.stdout, info.stdout + info.stderr


@pytest.mark.parametrize(
    ("run_name", "error", "match"),
    [
        (3, TypeError, "run_name must be a string"),
        ("  ", ValueError, "must not be empty"),
        ("a\nb", ValueError, "one line"),
        ("x" * 201, ValueError, "at most 200"),
    ],
)
def test_bad_run_name_is_refused_before_anything_is_written(tmp_path, run_name, error, match):
    with pytest.raises(error, match=match):
        tvmdbg.enable_dump_debug_info(str(tmp_path / "logdir"), run_name=run_name)
    assert not (tmp_path / "logdir").exists()


def test_a_different_run_name_is_a_different_session(tmp_path):
    writer = tvmdbg.enable_dump_debug_info(str(tmp_path), run_name="a")
    try:
        assert tvmdbg.enable_dump_debug_info(str(tmp_path), run_name=" a ") is writer
        with pytest.raises(ValueError, match="different arguments"):
            tvmdbg.enable_dump_debug_info(str(tmp_path), run_name="b")
    finally:
        tvmdbg.disable_dump_debug_info()


def test_live_follows_the_program_not_the_file_age(tmp_path):
    """Open writer: live. Closed (RunEnd): not live at once, though its files are seconds old.
    A program killed before it could close its dump: not live as soon as it is gone."""
    writer = tvmdbg.enable_dump_debug_info(str(tmp_path / "open"), tensor_debug_mode="FULL_HEALTH")
    try:
        blockbuilder_planted("log").run()
        writer.flush()
        assert Server(tmp_path / "open").json("runs")["runs"][0]["live"] is True
    finally:
        tvmdbg.disable_dump_debug_info()
    (closed,) = Server(tmp_path / "open").json("runs")["runs"]
    assert closed["live"] is False and closed["completeness"]["ended"] == "closed"

    code = (
        "import os, sys; sys.path.insert(0, 'tests'); import models, tvmdbg\n"
        f"w = tvmdbg.enable_dump_debug_info({str(tmp_path / 'killed')!r}, tensor_debug_mode='FULL_HEALTH')\n"
        "models.blockbuilder_planted('log').run(); w.flush(); os._exit(0)\n"
    )
    env = dict(os.environ, PYTHONPATH=ROOT, TVM_NUM_THREADS="1")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env, timeout=300)
    server = Server(tmp_path / "killed")
    (killed,) = server.json("runs")["runs"]
    assert killed["num_traces"] > 0 and killed["completeness"]["ended"] == "not closed"
    assert killed["live"] is False
    assert server.json("status")["runs"][0]["live"] is False


def test_histogram_of_a_full_tensor_value(dumps):
    server, run = dumps["server"], dumps["runs"]["tensor"]["run"]
    (log_op,) = _ops_of_type(dumps["logdir"], run, "relax.log")
    trace = server.json("graph_execution/op_traces", run=run, op_id=log_op.op_id)["traces"][0]
    with np.errstate(all="ignore"):
        expected = np.log(X - Y).astype(np.float32).ravel()
    finite = expected[np.isfinite(expected)]
    body = server.json("tensor/histogram", run=run, trace=trace["position"], bins=4)
    want_counts, want_edges = np.histogram(finite.astype(np.float64), bins=4, range=(finite.min(), finite.max()))
    assert body["counts"] == want_counts.tolist()
    assert np.allclose(body["edges"], want_edges)
    assert (body["nan"], body["neg_inf"], body["pos_inf"]) == (
        int(np.isnan(expected).sum()),
        int(np.isneginf(expected).sum()),
        int(np.isposinf(expected).sum()),
    )
    assert body["finite"] == finite.size and body["num_elements"] == expected.size
    assert body["min"] == pytest.approx(float(finite.min())) and body["max"] == pytest.approx(float(finite.max()))
    for bad in ({"bins": 0}, {"bins": 201}, {"bins": "x"}):
        assert "error" in server.json("tensor/histogram", expect=400, run=run, trace=trace["position"], **bad)
    no_value = dumps["runs"]["stats"]["run"]
    assert "FULL_TENSOR" in server.json("tensor/histogram", expect=404, run=no_value, trace=0)["error"]


def test_slice_axes_give_the_tensors_own_indices(dumps):
    server, run = dumps["server"], dumps["runs"]["tensor"]["run"]
    (sub_op,) = _ops_of_type(dumps["logdir"], run, "relax.subtract")
    trace = server.json("graph_execution/op_traces", run=run, op_id=sub_op.op_id)["traces"][0]
    whole = X - Y
    for text, axes in (
        ("", [(0, 0, 1), (1, 0, 1)]),
        ("0, 1::3", [(1, 1, 3)]),
        ("..., ::-2", [(0, 0, 1), (1, 7, -2)]),
        (":, 5", [(0, 0, 1)]),
    ):
        body = server.json("tensor/value", run=run, trace=trace["position"], slice=text)
        assert [(a["dim"], a["start"], a["step"]) for a in body["axes"]] == axes, text
        values = np.asarray(body["values"], dtype=np.float32)
        # Each shown value sits at the index its axes name.
        for at in np.ndindex(values.shape):
            index = [0] * whole.ndim
            if text == "0, 1::3":
                index[0] = 0
            if text == ":, 5":
                index[1] = 5
            for pos, axis in zip(at, body["axes"]):
                index[axis["dim"]] = axis["start"] + pos * axis["step"]
            assert values[at] == whole[tuple(index)], (text, at, index)


def test_op_stats_per_call_match_numpy(dumps):
    server, run = dumps["server"], dumps["runs"]["stats"]["run"]
    (log_op,) = _ops_of_type(dumps["logdir"], run, "relax.log")
    body = server.json("graph_execution/op_stats", run=run, op_id=log_op.op_id)
    assert body["num_traces"] == len(SCALES) and not body["bucketed"]
    for point, k in zip(body["points"], SCALES):
        out = np.log(X * k).astype(np.float32)
        assert point["num_traces"] == 1 and point["nan"] == point["neg_inf"] == point["pos_inf"] == 0
        assert point["min"] == pytest.approx(float(out.min()), rel=1e-5)
        assert point["max"] == pytest.approx(float(out.max()), rel=1e-5)
        assert point["mean"] == pytest.approx(float(out.mean()), rel=1e-4, abs=1e-6)
        assert point["abs_max"] == pytest.approx(float(np.abs(out).max()), rel=1e-5)
    # Two buckets over three calls keep each bucket's extremes.
    merged = server.json("graph_execution/op_stats", run=run, op_id=log_op.op_id, max_points=2)
    assert merged["bucketed"] and len(merged["points"]) == 2
    assert sum(p["num_traces"] for p in merged["points"]) == len(SCALES)
    assert min(p["min"] for p in merged["points"]) == pytest.approx(min(p["min"] for p in body["points"]))
    assert max(p["max"] for p in merged["points"]) == pytest.approx(max(p["max"] for p in body["points"]))
    # Other modes keep no statistics: a 404 that says which mode is needed.
    tensor_run = dumps["runs"]["tensor"]["run"]
    (other,) = _ops_of_type(dumps["logdir"], tensor_run, "relax.log")
    error = server.json("graph_execution/op_stats", expect=404, run=tensor_run, op_id=other.op_id)["error"]
    assert "FULL_STATS" in error and "FULL_TENSOR" in error
    assert (
        "max_points"
        in server.json("graph_execution/op_stats", expect=400, run=run, op_id=log_op.op_id, max_points=5001)["error"]
    )


def test_alerts_carry_dtype_and_shape(dumps):
    server, run = dumps["server"], dumps["runs"]["tensor"]["run"]
    alerts = server.json("alerts", run=run)["alerts"]
    assert alerts
    for alert in alerts:
        op_info = server.json("graphs/op_info", run=run, op_id=alert["op_id"])
        spec = op_info["outputs"][alert["output_slot"]]
        assert alert["dtype"] == spec["dtype"] == "float32"
        assert alert["shape"] == spec["shape"] == list(X.shape)
