"""The first calls that went non-finite survive the circular buffer, however many calls
follow, and `tvmdbg check` exits 0 after the ring dropped calls only when their writer
counted none that held a NaN or an Inf: real programs, the default ring, every tracing path,
a model nobody here wrote, and a dump written before the writer counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")

import dump_records  # noqa: E402
import trace_paths  # noqa: E402

from tvmdbg_tb import analysis  # noqa: E402
from tvmdbg_tb.cli import reports  # noqa: E402
from tvmdbg_tb.cli.session import OpNames  # noqa: E402
from tvmdbg_tb.events import layout  # noqa: E402
from tvmdbg_tb.events.reader import DebugDataReader  # noqa: E402

TESTS = Path(__file__).resolve().parent
TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]

# The planted model of tests/models.py: log(x - y) is finite for y = x - 0.5 and makes NaN
# and -Inf for the planted y (lv1, relax.log, created at models.py's log line).
PROGRAM = textwrap.dedent(
    """\
    import os, sys
    sys.path.insert(0, {tests!r})
    import tvm
    from tvm import relax
    import tvmdbg
    from models import blockbuilder_planted, X, Y, W
    options = {{}} if os.environ.get("RING") is None else {{"circular_buffer_size": int(os.environ["RING"])}}
    if os.environ.get("RING_BYTES") is not None:
        options["circular_buffer_bytes"] = int(os.environ["RING_BYTES"])
    tvmdbg.enable_dump_debug_info(sys.argv[1], tensor_debug_mode=os.environ.get("MODE", "FULL_HEALTH"), **options)
    model = blockbuilder_planted("log", fuse=False)
    main = relax.VirtualMachine(model.executable, tvm.cpu())["main"]
    x, w = tvm.runtime.tensor(X), tvm.runtime.tensor(W)
    finite, planted = tvm.runtime.tensor(X - 0.5), tvm.runtime.tensor(Y)
    nan_at = int(os.environ.get("NAN_AT", "-1"))
    for call in range(int(sys.argv[2])):
        main(x, planted if call == nan_at else finite, w)
    print("done", flush=True)
    """
)


def run_program(logdir: Path, calls: int, **env) -> None:
    script = logdir.parent / "program.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(PROGRAM.format(tests=str(TESTS)))
    env = {**os.environ, **{k: str(v) for k, v in env.items()}}
    done = subprocess.run(
        [sys.executable, str(script), str(logdir), str(calls)], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0 and "done" in done.stdout, done.stderr


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*TVMDBG, *map(str, args)], capture_output=True, text=True, timeout=300)


def read_run(logdir: Path):
    reader = DebugDataReader(logdir)
    reader.update()
    return reader.run()


def _alerts_route(logdir: Path, run: str) -> dict:
    """The plugin's alerts route, through TensorBoard's WSGI app."""
    from tensorboard.backend import application
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client
    from werkzeug.wrappers import Response

    from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin

    plugin = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(logdir)), start_reader=False)
    try:
        plugin.poll()
        client = Client(application.TensorBoardWSGI([plugin]), Response)
        response = client.get("/data/plugin/tvmdbg/alerts", query_string={"run": run})
        assert response.status_code == 200, response.get_data(as_text=True)
        return json.loads(response.get_data(as_text=True))
    finally:
        plugin.stop()


def first_origin(run) -> dict:
    alerts = analysis.alerts(run)
    assert alerts["first_origin_index"] is not None, alerts
    return alerts["alerts"][alerts["first_origin_index"]]


def test_a_nan_early_in_a_long_run_survives_the_default_ring(tmp_path):
    """The issue's run: a NaN at call 500, then 100,000 finite calls, the default ring of 1000
    (a user's CI): check exits 1 naming the origin; alerts show it; the closing record counts
    the non-finite call and what the ring dropped."""
    logdir = tmp_path / "logdir"
    calls = 100_501
    run_program(logdir, calls, NAN_AT=500)
    result = cli("check", logdir)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "The first origin is op lv1 (kernel tir_log; Relax ops relax.log lv1" in out, out
    # The step survives the ring's drops (Execution.call_number is written at record time).
    assert "in execution 500 (main, call 501)" in out and "models.py" in out
    assert f"The circular buffer dropped {calls - 1000 - 1} calls" in out
    alerts = json.loads(cli("alerts", logdir, "--json").stdout)
    origin = alerts["alerts"][alerts["first_origin_index"]]
    assert (origin["op_name"], origin["execution_index"], origin["origin_uncertain"]) == ("lv1", 500, False)
    assert (origin["function_name"], origin["call"]) == ("main", 501)
    assert alerts["start_dropped"] is False
    run = read_run(logdir)
    route = _alerts_route(logdir, run.name)  # what the dashboard reads
    origin = route["alerts"][route["first_origin_index"]]
    assert (origin["op_name"], origin["execution_index"], origin["origin_uncertain"]) == ("lv1", 500, False)
    state = run.completeness()
    assert state.complete and not state.notes, state.summary()
    end = run.run_end
    assert (end.nonfinite_executions, end.unchecked_executions) == (1, 0)
    assert end.dropped_executions == calls - 1000 - 1 == state.dropped[layout.EXECUTION]
    assert list(run.execution_digests()["index"]) == [500, *range(calls - 1000, calls)]


@pytest.mark.parametrize("ring", [1000, -1], ids=["with a count", "bytes only"])
def test_the_kept_nan_call_comes_on_top_of_the_byte_bound(tmp_path, ring):
    """circular_buffer_bytes bounds the newest records of each ring file; the first calls that
    held a NaN or an Inf are kept whole on top of it (as on top of circular_buffer_size). A
    bound of a few calls keeps the origin's call, and each file holds the newest records
    within the bound, the kept call and its drop records, nothing more."""
    logdir = tmp_path / "logdir"
    bound = 4096
    run_program(logdir, 300, NAN_AT=50, RING=ring, RING_BYTES=bound)
    result = cli("check", logdir)
    assert result.returncode == 1 and "in execution 50 (main, call 51)" in result.stdout, result.stdout + result.stderr
    run = read_run(logdir)
    assert first_origin(run)["execution_index"] == 50
    assert run.completeness().complete, run.completeness().summary()
    for stream, rows, key in (
        (layout.EXECUTION, run.execution_digests(), "index"),
        (layout.GRAPH_EXECUTION_TRACES, run.trace_digests(), "execution_index"),
    ):
        path = os.path.join(run.path, layout.file_name(stream))
        data = Path(path).read_bytes()
        newest_from = run.ring_drops(stream)[-1][0]  # the rows after the last drop record
        kept, newest = rows[:newest_from], rows[newest_from:]
        assert set(kept[key].tolist()) == {50} and newest[key].min() > 50 and newest[key].max() == 299
        sizes = {int(o): 16 + int.from_bytes(data[o : o + 8], "little") for o in rows["offset"].tolist()}
        assert len(data) - int(newest["offset"][0]) <= bound  # the newest records: within the bound
        head = int(newest["offset"][0])  # the kept call and the drop records: outside it
        drop_bytes = head - sum(sizes[int(o)] for o in kept["offset"].tolist())
        assert 0 < drop_bytes <= 2 * 64, drop_bytes  # a drop record before the kept call, one after


def test_a_finite_run_through_the_ring_is_clean_by_its_writers_count(tmp_path):
    logdir = tmp_path / "logdir"
    run_program(logdir, 3000, RING=100)
    result = cli("check", logdir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all finite (100 kernel outputs in 100 executions" in result.stdout  # each file keeps 100 records
    assert "the circular buffer dropped 2900 calls and 17900 kernel outputs, none of which held NaN or Inf" in (
        result.stdout
    )


def test_an_older_dump_reads_but_its_dropped_start_is_never_called_clean(tmp_path):
    """A dump written before records carried their run and place reads as before, says once
    that it could not be checked record by record, and, with its start dropped by the ring,
    checks 2 (nothing says what the dropped calls held) instead of 0."""
    logdir = tmp_path / "logdir"
    run_program(logdir, 300, RING=50)
    (run_dir,) = [p for p in logdir.iterdir() if p.is_dir()]
    dump_records.strip_identity(run_dir)
    run = read_run(logdir)
    assert run.keyed is False and run.num_executions() == 50 and not run.corruptions
    state = run.completeness()
    assert state.complete and len(state.notes) == 1 and "no run key" in state.notes[0]
    result = cli("check", logdir)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the circular buffer dropped the oldest calls" in result.stderr
    alerts = json.loads(cli("alerts", logdir, "--json").stdout)
    assert alerts["start_dropped"] is True


@pytest.mark.parametrize(
    "path, mode",
    [(path, "FULL_HEALTH") for path in trace_paths.PATHS]
    + [("compiled", "CURT_HEALTH"), ("compiled", "FULL_STATS"), ("vm_instrument", "FULL_TENSOR")],
)
def test_every_tracing_path_and_health_mode_keeps_the_first_nan_calls(tmp_path, path, mode):
    """Calls 5, 6, 7 and 8 make NaN (the ring keeps the first three whole), 200 finite calls
    follow through a ring of 20 records: the origin is call 5's log, and check says so."""
    import tvm
    from models import W, X, Y, blockbuilder_planted
    from tvm import relax

    import tvmdbg

    logdir = tmp_path / "logdir"
    with trace_paths.using(path):
        tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode=mode, circular_buffer_size=20)
        try:
            model = blockbuilder_planted("log", fuse=False)
            main = relax.VirtualMachine(model.executable, tvm.cpu())["main"]
            x, w = tvm.runtime.tensor(X), tvm.runtime.tensor(W)
            finite, planted = tvm.runtime.tensor(X - 0.5), tvm.runtime.tensor(Y)
            for call in range(209):
                main(x, planted if 5 <= call <= 8 else finite, w)
        finally:
            tvmdbg.disable_dump_debug_info()
    run = read_run(logdir)
    state = run.completeness()
    assert state.complete and state.dropped, state.summary()
    end = run.run_end
    assert (end.nonfinite_executions, end.unchecked_executions) == (4, 0)
    kept = sorted({int(e) for e in run.trace_digests()["execution_index"] if e < 100})
    assert kept == [5, 6, 7], kept  # the first three NaN calls, whole; the fourth went with the ring
    origin = first_origin(run)
    assert (origin["op_name"], origin["execution_index"], origin["origin_uncertain"]) == ("lv1", 5, False)
    code, text = reports.check(run, OpNames(run), str(logdir))
    assert code == reports.NONFINITE_FOUND and "The first origin is op lv1" in text, text


@pytest.mark.slow  # builds transformers' ResNet (once per test process)
def test_a_model_nobody_here_wrote_keeps_its_nan_call_through_the_ring(tmp_path):
    """transformers' ResNet (torch.export, fused; 18 kernels a call): one call with a NaN pixel
    among 40, a ring of 10 records: that call's records stay whole, its first alert is a
    kernel of that call, and check exits 1 on it."""
    real_models = pytest.importorskip("real_models")
    import tvmdbg

    built = real_models.build("resnet", fuse=True)
    poisoned = [a.copy() for a in built.inputs]
    poisoned[0].flat[7] = np.nan
    import tvm
    from tvm import relax

    logdir = tmp_path / "logdir"
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=10)
    try:
        vm = relax.VirtualMachine(built.executable, tvm.cpu())
        clean = [tvm.runtime.tensor(a) for a in built.inputs]
        bad = [tvm.runtime.tensor(a) for a in poisoned]
        for call in range(40):
            vm["main"](*(bad if call == 3 else clean))
    finally:
        tvmdbg.disable_dump_debug_info()
    run = read_run(logdir)
    state = run.completeness()
    assert state.complete and state.dropped.get(layout.GRAPH_EXECUTION_TRACES), state.summary()
    traces = run.trace_digests()
    in_call = traces["execution_index"] == 3
    claimed = int(run.execution_digests()[run.execution_digests()["index"] == 3]["num_traces"][0])
    assert int(np.count_nonzero(in_call)) == claimed > 10  # kept whole, more than the ring holds
    alerts = analysis.alerts(run)
    assert alerts["num_alerts"] and alerts["alerts"][0]["execution_index"] == 3
    code, text = reports.check(run, OpNames(run), str(logdir))
    assert code == reports.NONFINITE_FOUND and "in execution 3" in text, text


def test_a_call_whose_only_nan_is_its_result_is_kept_too(tmp_path):
    """op_regex traces no kernel: a NaN shows only in the function's output summary (which the
    compiled path counts from its output rows). That call is kept whole, the writer counts it,
    and check exits 1 on it."""
    import tvm
    from models import chain
    from tvm import relax

    import tvmdbg

    logdir = tmp_path / "logdir"
    with trace_paths.using("compiled"):
        tvmdbg.enable_dump_debug_info(
            str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=20, op_regex="^no_such_kernel$"
        )
        try:
            executable, (values,) = chain(4)
            main = relax.VirtualMachine(executable, tvm.cpu())["main"]
            poisoned = values.copy()
            poisoned[3] = np.nan
            finite, planted = tvm.runtime.tensor(values), tvm.runtime.tensor(poisoned)
            for call in range(200):
                main(planted if call == 5 else finite)
        finally:
            tvmdbg.disable_dump_debug_info()
    run = read_run(logdir)
    assert run.num_traces() == 0 and run.completeness().complete
    assert (run.run_end.nonfinite_executions, run.run_end.dropped_executions) == (1, 179)
    assert list(run.execution_digests()["index"][:2]) == [5, 180]
    code, text = reports.check(run, OpNames(run), str(logdir))
    assert code == reports.NONFINITE_FOUND and "1 function calls returned non-finite values" in text, text
