"""Logdirs on object storage, against a real S3 server (moto) the fixtures start on 127.0.0.1.

A run written to s3:// by a traced program is read by the reader, every CLI command and the
plugin; a run read while it is written is live, never complete, until its RunEnd; a writer
killed mid-run leaves an incomplete dump; the circular buffer drops whole segments and keeps
the first origin's call; a local path that is a mangled URL is never created; a store that
fails never takes the program down and never yields a clean dump.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eventgen  # noqa: E402
from object_store import S3Server, gcs_emulator, s3_server  # noqa: E402
from test_plugin import Server  # noqa: E402

from tvmdbg_tb import (
    analysis,  # noqa: E402
    storage,  # noqa: E402
)
from tvmdbg_tb.events.options import DumpOptions  # noqa: E402
from tvmdbg_tb.events.reader import DebugDataReader  # noqa: E402
from tvmdbg_tb.events.writer import DebugEventsWriter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
CHILD = TESTS / "object_store_child.py"
TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


def first_origin(run) -> dict | None:
    """The first origin alert of a run (analysis.alerts' row), or None."""
    found = analysis.alerts(run)
    index = found["first_origin_index"]
    return None if index is None else found["alerts"][index]


def child_env(s3: S3Server, **extra) -> dict:
    return {
        **os.environ,
        **s3.env,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "TVM_NUM_THREADS": "1",
        **extra,
    }


def run_child(s3: S3Server, logdir: str, calls: int, *flags: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHILD), logdir, str(calls), *flags],
        capture_output=True,
        text=True,
        timeout=240,
        env=child_env(s3, **env),
    )


def tvmdbg(s3: S3Server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*TVMDBG, *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=child_env(s3, TVMDBG_HISTORY="")
    )


@pytest.fixture(scope="module")
def written(s3):
    """A traced program's dump in a bucket: (logdir URL, the line of its faulty op)."""
    logdir = s3.bucket() + "/logs"
    done = run_child(s3, logdir, 3, TVMDBG_TEST_MODE="FULL_STATS")  # statistics: compare can read it
    assert done.returncode == 0, done.stderr[-3000:]
    line = int(done.stdout.split("LINE", 1)[1].split()[0])
    return logdir, line


def test_a_run_written_to_s3_is_whole_and_closed(written):
    logdir, line = written
    fs = storage.open_store(logdir).fs
    names = [key.rsplit("/", 1)[1] for key in fs.find(logdir)]
    assert "tvmdbg.run" in names and "tvmdbg.execution.00000000" in names, names
    assert not any(name.endswith(".dropped") for name in names)
    with DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        assert run.segmented and run.corruptions == [] and run.stream_errors == {}
        assert run.completeness().state == "complete"
        assert run.num_executions() == 3 and run.num_traces() > 3
        origin = first_origin(run)
        assert origin is not None and origin["execution_index"] == 0, origin


def test_cli_commands_read_an_s3_logdir(s3, written):
    logdir, line = written
    alerts = tvmdbg(s3, "alerts", logdir)
    assert alerts.returncode == 0, alerts.stderr
    assert "first origin" in alerts.stdout and f"models.py:{line}" in alerts.stdout, alerts.stdout
    check = tvmdbg(s3, "check", logdir)
    assert check.returncode == 1, (check.stdout, check.stderr)
    profile = tvmdbg(s3, "profile", logdir)
    assert profile.returncode == 0 and "subtract" in profile.stdout, profile.stdout + profile.stderr
    compare = tvmdbg(s3, "compare", logdir, logdir)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    missing = tvmdbg(s3, "alerts", s3.bucket() + "/nothing/here")
    assert missing.returncode == 2 and "nothing stored under this prefix" in missing.stderr, missing.stderr


def test_the_plugin_serves_an_s3_logdir(written):
    logdir, line = written
    server = Server(logdir)
    try:
        assert server.plugin.is_active()
        runs = server.json("runs")
        name = runs["runs"][0]["run"] if isinstance(runs["runs"][0], dict) else runs["runs"][0]
        alerts = server.json("alerts", run=name)
        assert alerts["first_origin_index"] is not None
        graphs = server.json("graphs/list", run=name)["graphs"]
        assert graphs
        files = server.json("source_files/list", run=name)["source_files"]
        index = next(i for i, f in enumerate(files) if f["file_path"].endswith("models.py"))
        source = server.json("source_files/file", run=name, index=index)
        assert "_fault_expr" in "\n".join(source["lines"])
        status = server.json("status")
        assert not status["problems"], status
    finally:
        server.plugin.close() if hasattr(server.plugin, "close") else None


def _write_call(writer: DebugEventsWriter, nan: bool = False) -> None:
    index = writer.allocate_execution_index()
    writer.write_graph_execution_traces([eventgen.trace(k, index, nan=5 if nan and k == 1 else 0) for k in range(3)])
    writer.write_execution(eventgen.execution(index, 3))


def _graph(writer: DebugEventsWriter) -> None:
    for op in eventgen.chain_ops(3):
        writer.write_graph_op_creation(op)


def test_a_run_read_while_it_is_written_is_live_until_its_run_end(s3, monkeypatch):
    monkeypatch.setenv("TVMDBG_SEAL_SECONDS", "0.2")
    logdir = s3.bucket() + "/live"
    options = DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    writer = DebugEventsWriter(logdir, options, flush_interval=0.1)
    reader = DebugDataReader(logdir)
    seen, states = [], set()

    def look() -> None:
        reader.update()
        run = reader.run()
        seen.append(run.num_executions())
        states.add(run.completeness().state)
        # Every call shown has its traces: the segments go up in the order readers rely on.
        assert run.num_traces() == 3 * run.num_executions()

    try:
        _graph(writer)
        for step in range(6):
            _write_call(writer, nan=step == 2)
            time.sleep(0.3)
            look()
        deadline = time.time() + 60  # a loaded machine: the uploads catch up, the run still live
        while seen[-1] < 6:
            assert time.time() < deadline, seen
            time.sleep(0.3)
            look()
        shown = Server(logdir).json("runs")["runs"][0]  # the tab's view of the growing run
        assert shown["live"] and shown["completeness"]["state"] == "live" and shown["num_alerts"] > 0, shown
    finally:
        writer.close()
    assert states == {"live"}, states
    assert seen == sorted(seen) and seen[0] < 6, seen
    reader.update()
    run = reader.run()
    assert run.completeness().state == "complete" and run.num_executions() == 6
    reader.close()


def test_a_writer_killed_mid_run_leaves_an_incomplete_dump(s3, tmp_path):
    logdir = s3.bucket() + "/killed"
    done = run_child(s3, logdir, 4, "--kill", TVMDBG_SEAL_SECONDS="0.5", TVMDBG_STAGING_DIR=str(tmp_path))
    assert "KILLING" in done.stdout and done.returncode == -9, done.stderr[-2000:]
    with DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        assert run.num_executions() == 4, run.num_executions()
        verdict = run.completeness()
        assert verdict.state == "incomplete" and verdict.ended == "not closed", verdict
    check = tvmdbg(s3, "check", logdir)
    assert check.returncode != 0 and "incomplete" in (check.stdout + check.stderr).lower()


def test_the_ring_drops_whole_segments_and_keeps_the_first_origin(s3, monkeypatch):
    monkeypatch.setenv("TVMDBG_SEGMENT_BYTES", "2000")
    logdir = s3.bucket() + "/ring"
    writer = DebugEventsWriter(logdir, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=8))
    _graph(writer)
    for step in range(80):
        _write_call(writer, nan=step in (5, 40))
        writer.flush()  # a seal check per call: many small segments
    writer.close()
    fs = storage.open_store(logdir).fs
    names = [key.rsplit("/", 1)[1] for key in fs.find(logdir)]
    markers = [n for n in names if n.endswith(".dropped")]
    assert any(n.startswith("tvmdbg.execution.") for n in markers), names
    assert not any(n.replace(".dropped", "") in names for n in markers)  # each dropped segment deleted
    with DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        assert run.corruptions == []
        verdict = run.completeness()
        assert verdict.state == "complete" and verdict.dropped.get("execution"), verdict
        kept = set(run.execution_digests()["index"].tolist())
        assert 5 in kept and 79 in kept and len(kept) < 40, sorted(kept)
        origin = first_origin(run)
        assert origin is not None and origin["execution_index"] == 5, origin
    assert writer.uploaded_bytes > 0


def test_a_mangled_url_is_never_created_as_a_local_directory(tmp_path, monkeypatch):
    import tvmdbg

    monkeypatch.chdir(tmp_path)
    for mangled in ("s3:/bucket/logs", "gs:/bucket/logs", os.path.normpath("s3://bucket/logs")):
        with pytest.raises(ValueError, match="looks like a URL"):
            tvmdbg.enable_dump_debug_info(mangled)
        with pytest.warns(RuntimeWarning, match="looks like a URL"):
            writer = DebugEventsWriter(mangled)
        assert writer.failed
        writer.close()
    with pytest.raises(ValueError, match="live control needs a local logdir"):
        tvmdbg.enable_dump_debug_info("s3://bucket/logs", live=True)
    assert list(tmp_path.iterdir()) == []
    assert storage.location_problem("s3:/bucket/logs").startswith("logdir 's3:/bucket/logs' looks like a URL")


def test_a_failing_store_never_stops_the_program_nor_reads_as_clean(monkeypatch, tmp_path):
    server = S3Server()
    monkeypatch.setenv("TVMDBG_STAGING_DIR", str(tmp_path))  # what is not uploaded stays there
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("TVMDBG_UPLOAD_TIMEOUT", "1")
    logdir = server.bucket() + "/failing"
    try:
        writer = DebugEventsWriter(logdir, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1))
        _graph(writer)
        _write_call(writer)
        writer.flush()
        assert writer._segments.uploader.drain(10)
    finally:
        server.stop()  # the store goes away mid-run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.monotonic()
        for step in range(3):
            _write_call(writer, nan=step == 1)  # the program goes on: nothing raises
        writer.close()
        assert time.monotonic() - start < 8  # close waits TVMDBG_UPLOAD_TIMEOUT, not the retries
    messages = " ".join(str(w.message) for w in caught)
    assert "did not finish" in messages and "incomplete" in messages, messages
    staged = writer._segments.staging
    assert os.path.isdir(staged) and os.listdir(staged)  # nothing lost: the rest stays staged

    # A store that cannot be reached at all: the writer says so and is off, the program goes on.
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    with pytest.warns(RuntimeWarning, match="could not create the dump directory"):
        gone = DebugEventsWriter(logdir + "2")
    assert gone.failed
    _write_call(gone)
    gone.close()


def test_an_fsspec_memory_filesystem_holds_a_run(monkeypatch):
    """Any fsspec URL: the same segments through fsspec's memory file system (the stand-in for
    gs:// where the GCS emulator cannot run)."""
    logdir = "memory://tvmdbg-tests/logs"
    writer = DebugEventsWriter(logdir, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1))
    _graph(writer)
    for step in range(4):
        _write_call(writer, nan=step == 1)
    writer.close()
    with DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        assert run.completeness().state == "complete" and run.num_executions() == 4
        assert first_origin(run)["execution_index"] == 1
    again = DebugEventsWriter(logdir, run_id=writer.run_id)  # the name is taken: exclusive create
    assert again.run_id == writer.run_id + "-1"
    again.close()


def test_a_gcs_emulator_holds_a_run():
    """gs:// through gcsfs against gcp-storage-emulator: written, read live and closed."""
    with gcs_emulator() as bucket:
        logdir = bucket + "/logs"
        writer = DebugEventsWriter(logdir, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1))
        _graph(writer)
        for step in range(3):
            _write_call(writer, nan=step == 2)
        writer.flush()
        assert writer._segments.uploader.drain(30)
        with DebugDataReader(logdir) as reader:
            reader.update()
            assert reader.run().completeness().state == "live"
            writer.close()
            assert not writer._segments.uploader.lost
            reader.update()
            run = reader.run()
            assert run.completeness().state == "complete" and run.num_executions() == 3
            assert first_origin(run)["execution_index"] == 2


def test_the_plugin_imports_without_s3fs():
    """s3fs, gcsfs and fsspec are imported only when a URL is opened."""
    code = (
        "import sys; import tvmdbg_tb.plugin.loader, tvmdbg_tb.plugin.plugin, tvmdbg_tb.events.reader; "
        "from tvmdbg_tb.events import writer; "
        "print(json.dumps(sorted(m for m in ('fsspec', 's3fs', 'gcsfs', 'boto3') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
