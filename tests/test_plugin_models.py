"""The plugin's routes on dumps made by compiling and running real TVM models through the
instrumentation: the NaN made by log() is the origin alert, the kernels it flows through are
not, and a NaN fed in as a parameter makes no origin at all."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tvm
from models import blockbuilder_planted, nn_planted
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client
from werkzeug.wrappers import Response

import tvmdbg
from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin

PREFIX = "/data/plugin/tvmdbg/"
CASES = {"unfused": ("bb", False), "fused": ("bb", True), "nn": ("nn", False)}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Each model run twice (planted NaN; then a NaN input x), each in its own run directory."""
    root = tmp_path_factory.mktemp("models")
    models = {}
    for name, (frontend, fuse) in CASES.items():
        logdir = root / name
        tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            model = (blockbuilder_planted if frontend == "bb" else nn_planted)("log", fuse)
            model.run()
            nan_input = [a.copy() for a in model.inputs]
            nan_input[0][0, 0] = np.nan
            vm = tvm.relax.VirtualMachine(model.executable, tvm.cpu())
            vm[model.function](*[tvm.runtime.tensor(a) for a in nan_input])
        finally:
            tvmdbg.disable_dump_debug_info()
        models[name] = model
    plugin = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(root)), start_reader=False)
    plugin.poll()
    client = Client(application.TensorBoardWSGI([plugin]), Response)

    def get(route, **params):
        response = client.get(PREFIX + route, query_string=params)
        assert response.status_code == 200, (route, params, response.get_data(as_text=True))
        return json.loads(response.get_data(as_text=True))

    runs = {r["run"].split(os.sep)[0]: r["run"] for r in get("runs")["runs"]}
    assert sorted(runs) == sorted(CASES)
    yield get, runs, models
    plugin.stop()


@pytest.mark.parametrize("case", list(CASES))
def test_origin_alert_is_the_log_and_the_rest_propagate(served, case):
    get, runs, models = served
    run, model = runs[case], models[case]
    body = get("alerts", run=run)
    alerts = body["alerts"]
    first = alerts[body["first_origin_index"]]
    assert body["first_origin_index"] == 0 and first["origin"] is True and first["execution_index"] == 0
    types = [o["op_type"] for o in first["original_ops"]]
    assert "relax.log" in types
    log_op = first["original_ops"][types.index("relax.log")]
    assert (os.path.realpath(log_op["location"]["file_path"]), log_op["location"]["line"]) == (
        os.path.realpath(model.fault_file),
        model.fault_line,
    )
    assert first["nan_count"] + first["neg_inf_count"] > 0 and first["size"] == 8
    if case == "fused":
        assert len(types) > 1 and first["kernel"].startswith("fused")
    else:
        assert types == ["relax.log"] and first["location"]["line"] == model.fault_line
    first_execution = [a for a in alerts if a["execution_index"] == 0]
    assert [a["origin"] for a in first_execution] == [True] + [False] * (len(first_execution) - 1)
    if case != "fused":
        assert len(first_execution) >= 3  # log -> multiply -> matmul carry it on
    # Second call: x holds a NaN, so every alert there was passed on from a parameter.
    second = [a for a in alerts if a["execution_index"] == 1]
    assert second and not any(a["origin"] for a in second)
    # The alert leads to the kernel execution, its op and its inputs.
    trace = get("graph_execution/data", run=run, begin=first["trace_position"], end=first["trace_position"] + 1)
    assert trace["graph_executions"][0]["op_id"] == first["op_id"]
    op = get("graphs/op_info", run=run, op_id=first["op_id"])
    assert op["kernel"] == first["kernel"] and op["inputs"] and op["num_traces"] == 2
    for item in op["inputs"]:
        if item["kind"] == "OP_OUTPUT":
            producer = get("graph_execution/op_traces", run=run, op_id=item["producer_op_id"], end=1)["traces"][0]
            assert producer["nonfinite"] is False  # the inputs were finite: the op is the origin
    source = get("source_files/file", run=run, index=0)
    assert source["file_path"] and source["lines"]


def test_graph_profile_and_executions_on_a_real_model(served):
    get, runs, models = served
    run = runs["unfused"]
    graphs = get("graphs/list", run=run)["graphs"]
    assert len(graphs) == 1 and graphs[0]["name"] == "main" and graphs[0]["source_mapped"] is True
    info = get("graphs/graph_info", run=run, graph_id=graphs[0]["graph_id"])
    op_types = [o["op_type"] for op in info["ops"] for o in op["original_ops"]]
    assert {"relax.subtract", "relax.log", "relax.multiply", "relax.matmul", "relax.maximum", "relax.add"} <= set(
        op_types
    )
    assert any(e["kind"] == "PARAM" for e in info["edges"]) and any(e["kind"] == "OP_OUTPUT" for e in info["edges"])
    table = get("profile", run=run)
    assert table["num_executions"] == 2 and table["total_us"] > 0
    assert {r["op_id"] for r in table["rows"]} == {op["op_id"] for op in info["ops"]}
    assert all(r["calls"] == 2 and r["mean_us"] >= 0 for r in table["rows"])
    assert abs(sum(r["percent"] for r in table["rows"]) - 100.0) < 1e-6
    executions = get("execution/data", run=run)["executions"]
    assert [e["function_name"] for e in executions] == ["main", "main"]
    assert executions[1]["inputs"][0]["summary"]["nan"] == 1
    digests = get("graph_execution/digests", run=run, execution_index=0)
    assert digests["num_digests"] == len(info["ops"])


def test_full_tensor_values_of_a_real_kernel(tmp_path):
    from models import X, Y

    logdir = tmp_path / "full"
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1)
    try:
        blockbuilder_planted("log", False).run()
    finally:
        tvmdbg.disable_dump_debug_info()
    plugin = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(logdir)), start_reader=False)
    plugin.poll()
    client = Client(application.TensorBoardWSGI([plugin]), Response)
    run = json.loads(client.get(PREFIX + "runs").get_data())["runs"][0]["run"]
    alerts = json.loads(client.get(PREFIX + "alerts", query_string={"run": run}).get_data())
    first = alerts["alerts"][alerts["first_origin_index"]]
    assert first["op_name"] and "relax.log" in [o["op_type"] for o in first["original_ops"]]
    value = json.loads(
        client.get(PREFIX + "tensor/value", query_string={"run": run, "trace": first["trace_position"]}).get_data()
    )
    with np.errstate(all="ignore"):
        expected = np.log(X - Y)
    assert value["shape"] == [1, 8] and value["dtype"] == "float32" and not value["truncated"]
    decoded = np.array(
        [[{"NaN": np.nan, "-Infinity": -np.inf, "Infinity": np.inf}.get(v, v) for v in row] for row in value["values"]]
    )
    np.testing.assert_allclose(decoded, expected, rtol=1e-6)
    one = json.loads(
        client.get(
            PREFIX + "tensor/value", query_string={"run": run, "trace": first["trace_position"], "slice": "0, 0:3"}
        ).get_data()
    )
    assert one["sliced_shape"] == [3] and one["values"] == ["-Infinity", 0.0, "NaN"]  # log(0), log(1), log(-2)
    plugin.stop()


def test_the_plugin_never_imports_tvm_or_the_instrumentation():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tensorboard.plugins import base_plugin\n"
        "from tvmdbg_tb.plugin.loader import TvmDebuggerLoader\n"
        "plugin = TvmDebuggerLoader().load(base_plugin.TBContext(logdir=''))\n"
        "assert type(plugin).__name__ == 'TvmDebuggerPlugin'\n"
        "bad = [m for m in sys.modules if m == 'tvm' or m.startswith(('tvm.', 'tvmdbg_tb.capture', 'tvmdbg_tb.tracing', 'torch'))]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__))
    )
    assert result.returncode == 0, result.stderr
