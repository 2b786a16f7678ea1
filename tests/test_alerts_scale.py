"""Alerts at scale: a dump with more than 150k alerts, written by the real writer, served by
the real plugin. Counts by kind and origin cover every alert (not the first page), equal what
the reader's own digests say, and pages by offset/limit tile the whole list."""

from __future__ import annotations

import numpy as np
import pytest
from plugin_dumps import write_graph
from test_plugin import Server

from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.reader import DebugDataReader
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb

EXECUTIONS, PER_EXECUTION = 170, 1000


def _kinds(i: int) -> tuple[int, int, int]:
    """(neg_inf, pos_inf, nan) of the i-th trace of an execution: every 10th is finite."""
    if i % 10 == 9:
        return 0, 0, 0
    nan = 3 if i % 3 == 0 or i % 7 == 0 else 0
    return (2 if i % 3 == 1 else 0), (1 if i % 3 == 2 or i % 7 == 0 else 0), nan


def write_many_alerts(logdir, run_name: str, circular_buffer_size: int = -1) -> None:
    w = DebugEventsWriter(
        logdir, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=circular_buffer_size), run_id=run_name
    )
    write_graph(w)
    kinds = [_kinds(i) for i in range(PER_EXECUTION)]
    for _ in range(EXECUTIONS):
        index = w.allocate_execution_index()
        traces = []
        for i, (neg, pos, nan) in enumerate(kinds):
            traces.append(
                pb.GraphExecutionTrace(
                    op_id=i % 4,
                    execution_index=index,
                    op_name=f"lv{i % 4}",
                    kernel="k",
                    tensor_debug_mode=pb.FULL_HEALTH,
                    debug_values=[0, pb.FLOAT32, 1, 32, neg, pos, nan, 0, 32 - neg - pos - nan, 0],
                    dtype="float32",
                    shape=[32],
                )
            )
        w.write_graph_execution_traces(traces)
        w.write_execution(pb.Execution(index=index, function_name="main", graph_id=0, num_traces=len(traces)))
    w.close()


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("many_alerts")
    write_many_alerts(logdir, "big")
    s = Server(logdir)
    yield s, logdir
    s.plugin.stop()


def test_alert_counts_cover_all_alerts(big):
    server, logdir = big
    body = server.json("alerts", run="big", offset=0, limit=200)
    assert len(body["alerts"]) == 200 and body["begin"] == 0 and body["end"] == 200
    # The reader's own totals, from its digests of every trace in the dump.
    reader = DebugDataReader(logdir)
    reader.discover()
    reader.update()
    digests = reader.run("big").trace_digests()
    bad = (digests["nan"] > 0) | (digests["neg_inf"] > 0) | (digests["pos_inf"] > 0)
    assert body["num_alerts"] == int(bad.sum()) > 150_000
    assert body["nan_alerts"] == int((digests["nan"] > 0).sum())
    assert body["neg_inf_alerts"] == int((digests["neg_inf"] > 0).sum())
    assert body["pos_inf_alerts"] == int((digests["pos_inf"] > 0).sum())
    # And what was written: per execution, the kinds of _kinds.
    kinds = np.array([_kinds(i) for i in range(PER_EXECUTION)])
    assert body["nan_alerts"] == EXECUTIONS * int((kinds[:, 2] > 0).sum())
    assert body["neg_inf_alerts"] == EXECUTIONS * int((kinds[:, 0] > 0).sum())
    assert body["pos_inf_alerts"] == EXECUTIONS * int((kinds[:, 1] > 0).sum())
    assert 0 < body["origin_alerts"] < body["num_alerts"] and body["start_dropped"] is False


def test_offset_limit_pages_tile_the_list(big):
    server, _ = big
    total = server.json("alerts", run="big", offset=0, limit=1)["num_alerts"]
    last = server.json("alerts", run="big", offset=total - 5, limit=200)
    assert last["begin"] == total - 5 and last["end"] == total and len(last["alerts"]) == 5
    same = server.json("alerts", run="big", begin=total - 5, end=total)
    assert [a["trace_position"] for a in same["alerts"]] == [a["trace_position"] for a in last["alerts"]]
    assert server.json("alerts", run="big", offset=total + 10, limit=5)["alerts"] == []
    err = server.get("alerts", expect=400, run="big", offset=0, limit=10_001).get_data(as_text=True)
    assert "limit" in err
    server.get("alerts", expect=400, run="big", offset=-1, limit=5)


def test_every_paged_route_takes_offset_and_limit(big):
    server, _ = big
    by_offset = server.json("graph_execution/digests", run="big", offset=10, limit=3)
    by_range = server.json("graph_execution/digests", run="big", begin=10, end=13)
    assert (by_offset["begin"], by_offset["end"]) == (10, 13)
    assert by_offset["graph_execution_digests"] == by_range["graph_execution_digests"]
    calls = server.json("execution/data", run="big", offset=0, limit=2)
    assert (calls["begin"], calls["end"]) == (0, 2)
    err = server.get("execution/data", expect=400, run="big", offset=0, limit=101).get_data(as_text=True)
    assert "limit 101 is larger than 100" in err


def write_small_buffer(logdir, run_name: str = "small") -> None:
    """30 calls of 4 NaN kernels through a circular buffer of 50: the run's start is dropped."""
    w = DebugEventsWriter(
        logdir, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=50), run_id=run_name
    )
    write_graph(w)
    for _ in range(30):
        index = w.allocate_execution_index()
        traces = [
            pb.GraphExecutionTrace(
                op_id=k,
                execution_index=index,
                op_name=f"lv{k}",
                kernel="k",
                tensor_debug_mode=pb.FULL_HEALTH,
                debug_values=[0, pb.FLOAT32, 1, 32, 0, 0, 1, 0, 31, 0],
            )
            for k in range(4)
        ]
        w.write_graph_execution_traces(traces)
        w.write_execution(pb.Execution(index=index, function_name="main", graph_id=0, num_traces=4))
    w.close()


def test_start_dropped_by_circular_buffer(tmp_path):
    """With a small circular buffer the oldest records are gone but for the first NaN calls,
    which the ring keeps whole: the route has the first alerts and says nothing is lost."""
    from tvmdbg_tb.events.layout import KEPT_NONFINITE_CALLS

    write_small_buffer(tmp_path)
    server = Server(tmp_path)
    try:
        body = server.json("alerts", run="small")
        assert body["start_dropped"] is False and body["num_alerts"] == 4 * KEPT_NONFINITE_CALLS + 50
        assert [a["execution_index"] for a in body["alerts"][:4]] == [0, 0, 0, 0]
        assert body["nan_alerts"] == body["num_alerts"]
    finally:
        server.plugin.stop()
