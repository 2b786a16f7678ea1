"""The plugin's routes through its WSGI app (werkzeug test client), on dumps written by the
real writer: every route, paging edges, alerts' origin flag, live reading, damaged files,
path traversal and fuzzed parameters."""

from __future__ import annotations

import json
import os
import time

import pytest
import route_fuzz
from plugin_dumps import write_execution, write_full_tensor, write_graph, write_nan_chain
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from werkzeug.test import Client
from werkzeug.wrappers import Response

from tvmdbg_tb import analysis
from tvmdbg_tb.events import layout, records
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin

PREFIX = "/data/plugin/tvmdbg/"


class Server:
    """A plugin and a test client for it, polled synchronously unless `live` is set."""

    def __init__(self, logdir, live: bool = False):
        self.plugin = TvmDebuggerPlugin(
            base_plugin.TBContext(logdir=str(logdir)), poll_interval=0.05, start_reader=live
        )
        if not live:
            self.plugin.poll()
        self.client = Client(application.TensorBoardWSGI([self.plugin]), Response)

    def get(self, route: str, expect: int | None = 200, **params):
        response = self.client.get(PREFIX + route, query_string=params)
        if expect is not None:
            assert response.status_code == expect, (route, params, response.get_data(as_text=True)[:500])
        return response

    def json(self, route: str, expect: int = 200, **params):
        response = self.get(route, expect, **params)
        assert response.mimetype == "application/json"
        return json.loads(response.get_data(as_text=True))


@pytest.fixture(scope="module")
def nan_logdir(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("nan")
    write_nan_chain(logdir, "run_a")
    write_full_tensor(logdir, "run_t")
    return logdir


@pytest.fixture(scope="module")
def server(nan_logdir):
    s = Server(nan_logdir)
    yield s
    s.plugin.stop()


def test_runs_and_status(server):
    runs = server.json("runs")["runs"]
    assert [r["run"] for r in runs] == ["run_a", "run_t"]
    a = runs[0]
    assert a["num_executions"] == 4 and a["num_traces"] == 16 and a["num_graphs"] == 1 and a["num_ops"] == 4
    assert a["tensor_debug_mode"] == "FULL_HEALTH" and a["pid"] == os.getpid()
    assert a["num_alerts"] == 7 and a["first_origin_alert"] == 0 and a["num_corruptions"] == 0
    assert a["last_update_time"] <= time.time() and isinstance(a["live"], bool)
    status = server.json("status")
    assert status["problems"] == [] and status["reader"]["polls"] >= 1 and status["reader"]["error"] is None
    assert status["runs"][0]["indexing"] is False and status["runs"][0]["error"] is None
    assert {r["run"] for r in status["runs"]} == {"run_a", "run_t"}
    assert server.json("status", run="run_t")["runs"][0]["num_traces"] == 1


def test_default_run_is_the_readers_choice(nan_logdir):
    """The runs route names the run the dashboard opens on: DebugDataReader.choose()'s (the CLI's
    rule: the run whose first NaN/Inf came first, not the newest one), once every run was read."""
    s = Server(nan_logdir, live=False)
    try:
        body = s.json("runs")
        assert body["default_run"] == "run_a", body  # run_t, the newest, recorded its first NaN/Inf later
        assert body["default_run_reason"] == "the run whose first NaN/Inf was recorded first"
        fresh = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(nan_logdir)), start_reader=False)
        fresh._reader.discover()  # listed, not read yet: the first NaN is not known
        client = Client(application.TensorBoardWSGI([fresh]), Response)
        early = json.loads(client.get(PREFIX + "runs").get_data(as_text=True))
        assert len(early["runs"]) == 2 and early["default_run"] is None
        assert early["default_run_reason"] == "not every run has been read yet"
        fresh.poll()
        assert json.loads(client.get(PREFIX + "runs").get_data(as_text=True))["default_run"] == "run_a"
    finally:
        s.plugin.stop()


def test_alerts_origin_in_a_propagating_nan_chain(server):
    body = server.json("alerts", run="run_a")
    alerts = body["alerts"]
    assert body["num_alerts"] == 7 and body["alerts_breakdown"] == {"InfNanAlert": 7}
    # Execution 2: NaN born in lv1 (fused log+add), passed on by lv2 and lv3.
    # Execution 3: a NaN parameter reaches lv0, so nothing there is an origin.
    got = [(a["execution_index"], a["op_name"], a["origin"]) for a in alerts]
    assert got == [
        (2, "lv1", True),
        (2, "lv2", False),
        (2, "lv3", False),
        (3, "lv0", False),
        (3, "lv1", False),
        (3, "lv2", False),
        (3, "lv3", False),
    ]
    assert body["first_origin_index"] == 0
    first = alerts[0]
    assert first["kernel"] == "fused_log_add" and first["output_slot"] == 0 and first["nan_count"] == 32
    assert first["size"] == 32 and first["neg_inf_count"] == 0 and first["trace_position"] == 9
    assert first["trace_index"] == 9 and first["execution_position"] == 2 and first["wall_time"] > 0
    assert first["location"]["line"] == 21 and first["location"]["function"] == "model"
    assert first["location"]["file_path"].endswith("plugin_dumps.py")
    assert [(o["op_type"], o["location"]["line"]) for o in first["original_ops"]] == [
        ("relax.log", 21),
        ("relax.add", 40),
    ]
    # The trace position of an alert leads to the same kernel execution.
    trace = server.json("graph_execution/data", run="run_a", begin=9, end=10)["graph_executions"][0]
    assert trace["op_name"] == "lv1" and trace["summary"]["nan"] == 32
    # Paging and filtering.
    page = server.json("alerts", run="run_a", begin=2, end=4)
    assert [a["op_name"] for a in page["alerts"]] == ["lv3", "lv0"] and page["first_origin_index"] == 0
    assert server.json("alerts", run="run_a", alert_type="OtherAlert")["alerts"] == []


def test_cli_and_route_print_the_same_alerts(server):
    run = server.plugin._reader.run("run_a")
    route = server.get("alerts", run="run_a").get_data(as_text=True)
    assert json.loads(analysis.dumps(analysis.alerts(run))) == json.loads(route)


def test_execution_routes(server):
    body = server.json("execution/digests", run="run_a")
    assert body["num_digests"] == 4 and [d["nonfinite"] for d in body["execution_digests"]] == [
        False,
        False,
        True,
        True,
    ]
    assert body["execution_digests"][0]["function_name"] == "main"
    data = server.json("execution/data", run="run_a", begin=3, end=4)["executions"][0]
    assert data["index"] == 3 and data["first_trace_position"] == 12 and data["tensor_debug_mode"] == "FULL_HEALTH"
    assert data["inputs"][0]["summary"]["nan"] == 32 and data["outputs"][0]["summary"]["nan"] == 1
    assert data["location"] == {"file_path": data["location"]["file_path"], "line": 60, "function": "train"}


def test_graph_execution_routes(server):
    body = server.json("graph_execution/digests", run="run_a")
    assert body["num_digests"] == 16
    rows = body["graph_execution_digests"]
    assert [r["position"] for r in rows] == list(range(16)) and rows[9]["nonfinite"] is True
    assert rows[3]["op_name"] == "lv3" and rows[3]["duration_us"] == 4.0
    one = server.json("graph_execution/digests", run="run_a", execution_index=2)
    assert one["num_digests"] == 4 and [r["position"] for r in one["graph_execution_digests"]] == [8, 9, 10, 11]
    data = server.json("graph_execution/data", run="run_a", execution_index=3, begin=1, end=2)["graph_executions"]
    assert data[0]["position"] == 13 and data[0]["shape"] == [4, 8] and data[0]["debug_values"][6] == 32
    traces = server.json("graph_execution/op_traces", run="run_a", graph_id=0, op_name="lv2")
    assert traces["num_traces"] == 4 and [t["execution_index"] for t in traces["traces"]] == [0, 1, 2, 3]
    assert server.json("graph_execution/op_traces", run="run_a", op_id=2, begin=3)["traces"][0]["nan"] == 32
    server.json("graph_execution/op_traces", 404, run="run_a", op_id=99)
    server.json("graph_execution/op_traces", 400, run="run_a")


def test_graph_routes(server):
    graphs = server.json("graphs/list", run="run_a")["graphs"]
    assert graphs == [{**graphs[0], "graph_id": 0, "name": "main", "num_ops": 4}]
    info = server.json("graphs/graph_info", run="run_a", graph_id=0)
    assert [op["op_name"] for op in info["ops"]] == ["lv0", "lv1", "lv2", "lv3"]
    assert [p["name"] for p in info["params"]] == ["x", "w"]
    fused = info["ops"][1]
    assert [o["op_type"] for o in fused["original_ops"]] == ["relax.log", "relax.add"]
    edges = {(e["src_op_id"], e["dst_op_id"], e["kind"]) for e in info["edges"]}
    assert {
        (None, 0, "PARAM"),
        (0, 1, "OP_OUTPUT"),
        (1, 2, "OP_OUTPUT"),
        (None, 2, "CONSTANT"),
        (2, 3, "OP_OUTPUT"),
    } == edges
    server.json("graphs/graph_info", 404, run="run_a", graph_id=7)
    op = server.json("graphs/op_info", run="run_a", graph_id=0, op_name="lv2")
    assert op["op_id"] == 2 and op["inputs"][0]["producer_op_name"] == "lv1" and op["inputs"][1]["kind"] == "CONSTANT"
    assert op["consumers"] == [{"op_id": 3, "op_name": "lv3", "input_slot": 0, "output_slot": 0}]
    assert op["num_traces"] == 4 and op["latest"][0]["execution_index"] == 3
    assert server.json("graphs/op_info", run="run_a", op_id=0)["inputs"][0]["param_index"] == 0
    server.json("graphs/op_info", 404, run="run_a", graph_id=0, op_name="nope")


def test_source_and_stack_frames(server):
    files = server.json("source_files/list", run="run_a")["source_files"]
    assert len(files) == 1 and files[0]["file_path"].endswith("plugin_dumps.py")
    source = server.json("source_files/file", run="run_a", index=0)
    with open(files[0]["file_path"]) as f:
        assert source["lines"] == f.read().splitlines()
    server.json("source_files/file", 404, run="run_a", index=1)
    server.json("source_files/file", 400, run="run_a", index=-1)
    frames = server.json("stack_frames/stack_frames", run="run_a", stack_frame_ids="0, 1")["stack_frames"]
    assert [(f["id"], f["line"], f["function"]) for f in frames] == [(0, 1, "<module>"), (1, 12, "model")]
    server.json("stack_frames/stack_frames", 404, run="run_a", stack_frame_ids="0,999")
    server.json("stack_frames/stack_frames", 400, run="run_a", stack_frame_ids="0,x")


def test_tensor_value(server):
    value = server.json("tensor/value", run="run_t", trace=0)
    assert value["shape"] == [3, 4] and value["sliced_shape"] == [3, 4] and value["num_elements"] == 12
    assert value["values"][1][2] == "NaN" and value["values"][2][3] == "Infinity" and value["values"][0][1] == 1.0
    part = server.json("tensor/value", run="run_t", trace=0, slice="1:, ::2")
    assert part["values"] == [[4.0, "NaN"], [8.0, 10.0]]
    assert server.json("tensor/value", run="run_t", trace=0, slice="..., -1")["values"] == [3.0, 7.0, "Infinity"]
    assert server.json("tensor/value", run="run_t", trace=0, slice="2,1")["values"] == 9.0
    for bad in ("1:2:0", "a", "5", "0,0,0", "...,...", "__import__('os')"):
        assert "error" in server.json("tensor/value", 400, run="run_t", trace=0, slice=bad)
    server.json("tensor/value", 400, run="run_t", trace=0, slice=":", max_elements=5)  # asked for too much
    fit = server.json("tensor/value", run="run_t", trace=0, max_elements=5)  # no slice: a default view
    assert fit["default_slice"] and fit["slice"] == "0:1,0:4" and fit["values"] == [[0.0, 1.0, 2.0, 3.0]]
    server.json("tensor/value", 404, run="run_a", trace=0)  # FULL_HEALTH: no value stored
    server.json("tensor/value", 404, run="run_t", trace=1)


def test_profile(server):
    table = server.json("profile", run="run_a")
    assert table["total_us"] == 40.0 and table["num_executions"] == 4
    rows = table["rows"]
    assert [r["op_name"] for r in rows] == ["lv3", "lv2", "lv1", "lv0"]
    assert rows[0] == {**rows[0], "calls": 4, "total_us": 16.0, "mean_us": 4.0, "percent": 40.0, "kernel": "sum"}
    assert rows[1]["shape"] == [4, 8] and rows[1]["dtype"] == "float32"
    one = server.json("profile", run="run_a", execution_index=2)
    assert one["num_executions"] == 1 and one["total_us"] == 10.0
    server.json("profile", 404, run="run_a", graph_id=5)


def test_paging_edges(tmp_path):
    w = DebugEventsWriter(tmp_path, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1), run_id="big")
    write_graph(w)
    for _ in range(300):
        write_execution(w)
    w.close()
    s = Server(tmp_path)
    route = "graph_execution/digests"
    total = 1200

    def page(**params):
        body = s.json(route, run="big", **params)
        return body["begin"], body["end"], len(body["graph_execution_digests"]), body["num_digests"]

    assert page() == (0, total, total, total)  # end=-1 by default: all
    assert page(begin=0, end=0) == (0, 0, 0, total)
    assert page(begin=total - 1, end=-1) == (total - 1, total, 1, total)
    assert page(begin=10, end=5000) == (10, total, total - 10, total)  # end clamped
    assert page(begin=5000) == (total, total, 0, total)
    assert page(begin=5000, end=6000) == (total, total, 0, total)
    for params in ({"begin": -1}, {"end": -2}, {"begin": 5, "end": 4}, {"begin": "1.5"}, {"end": "x"}):
        assert "error" in s.json(route, 400, run="big", **params)
    # Full-record pages are bounded: 1000 traces, 100 executions.
    s.json("graph_execution/data", 400, run="big")
    assert len(s.json("graph_execution/data", run="big", begin=0, end=1000)["graph_executions"]) == 1000
    s.json("execution/data", 400, run="big")
    assert len(s.json("execution/data", run="big", begin=250, end=-1)["executions"]) == 50
    s.plugin.stop()


def test_live_records_and_runs_appear(tmp_path):
    s = Server(tmp_path, live=True)
    assert s.json("runs")["runs"] == [] and not s.plugin.is_active()
    w = write_nan_chain(tmp_path, "live", close=False)

    def wait_for(predicate):
        deadline = time.time() + 20
        while time.time() < deadline:
            body = s.json("status")
            if predicate(body):
                return body
            time.sleep(0.05)
        raise AssertionError(f"timed out: {body}")

    wait_for(lambda b: b["runs"] and b["runs"][0]["num_traces"] == 16)
    assert s.plugin.is_active()
    assert s.json("runs")["runs"][0]["live"] is True
    before = s.json("alerts", run="live")["num_alerts"]
    write_execution(w, nan_from=2)  # written between two requests
    w.flush()
    # The call's traces and its execution record are two files, each read as it grows: wait
    # for both (one update may see the traces before the execution that follows them).
    wait_for(lambda b: b["runs"][0]["num_traces"] == 20 and b["runs"][0]["num_executions"] == 5)
    assert s.json("alerts", run="live")["num_alerts"] == before + 2
    assert s.json("execution/digests", run="live")["num_digests"] == 5
    w2 = write_nan_chain(tmp_path / "sub", "second", close=True)
    wait_for(lambda b: len(b["runs"]) == 2 and b["runs"][1]["num_traces"] == 16)
    assert [r["run"] for r in s.json("runs")["runs"]] == ["live", os.path.join("sub", "second")]
    assert s.json("alerts", run=os.path.join("sub", "second"))["num_alerts"] == 7
    w.close()
    w2.close()
    s.plugin.stop()


def _traces_file(logdir, run):
    return os.path.join(logdir, run, layout.file_name(layout.GRAPH_EXECUTION_TRACES))


def test_corrupt_record_in_the_middle_is_reported_and_skipped(tmp_path):
    write_nan_chain(tmp_path, "bad")
    path = _traces_file(tmp_path, "bad")
    with open(path, "rb") as f:
        data = bytearray(f.read())
    items = list(records.scan(bytes(data), 0, path))
    offset, start, length = items[5]
    data[start + length // 2] ^= 0xFF  # damage the data of record 5
    with open(path, "wb") as f:
        f.write(data)
    s = Server(tmp_path)
    status = s.json("status")
    run = status["runs"][0]
    assert run["num_traces"] == 15 and run["num_corruptions"] == 1
    assert run["corruptions"][0]["offset"] == offset and run["corruptions"][0]["reason"] == "bad data CRC"
    assert any("damaged" in p for p in status["problems"])
    digests = s.json("graph_execution/digests", run="bad")["graph_execution_digests"]
    assert [d["index"] for d in digests] == [i for i in range(16) if i != 5]
    assert s.json("alerts", run="bad")["num_alerts"] == 7
    assert s.json("runs")["runs"][0]["num_corruptions"] == 1


def test_truncated_tail_waits_then_completes(tmp_path):
    write_nan_chain(tmp_path, "cut")
    path = _traces_file(tmp_path, "cut")
    with open(path, "rb") as f:
        data = f.read()
    last = list(records.scan(data, 0, path))[-1][0]
    with open(path, "wb") as f:
        f.write(data[: last + 20])  # the last record cut in its middle
    s = Server(tmp_path)
    assert s.json("status")["runs"][0] == {**s.json("status")["runs"][0], "num_traces": 15, "num_corruptions": 0}
    with open(path, "ab") as f:
        f.write(data[last + 20 :])  # the writer finishes it
    s.plugin.poll()
    assert s.json("graph_execution/digests", run="cut")["num_digests"] == 16
    assert s.json("status")["runs"][0]["num_corruptions"] == 0


def test_reader_thread_survives_failures(tmp_path, monkeypatch):
    write_nan_chain(tmp_path, "r")
    s = Server(tmp_path)
    reader = s.plugin._reader
    real_update = reader.update
    monkeypatch.setattr(reader, "update", lambda: 1 / 0)
    s.plugin.poll()
    status = s.json("status")
    assert "ZeroDivisionError" in status["reader"]["error"] and status["problems"]
    assert s.json("runs")["runs"][0]["num_traces"] == 16  # what was read is still served
    monkeypatch.setattr(reader, "update", real_update)
    s.plugin.poll()
    assert s.json("status")["reader"]["error"] is None


def test_undecodable_record_with_a_good_crc(tmp_path):
    write_nan_chain(tmp_path, "junk")
    with open(_traces_file(tmp_path, "junk"), "ab") as f:
        f.write(records.encode(b"\xff\xff\xff"))  # framing fine, protobuf garbage
    s = Server(tmp_path)
    run = s.json("status")["runs"][0]
    assert run["num_traces"] == 16 and run["num_corruptions"] == 1
    assert "undecodable" in run["corruptions"][0]["reason"]


def test_static_files_never_leave_the_bundle(server, tmp_path, monkeypatch):
    import tvmdbg_tb_frontend

    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.js").write_text("export function render() {}\n")
    (dist / "assets" / "style.css").write_text("body {}\n")
    (tmp_path / "secret.txt").write_text("TOP-SECRET-CONTENT")
    monkeypatch.setattr(tvmdbg_tb_frontend, "DIST_DIR", dist)
    r = server.get("index.js")
    assert r.get_data(as_text=True) == "export function render() {}\n" and r.mimetype == "application/javascript"
    assert server.get("assets/style.css").mimetype == "text/css"
    for evil in (
        "../secret.txt",
        "..%2fsecret.txt",
        "%2e%2e/secret.txt",
        "assets/../../secret.txt",
        "/etc/passwd",
        "%2fetc%2fpasswd",
        "index.js/../../secret.txt",
        "assets/",
        "nothing.js",
    ):
        r = server.get(evil, expect=None)
        assert r.status_code == 404, evil
        assert b"TOP-SECRET" not in r.get_data() and b"root:" not in r.get_data()
    # source_files/file takes only an index: a path is a bad parameter.
    for evil in ("../../etc/passwd", "/etc/passwd", "0/../1"):
        assert server.get("source_files/file", expect=400, run="run_a", index=evil)


def test_missing_bundle_serves_a_notice(server, tmp_path, monkeypatch):
    import tvmdbg_tb_frontend

    monkeypatch.setattr(tvmdbg_tb_frontend, "DIST_DIR", tmp_path / "absent")
    body = server.get("index.js").get_data(as_text=True)
    assert "export function render()" in body and "not built" in body and "build.sh" in body


def test_bad_run_and_missing_parameters(server):
    for route in ("alerts", "execution/digests", "graphs/list", "profile", "source_files/list"):
        assert server.json(route, 400)["error"].startswith("missing parameter")
        assert "no run" in server.json(route, 404, run="../run_a")["error"]
    server.json("graphs/graph_info", 400, run="run_a")
    server.json("tensor/value", 400, run="run_t")
    server.json("source_files/file", 400, run="run_a")
    server.json("stack_frames/stack_frames", 400, run="run_a")


def test_is_active_only_with_runs(tmp_path):
    empty = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(tmp_path)), start_reader=False)
    assert not empty.is_active()
    assert TvmDebuggerPlugin(base_plugin.TBContext(logdir=""), start_reader=False).is_active() is False
    write_nan_chain(tmp_path, "x")
    later = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(tmp_path)), start_reader=False)
    assert later.is_active()
    meta = later.frontend_metadata()
    assert meta.es_module_path == "/index.js" and meta.tab_name == "TVM Debugger"


def test_fuzzed_parameters_never_answer_500(server):
    """Every GET route, every parameter the plugin reads, fuzzed (tests/route_fuzz.py)."""
    seen = route_fuzz.fuzz_every_route(server, ["run_a", "run_t"], seed=1234, per_route=50, traces=4)
    assert seen.get(200, 0) and seen.get(400, 0) and seen.get(404, 0), seen


def test_alert_monitor_replays_and_resets(tmp_path):
    """A compaction replaces the trace file: the monitor starts over from the new file, where
    the ring kept the NaN call whole in front of the newest records."""
    w = DebugEventsWriter(tmp_path, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=8), run_id="ring")
    write_graph(w)
    write_execution(w, nan_from=1)
    w.flush()
    s = Server(tmp_path)
    assert [a["op_name"] for a in s.json("alerts", run="ring")["alerts"]] == ["lv1", "lv2", "lv3"]
    for _ in range(5):
        write_execution(w)  # the ring drops finite calls, never the NaN one
    w.flush()
    s.plugin.poll()
    alerts = s.json("alerts", run="ring")
    assert [(a["op_name"], a["execution_index"], a["origin"]) for a in alerts["alerts"]] == [
        ("lv1", 0, True),
        ("lv2", 0, False),
        ("lv3", 0, False),
    ]
    digests = s.json("graph_execution/digests", run="ring")["graph_execution_digests"]
    assert [d["index"] for d in digests] == [0, 1, 2, 3, *range(16, 24)]  # the NaN call, then the last 8
    w.close()
    assert s.json("alerts", run="ring")["num_alerts"] == 3


def test_one_unreadable_run_does_not_stop_the_others(tmp_path):
    write_nan_chain(tmp_path, "a")
    write_nan_chain(tmp_path, "b")
    s = Server(tmp_path)
    run_a = s.plugin._reader.run("a")
    real = run_a.update

    def broken():
        raise PermissionError("tvmdbg.graphs: permission denied")

    run_a.update = broken
    w = DebugEventsWriter(tmp_path, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1), run_id="c")
    write_graph(w)
    write_execution(w)
    w.close()
    s.plugin.poll()
    status = s.json("status")
    by_run = {r["run"]: r for r in status["runs"]}
    assert "PermissionError" in by_run["a"]["error"] and by_run["b"]["error"] is None
    assert by_run["c"]["num_traces"] == 4 and any("reading failed" in p for p in status["problems"])
    run_a.update = real
    s.plugin.poll()
    assert s.json("status", run="a")["runs"][0]["error"] is None


def test_origin_across_polls_and_late_execution_records(tmp_path):
    """Traces of one execution read in two polls, the execution record (with a NaN input)
    arriving after them: origins are decided with what came earlier and revised after."""
    from plugin_dumps import health

    from tvmdbg_tb.proto import debug_event_pb2 as pb

    w = DebugEventsWriter(
        tmp_path, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1), run_id="split"
    )
    write_graph(w)
    s = Server(tmp_path)

    def trace(op_id, index, nan):
        return pb.GraphExecutionTrace(
            op_id=op_id, execution_index=index, tensor_debug_mode=pb.FULL_HEALTH, debug_values=health(32, nan)
        )

    index = w.allocate_execution_index()
    w.write_graph_execution_traces([trace(0, index, 0), trace(1, index, 3)])
    w.flush()
    s.plugin.poll()
    w.write_graph_execution_traces([trace(2, index, 3), trace(3, index, 1)])
    w.flush()
    s.plugin.poll()
    assert [(a["op_name"], a["origin"]) for a in s.json("alerts", run="split")["alerts"]] == [
        ("lv1", True),
        ("lv2", False),
        ("lv3", False),
    ]
    # Next call: lv0 (inputs: params x, w) is NaN; its execution record comes later.
    index = w.allocate_execution_index()
    w.write_graph_execution_traces([trace(0, index, 32)])
    w.flush()
    s.plugin.poll()
    assert s.json("alerts", run="split", begin=3)["alerts"][0]["origin"] is True  # nothing says otherwise yet
    w.write_execution(
        pb.Execution(
            index=index,
            function_name="main",
            graph_id=0,
            tensor_debug_mode=pb.FULL_HEALTH,
            inputs=[pb.TensorSummary(debug_values=health(32, 1)), pb.TensorSummary(debug_values=health(64))],
        )
    )
    w.close()
    s.plugin.poll()
    body = s.json("alerts", run="split")
    assert body["alerts"][3]["op_name"] == "lv0" and body["alerts"][3]["origin"] is False  # x was NaN
    assert body["first_origin_index"] == 0


def test_alerts_are_never_behind_the_traces_a_client_saw(tmp_path):
    """A request sees alerts for every trace an earlier request counted (no half-indexed state)."""
    import threading

    w = DebugEventsWriter(
        tmp_path,
        DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1),
        run_id="race",
        flush_interval=0.005,
    )
    write_graph(w)
    w.flush()
    s = Server(tmp_path, live=True)
    s.plugin._poll_interval = 0.001

    def produce():
        for _ in range(150):
            write_execution(w, nan_from=1)  # 4 traces, 3 of them alerts (lv1, lv2, lv3)
            time.sleep(0.0005)

    producer = threading.Thread(target=produce)
    producer.start()
    checks = 0
    while producer.is_alive() or checks < 5:
        runs = s.json("status")["runs"]
        if runs:
            seen = runs[0]["num_traces"]
            alerts = s.json("alerts", run="race", begin=0, end=0)["num_alerts"]
            assert alerts >= 3 * (seen // 4) + max(0, seen % 4 - 1), (seen, alerts)
            checks += 1
    producer.join()
    w.close()
    s.plugin.stop()
    assert checks > 5


def test_alerts_the_same_in_small_blocks(nan_logdir, monkeypatch):
    import sys

    alerts_module = sys.modules["tvmdbg_tb.analysis.alerts"]  # the package's `alerts` is the function
    whole = Server(nan_logdir).json("alerts", run="run_a")
    monkeypatch.setattr(alerts_module, "_BLOCK", 2)
    assert Server(nan_logdir).json("alerts", run="run_a") == whole


def test_queries_answer_while_a_large_dump_is_indexed(tmp_path, monkeypatch):
    """The run lock is held per chunk: while indexing, answers show the chunks read so far,
    with their alerts, instead of waiting for the whole dump."""
    import threading

    from tvmdbg_tb.events import reader as reader_module

    w = DebugEventsWriter(tmp_path, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1), run_id="big")
    write_graph(w)
    for _ in range(1000):
        write_execution(w, nan_from=1)  # 4 traces, 3 alerts each
    w.close()
    monkeypatch.setattr(reader_module, "_READ_CHUNK", 2048)
    run = reader_module.RunReader("big", str(tmp_path / "big"))
    monitor = analysis.monitor(run)
    indexing = threading.Thread(target=run.update)
    indexing.start()
    partial = 0
    while indexing.is_alive():
        seen = run.num_traces()
        alerts = monitor.num_alerts()
        assert alerts >= 3 * (seen // 4) + max(0, seen % 4 - 1), (seen, alerts)
        partial += 0 < seen < 4000
        body = analysis.alerts(run, 0, 5)
        assert all(a["op_name"] in ("lv1", "lv2", "lv3") for a in body["alerts"])
    indexing.join()
    assert run.num_traces() == 4000 and monitor.num_alerts() == 3000
    assert partial > 0, "no answer came while the dump was being indexed"


def test_no_origin_claimed_where_the_circular_buffer_dropped_the_producer(tmp_path):
    """The ring keeps the first KEPT_NONFINITE_CALLS NaN calls whole; of the two after them,
    with a ring of 6 traces, the older lost lv0 and lv1: lv2's NaN input came from lv1, whose
    trace is gone, so lv2 is not called the origin there; in the next execution, complete,
    lv1 is."""
    from plugin_dumps import write_execution

    from tvmdbg_tb.events.layout import KEPT_NONFINITE_CALLS

    w = DebugEventsWriter(tmp_path, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=6), run_id="ring")
    write_graph(w)
    for _ in range(KEPT_NONFINITE_CALLS + 2):
        write_execution(w, nan_from=1)
    w.close()
    s = Server(tmp_path)
    alerts = s.json("alerts", run="ring")
    kept = [(name, e, name == "lv1") for e in range(KEPT_NONFINITE_CALLS) for name in ("lv1", "lv2", "lv3")]
    cut, last = KEPT_NONFINITE_CALLS, KEPT_NONFINITE_CALLS + 1
    assert [(a["op_name"], a["execution_index"], a["origin"]) for a in alerts["alerts"]] == [
        *kept,
        ("lv2", cut, False),
        ("lv3", cut, False),
        ("lv1", last, True),
        ("lv2", last, False),
        ("lv3", last, False),
    ]
    assert alerts["first_origin_index"] == 0 and not alerts["start_dropped"]
