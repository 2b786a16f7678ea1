"""Every route's answer, as the plugin serves it for real runs, matches the type the dashboard
declares for it (tvmdbg_tb_frontend/src: each `get<T>("route")` call), read with
tests/ts_types.py: required fields present, every value of its declared type, and (for
api.ts, whose types describe whole answers) no field the dashboard does not declare.

The runs: a fused model whose sqrt makes a NaN its maximum hides, in deep mode
(trace_fused_ops=True: masked inner-op alerts, replays), in FULL_HEALTH (the kernel's own
inner-op check), in FULL_TENSOR (values, histograms) and FULL_STATS (compare). Live control's one read route is
checked with a paused program in tests/test_live.py's way (live/paused_call), here skipped:
it needs a live child process.
"""

from __future__ import annotations

import json
from pathlib import Path

import models_masked as mm
import numpy as np
import pytest
import ts_types
import tvm
from models import compile_module
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from tvm import relax
from werkzeug.test import Client
from werkzeug.wrappers import Response

import tvmdbg
from tvmdbg_tb import analysis
from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin

PREFIX = "/data/plugin/tvmdbg/"
API_TS = ts_types.SOURCES / "api.ts"


def _record(logdir: Path, mode: str, calls: int = 2, **options) -> None:
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=-1, **options)
    try:
        vm = relax.VirtualMachine(compile_module(mm.MaskedSqrt, fuse=True), tvm.cpu())
        for _ in range(calls):
            vm["main"](*[tvm.runtime.tensor(a) for a in mm.inputs("MaskedSqrt")])
    finally:
        tvmdbg.disable_dump_debug_info()


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("routes")
    _record(root / "deep", "FULL_HEALTH", trace_fused_ops=True)
    _record(root / "inner", "FULL_HEALTH")  # the compiled path's inner-op check: inner_nonfinite
    _record(root / "values", "FULL_TENSOR")
    _record(root / "stats_a", "FULL_STATS")
    _record(root / "stats_b", "FULL_STATS")
    return root


@pytest.fixture(scope="module")
def client(logdir):
    plugin = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(logdir)), poll_interval=0.05, start_reader=False)
    plugin.poll()
    yield plugin, Client(application.TensorBoardWSGI([plugin]), Response)
    plugin.stop()


def _get(client, route: str, **params):
    plugin, http = client
    response = http.get(PREFIX + route, query_string=params)
    assert response.status_code == 200, (route, params, response.get_data(as_text=True)[:300])
    return json.loads(response.get_data(as_text=True))


def _runs(client) -> dict[str, str]:
    """Run names by their directory's first part (deep, inner, values, stats_a, stats_b)."""
    return {r["run"].split("/")[0]: r["run"] for r in _get(client, "runs")["runs"]}


def _requests(client) -> list[tuple[str, dict]]:
    """(route, params) reaching every route the dashboard reads, on data that fills them."""
    runs = _runs(client)
    deep, values = runs["deep"], runs["values"]
    graph = _get(client, "graphs/list", run=deep)["graphs"][0]["graph_id"]
    info = _get(client, "graphs/graph_info", run=deep, graph_id=graph)
    op = next(o["op_id"] for o in info["ops"] if o.get("kernel", "").startswith("fused"))
    stats_op = _get(client, "graph_execution/data", run=runs["stats_a"], begin=0, end=1)["graph_executions"][0]["op_id"]
    value_trace = _get(client, "graph_execution/data", run=values, begin=0, end=1)["graph_executions"][0]
    frames = _get(client, "graphs/op_info", run=deep, op_id=op)["location"]
    stack_ids = ",".join(str(i) for i in (frames or {}).get("stack_frame_ids", [])[:3]) or "0"
    return [
        ("runs", {}),
        ("status", {"run": deep}),
        ("alerts", {"run": deep, "begin": 0, "end": 100}),
        ("alerts", {"run": runs["inner"], "begin": 0, "end": 100}),
        ("execution/digests", {"run": deep, "begin": 0, "end": 10}),
        ("execution/data", {"run": deep, "begin": 0, "end": 10}),
        ("graph_execution/data", {"run": deep, "begin": 0, "end": 50}),
        ("graph_execution/op_traces", {"run": deep, "op_id": op, "begin": 0, "end": 10, "execution_index": 1}),
        ("graph_execution/op_stats", {"run": runs["stats_a"], "op_id": stats_op}),
        ("graphs/list", {"run": deep}),
        ("graphs/graph_info", {"run": deep, "graph_id": graph}),
        ("graphs/neighborhood", {"run": deep, "op_id": op, "execution_index": 1}),
        ("graphs/overview", {"run": deep, "graph_id": graph, "max_groups": 2, "execution_index": 1}),
        ("graphs/search", {"run": deep, "q": "sqrt"}),
        ("graphs/op_info", {"run": deep, "op_id": op, "execution_index": 1}),
        ("source_files/list", {"run": deep}),
        ("source_files/file", {"run": deep, "index": 0, "begin": 0, "end": 500}),
        ("source_files/op_lines", {"run": deep, "index": 0, "begin": 0, "end": 500}),
        ("stack_frames/stack_frames", {"run": deep, "stack_frame_ids": stack_ids}),
        ("tensor/value", {"run": values, "trace": value_trace["position"]}),
        ("tensor/histogram", {"run": values, "trace": value_trace["position"]}),
        ("profile", {"run": deep}),
        ("replays", {"run": deep, "op_id": op}),
        ("compare", {"run_a": runs["stats_a"], "run_b": runs["stats_b"]}),
    ]


def test_every_route_the_dashboard_reads_is_requested_here(client):
    declared = set(ts_types.route_types())
    requested = {route for route, _ in _requests(client)}
    assert declared - requested == {"live/paused_call"}  # see the module docstring


def test_every_answer_matches_the_dashboards_declared_types(client):
    checker = ts_types.Checker(ts_types.declarations())
    declared = ts_types.route_types()
    errors = []
    for route, params in _requests(client):
        answer = _get(client, route, **params)
        for path, declared_type in declared[route]:
            strict = path == API_TS  # other files read a part of an answer
            errors += [f"{route} ({path.name}): {e}" for e in checker.check(answer, declared_type, strict=strict)]
    assert errors == [], "\n".join(errors)


def test_the_checker_sees_a_missing_field_and_a_wrong_type():
    """Guards the test above against a checker that passes everything."""
    checker = ts_types.Checker(ts_types.declarations())
    page = {"begin": 0, "end": 0, "num_alerts": 0, "alerts_breakdown": {}, "first_origin_index": None, "alerts": []}
    errors = checker.check(page, ("name", "AlertsPage"))
    assert "$.nan_alerts: missing (declared required)" in errors
    assert "$.start_dropped: missing (declared required)" in errors
    wrong = {**page, "nan_alerts": "3", "neg_inf_alerts": 0, "pos_inf_alerts": 0, "origin_alerts": 0}
    assert "$.nan_alerts: '3' is not a number" in checker.check(
        {**wrong, "start_dropped": False}, ("name", "AlertsPage")
    )
    assert checker.check({**page, "surprise": 1}, ("name", "Paged")) != []


def test_alerts_with_masked_inner_ops_carry_the_counts_the_dashboard_requires(client, logdir):
    """With trace_fused_ops=True the alerts answer was built a second time, for masked
    inner-op alerts, without nan_alerts, neg_inf_alerts, pos_inf_alerts, origin_alerts and
    start_dropped: the dashboard showed "NaN" counts."""
    with tvmdbg.DebugDataReader(str(logdir / "deep")) as reader:
        reader.update()
        answer = analysis.alerts(reader.run())
    rows = answer["alerts"]
    assert any(row.get("masked") for row in rows), "the run has masked inner-op alerts"
    assert answer["num_alerts"] == len(rows)
    assert answer["nan_alerts"] == sum(row["nan_count"] > 0 for row in rows) > 0
    assert answer["neg_inf_alerts"] == sum(row["neg_inf_count"] > 0 for row in rows)
    assert answer["pos_inf_alerts"] == sum(row["pos_inf_count"] > 0 for row in rows)
    assert answer["origin_alerts"] == sum(bool(row["origin"]) for row in rows) >= 1
    assert answer["start_dropped"] is False
    assert np.isfinite([answer["nan_alerts"], answer["origin_alerts"]]).all()
