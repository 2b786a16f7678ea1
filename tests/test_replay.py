"""Op-level truth inside fused kernels (tvmdbg_tb.replay), on real compiled models.

- Automatic replay: the first kernel of a run whose output goes non-finite is re-run op by op
  (fast path: a re-run of the VM call; VM-instrument path: inputs copied at the kernel), and
  the alert lands on the inner op that made the value, "confirmed": "replay".
- Deep mode (trace_fused_ops=True): NaNs made and masked inside a fused kernel are recorded and
  alerted at their own op and line; check-numerics raises there.
- Front ends: the `replays` and `alerts` routes, `tvmdbg check`/`alerts`, the reader API.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import models_masked as mm
import numpy as np
import pytest
import tvm
from models import compile_module
from tvm import relax

import tvmdbg
from tvmdbg_tb.tracing import fast_tracer
from tvmdbg_tb.tracing.check_numerics import CheckNumericsError
from tvmdbg_tb.tracing.state import Paths, TracingState, activated

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "debug_digits.py"
MASKED_FILE = str(Path(mm.__file__).resolve())
TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli.main import main; sys.exit(main())"]


def _example_line(fragment: str) -> int:
    hits = [n for n, line in enumerate(EXAMPLE.read_text().splitlines(), 1) if fragment in line]
    assert len(hits) == 1
    return hits[0]


def _run(logdir) -> tvmdbg.DebugDataReader:
    reader = tvmdbg.DebugDataReader(logdir)
    reader.update()
    return reader


def _first_origin(run) -> dict:
    from tvmdbg_tb import analysis

    page = analysis.alerts(run)
    assert page["first_origin_index"] is not None, page
    return page["alerts"][page["first_origin_index"]]


def _run_model(logdir, module, name: str, fuse: bool = True, calls: int = 1, **options):
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH", **options)
    try:
        if callable(module):  # a BlockBuilder model: built while tvmdbg records emit sites
            module = module()[0]
        vm = relax.VirtualMachine(compile_module(module, fuse=fuse), tvm.cpu())
        for _ in range(calls):
            out = vm["main"](*[tvm.runtime.tensor(a) for a in mm.inputs(name)])
    finally:
        tvmdbg.disable_dump_debug_info()
    return out.numpy()


# -- the demo ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("demo")
    cmd = [sys.executable, str(EXAMPLE), "--debug", "--dump_dir", str(logdir), "--steps", "5"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env={**os.environ})
    assert done.returncode == 0, done.stderr
    reader = _run(logdir)
    return logdir, reader.run()


def test_demo_first_origin_is_the_log_inside_the_fused_kernel_confirmed_by_replay(demo_run):
    _, run = demo_run
    alert = _first_origin(run)
    assert alert["kernel"] == "fused_tir_log_multiply_sum"
    assert alert["confirmed"] == "replay"
    assert alert["inner_op"]["op_type"] == "relax.log"
    assert alert["location"]["line"] == _example_line("relax.op.log(")
    assert Path(alert["location"]["file_path"]).resolve() == EXAMPLE
    # The other alerts of the run are not replayed: they say the location is a heuristic.
    others = [a for a in _all_alerts(run) if a is not alert and a["trace_index"] != alert["trace_index"]]
    assert others and all(a["confirmed"] == "heuristic" and a["inner_op"] is None for a in others)


def _all_alerts(run) -> list[dict]:
    from tvmdbg_tb import analysis

    return analysis.alerts(run)["alerts"]


def test_demo_replay_record_reachable_from_the_kernel_trace(demo_run):
    _, run = demo_run
    alert = _first_origin(run)
    trace = run.trace(alert["trace_position"])
    record = run.replay_of(trace.execution_index, trace.op_id)
    assert record is not None and record.trigger == "auto" and not record.error
    assert record.matches_kernel
    assert [o.op_type for o in record.ops] == ["relax.log", "relax.multiply", "relax.sum"]
    log = record.ops[0]
    assert log.origin and record.first_nonfinite_op == 0
    neg_inf = log.outputs[0].debug_values[4]
    assert neg_inf > 0  # log(0) = -inf: the softmax underflowed
    assert all(s.debug_values[4] + s.debug_values[5] + s.debug_values[6] == 0 for s in record.inputs)
    assert log.input_refs == [-1]  # the log reads the kernel's first input
    assert len(run.replays()) == 1  # once per run


def test_demo_check_and_alerts_cli_name_the_inner_op(demo_run):
    logdir, _ = demo_run
    line = _example_line("relax.op.log(")
    done = subprocess.run([*TVMDBG, "check", str(logdir)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert (
        f"it was created at {EXAMPLE}:{line} (__call__) (inside the fused kernel, relax.log lv1 made it: "
        in done.stdout
    )
    assert "confirmed by replay)" in done.stdout
    done = subprocess.run(
        [*TVMDBG, "alerts", str(logdir), "--json", "-l", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    first = json.loads(done.stdout)["alerts"][0]
    assert first["confirmed"] == "replay" and first["inner_op"]["var_name"] == "lv1"


# -- automatic replay on both tracing paths ---------------------------------------------------


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "vm_instrument"])
def test_leaked_log_alert_lands_on_the_log_not_the_first_op(tmp_path, fast):
    with activated(TracingState(paths=Paths(compiled=fast))):
        out = _run_model(tmp_path, mm.LeakedLog, "LeakedLog")
    assert not np.isfinite(out).all()
    run = _run(tmp_path).run()
    assert run.graphs()[0].instrumentation == ("compiled" if fast else "vm_instrument")
    alert = _first_origin(run)
    assert alert["kernel"] == "fused_subtract_tir_log_multiply_sum"
    assert alert["original_ops"][0]["op_type"] == "relax.subtract"  # the heuristic's first guess
    assert alert["confirmed"] == "replay"
    assert alert["inner_op"]["op_type"] == "relax.log"
    assert alert["location"] == {"file_path": MASKED_FILE, "line": mm.LEAKED_LOG_LINE, "function": "main"}
    [record] = run.replays()
    assert ("re-running" in record.note) == fast


def test_without_the_inner_op_check_a_masked_nan_is_not_seen(tmp_path):
    """(With the default options it is: tests/test_inner_check.py.)"""
    out = _run_model(tmp_path, mm.MaskedSqrt, "MaskedSqrt", inner_op_check=False)
    assert np.isfinite(out).all()
    run = _run(tmp_path).run()
    assert run.replays() == []
    from tvmdbg_tb import analysis

    assert analysis.alerts(run)["num_alerts"] == 0


# -- deep mode -------------------------------------------------------------------------------


def _masked_cases():
    return {
        "sqrt-tvmscript": (mm.MaskedSqrt, "MaskedSqrt", "relax.sqrt", mm.MASKED_SQRT_LINE),
        "log-tvmscript": (mm.MaskedLog, "MaskedLog", "relax.log", mm.MASKED_LOG_LINE),
        "sqrt-blockbuilder": (mm.masked_sqrt_bb, "MaskedSqrt", "relax.sqrt", mm.masked_sqrt_bb()[1]),
        "log-blockbuilder": (mm.masked_log_bb, "MaskedLog", "relax.log", mm.masked_log_bb()[1]),
    }


@pytest.mark.parametrize("case", ["sqrt-tvmscript", "log-tvmscript", "sqrt-blockbuilder", "log-blockbuilder"])
def test_deep_mode_alerts_a_masked_nan_at_its_own_line(tmp_path, case):
    module, name, op_type, line = _masked_cases()[case]
    out = _run_model(tmp_path, module, name, calls=2, trace_fused_ops=True)
    assert np.isfinite(out).all()  # the kernel's output hides it
    run = _run(tmp_path).run()
    assert run.graphs()[0].instrumentation == "vm_instrument"
    records = run.replays()
    assert len(records) == 2 and all(r.trigger == "deep" and not r.error for r in records)
    alert = _first_origin(run)
    assert alert["masked"] and alert["origin"] and alert["confirmed"] == "deep"
    assert alert["inner_op"]["op_type"] == op_type
    assert alert["location"]["line"] == line
    assert alert["nan_count"] > 0
    assert alert["execution_index"] == 0
    done = subprocess.run([*TVMDBG, "check", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout
    assert re.search(
        rf"created at {re.escape(MASKED_FILE)}:{line} \(\w+\) \(inside the fused kernel, {op_type} ", done.stdout
    )
    assert "made NaN/Inf inside that their outputs hide" in done.stdout


def test_deep_mode_unfused_model_is_unchanged(tmp_path):
    """Without fusion each op is its own kernel: deep mode has nothing to add."""
    out = _run_model(tmp_path, mm.MaskedSqrt, "MaskedSqrt", fuse=False, trace_fused_ops=True)
    assert np.isfinite(out).all()
    run = _run(tmp_path).run()
    assert run.replays() == []
    alert = _first_origin(run)
    assert alert["kernel"].endswith("sqrt") and alert["confirmed"] == "heuristic"
    assert alert["location"]["line"] == mm.MASKED_SQRT_LINE


def test_trace_fused_ops_must_be_a_bool(tmp_path):
    with pytest.raises(TypeError, match="trace_fused_ops"):
        tvmdbg.enable_dump_debug_info(tmp_path, trace_fused_ops="yes")
    with pytest.raises(TypeError, match="trace_fused_ops"):
        tvmdbg.enable_check_numerics(trace_fused_ops=1)


# -- check-numerics -----------------------------------------------------------------------------


@pytest.mark.parametrize("deep", [False, True])
def test_check_numerics_names_the_inner_op(deep):
    module, name = (mm.MaskedLog, "MaskedLog") if deep else (mm.LeakedLog, "LeakedLog")
    tvmdbg.enable_check_numerics(trace_fused_ops=deep)
    try:
        vm = relax.VirtualMachine(compile_module(module, fuse=True), tvm.cpu())
        with pytest.raises(CheckNumericsError) as info:
            vm["main"](*[tvm.runtime.tensor(a) for a in mm.inputs(name)])
    finally:
        tvmdbg.disable_check_numerics()
    error = info.value
    line = mm.MASKED_LOG_LINE if deep else mm.LEAKED_LOG_LINE
    assert error.inner_op == ("relax.log", "lg")
    assert error.source == (MASKED_FILE, line)
    assert "Replayed op by op: `relax.log` -> lg" in str(error)
    assert f"{MASKED_FILE}:{line}" in str(error)


def test_check_numerics_without_deep_mode_passes_a_masked_nan():
    tvmdbg.enable_check_numerics()
    try:
        vm = relax.VirtualMachine(compile_module(mm.MaskedLog, fuse=True), tvm.cpu())
        out = vm["main"](*[tvm.runtime.tensor(a) for a in mm.inputs("MaskedLog")])
    finally:
        tvmdbg.disable_check_numerics()
    assert np.isfinite(out.numpy()).all()


# -- the plugin route ---------------------------------------------------------------------------


def test_replays_route_and_alerts_route(tmp_path):
    from tensorboard.backend.event_processing import plugin_event_multiplexer  # noqa: F401
    from tensorboard.plugins import base_plugin
    from werkzeug import test as werkzeug_test
    from werkzeug import wrappers

    from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin

    _run_model(tmp_path, mm.MaskedSqrt, "MaskedSqrt", trace_fused_ops=True)
    plugin = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(tmp_path)), start_reader=False)
    plugin._reader.update()
    apps = plugin.get_plugin_apps()

    def get(route, **params):
        client = werkzeug_test.Client(apps[route], wrappers.Response)
        response = client.get(route, query_string=params)
        return response.status_code, json.loads(response.get_data(as_text=True))

    code, runs = get("/runs")
    assert code == 200
    [info] = runs["runs"]
    assert info["num_alerts"] == 1 and info["first_origin_alert"] == 0
    code, page = get("/replays", run=info["run"])
    assert code == 200 and page["num_replays"] == 1
    replay = page["replays"][0]
    assert replay["trigger"] == "deep" and replay["error"] is None
    ops = replay["ops"]
    assert [o["op_type"] for o in ops] == ["relax.matmul", "relax.add", "relax.sqrt", "relax.maximum", "relax.multiply"]
    assert [o["health"] for o in ops] == ["finite", "finite", "nonfinite", "finite", "finite"]
    assert replay["first_nonfinite_op"] == 2 and ops[2]["origin"]
    assert ops[2]["location"]["line"] == mm.MASKED_SQRT_LINE
    assert ops[3]["input_refs"][0] == 2  # maximum reads the sqrt
    code, one = get("/replays", run=info["run"], op_id=str(replay["op_id"]), execution_index="0")
    assert code == 200 and one["replays"] == page["replays"]
    code, missing = get("/replays", run=info["run"], op_id="999999")
    assert code == 404 and "error" in missing
    code, bad = get("/replays", run=info["run"], op_id="x")
    assert code == 400
    code, alerts = get("/alerts", run=info["run"])
    assert code == 200 and alerts["num_alerts"] == 1
    assert alerts["alerts"][0]["masked"] and alerts["alerts"][0]["inner_op"]["op_type"] == "relax.sqrt"


def test_demo_cli_ni_li_and_replay_show_the_inner_ops(demo_run):
    logdir, run = demo_run
    alert = _first_origin(run)
    name, e = alert["op_name"], alert["execution_index"]
    line = _example_line("relax.op.log(")
    done = subprocess.run(
        [*TVMDBG, "analyze", str(logdir), "-x", f"ni {name}", "-x", f"li {name}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"replayed op by op in execution {e} (auto)" in done.stdout
    assert "relax.log" in done.stdout and "<- made it" in done.stdout
    made = [row for row in done.stdout.splitlines() if "<- made it" in row]
    assert made and all(f"debug_digits.py:{line}" in row and "relax.log" in row for row in made)
    assert "lv1 = relax.log(lv)" in done.stdout
    done = subprocess.run(
        [*TVMDBG, "replay", str(logdir), "--execution", str(e), "--op", name], capture_output=True, text=True
    )
    assert done.returncode == 0 and "<- made it" in done.stdout
    # Another execution of the same kernel: no inputs were kept, and it says why.
    traced = run.trace_digests()["execution_index"][run.op_trace_indices(alert["op_id"])].tolist()
    later = min(x for x in traced if x > e)
    done = subprocess.run(
        [*TVMDBG, "replay", str(logdir), "--execution", str(later), "--op", name], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "were not captured" in done.stderr and "FULL_HEALTH" in done.stderr and f"[{e}]" in done.stderr
    # A single-op kernel: nothing to replay.
    single = next(op for op in run.ops() if len(op.original_ops) == 1 and run.op_trace_indices(op.op_id).size)
    done = subprocess.run(
        [*TVMDBG, "replay", str(logdir), "--execution", "0", "--op", f"#{single.op_id}"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "nothing to replay" in done.stderr


# -- bad input: a clear message, never an exception -------------------------------------------


def test_replay_bad_inputs_give_a_record_with_a_clear_error(tmp_path):
    from tvmdbg_tb.capture import hooks as capture
    from tvmdbg_tb.proto import debug_event_pb2 as pb
    from tvmdbg_tb.replay.replayer import replay

    def attempt(site, inputs):
        return replay(
            None,
            site,
            inputs,
            execution_index=0,
            op_id=0,
            graph_id=0,
            trigger="request",
            location_of=lambda frames, user_index, node: pb.CodeLocation(user_frame_index=-1),
        )

    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH")
    try:
        fused = capture.info_of(compile_module(mm.LeakedLog, fuse=True))
        plain = capture.info_of(compile_module(mm.LeakedLog, fuse=False))
    finally:
        tvmdbg.disable_dump_debug_info()
    [site] = fused.functions["main"].sites
    x, y = mm.inputs("LeakedLog")
    assert "not compiled while tvmdbg was enabled" in attempt(None, [x]).error
    assert attempt(site, None).error == "the kernel's inputs were not captured for this execution"
    assert [o.op_type for o in attempt(site, None).ops][:2] == ["relax.subtract", "relax.log"]  # ops, no outputs
    wrong = attempt(site, [x])
    assert "takes 2 inputs, 1 were given" in wrong.error and not wrong.ops[0].outputs
    bad_dtype = attempt(site, [x.astype("float64"), y.astype("float64")])
    assert bad_dtype.error.startswith("the replay of `fused_subtract_tir_log_multiply_sum` raised")
    unfused = plain.functions["main"].sites[0]
    assert "compiled without FuseOps" in attempt(unfused, [x, y]).error
    good = attempt(site, [x, y])
    assert not good.error and good.ops[good.first_nonfinite_op].op_type == "relax.log"


def test_full_tensor_dump_replays_any_fused_call_offline(tmp_path, monkeypatch):
    logdir = tmp_path / "full_tensor"
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_TENSOR")
    try:
        vm = relax.VirtualMachine(compile_module(mm.MaskedLog, fuse=True), tvm.cpu())
        for _ in range(2):
            vm["main"](*[tvm.runtime.tensor(a) for a in mm.inputs("MaskedLog")])
    finally:
        tvmdbg.disable_dump_debug_info()
    run = _run(logdir).run()
    [op] = [op for op in run.ops() if len(op.original_ops) > 1]
    source = run.fused_group_source(op.op_id)
    assert source is not None and [o.op_type for o in source.ops][2] == "relax.log"
    assert [bool(c.dtype) for c in source.constants] == [False, True]  # x, then the bound 0.0
    done = subprocess.run(
        [*TVMDBG, "replay", str(logdir), "--execution", "1", "--op", op.op_name], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    made = [row for row in done.stdout.splitlines() if "<- made it" in row]
    assert len(made) == 1 and "relax.log" in made[0] and f"models_masked.py:{mm.MASKED_LOG_LINE}" in made[0]
    assert "replayed from the FULL_TENSOR dump" in done.stdout
    # The replay computes what numpy computes for log(3x): the NaN count of the inner op.
    x = mm.inputs("MaskedLog")[0]
    assert f"nan:{int(np.count_nonzero(x < 0))}" in made[0]
    # The dump is untouched: reading it again finds the same records.
    assert len(_run(logdir).run().replays()) == len(run.replays())
    # Another TVM version cannot load the recorded ops: it says so.
    from tvmdbg_tb.replay.group import ReplayError
    from tvmdbg_tb.replay.offline import replay_recorded

    monkeypatch.setattr(tvm, "__version__", "0.0.0-other")
    with pytest.raises(ReplayError, match="written with TVM .* this process has TVM 0.0.0-other"):
        replay_recorded(run, op, 1)


@pytest.mark.parametrize("name", sorted(mm.LEAKED))
def test_fused_leak_alert_is_located_at_the_op_that_made_the_value(tmp_path, name):
    from models import line_of

    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH")
    try:
        vm = relax.VirtualMachine(compile_module(getattr(mm, name), fuse=True), tvm.cpu())
        vm["main"](*[tvm.runtime.tensor(a) for a in mm.leaked_inputs(name)])
    finally:
        tvmdbg.disable_dump_debug_info()
    run = _run(tmp_path).run()
    alert = _first_origin(run)
    op_type = mm.LEAKED[name]
    assert len(alert["original_ops"]) > 1 and alert["original_ops"][0]["op_type"] != op_type  # fused, not first
    assert alert["confirmed"] == "replay" and alert["inner_op"]["op_type"] == op_type
    assert alert["location"]["line"] == line_of(MASKED_FILE, f"# leak: {op_type.split('.')[-1]}")


def test_native_and_python_scans_name_the_same_first_nonfinite_row(tmp_path, monkeypatch):
    """AutoReplay.scan_buffers in C++ (native_rows) and in Python, on the stats buffers of a
    real call with non-finite counts planted at random rows (and rows that did not run, and
    rows whose fused ops made one): the same (function, row), the earliest by timestamp over
    two buffers."""
    from models import chain

    from tvmdbg_tb.capture import compiled
    from tvmdbg_tb.replay.auto import AutoReplay
    from tvmdbg_tb.tracing import native_rows

    assert native_rows.LIBRARY.load() is not None, native_rows.LIBRARY.failure()
    tvmdbg.enable_dump_debug_info(str(tmp_path), "FULL_HEALTH", circular_buffer_size=-1)
    try:
        executable, inputs = chain(30, 9)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        vm["main"](tvm.runtime.tensor(inputs[0]))
        function = vm._tvmdbg_info.compiled["main"]
        real = fast_tracer._buffer(function.fid, function.nrows)[1].copy()  # the rows the call's kernels wrote
        fid = function.fid
    finally:
        tvmdbg.disable_dump_debug_info()
    replay = AutoReplay.__new__(AutoReplay)  # scan_buffers reads no session state
    assert function.health and len(function.rows) == 30
    rng = np.random.default_rng(3)
    off = {"error": RuntimeError("off in this test")}
    for trial in range(60):
        buffers = []
        for _ in range(2):
            array = real.copy()
            array[0, 0] = 1e9  # the call's start
            array[1:31, 0] = np.sort(rng.uniform(1e9, 2e9, 30))
            for row in rng.integers(1, 31, rng.integers(0, 3)):
                array[row, rng.choice([1, 5, 6])] += 1.0  # a NaN (size above the three counts), -inf or +inf
            for row in rng.integers(1, 31, rng.integers(0, 2)):
                array[row, 0] = 0.0  # a kernel that did not run
            inner = rng.integers(1, 31, rng.integers(0, 2))
            for row in inner:  # a kernel whose fused ops made one (the inner-op check)
                array[row, compiled.INNER_COLUMN] = 2.0
            array[0, compiled.INNER_FLAG_COLUMN] = array[0, 0] if len(inner) else 0.0
            buffers.append((fid, None, array))
        native = replay.scan_buffers(buffers)
        with monkeypatch.context() as patch:
            patch.setattr(native_rows.LIBRARY, "_state", off)
            python = replay.scan_buffers(buffers)
        assert native == python, trial
