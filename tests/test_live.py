"""Live debugging (tvmdbg_tb.live): watchpoint conditions on real models, the control channel's
token guard, resume on timeout, and faults (two dashboards, unknown ops, a program that dies
while paused, a killed TensorBoard, a stale token)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import numpy as np
import pytest
import ts_types
import tvm
from models import INPUTS, blockbuilder_planted, digits_training
from tensorboard.backend import application
from tensorboard.plugins import base_plugin
from tvm import relax
from werkzeug.test import Client
from werkzeug.wrappers import Response

import tvmdbg
from tvmdbg_tb.live.channel import LIVE_FILE, TOKEN_HEADER
from tvmdbg_tb.plugin.guard import DASHBOARD_HEADER
from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin
from tvmdbg_tb.tracing.state import ACTIVE

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "/data/plugin/tvmdbg/"
DIFF = INPUTS[0] - INPUTS[1]  # the planted model's first kernel (subtract) output: x - y


def _hits(writer) -> list:
    reader = tvmdbg.DebugDataReader(os.path.dirname(writer.run_dir))
    try:
        reader.update()
        return [hit for _, hit in reader.run(os.path.basename(writer.run_dir)).watchpoint_hits]
    finally:
        reader.close()


@pytest.fixture()
def dump(tmp_path):
    writer = tvmdbg.enable_dump_debug_info(str(tmp_path), "FULL_HEALTH", circular_buffer_size=-1)
    yield writer
    tvmdbg.disable_dump_debug_info()


# -- watchpoint conditions on real models ------------------------------------------------------


def test_nan_or_inf_hits_the_log_kernel_first(dump):
    model = blockbuilder_planted("log")
    tvmdbg.add_watchpoint("nan_or_inf")
    model.run()
    tvmdbg.disable_dump_debug_info()
    hits = _hits(dump)
    with np.errstate(all="ignore"):
        expected = np.log(DIFF)
    assert hits[0].kernel.endswith("log")
    assert hits[0].detail == f"{np.isnan(expected).sum()} NaN, {np.isinf(expected).sum()} Inf of {expected.size}"
    assert all(h.condition == "nan_or_inf" and not h.paused for h in hits)  # no live control: no pause


def test_abs_above_on_one_op(dump):
    model = blockbuilder_planted("log")
    tvmdbg.add_watchpoint("abs_above", threshold=4.5, op_name="lv")  # lv = subtract(x, y)
    model.run()
    tvmdbg.disable_dump_debug_info()
    hits = _hits(dump)
    assert [h.op_name for h in hits] == ["lv"]
    assert hits[0].detail.startswith(f"{int((np.abs(DIFF) > 4.5).sum())} of 8 values")


def test_value_range_on_an_op_regex(dump):
    model = blockbuilder_planted("log")
    tvmdbg.add_watchpoint("value_range", min=-1.0, max=6.0, op_regex="^subtract$")
    model.run()
    tvmdbg.disable_dump_debug_info()
    hits = _hits(dump)
    assert [h.kernel for h in hits] == ["subtract"]
    assert hits[0].detail.startswith(f"{int(((DIFF < -1) | (DIFF > 6)).sum())} of 8 values outside")


def test_all_zero(dump):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            negated = bb.emit(relax.op.negative(x))
            zeros = bb.emit(relax.op.nn.relu(negated))  # x > 0: all zero, the only hit
            out = bb.emit_output(relax.op.add(zeros, x))
        bb.emit_func_output(out)
    vm = relax.VirtualMachine(tvm.compile(bb.get(), "llvm"), tvm.cpu())
    tvmdbg.add_watchpoint("all_zero")
    vm["main"](tvm.runtime.tensor(np.arange(1, 5, dtype="float32")))
    tvmdbg.disable_dump_debug_info()
    hits = _hits(dump)
    assert [h.kernel for h in hits] == ["relu"], [(h.op_name, h.kernel) for h in hits]
    assert hits[0].detail == "all 4 values are zero"


def test_changed_since_previous_execution(dump):
    training = digits_training(lr=0.5)
    tvmdbg.add_watchpoint("changed", threshold=0.1, op_regex="matmul")
    for _ in range(2):
        training.trainer.update(training.inputs, training.targets)
    hits_after_training = len(tvmdbg.list_watchpoints()) and tvmdbg.list_watchpoints()[0]["hits"]
    model = blockbuilder_planted("log")
    same = tvmdbg.add_watchpoint("changed", threshold=0.1, op_name="lv")
    model.run()
    model.run()  # the same inputs: nothing changes
    tvmdbg.disable_dump_debug_info()
    hits = _hits(dump)
    assert hits_after_training > 0
    assert hits and all(h.watchpoint_id != same for h in hits)
    assert all("since the previous execution" in h.detail for h in hits)
    # a hit compares with an earlier execution of the same op: never on an op's first run
    reader = tvmdbg.DebugDataReader(str(Path(dump.run_dir).parent))
    reader.update()
    run = reader.run(os.path.basename(dump.run_dir))
    for hit in hits:
        runs_of_op = [run.trace(int(i)).execution_index for i in run.op_trace_indices(hit.op_id, hit.output_slot)]
        assert min(runs_of_op) < hit.execution_index, (hit, runs_of_op)
    reader.close()


def test_bad_watchpoints_are_refused_clearly(dump):
    with pytest.raises(ValueError, match="unknown watchpoint condition"):
        tvmdbg.add_watchpoint("nan")
    with pytest.raises(ValueError, match="needs the parameter 'threshold'"):
        tvmdbg.add_watchpoint("abs_above")
    with pytest.raises(ValueError, match="min .* must be <= max"):
        tvmdbg.add_watchpoint("value_range", min=2, max=1)
    with pytest.raises(ValueError, match="not a valid regular expression"):
        tvmdbg.add_watchpoint("all_zero", op_regex="(")
    ident = tvmdbg.add_watchpoint("nan_or_inf", op_name="no_such_op")  # Python may add before compiling
    blockbuilder_planted("log").run()
    assert tvmdbg.list_watchpoints()[0]["hits"] == 0
    tvmdbg.delete_watchpoint(ident)
    assert tvmdbg.list_watchpoints() == []
    with pytest.raises(KeyError):
        tvmdbg.delete_watchpoint(ident)


# -- the control channel -----------------------------------------------------------------------


class Dashboard:
    """A TensorBoard plugin instance over the logdir (each instance is one TensorBoard)."""

    def __init__(self, logdir):
        self.plugin = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(logdir)), start_reader=False)
        self.plugin.poll()
        self.client = Client(application.TensorBoardWSGI([self.plugin]), Response)

    def run(self) -> str:
        self.plugin.poll()
        return self.plugin._reader.runs()[0]

    def get(self, route, **params):
        response = self.client.get(PREFIX + route, query_string={"run": self.run(), **params})
        return response.status_code, json.loads(response.get_data(as_text=True))

    def post(self, route, body):
        response = self.client.post(
            PREFIX + route, query_string={"run": self.run()}, json=body, headers={DASHBOARD_HEADER: "1"}
        )
        return response.status_code, json.loads(response.get_data(as_text=True))

    def wait_paused(self, pause_id: int = 1, timeout: float = 60) -> dict:
        deadline = time.time() + timeout
        while True:
            status, state = self.get("live/state")
            assert status == 200, state
            if state.get("paused") and state["pause"]["pause_id"] >= pause_id:
                return state
            assert time.time() < deadline, state
            time.sleep(0.05)


@pytest.fixture()
def live(tmp_path):
    writer = tvmdbg.enable_dump_debug_info(str(tmp_path), "FULL_HEALTH", circular_buffer_size=-1, live=True)
    yield writer, blockbuilder_planted("log")  # compiled after enable: ops know their source line
    tvmdbg.disable_dump_debug_info()


def _in_thread(fn) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def _raw(writer, path: str, token: str | None):
    info = json.loads(Path(writer.run_dir, LIVE_FILE).read_text())
    headers = {TOKEN_HEADER: token} if token is not None else {}
    request = urllib.request.Request(f"http://127.0.0.1:{info['port']}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_requests_without_the_token_are_refused(live):
    writer, _ = live
    info = json.loads(Path(writer.run_dir, LIVE_FILE).read_text())
    assert oct(os.stat(Path(writer.run_dir, LIVE_FILE)).st_mode & 0o777) == "0o600"
    status, answer = _raw(writer, "/state", None)
    assert status == 401 and "missing" in answer["error"]
    status, answer = _raw(writer, "/state", secrets.token_hex(16))
    assert status == 403 and "wrong token" in answer["error"]
    status, answer = _raw(writer, "/state", info["token"])
    assert status == 200 and answer["live"] and answer["pid"] == os.getpid()


def test_pause_step_run_to_and_two_dashboards(live, tmp_path):
    writer, model = live
    one, two = Dashboard(tmp_path), Dashboard(tmp_path)
    status, answer = one.post("live/watchpoints", {"condition": "nan_or_inf", "op_name": "no_such_op"})
    assert status == 400 and "no op named 'no_such_op'" in answer["error"]
    status, answer = one.post("live/watchpoints", {"condition": "nan_or_inf"})
    assert status == 200, answer
    thread = _in_thread(model.run)
    state = one.wait_paused(1)
    pause = state["pause"]
    assert pause["kernel"].endswith("log") and pause["reason"].startswith("watchpoint #1")
    np.testing.assert_array_equal(pause["inputs"][0]["values"], DIFF.reshape(-1))
    assert pause["source"]["op_type"] == "relax.log"
    assert two.wait_paused(1)["pause"]["pause_id"] == 1  # the other dashboard sees the same pause
    status, answer = one.post("live/command", {"action": "run_to", "op_name": "nope", "pause_id": 1})
    assert status == 400 and "no op named 'nope'" in answer["error"]
    assert one.post("live/command", {"action": "step", "pause_id": 1})[0] == 200
    status, answer = two.post("live/command", {"action": "continue", "pause_id": 1})
    assert status == 409 and ("is over" in answer["error"] or "already answered" in answer["error"])
    state = one.wait_paused(2)
    assert state["pause"]["reason"] == "step"
    last_op = state["pause"]["op_name"]
    assert one.post("live/command", {"action": "continue", "pause_id": 2})[0] == 200
    thread.join(timeout=30)
    assert not thread.is_alive()
    # run_to: pause when a chosen op runs, in the next call
    assert one.post("live/command", {"action": "pause"})[0] == 200
    thread = _in_thread(model.run)
    state = one.wait_paused(3)
    assert state["pause"]["reason"] == "pause requested"
    assert one.post("live/command", {"action": "run_to", "op_name": last_op, "pause_id": 3})[0] == 200
    state = one.wait_paused(4)
    assert state["pause"]["op_name"] == last_op and state["pause"]["reason"] == f"reached {last_op}"
    assert one.post("live/command", {"action": "continue", "pause_id": 4})[0] == 200
    thread.join(timeout=30)
    assert not thread.is_alive()
    status, answer = one.post("live/command", {"action": "step", "pause_id": 4})
    assert status == 409 and "not paused" in answer["error"]
    status, hits = one.get("live/hits")
    assert status == 200 and hits["num_hits"] >= 1 and hits["hits"][0]["paused"] is True


def test_the_paused_call_lists_its_kernels_so_far(live, tmp_path):
    """A call's traces reach the dump when it returns; while it is paused, live/paused_call
    lists the kernels it ran so far with their health, the paused one at call_row, and the
    dump's rows of that call, once written, are the same."""
    writer, model = live
    dash = Dashboard(tmp_path)
    status, answer = dash.get("live/paused_call")
    assert status == 409 and "not paused" in answer["error"]
    assert dash.post("live/watchpoints", {"condition": "nan_or_inf"})[0] == 200
    thread = _in_thread(model.run)
    pause = dash.wait_paused(1)["pause"]
    status, call = dash.get("live/paused_call")
    assert status == 200, call
    rows = call["rows"]
    assert call["pause_id"] == 1 and call["execution_index"] == pause["execution_index"]
    assert call["num_traces"] == pause["call_traces"] == len(rows) == 2, rows  # subtract, then log
    assert [r["call_position"] for r in rows] == [0, 1] and (call["begin"], call["end"]) == (0, 2)
    paused = rows[pause["call_row"]]
    assert paused["op_id"] == pause["op_id"] and paused["kernel"].endswith("log")
    with np.errstate(all="ignore"):
        expected = np.log(DIFF)
    assert paused["nan"] == int(np.isnan(expected).sum()) > 0 and paused["nonfinite"] is True
    assert rows[0]["kernel"].endswith("subtract") and rows[0]["nonfinite"] is False
    assert rows[0]["summary"]["size"] == DIFF.size and rows[0]["position"] is None
    status, dumped = dash.get("graph_execution/data", execution_index=pause["execution_index"])
    assert status == 200 and dumped["graph_executions"] == []  # the call is not in the dump yet
    status, one = dash.get("live/paused_call", begin=1, end=5)
    assert status == 200 and [r["call_position"] for r in one["rows"]] == [1] and one["end"] == 2
    for params, message in (({"begin": "x"}, "integer"), ({"begin": 2, "end": 1}, "must be -1 or >= begin")):
        status, answer = dash.get("live/paused_call", **params)
        assert status == 400 and message in answer["error"], answer
    assert dash.post("live/command", {"action": "step", "pause_id": 1})[0] == 200
    pause = dash.wait_paused(2)["pause"]
    stepped = dash.get("live/paused_call")[1]["rows"]
    assert pause["call_traces"] == len(stepped) == 3 and pause["call_row"] == 2
    assert stepped[:2] == rows and stepped[2]["op_id"] == pause["op_id"]
    assert dash.post("live/command", {"action": "continue", "pause_id": 2})[0] == 200
    thread.join(timeout=30)
    assert not thread.is_alive()
    writer.flush()
    dumped = dash.get("graph_execution/data", execution_index=pause["execution_index"])[1]["graph_executions"]
    fields = ("op_id", "output_slot", "execution_index", "nan", "neg_inf", "pos_inf", "nonfinite", "debug_values")
    assert [[r[f] for f in fields] for r in dumped[:3]] == [[r[f] for f in fields] for r in stepped]


def test_a_keepalive_for_a_pause_that_ended_is_an_answer_and_changes_nothing(live, tmp_path):
    """The pause a dashboard read can end before its keepalive arrives (another dashboard
    resumed it, it timed out): the keepalive is answered "over", never refused, and touches
    nothing (not the current pause's timeout). Answers match the dashboard's KeepaliveAnswer."""
    writer, model = live
    one, two = Dashboard(tmp_path), Dashboard(tmp_path)
    checker = ts_types.Checker(ts_types.declarations())
    controller = ACTIVE.state.live.controller
    assert one.post("live/watchpoints", {"condition": "nan_or_inf"})[0] == 200
    thread = _in_thread(model.run)
    assert one.wait_paused(1)["pause"]["pause_id"] == 1  # dashboard one shows pause #1
    assert two.post("live/command", {"action": "step", "pause_id": 1})[0] == 200
    before = one.wait_paused(2)
    contact = controller.last_contact
    status, answer = one.post("live/keepalive", {"pause_id": 1})  # one's keepalive, late
    assert status == 200 and (answer["ok"], answer["pause_id"], answer["over"], answer["now"]) == (False, 1, True, 2)
    assert checker.check(answer, ("name", "KeepaliveAnswer")) == []
    assert controller.last_contact == contact  # pause #2's timeout runs on
    assert one.get("live/state")[1] == before  # nothing applied, nothing resumed
    status, answer = one.post("live/keepalive", {"pause_id": 2})
    assert status == 200 and answer["ok"] is True and answer["timeout"] == controller.timeout, answer
    assert checker.check(answer, ("name", "KeepaliveAnswer")) == []
    assert controller.last_contact > contact
    for bogus in (0, -1, 3):  # a pause this program never had is a bad request
        status, answer = one.post("live/keepalive", {"pause_id": bogus})
        assert status == 400 and f"no pause #{bogus} in this program" in answer["error"], answer
    assert one.post("live/command", {"action": "continue", "pause_id": 2})[0] == 200
    thread.join(timeout=30)
    assert not thread.is_alive()
    status, answer = one.post("live/keepalive", {"pause_id": 2})  # the program runs: no pause now
    assert status == 200 and (answer["ok"], answer["over"], answer["now"]) == (False, True, None), answer
    assert checker.check(answer, ("name", "KeepaliveAnswer")) == []


def test_a_pause_is_read_before_the_state_shows_it(live, tmp_path):
    """The page asks for the paused op, its graph and its stack as soon as live/state shows the
    pause, whenever the plugin's reader last polled: the state route reads the run up to the
    pause (flushed before it is shown) before it answers, so none of them is a 404."""
    writer, model = live
    dash = Dashboard(tmp_path)  # polled once: the run is known, its compiled model not read yet
    run = dash.plugin._reader.runs()[0]
    assert dash.plugin._reader.run(run).graphs() == []

    def get(route, **params):  # no poll between requests: the reader thread could be late
        response = dash.client.get(PREFIX + route, query_string={"run": run, **params})
        return response.status_code, json.loads(response.get_data(as_text=True))

    tvmdbg.request_pause()
    thread = _in_thread(model.run)
    deadline = time.time() + 60
    while not (state := get("live/state")[1]).get("paused"):
        assert time.time() < deadline, state
        time.sleep(0.05)
    pause = state["pause"]
    status, op = get("graphs/op_info", op_id=pause["op_id"])
    assert status == 200 and op["op_name"] == pause["op_name"], op
    status, graph = get("graphs/graph_info", graph_id=pause["graph_id"])
    assert status == 200 and pause["op_name"] in [o["op_name"] for o in graph["ops"]], graph
    status, frames = get("stack_frames/stack_frames", stack_frame_ids=",".join(map(str, op["stack_frame_ids"])))
    assert status == 200 and len(frames["stack_frames"]) == len(op["stack_frame_ids"]) > 0, frames
    response = dash.client.post(
        PREFIX + "live/command",
        query_string={"run": run},
        json={"action": "continue", "pause_id": pause["pause_id"]},
        headers={DASHBOARD_HEADER: "1"},
    )
    assert response.status_code == 200
    thread.join(timeout=30)
    assert not thread.is_alive()


def test_resumes_after_timeout_without_a_dashboard(tmp_path):
    model = blockbuilder_planted("log")
    writer = tvmdbg.enable_dump_debug_info(
        str(tmp_path), "FULL_HEALTH", circular_buffer_size=-1, live=True, live_timeout=1.0
    )
    try:
        tvmdbg.add_watchpoint("nan_or_inf")
        started = time.time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, out = model.run()
        elapsed = time.time() - started
        assert 1.0 <= elapsed < 20, elapsed
        assert any("no dashboard contact for 1 s; resuming" in str(w.message) for w in caught)
        model.run()  # after a timeout the program runs on: no second wait
        assert time.time() - started < elapsed + 5
    finally:
        tvmdbg.disable_dump_debug_info()
    hits = _hits(writer)
    assert hits[0].paused and hits[0].kernel.endswith("log")
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    run = reader.run(reader.runs()[0])
    assert run.num_executions() == 2  # no lost records
    # The paused call's duration is the model's time, not the second it waited.
    assert run.execution_digests()["duration_us"][0] < 0.5e6
    reader.close()


def test_reading_the_state_does_not_keep_a_pause_alive(tmp_path):
    """Only an explicit POST (a command, live/keepalive) is dashboard contact; GETs change nothing."""
    model = blockbuilder_planted("log")
    tvmdbg.enable_dump_debug_info(str(tmp_path), "FULL_HEALTH", circular_buffer_size=-1, live=True, live_timeout=1.5)
    try:
        dash = Dashboard(tmp_path)
        tvmdbg.request_pause()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            thread = _in_thread(model.run)
            pause = dash.wait_paused(1)["pause"]
            kept = time.time()
            while time.time() - kept < 3.0:  # keepalive every 0.3 s: still paused after 2x the timeout
                status, answer = dash.post("live/keepalive", {"pause_id": pause["pause_id"]})
                assert status == 200 and answer["timeout"] == 1.5, answer
                last_contact = time.time()
                time.sleep(0.3)
            assert dash.get("live/state")[1]["paused"]
            status, answer = dash.post("live/keepalive", {"pause_id": pause["pause_id"] + 1})
            assert status == 400 and "no pause #2 in this program" in answer["error"], answer
            polled = time.time()
            while thread.is_alive():  # GET polling alone: the pause times out
                assert dash.get("live/state")[0] == 200
                assert time.time() - polled < 20
                time.sleep(0.1)
        assert 1.4 <= time.time() - last_contact < 20
        assert any("no dashboard contact for 1.5 s; resuming" in str(w.message) for w in caught)
        status, answer = dash.post("live/keepalive", {"pause_id": pause["pause_id"]})
        assert status == 200 and (answer["ok"], answer["over"], answer["now"]) == (False, True, None), answer
    finally:
        tvmdbg.disable_dump_debug_info()


def test_patterns_are_matched_once_per_name_in_bounded_time(dump):
    """A pattern set before compiling that backtracks catastrophically on a fused kernel's name is
    disabled when the name appears (the kernel still runs; the stdlib's re would never return)."""
    hostile = tvmdbg.add_watchpoint("nan_or_inf", op_regex=r"(\w|\w|\w)+(?=#)")
    relu = tvmdbg.add_watchpoint("abs_above", threshold=0.0, op_regex="relu", pause=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.process_time()
        training = digits_training(lr=0.05, fuse=True)  # fused names such as fused_matmul_add_relu
        training.trainer.update(training.inputs, training.targets)
        assert time.process_time() - started < 30
    listed = {w["id"]: w for w in tvmdbg.list_watchpoints()}
    assert "took longer than" in listed[hostile]["disabled"] and listed[hostile]["hits"] == 0
    assert any(f"watchpoint #{hostile} disabled" in str(w.message) for w in caught)
    assert listed[relu]["disabled"] is None and listed[relu]["hits"] > 0
    hits = [h for h in tvmdbg.watchpoint_hits() if h["watchpoint_id"] == relu]
    assert hits and all("relu" in h["kernel"] or "relu" in h["op_name"] for h in hits)
    # set after the names are known: refused at once
    with pytest.raises(ValueError, match="takes longer than"):
        tvmdbg.add_watchpoint("nan_or_inf", op_regex=r"(\w|\w|\w)+(?=#)")
    with pytest.raises(ValueError, match="at most 1000"):
        tvmdbg.add_watchpoint("nan_or_inf", op_regex="x" * 10_000)
    with pytest.raises(ValueError, match="pause must be true or false"):
        tvmdbg.add_watchpoint("nan_or_inf", pause="false")
    with pytest.raises(ValueError, match="'threshold' must be a number"):
        tvmdbg.add_watchpoint("abs_above", threshold="5")


def test_changed_values_stay_within_their_byte_budget(tmp_path, monkeypatch):
    """'changed' keeps one copy per op output until the shared budget is spent: the outputs past
    it are not watched (and counted), and no new 'changed' watchpoint is accepted."""
    from tvmdbg_tb.live import controller as controller_module

    monkeypatch.setattr(controller_module, "CHANGED_BUDGET_BYTES", 64 * 1024)
    tvmdbg.enable_dump_debug_info(str(tmp_path), "FULL_HEALTH", circular_buffer_size=-1)
    try:
        training = digits_training(lr=0.5)
        first = tvmdbg.add_watchpoint("changed", threshold=0.1)
        for _ in range(3):
            training.trainer.update(training.inputs, training.targets)
        watchpoint = tvmdbg.list_watchpoints()[0]
        assert 0 < watchpoint["kept_bytes"] <= 64 * 1024 and watchpoint["unwatched_outputs"] > 0, watchpoint
        assert watchpoint["hits"] > 0  # the outputs it keeps are still compared
        with pytest.raises(ValueError, match="reached their budget of 64 KB; delete one first"):
            tvmdbg.add_watchpoint("changed", threshold=1.0)
        tvmdbg.delete_watchpoint(first)  # gives its bytes back
        tvmdbg.add_watchpoint("changed", threshold=1.0)
    finally:
        tvmdbg.disable_dump_debug_info()


def test_new_hits_are_seen_past_the_kept_ones(dump, monkeypatch):
    """`tvmdbg run --watch` stops at every new hit: counting stays right once the first hits
    kept in memory are full (the list itself stops growing)."""
    from tvmdbg_tb.live import controller as controller_module

    monkeypatch.setattr(controller_module, "MAX_KEPT_HITS", 2)
    model = blockbuilder_planted("log")
    tvmdbg.add_watchpoint("abs_above", threshold=0.0, op_name="lv")  # one hit per call
    seen = 0
    for call in range(1, 6):
        model.run()
        total, first = tvmdbg.watchpoint_hits_since(seen)
        assert total == call and first is not None and first["op_name"] == "lv", (call, total, first)
        seen = total
        assert tvmdbg.watchpoint_hits_since(seen) == (total, None)
    assert len(tvmdbg.watchpoint_hits()) == 2


def test_no_live_program_and_a_stale_token(tmp_path):
    writer = tvmdbg.enable_dump_debug_info(str(tmp_path), "FULL_HEALTH", circular_buffer_size=-1)
    writer.flush()
    dash = Dashboard(tmp_path)
    status, state = dash.get("live/state")
    assert status == 200 and state["live"] is False and "live=True" in state["reason"]
    status, answer = dash.post("live/command", {"action": "pause"})
    assert status == 404 and "live=True" in answer["error"]
    tvmdbg.disable_dump_debug_info()
    live_file = Path(writer.run_dir, LIVE_FILE)
    # a live file whose token is not the program's (a program started again on the same port)
    writer2 = tvmdbg.enable_dump_debug_info(str(tmp_path / "other"), "FULL_HEALTH", live=True)
    try:
        info = json.loads(Path(writer2.run_dir, LIVE_FILE).read_text())
        live_file.write_text(json.dumps({**info, "token": secrets.token_hex(16)}))
        status, answer = Dashboard(tmp_path).post("live/command", {"action": "pause"})
        assert status == 403 and "refused the live file's token" in answer["error"]
    finally:
        tvmdbg.disable_dump_debug_info()
    assert not Path(writer2.run_dir, LIVE_FILE).exists()  # removed at the end of the program


def _child(logdir: Path, timeout: float, calls: int) -> tuple[subprocess.Popen, str]:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "live_child.py"), str(logdir), str(timeout), str(calls)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = proc.stdout.readline()
    assert line.startswith("READY"), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line.split()[1]


def _tvmdbg(*args) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())", *map(str, args)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


def test_program_killed_while_paused(tmp_path):
    """SIGKILL while a NaN watchpoint holds the program paused in the call that made the NaN:
    the call never returns, and its NaN is still an alert, from the hit that saw it."""
    proc, run_dir = _child(tmp_path, 600, 3)
    try:
        dash = Dashboard(tmp_path)
        state = dash.wait_paused(1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        status, state = dash.get("live/state")
        assert status == 200 and state["live"] is False and "has exited" in state["reason"]
        status, answer = dash.post("live/command", {"action": "continue", "pause_id": 1})
        assert status == 404 and "has exited" in answer["error"]
        status, hits = dash.get("live/hits")  # flushed at the pause: nothing lost
        assert hits["num_hits"] == 1 and hits["hits"][0]["kernel"].endswith("log")
        # The NaN of the call that never returned is an alert: the plugin, `alerts` and `check`.
        (unfinished,) = dash.get("alerts")[1]["unfinished"]
        with np.errstate(all="ignore"):
            expected = np.log(DIFF)
        assert unfinished["kernel"].endswith("log") and unfinished["execution_index"] == 0
        assert unfinished["nan_count"] == np.isnan(expected).sum() and unfinished["size"] == expected.size
        op = unfinished["op_name"]
        check = _tvmdbg("check", tmp_path)
        assert check.returncode == 1, (check.stdout, check.stderr)
        assert f"op {op}:0 (kernel {unfinished['kernel']}) made {unfinished['nan_count']} NaN" in check.stdout
        assert "a call that never returned" in check.stdout and "The dump is incomplete" in check.stdout
        alerts = _tvmdbg("alerts", tmp_path)
        assert "1 NaN/Inf in calls that never returned" in alerts.stdout, alerts.stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_command_that_timed_out_on_a_frozen_program_never_happens_after(tmp_path):
    """SIGSTOP while the program runs, `pause` answered 504 (withdrawn), SIGCONT: the program
    reads the request after its deadline and refuses it; it runs on and never pauses."""
    proc, run_dir = _child(tmp_path, 600, 10**7)
    try:
        dash = Dashboard(tmp_path)
        dash.wait_paused(1)  # the NaN watchpoint's first hit
        assert dash.post("live/command", {"action": "continue", "pause_id": 1})[0] == 200
        proc.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        status, answer = dash.post("live/command", {"action": "pause"})
        assert status == 504 and answer["withdrawn"] is True, answer
        assert time.monotonic() - started < 10  # one overall deadline
        assert "withdrawn" in answer["error"] and answer["request_id"]
        proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            status, state = dash.get("live/state")
            assert status == 200 and state["live"], state
            assert not state["paused"] and not state["pause_requested"], state
            time.sleep(0.1)
        assert answer["request_id"] not in {a["request_id"] for a in state["applied"]}
        # a command that arrives in time still applies, and is listed as applied
        status, answer = dash.post("live/command", {"action": "pause"})
        assert status == 200, answer
        state = dash.wait_paused(2)
        assert state["pause"]["reason"] == "pause requested"
        assert answer["request_id"] in {a["request_id"] for a in state["applied"]}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_killed_tensorboard_lets_the_program_finish(tmp_path):
    e2e = pytest.importorskip("test_dashboard_e2e")
    tb = e2e.TensorBoardProcess(tmp_path, tmp_path / "tb.log")
    proc, run_dir = _child(tmp_path, 3, 3)
    try:
        run = os.path.relpath(run_dir, tmp_path)
        deadline = time.time() + 60
        while True:
            try:
                state = tb.api(f"live/state?run={run}")
                if state.get("paused"):
                    break
            except urllib.error.HTTPError:
                pass  # the run is not listed yet
            assert time.time() < deadline
            time.sleep(0.2)
        tb.proc.send_signal(signal.SIGKILL)
        tb.proc.wait()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "DONE" in out, err
        assert "resuming" in err
    finally:
        tb.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    run_reader = reader.run(os.path.relpath(run_dir, tmp_path))
    assert run_reader.num_executions() == 3 and len(run_reader.watchpoint_hits) == 3
    reader.close()


# -- the CLI shares the watchpoints ------------------------------------------------------------

from test_cli_tvm import cli, script  # noqa: E402, F401  (the CLI tests' script fixture)


@pytest.mark.slow
def test_tvmdbg_run_stops_at_a_watchpoint_hit(script, tmp_path):  # noqa: F811
    dump = tmp_path / "dump"
    result = cli(
        "run", "--watch", "nan_or_inf:op_regex=log", "--dump_dir", dump, "-x", "run --no_break", script, "-", 2
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("tvmdbg run: stopped after") == 1
    assert "stopped after VM call 3 (main, execution 2): 1 watchpoint hit, the first #1 NaN or Inf" in out, out
    stop = out.index("stopped after")
    assert out.index("step 1: finite=True") < stop < out.index("step 2: finite=True")
    bad = cli("run", "--watch", "abs_above:limit=3", script)
    assert bad.returncode != 0 and "--watch: bad watch option 'limit=3'" in bad.stderr
