"""An incomplete dump is never reported as clean: real dumps written by real TVM programs,
then cut by a full disk, a kill, truncation, damage, FIFOs and directories in the way.

`tvmdbg check` exits 0 only for a complete, finite dump; 1 when a NaN/Inf was found; 2 when
it cannot tell, saying what is missing, where and why."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

from tvmdbg_tb.events import records  # noqa: E402
from tvmdbg_tb.events.reader import DebugDataReader  # noqa: E402

TESTS = Path(__file__).resolve().parent
TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]
FILES = ["metadata", "source_files", "stack_frames", "graphs", "execution", "graph_execution_traces"]

PROGRAM = textwrap.dedent(
    """\
    import os, resource, signal, sys, time
    sys.path.insert(0, {tests!r})
    limit = int(os.environ.get("FSIZE_LIMIT", "0"))
    if limit:  # a disk that fills up: writes past `limit` bytes per file fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    import numpy as np, tvm
    from tvm import relax
    import tvmdbg
    from models import chain
    executable, inputs = chain(20)
    tvmdbg.enable_dump_debug_info(sys.argv[1], tensor_debug_mode=os.environ.get("MODE", "FULL_HEALTH"),
                                  circular_buffer_size=-1)
    vm = relax.VirtualMachine(executable, tvm.cpu())
    x = tvm.runtime.tensor(inputs[0])
    total = 0.0
    for step in range(int(sys.argv[2])):
        total += float(vm["main"](x).numpy().sum())
        if os.environ.get("SIGNAL_AT") == str(step):
            print("ready", flush=True)
            time.sleep(60)
    print("result", total, flush=True)
    """
)


def run_program(logdir: Path, calls: int, **env) -> subprocess.CompletedProcess:
    script = logdir.parent / "program.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(PROGRAM.format(tests=str(TESTS)))
    return subprocess.run(
        [sys.executable, str(script), str(logdir), str(calls)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **{k: str(v) for k, v in env.items()}},
    )


def check(logdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*TVMDBG, "check", str(logdir)], capture_output=True, text=True, timeout=120)


def run_dir(logdir: Path) -> Path:
    (run,) = [p for p in logdir.iterdir() if p.is_dir()]
    return run


@pytest.fixture(scope="module")
def clean_dump(tmp_path_factory) -> Path:
    logdir = tmp_path_factory.mktemp("clean") / "logdir"
    done = run_program(logdir, 6)
    assert done.returncode == 0, done.stderr
    return logdir


def test_a_closed_dump_is_complete_and_checks_clean(clean_dump):
    reader = DebugDataReader(clean_dump)
    reader.update()
    state = reader.run().completeness()
    assert state.complete and state.ended == "closed" and state.writer_alive is False, state
    result = check(clean_dump)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all finite (120 kernel outputs in 6 executions" in result.stdout


def test_a_full_disk_is_reported_and_the_program_runs_on(tmp_path):
    """Point 1: the traces file hits the limit partway; the program ends normally with one
    warning; check says it cannot tell, from which execution data is missing, and why."""
    logdir = tmp_path / "logdir"
    full = run_program(logdir, 200, FSIZE_LIMIT=60_000)
    reference = run_program(tmp_path / "reference" / "logdir", 200)
    assert full.returncode == 0, full.stderr
    assert full.stdout == reference.stdout  # the same results
    assert full.stderr.count("tvmdbg:") == 1, full.stderr
    result = check(logdir)
    assert result.returncode == 2, result.stdout + result.stderr
    message = result.stderr
    assert "cannot tell" in message and "dumping was aborted" in message
    assert "File too large" in message  # why
    assert "records from execution" in message and "tvmdbg.graph_execution_traces" in message  # where
    state = _completeness(logdir)
    (aborted,) = [p for p in state.problems if p.kind == "aborted"]
    assert aborted.executions[0] >= 0 and aborted.executions[1] is None


def test_a_full_tmpfs_is_reported_even_without_a_closing_record(tmp_path):
    """Point 1 on a real 1 MB file system: every file shares the space, so even the record
    saying dumping was aborted may not fit; the dump is still never called clean."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (the RLIMIT_FSIZE test covers a full disk)")
    try:
        logdir = mount / "logdir"
        full = run_program(logdir, 1500)
        assert full.returncode == 0, full.stderr
        assert full.stderr.count("tvmdbg:") == 1 and "No space left on device" in full.stderr, full.stderr
        result = check(logdir)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "cannot tell" in result.stderr
        assert "dumping was aborted" in result.stderr or "never closed" in result.stderr
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_killed_writer_is_reported(tmp_path):
    """Point 7: a program killed mid-run leaves no closing record: never 'all finite'."""
    logdir = tmp_path / "logdir"
    script = tmp_path / "program.py"
    script.write_text(PROGRAM.format(tests=str(TESTS)))
    child = subprocess.Popen(
        [sys.executable, str(script), str(logdir), "50"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SIGNAL_AT": "20"},
    )
    assert child.stdout.readline().strip() == "ready"
    time.sleep(1.5)  # a timed flush
    live = check(logdir)  # the writer runs: what is there is not the whole story yet
    assert live.returncode == 2 and "the dump is live: the writer is still running" in live.stderr, live.stderr
    child.send_signal(signal.SIGKILL)
    child.wait()
    result = check(logdir)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "never closed" in result.stderr and f"pid {child.pid}" in result.stderr


@pytest.mark.parametrize("name", FILES)
def test_truncation_at_many_offsets_is_never_clean(clean_dump, tmp_path, name):
    """Point 2: every file cut at many offsets (inside records and at record boundaries)."""
    source = run_dir(clean_dump) / f"tvmdbg.{name}"
    data = source.read_bytes()
    boundaries = [offset for offset, _, _ in _records(data)][1:]
    offsets = sorted({*boundaries[-3:], *range(1, len(data), max(1, len(data) // 7)), len(data) - 1})
    for offset in offsets:
        logdir = tmp_path / f"cut{offset}" / "logdir"
        shutil.copytree(clean_dump, logdir)
        (run_dir(logdir) / f"tvmdbg.{name}").write_bytes(data[:offset])
        result = check(logdir)
        assert result.returncode == 2, (name, offset, result.stdout, result.stderr)
        assert "cannot" in result.stderr, (name, offset, result.stderr)


def test_damaged_metadata_is_named_as_such(clean_dump, tmp_path):
    """Point 3: not 'written in mode TENSOR_DEBUG_MODE_UNSPECIFIED'."""
    logdir = tmp_path / "logdir"
    shutil.copytree(clean_dump, logdir)
    path = run_dir(logdir) / "tvmdbg.metadata"
    data = bytearray(path.read_bytes())
    data[20] ^= 0xFF
    path.write_bytes(bytes(data))
    result = check(logdir)
    assert result.returncode == 2
    assert "metadata record is damaged" in result.stderr and "UNSPECIFIED" not in result.stderr
    path.write_bytes(b"")
    result = check(logdir)
    assert result.returncode == 2 and "metadata record is missing" in result.stderr


def test_a_fifo_or_a_directory_in_a_run_is_reported_and_the_rest_read(clean_dump, tmp_path):
    """Points 10 and 11: never opened (a FIFO would block), reported, the other streams read."""
    for kind in ("fifo", "directory"):
        logdir = tmp_path / kind / "logdir"
        shutil.copytree(clean_dump, logdir)
        path = run_dir(logdir) / "tvmdbg.graphs"
        path.unlink()
        os.mkfifo(path) if kind == "fifo" else path.mkdir()
        result = check(logdir)  # returns (timeout=120 otherwise)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "graphs stream unreadable" in result.stderr and "not a regular file" in result.stderr
        reader = DebugDataReader(logdir)
        reader.update()
        run = reader.run()
        assert run.num_traces() == 120 and run.num_executions() == 6
        analyze = subprocess.run(
            [*TVMDBG, "analyze", str(logdir), "-x", "lt -l 2"], capture_output=True, text=True, timeout=120
        )
        assert analyze.returncode == 0 and "Traceback" not in analyze.stderr, analyze.stderr
        assert "unreadable" in analyze.stderr


def test_a_zero_filled_tail_is_scanned_once(clean_dump, tmp_path, monkeypatch):
    """Point 12: what a power loss leaves; later polls do not rescan it."""
    from tvmdbg_tb.events import vectorized

    logdir = tmp_path / "logdir"
    shutil.copytree(clean_dump, logdir)
    with open(run_dir(logdir) / "tvmdbg.graph_execution_traces", "ab") as f:
        f.write(bytes(4 << 20))
    reader = DebugDataReader(logdir)
    reader.update()
    calls = []
    real = vectorized.scan
    monkeypatch.setattr(vectorized, "scan", lambda *a, **k: calls.append(1) or real(*a, **k))
    for _ in range(3):
        reader.update()
    assert calls == []
    run = reader.run()
    assert run.num_traces() == 120
    assert [p.kind for p in run.completeness().problems] == ["damaged"] or any(
        p.kind == "truncated" for p in run.completeness().problems
    )


def test_a_damaged_record_larger_than_a_read_chunk_is_skipped_and_reported(tmp_path):
    """Point 8: FULL_TENSOR traces of 2M elements (8 MB records): a bad data CRC and a bad
    length are both reported, and the records after them still read."""
    logdir = tmp_path / "logdir"
    script = tmp_path / "big.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import sys
            sys.path.insert(0, {str(TESTS)!r})
            import tvm
            from tvm import relax
            import tvmdbg
            from models import big_elementwise
            executable, inputs = big_elementwise(1 << 21)
            tvmdbg.enable_dump_debug_info(sys.argv[1], tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1)
            vm = relax.VirtualMachine(executable, tvm.cpu())
            for _ in range(4):
                vm["main"](tvm.runtime.tensor(inputs[0]))
            """
        )
    )
    done = subprocess.run([sys.executable, str(script), str(logdir)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    path = run_dir(logdir) / "tvmdbg.graph_execution_traces"
    data = bytearray(path.read_bytes())
    starts = [offset for offset, _, _ in _records(bytes(data))]
    assert len(starts) >= 4 and starts[1] - starts[0] > 4 << 20
    data[starts[0] + 1000] ^= 0xFF  # the data of the first record
    data[starts[2] + 3] ^= 0xFF  # the length of the third
    path.write_bytes(bytes(data))
    reader = DebugDataReader(logdir)
    reader.update()
    run = reader.run()
    found = sorted((c.offset, c.reason) for c in run.corruptions)
    assert found == [(starts[0], "bad data CRC"), (starts[2], "bad length CRC")], found
    assert run.num_traces() == len(starts) - 2
    result = check(logdir)
    assert result.returncode == 2 and f"at byte {starts[2]}" in result.stderr, result.stderr


def _records(data: bytes):
    return [item for item in records.scan(data, 0, "x") if not isinstance(item, records.Corruption)]


def _completeness(logdir: Path):
    reader = DebugDataReader(logdir)
    reader.update()
    return reader.run().completeness()


def test_an_origin_next_to_a_damaged_record_is_marked_uncertain(tmp_path):
    """Point 9: one damaged byte in the true origin's trace; the op named origin instead
    (a later op) says it is uncertain, in the alerts JSON, `tvmdbg alerts` and `tvmdbg check`."""
    import json

    logdir = tmp_path / "logdir"
    script = tmp_path / "planted.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import sys
            sys.path.insert(0, {str(TESTS)!r})
            import tvmdbg
            from models import blockbuilder_planted
            tvmdbg.enable_dump_debug_info(sys.argv[1], tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
            model = blockbuilder_planted("log", fuse=False)
            for _ in range(3):
                model.run()
            """
        )
    )
    subprocess.run([sys.executable, str(script), str(logdir)], check=True, timeout=300, capture_output=True)
    reader = DebugDataReader(logdir)
    reader.update()
    run = reader.run()
    from tvmdbg_tb import analysis

    before = analysis.alerts(run)
    origin = before["alerts"][before["first_origin_index"]]
    assert origin["original_ops"][0]["op_type"] == "relax.log" and not origin["origin_uncertain"]
    path = run_dir(logdir) / "tvmdbg.graph_execution_traces"
    data = bytearray(path.read_bytes())
    offset = int(run.trace_digests()["offset"][origin["trace_position"]])
    data[offset + 40] ^= 0xFF
    path.write_bytes(bytes(data))
    alerts = subprocess.run([*TVMDBG, "alerts", str(logdir), "--json"], capture_output=True, text=True, timeout=120)
    claimed = [a for a in json.loads(alerts.stdout)["alerts"] if a["origin"]]
    same = [a for a in claimed if a["execution_index"] == origin["execution_index"]]
    assert same and same[0]["op_name"] != origin["op_name"]  # a later op is claimed: the wrong one
    assert all(a["origin_uncertain"] for a in same)
    text = subprocess.run([*TVMDBG, "alerts", str(logdir)], capture_output=True, text=True, timeout=120).stdout
    assert "This origin is uncertain" in text and "yes?" in text
    result = check(logdir)
    assert result.returncode == 1 and "This origin is uncertain" in result.stdout, result.stdout
    assert "The dump is incomplete: damaged record" in result.stdout


@pytest.mark.slow
def test_the_origin_flags_are_the_same_in_every_health_mode(tmp_path):
    """Point 6: a NaN made by log in call 1, then a NaN parameter in call 2 that every op
    passes on: only call 1's log is an origin, whatever the mode."""
    import json

    script = tmp_path / "modes.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import sys
            sys.path.insert(0, {str(TESTS)!r})
            import numpy as np, tvm
            from tvm import relax
            import tvmdbg
            from models import blockbuilder_planted
            tvmdbg.enable_dump_debug_info(sys.argv[1], tensor_debug_mode=sys.argv[2], circular_buffer_size=-1)
            model = blockbuilder_planted("log", fuse=False)  # compiled after enable: source-mapped
            vm = relax.VirtualMachine(model.executable, tvm.cpu())
            x, y, w = model.inputs
            vm["main"](*(tvm.runtime.tensor(a) for a in (x, np.zeros_like(y), w)))  # finite
            vm["main"](*(tvm.runtime.tensor(a) for a in model.inputs))  # log makes the NaN
            bad_x = x.copy(); bad_x[0, 0] = np.nan
            vm["main"](*(tvm.runtime.tensor(a) for a in (bad_x, np.zeros_like(y), w)))  # a NaN parameter
            """
        )
    )
    found = {}
    for mode in ("CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH", "FULL_TENSOR"):
        logdir = tmp_path / mode
        subprocess.run([sys.executable, str(script), str(logdir), mode], check=True, timeout=300, capture_output=True)
        out = subprocess.run([*TVMDBG, "alerts", str(logdir), "--json"], capture_output=True, text=True, timeout=120)
        alerts = json.loads(out.stdout)["alerts"]
        found[mode] = sorted((a["execution_index"], a["op_name"], a["origin"]) for a in alerts)
    assert [(e, o) for e, _, o in found["FULL_HEALTH"] if o] == [(1, True)]
    for mode, rows in found.items():
        assert rows == found["FULL_HEALTH"], mode

    # FULL_TENSOR pills show every count FULL_HEALTH records, for kernel outputs and inputs.
    from tvmdbg_tb import analysis

    keys = ("nan", "neg_inf", "pos_inf", "negative", "zero", "positive", "size")
    summaries = {}
    for mode in ("FULL_HEALTH", "FULL_TENSOR"):
        reader = DebugDataReader(tmp_path / mode)
        reader.update()
        run = reader.run()
        traces = analysis.trace_data(run, np.arange(run.num_traces()))
        inputs = [e["inputs"] for e in analysis.execution_data(run, 0, run.num_executions())]
        summaries[mode] = (
            [{k: t["summary"].get(k) for k in keys} for t in traces],
            [[{k: s["summary"].get(k) for k in keys} for s in row] for row in inputs],
        )
    assert summaries["FULL_TENSOR"] == summaries["FULL_HEALTH"]
    assert any(t["negative"] and t["zero"] for t in summaries["FULL_HEALTH"][0])


def test_check_names_the_function_and_says_why_there_is_no_line(tmp_path):
    """Point 7: a model compiled before enable has no source mapping: say so, not 'created at -.'"""
    script = tmp_path / "early.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import sys
            sys.path.insert(0, {str(TESTS)!r})
            import tvmdbg
            from models import blockbuilder_planted
            model = blockbuilder_planted("log", fuse=False)  # compiled before enable
            tvmdbg.enable_dump_debug_info(sys.argv[1], tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
            model.run()
            """
        )
    )
    logdir = tmp_path / "logdir"
    subprocess.run([sys.executable, str(script), str(logdir)], check=True, timeout=300, capture_output=True)
    result = check(logdir)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "in execution 0 (main)" in result.stdout
    assert "created at -" not in result.stdout and "compiled before tvmdbg was enabled" in result.stdout
    text = subprocess.run([*TVMDBG, "alerts", str(logdir)], capture_output=True, text=True, timeout=120).stdout
    assert "compiled before tvmdbg was enabled" in text


def test_a_tuple_item_shows_its_own_health_and_full_tensor_tuples_count(tmp_path):
    """Point 6: pair[1] of a tuple parameter shows pair[1]'s health (not the tuple's total),
    and in FULL_TENSOR a NaN coming in through a tuple is not blamed on the kernel reading it."""
    script = tmp_path / "tuple.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import sys
            sys.path.insert(0, {str(TESTS)!r})
            import numpy as np, tvm
            from tvm import relax
            import tvmdbg
            from models import compile_module
            from test_tuple_inputs import _tuple_model
            tvmdbg.enable_dump_debug_info(sys.argv[1], tensor_debug_mode=sys.argv[2], circular_buffer_size=-1)
            vm = relax.VirtualMachine(compile_module(_tuple_model(), False), tvm.cpu())
            ones = np.ones(4, "float32")
            nan_in = np.array([np.nan, np.nan, np.nan, 1], "float32")
            t = tvm.runtime.tensor
            vm["main"]((t(nan_in), t(-ones)), t(ones))  # NaN comes in through pair[0]
            vm["main"]((t(ones), t(ones)), t(-ones))  # NaN born in log
            """
        )
    )
    from tvmdbg_tb import analysis

    origins = {}
    for mode in ("FULL_HEALTH", "FULL_TENSOR", "CONCISE_HEALTH"):
        logdir = tmp_path / mode
        subprocess.run([sys.executable, str(script), str(logdir), mode], check=True, timeout=300, capture_output=True)
        reader = DebugDataReader(logdir)
        reader.update()
        run = reader.run()
        (add,) = [op for op in run.ops() if [i.name for i in op.inputs] == ["pair[0]", "pair[1]"]]
        info = analysis.op_info(run, add)
        assert [(i["param_index"], i["tuple_item"]) for i in info["inputs"]] == [(0, 0), (0, 1)]
        pair = analysis.execution_data(run, 0, 1)[0]["inputs"][0]
        first, second = pair["items"]
        assert first["summary"]["nan"] == 3 and second["summary"]["nan"] == 0, mode
        if mode != "CONCISE_HEALTH":
            assert second["summary"]["negative"] == 4 and first["summary"]["positive"] == 1, mode
        answer = analysis.alerts(run)
        origins[mode] = sorted((a["execution_index"], a["op_name"]) for a in answer["alerts"] if a["origin"])
    assert origins["FULL_TENSOR"] == origins["FULL_HEALTH"] == origins["CONCISE_HEALTH"]
    assert [e for e, _ in origins["FULL_HEALTH"]] == [1]


def test_a_writer_is_alive_by_its_process_start_time_not_by_proc_inode_times():
    """A long-running writer stays 'live'; a pid reused by a later process does not count."""
    from tvmdbg_tb.events import completeness

    started = completeness._process_start_time(os.getpid())
    if started is None:
        pytest.skip("no /proc here")
    assert 0 < time.time() - started < 10 * 24 * 3600  # this process started in the past
    assert completeness._process_alive(os.getpid(), since=time.time() + 3600)  # metadata written long after start
    assert not completeness._process_alive(os.getpid(), since=started - 60)  # started after the metadata: reused
