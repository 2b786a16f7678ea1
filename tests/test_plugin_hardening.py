"""The plugin on bad days: completeness in `runs` and `status`, huge integers, runs nested
below strays and inside other runs, runs whose directory goes, FIFOs in a run."""

from __future__ import annotations

import os
import shutil
import threading

from plugin_dumps import write_full_tensor, write_nan_chain
from test_plugin import Server

from tvmdbg_tb.events import records
from tvmdbg_tb.events.reader import DebugDataReader


def test_runs_and_status_say_whether_a_dump_is_complete(tmp_path):
    write_nan_chain(tmp_path, "whole")
    write_nan_chain(tmp_path, "cut")
    traces = tmp_path / "cut" / "tvmdbg.graph_execution_traces"
    data = traces.read_bytes()
    traces.write_bytes(data[: len(data) - 20])
    meta = tmp_path / "cut" / "tvmdbg.metadata"
    first, _, length = next(records.scan(meta.read_bytes(), 0, str(meta)))
    meta.write_bytes(meta.read_bytes()[: first + length + 16])  # DebugMetadata only, no RunEnd
    s = Server(tmp_path)
    runs = {r["run"]: r for r in s.json("runs")["runs"]}
    assert runs["whole"]["completeness"]["complete"] is True
    assert runs["whole"]["completeness"]["state"] == "complete"
    cut = runs["cut"]["completeness"]
    # This process wrote it and still runs: without a closing record, the writer may be busy.
    assert cut["complete"] is False and cut["ended"] == "running"
    status = s.json("status", run="cut")
    assert status["runs"][0]["completeness"] == cut
    s.plugin.stop()


def test_a_cut_dump_whose_writer_is_gone_is_incomplete_in_status(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "write.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from plugin_dumps import write_nan_chain\n"
        "write_nan_chain(sys.argv[1], 'run')\n"
    )
    logdir = tmp_path / "logdir"
    subprocess.run([sys.executable, str(script), str(logdir)], check=True, timeout=120)
    traces = logdir / "run" / "tvmdbg.graph_execution_traces"
    data = traces.read_bytes()
    traces.write_bytes(data[: len(data) - 20])
    s = Server(logdir)
    (run,) = s.json("runs")["runs"]
    state = run["completeness"]
    assert state["state"] == "incomplete" and state["ended"] == "closed"
    kinds = {p["kind"]: p for p in state["problems"]}
    assert kinds["truncated"]["file"] == str(traces) and kinds["truncated"]["offset"] > 0
    assert "executions_missing_traces" in kinds
    assert any("run run: incomplete" in p for p in s.json("status")["problems"])
    s.plugin.stop()


def test_integer_parameters_beyond_64_bits_answer_400(tmp_path):
    write_full_tensor(tmp_path, "run_t")
    s = Server(tmp_path)
    for text in (str(2**63), f"-{2**63}", f"0:{2**64}", f"::{2**70}", f"{2**63},0"):
        assert "error" in s.json("tensor/value", 400, run="run_t", trace=0, slice=text)
    for name in ("trace", "max_elements"):
        s.json("tensor/value", 400, run="run_t", **{"trace": 0, name: 2**63})
    s.json("graph_execution/digests", 400, run="run_t", begin=2**64)
    s.plugin.stop()


def test_runs_are_found_at_every_depth_and_dropped_when_their_directory_goes(tmp_path):
    write_nan_chain(tmp_path / "a" / "b" / "c" / "d" / "e", "deep")
    write_nan_chain(tmp_path, "outer")
    write_nan_chain(tmp_path / "outer", "inner")  # a run inside another run's directory
    (tmp_path / "tvmdbg.metadata").write_bytes(b"stray")  # a stray file above them all
    reader = DebugDataReader(tmp_path)
    reader.update()
    names = reader.runs()
    assert {"a/b/c/d/e/deep", "outer", "outer/inner"} <= set(names), names
    assert reader.run("outer/inner").num_traces() == 16
    shutil.rmtree(tmp_path / "a")
    reader.update()
    assert "a/b/c/d/e/deep" not in reader.runs()
    s = Server(tmp_path)
    assert {"outer", "outer/inner"} <= {r["run"] for r in s.json("runs")["runs"]}
    shutil.rmtree(tmp_path / "outer" / "inner")
    s.plugin.poll()
    assert "outer/inner" not in {r["run"] for r in s.json("runs")["runs"]}
    s.plugin.stop()


def test_a_fifo_in_a_run_never_blocks_the_routes(tmp_path):
    write_nan_chain(tmp_path, "run")
    path = tmp_path / "run" / "tvmdbg.stack_frames"
    path.unlink()
    os.mkfifo(path)
    s = Server(tmp_path)
    answers = []
    worker = threading.Thread(target=lambda: answers.append(s.json("status")), daemon=True)
    worker.start()
    worker.join(30)
    assert answers, "status blocked on a FIFO"
    (run,) = answers[0]["runs"]
    assert run["num_traces"] == 16
    problems = run["completeness"]["problems"]
    assert any(p["kind"] == "unreadable" and "a FIFO" in p["message"] for p in problems), problems
    s.plugin.stop()


def test_json_answers_are_written_byte_for_byte_as_tensorboard_writes_them():
    """The routes write plain answers with json.dumps and leave the others (NaN and Inf,
    bytes, sets, text) to http_util.Respond's Cleanse: the same bytes either way."""
    from tensorboard.backend import http_util
    from werkzeug.test import EnvironBuilder
    from werkzeug.wrappers import Request

    from tvmdbg_tb.plugin.plugin import _json_text

    request = Request(EnvironBuilder().get_environ())
    answers = [
        {"runs": [{"run": "é/ü", "n": 2**70, "x": 1.5e-300, "ok": True, "none": None}], 3: (1, [2.0])},
        [{"value": float("nan")}, {"value": float("-inf")}],
        {"name": b"bytes", "ids": {3}},
        "text kept as it is",
    ]
    for answer in answers:
        plain = http_util.Respond(request, answer, "application/json").get_data()
        assert http_util.Respond(request, _json_text(answer), "application/json").get_data() == plain
    assert isinstance(_json_text(answers[0]), str) and _json_text(answers[1]) is answers[1]
