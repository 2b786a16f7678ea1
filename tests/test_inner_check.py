"""The inner-op check (tvmdbg_tb/capture/inner_check.py), on real compiled models.

With the default options, each fused kernel of a health-mode build counts the NaN and
infinities its own Relax ops make, so a value made and masked inside one kernel (its output
finite) raises an alert at the op's line: TVMScript `where`, BlockBuilder, nn.Module, a
float16 overflow, a division, and a transformers ResNet whose BatchNorm has eps=0 and one
zero variance. The counts are exact, both tracing paths record them, the first call's replay
confirms the op, every instrumented kernel's outputs are bit-identical to those of the
uninstrumented build, and inner_op_check=False builds without the check.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import models_masked as mm
import numpy as np
import pytest
import trace_paths
import tvm
from models import compile_module, line_of
from tvm import relax

import tvmdbg
from tvmdbg_tb import analysis
from tvmdbg_tb.events.reader import INNER_NONFINITE, NONFINITE

MASKED_FILE = str(Path(mm.__file__).resolve())
TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli.main import main; sys.exit(main())"]


@pytest.fixture(scope="module", params=["compiled", "python_call"])
def trace_path(request):
    with trace_paths.using(request.param):
        yield request.param


def _record(logdir, module, inputs, calls: int = 3, mode: str = "FULL_HEALTH", vms: list | None = None, **options):
    """Compiles module (a Relax module, or a builder returning (module, line), called while
    tvmdbg records so that its ops keep their lines) with the default fusing pipeline, runs
    it `calls` times; returns the last output and the run's reader (and adds the VM to vms)."""
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=-1, **options)
    try:
        if callable(module):
            module, BUILT_LINE[0] = module()
        vm = relax.VirtualMachine(compile_module(module, fuse=True), tvm.cpu())
        if vms is not None:
            vms.append(vm)
        function = vm[_entry(module)]
        for _ in range(calls):
            out = function(*[tvm.runtime.tensor(a) for a in inputs])
    finally:
        tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(str(logdir))
    reader.update()
    return np.asarray(out.numpy()), reader.run()


BUILT_LINE = [-1]  # the line the last builder _record called recorded


def _entry(module) -> str:
    names = [gv.name_hint for gv in module.get_global_vars()]
    return "main" if "main" in names else "forward"


def _masked(run) -> list[dict]:
    page = analysis.alerts(run)
    return [a for a in page["alerts"] if a.get("masked")]


CASES = {
    "where-tvmscript": (mm.MaskedLog, mm.inputs("MaskedLog"), "relax.log", mm.MASKED_LOG_LINE),
    "maximum-sqrt-tvmscript": (mm.MaskedSqrt, mm.inputs("MaskedSqrt"), "relax.sqrt", mm.MASKED_SQRT_LINE),
    "log-blockbuilder": (mm.masked_log_bb, mm.inputs("MaskedLog"), "relax.log", None),
    "sqrt-nn-module": (mm.masked_sqrt_nn, mm.inputs("MaskedSqrt"), "relax.sqrt", None),
    "float16-overflow": (
        mm.HalfOverflow,
        mm.half_overflow_inputs(),
        "relax.multiply",
        line_of(MASKED_FILE, "# masked: multiply"),
    ),
    "divide-clip": (
        mm.MaskedDivide,
        mm.masked_divide_inputs(),
        "relax.divide",
        line_of(MASKED_FILE, "# masked: divide"),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_default_options_alert_a_nan_made_and_masked_inside_one_kernel(tmp_path, trace_path, case):
    module, inputs, op_type, line = CASES[case]
    out, run = _record(tmp_path, module, inputs)
    if line is None:  # a builder: the line it recorded
        line = BUILT_LINE[0]
    assert np.isfinite(out).all()  # the kernel's output hides it
    assert run.graphs()[0].instrumentation == "compiled"
    alerts = _masked(run)
    assert [a["execution_index"] for a in alerts] == [0, 1, 2]  # every call, not only the first
    for alert in alerts:
        assert alert["origin"] and alert["inner_op"]["op_type"] == op_type
        assert (alert["location"]["file_path"], alert["location"]["line"]) == (MASKED_FILE, line)
        assert alert["nan_count"] + alert["neg_inf_count"] + alert["pos_inf_count"] > 0
        assert len(alert["original_ops"]) > 1  # a fused kernel
    # The first call's kernel was replayed op by op (its inputs captured by a re-run) and
    # names the same op; the later ones come from the kernel's own counts.
    assert alerts[0]["confirmed"] == "replay" and {a["confirmed"] for a in alerts[1:]} == {"inner_check"}
    page = analysis.alerts(run)
    assert page["first_origin_index"] == 0 and page["origin_alerts"] == 3


def test_the_counts_are_exact_per_op_and_kind(tmp_path, trace_path):
    out, run = _record(tmp_path, mm.MaskedDivide, mm.masked_divide_inputs(nan=3, neg_inf=2, pos_inf=5), calls=2)
    assert np.isfinite(out).all()
    [later] = [a for a in _masked(run) if a["execution_index"] == 1]
    [divide] = later["inner_nonfinite"]  # clip only passes values on: not counted
    assert (divide["op_type"], divide["nan_count"], divide["neg_inf_count"], divide["pos_inf_count"]) == (
        "relax.divide",
        3,
        2,
        5,
    )
    assert (later["nan_count"], later["neg_inf_count"], later["pos_inf_count"]) == (3, 2, 5)
    page = analysis.alerts(run)
    assert page["nan_alerts"] == page["neg_inf_alerts"] == page["pos_inf_alerts"] == 2


def test_every_op_that_made_one_is_listed_in_order(tmp_path):
    """float16: the multiply overflows (+-inf), the subtract makes NaN of them; the first is
    the origin."""
    out, run = _record(tmp_path, mm.HalfOverflow, mm.half_overflow_inputs(), calls=2)
    [later] = [a for a in _masked(run) if a["execution_index"] == 1]
    entries = [(e["op_type"], e["nan_count"], e["neg_inf_count"], e["pos_inf_count"]) for e in later["inner_nonfinite"]]
    assert entries == [("relax.multiply", 0, 1, 2), ("relax.multiply", 0, 1, 2), ("relax.subtract", 3, 0, 0)]
    assert later["inner_op"]["op_type"] == "relax.multiply"


def test_a_kernel_whose_output_shows_it_is_its_own_alert(tmp_path):
    """LeakedLog's NaN leaves its kernel: one alert per call, that of the output (the first
    call's replay names the log); its trace carries no inner counts."""
    _, run = _record(tmp_path, mm.LeakedLog, mm.inputs("LeakedLog"), calls=2)
    page = analysis.alerts(run)
    assert page["num_alerts"] == 2 and not _masked(run)
    assert [a["confirmed"] for a in page["alerts"]] == ["replay", "heuristic"]
    assert not (run.trace_digests()["flags"] & INNER_NONFINITE).any()


def test_a_kernel_whose_output_and_ops_show_it_names_the_op(tmp_path, trace_path):
    """A kernel writing a -inf literal whose multiply makes NaN (0 * -inf) that its output
    shows: the hunt reads the kernel's row after the call (its ops' flag raised too), and
    the first call's replay names the multiply at its line."""
    _, run = _record(tmp_path, mm.MaskTimesInf, mm.mask_times_inf_inputs(), calls=2)
    page = analysis.alerts(run)
    first = page["alerts"][page["first_origin_index"]]
    assert first["execution_index"] == 0 and first["confirmed"] == "replay", first
    assert first["inner_op"]["op_type"] == "relax.multiply", first
    line = line_of(MASKED_FILE, "# the bug: 0 * -inf")
    assert (first["location"]["file_path"], first["location"]["line"]) == (MASKED_FILE, line)


def test_trace_flags_and_records(tmp_path):
    """The kernel's trace carries inner_nonfinite; the reader flags it (vectorised digests and
    the protobuf path agree) without calling its output non-finite."""
    _, run = _record(tmp_path, mm.MaskedLog, mm.inputs("MaskedLog"), calls=2)
    digests = run.trace_digests()
    flagged = np.flatnonzero(digests["flags"] & INNER_NONFINITE)
    assert len(flagged) == 2 and not (digests["flags"][flagged] & NONFINITE).any()
    trace = run.trace(int(flagged[1]))
    [entry] = trace.inner_nonfinite
    assert (entry.op_type, entry.var_name, entry.nan) == ("relax.log", "lg", 18)
    assert run.user_frame(entry.code_location).line == mm.MASKED_LOG_LINE
    from tvmdbg_tb.events.reader import RunReader

    row = RunReader._trace_row(0, _event(trace))
    assert row[-1] & INNER_NONFINITE and not row[-1] & NONFINITE


def _event(trace):
    from tvmdbg_tb.proto import debug_event_pb2 as pb

    return pb.DebugEvent(graph_execution_trace=trace)


def test_check_cli_fails_and_names_the_op(tmp_path):
    _record(tmp_path, mm.MaskedSqrt, mm.inputs("MaskedSqrt"), calls=2)
    done = subprocess.run([*TVMDBG, "check", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout
    assert "made NaN/Inf inside that their outputs hide" in done.stdout
    assert f"{MASKED_FILE}:{mm.MASKED_SQRT_LINE}" in done.stdout and "relax.sqrt" in done.stdout


def test_inner_op_check_false_builds_without_it(tmp_path):
    out, run = _record(tmp_path, mm.MaskedLog, mm.inputs("MaskedLog"), inner_op_check=False)
    assert np.isfinite(out).all()
    assert analysis.alerts(run)["num_alerts"] == 0
    with pytest.raises(TypeError, match="inner_op_check"):
        tvmdbg.enable_dump_debug_info(tmp_path, inner_op_check="no")


def test_a_kernel_the_check_fails_on_is_named_in_a_warning(tmp_path, monkeypatch):
    """An error while adding the check (a bug, not a kernel it does not fit) leaves the kernel
    unchecked: the build says so, naming the kernel, rather than showing a quiet run."""
    from tvmdbg_tb.capture import inner_check

    def broken(*args, **kwargs):
        raise ValueError("planted")

    monkeypatch.setattr(inner_check, "add", broken)
    with pytest.warns(RuntimeWarning, match=r"no inner-op check in kernel fused_\w+ \(ValueError\('planted'\)\)"):
        out, run = _record(tmp_path, mm.MaskedLog, mm.inputs("MaskedLog"), calls=1)
    assert np.isfinite(out).all() and _masked(run) == []


@pytest.mark.parametrize("mode", ["CURT_HEALTH", "FULL_STATS"])
def test_other_modes_with_counts_check_too(tmp_path, mode):
    out, run = _record(tmp_path, mm.MaskedLog, mm.inputs("MaskedLog"), calls=2, mode=mode)
    alerts = _masked(run)
    assert [a["execution_index"] for a in alerts] == [0, 1]
    assert alerts[1]["inner_op"]["op_type"] == "relax.log" and alerts[1]["nan_count"] == 18


# -- outputs bit-identical -------------------------------------------------------------------


def _kernel_outputs(executable, function: str, inputs, kernels: set[str]) -> list[tuple[str, list[bytes]]]:
    """The arguments (inputs and outputs) of each call of the given kernels, copied right
    after the call, in call order; the instrumented build's extra arguments (the stats buffer,
    rows) are cut to the plain build's count by the caller."""
    vm = relax.VirtualMachine(executable, tvm.cpu())
    calls = []

    def instrument(func, symbol, before, ret, *args):
        if not before and str(symbol) in kernels:
            calls.append((str(symbol), [a.numpy().tobytes() for a in args if isinstance(a, tvm.runtime.Tensor)]))
        return 0

    vm.set_instrument(instrument)
    vm[function](*[tvm.runtime.tensor(a) for a in inputs])
    return calls


def _bit_identical(tmp_path, module, inputs, function: str = "main") -> int:
    """Compiles module plainly and instrumented (FULL_HEALTH, default options), then
    _same_kernel_calls."""
    plain = compile_module(module, fuse=True)
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        traced = compile_module(module, fuse=True)
    finally:
        tvmdbg.disable_dump_debug_info()
    return _same_kernel_calls(plain, traced, inputs, function)


def _info(executable):
    return relax.VirtualMachine(executable, tvm.cpu())._tvmdbg_info


def _same_kernel_calls(plain, traced, inputs, function: str = "main") -> int:
    """Runs both builds (untraced) and compares every kernel call's arguments bytewise;
    returns how many kernels of the instrumented build check their inner ops."""
    info = _info(traced)
    functions = list(info.compiled.values())
    kernels = {site.kernel for f in info.functions.values() for site in f.sites}
    expected = _kernel_outputs(plain, function, inputs, kernels)
    got = _kernel_outputs(traced, function, inputs, kernels)
    assert [s for s, _ in got] == [s for s, _ in expected] and expected
    for (symbol, want), (_, have) in zip(expected, got):
        assert have[: len(want)] == want, symbol  # then the stats buffer
    return sum(len(f.inner) for f in functions)


@pytest.mark.parametrize("name", ["MaskedLog", "MaskedSqrt", "MaskedDivide", "HalfOverflow", "LeakedLog"])
def test_instrumented_kernels_outputs_are_bit_identical(tmp_path, name):
    inputs = {"MaskedDivide": mm.masked_divide_inputs(), "HalfOverflow": mm.half_overflow_inputs()}.get(name)
    checked = _bit_identical(tmp_path, getattr(mm, name), inputs or mm.inputs(name))
    assert checked >= 1


def test_transformer_block_kernels_are_bit_identical(tmp_path):
    import models

    captured = []
    original = models.compile_module
    models.compile_module = lambda mod, fuse: captured.append(mod) or original(mod, fuse)
    try:
        _, inputs = models.transformer_block(tokens=8, dim=32)
    finally:
        models.compile_module = original
    assert _bit_identical(tmp_path, captured[0], inputs) >= 3


def test_model_kernels_are_bit_identical(tmp_path):
    """A model nobody here wrote: transformers' GPT-2 (small config), every kernel call."""
    real_models = pytest.importorskip("real_models")
    built = real_models.build("gpt2", fuse=True)
    plain = real_models.compile_module(built.mod, fuse=True)
    assert _same_kernel_calls(plain, built.executable, built.inputs) >= 5


# -- models nobody here wrote ------------------------------------------------------------------


def test_resnet_batch_norm_eps0_alerts_at_the_batch_norm(tmp_path):
    """transformers' ResNet, fused, BatchNorm with eps=0 and one zero variance: batch_norm
    makes -inf in that channel inside fused_batch_norm..._relu, the ReLU zeroes it. With the
    default options: an alert at the batch_norm, its line the op's own."""
    real_models = pytest.importorskip("real_models")
    built = real_models.build("resnet", fuse=True, plant="bn_eps0")
    logdir = real_models.record(built, tmp_path, calls=2)
    reader = tvmdbg.DebugDataReader(logdir)
    reader.update()
    run = reader.run()
    page = analysis.alerts(run)
    first = page["alerts"][page["first_origin_index"]]
    assert first["masked"] and first["origin"] and "batch_norm" in first["kernel"]
    assert first["inner_op"]["op_type"] == "relax.nn.batch_norm" and first["neg_inf_count"] > 0
    op = run.op(first["op_id"])
    batch_norm = next(o for o in op.original_ops if o.op_type == "relax.nn.batch_norm")
    expected = analysis_location(run, batch_norm.code_location)
    assert [first["location"][k] for k in ("file_path", "line")] == [expected[k] for k in ("file_path", "line")]
    assert [a["execution_index"] for a in page["alerts"] if a.get("masked")] == [0, 1]
    plain = real_models.compile_module(built.mod, fuse=True)
    assert _same_kernel_calls(plain, built.executable, built.inputs) >= 3


def analysis_location(run, code_location):
    from tvmdbg_tb.events.locations import location

    return location(run, code_location)


@pytest.mark.parametrize("name", ["gpt2", "bert", "resnet"])
def test_healthy_models_raise_no_inner_alert(tmp_path, name):
    """No false alarm from the check: the healthy models' kernels make no NaN or Inf inside
    them that their outputs hide (GPT-2's -inf mask is its kernels' output: that alert is
    the output's, named at the op that made it)."""
    real_models = pytest.importorskip("real_models")
    built = real_models.build(name, fuse=True)
    functions = list(_info(built.executable).compiled.values())
    assert sum(len(f.inner) for f in functions) >= 3  # the check is there
    reader = tvmdbg.DebugDataReader(real_models.record(built, tmp_path, calls=2))
    reader.update()
    alerts = analysis.alerts(reader.run())["alerts"]
    assert not [a for a in alerts if a.get("masked")]
    for alert in alerts:  # GPT-2's causal mask: where(mask, 0, -inf), fused with the add after it
        assert alert["inner_op"] is None or alert["inner_op"]["op_type"] == "relax.where"


def test_a_kernel_counting_its_output_checks_its_ops_too(tmp_path, monkeypatch):
    """A kernel made to count its own output (epilogue.py) and its ops: one stats buffer."""
    from tvmdbg_tb.capture import counting

    monkeypatch.setattr(counting, "IN_LOOP_BYTES", 0)  # every countable output counted in its kernel
    vms = []
    out, run = _record(tmp_path, mm.MaskedLog, mm.inputs("MaskedLog"), calls=2, vms=vms)
    alerts = _masked(run)
    assert [a["execution_index"] for a in alerts] == [0, 1] and alerts[1]["inner_op"]["op_type"] == "relax.log"
    assert [list(run.trace(k).debug_values)[3:7] for k in range(2)] == [[32.0, 0.0, 0.0, 0.0]] * 2
    rewritten = [f for f in vms[0]._tvmdbg_info.compiled.values() if f.inner and f.rows[0].fused]
    assert rewritten, "the kernel counts its output (epilogue) and its ops"
    assert _bit_identical(tmp_path / "bits", mm.MaskedLog, mm.inputs("MaskedLog")) >= 1


# -- with intended masking and the non-finite rule of writer and reader -----------------------


def test_a_mask_made_and_absorbed_inside_one_kernel_is_no_alert(tmp_path, trace_path):
    """where(mask, x, -inf) then exp in one kernel: the check counts the where's -inf (the
    trace carries it) but a literal of the program absorbed inside the kernel is intended
    masking, listed apart, and `check` passes; MaskedLog's computed NaN stays an alert."""
    out, run = _record(tmp_path / "fill", mm.MaskedFill, mm.inputs("MaskedLog"), calls=2)
    assert np.isfinite(out).all() and (out == 0).any()
    digests = run.trace_digests()
    flagged = np.flatnonzero(digests["flags"] & INNER_NONFINITE)
    assert len(flagged) == 2
    assert [e.op_type for e in run.trace(int(flagged[0])).inner_nonfinite] == ["relax.where"]
    page = analysis.alerts(run)
    assert page["num_alerts"] == 0
    assert page["benign"]["absorbed"] == 2 and page["benign"]["ops"][0]["neg_inf"] == 2
    done = subprocess.run([*TVMDBG, "check", str(tmp_path / "fill")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout
    assert (
        analysis.alerts(_record(tmp_path / "log", mm.MaskedLog, mm.inputs("MaskedLog"), calls=1)[1])["num_alerts"] == 1
    )


def test_a_nan_computed_next_to_an_absorbed_mask_in_one_kernel_is_an_alert(tmp_path, trace_path):
    """The kernel's first op that made a non-finite value writes the mask's -inf, but a later
    op computes a NaN (sqrt of a negative) that a maximum hides: the kernel did not only
    absorb its mask, so the call is an alert at the sqrt's line, and `check` fails."""
    out, run = _record(tmp_path / "both", mm.MaskedFillAndSqrt, mm.inputs("MaskedLog"), calls=2)
    assert np.isfinite(out).all()
    digests = run.trace_digests()
    [first, _] = np.flatnonzero(digests["flags"] & INNER_NONFINITE)
    made = [(e.op_type, e.nan > 0, e.neg_inf > 0) for e in run.trace(int(first)).inner_nonfinite]
    assert made[0] == ("relax.where", False, True) and ("relax.sqrt", True, False) in made, made
    page = analysis.alerts(run)
    assert page["num_alerts"] == 2, page["benign"]
    [alert, _] = _masked(run)
    assert alert["inner_op"]["op_type"] == "relax.sqrt", alert
    assert alert["masked"] and alert["nan_count"] > 0 and alert["neg_inf_count"] == 0, alert
    assert alert["inner_op"]["location"]["line"] == line_of(MASKED_FILE, "# computed: sqrt"), alert
    done = subprocess.run([*TVMDBG, "check", str(tmp_path / "both")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout


def test_an_expected_pattern_covers_a_kernel_made_value(tmp_path):
    _, run = _record(tmp_path, mm.MaskedLog, mm.inputs("MaskedLog"), calls=2, expected_nonfinite="log")
    page = analysis.alerts(run)
    assert page["num_alerts"] == 0 and page["benign"]["expected"] == 2


def test_the_ring_keeps_the_first_call_whose_ops_made_one(tmp_path, trace_path):
    """The writer counts a call whose kernel hid what its ops made as a non-finite call: the
    ring keeps it whole behind many finite calls, the writer's count says so, and of two runs
    the chooser shows the one holding it though the other started later."""
    logdir = tmp_path / "logs"
    tvmdbg.enable_dump_debug_info(str(logdir / "bad"), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=5)
    try:
        vm = relax.VirtualMachine(compile_module(mm.MaskedLog, fuse=True), tvm.cpu())
        vm["main"](tvm.runtime.tensor(mm.inputs("MaskedLog")[0]))
        for _ in range(12):
            vm["main"](tvm.runtime.tensor(mm.positive_inputs()[0]))
    finally:
        tvmdbg.disable_dump_debug_info()
    _record(logdir / "good", mm.MaskedLog, mm.positive_inputs(), calls=2)
    reader = tvmdbg.DebugDataReader(str(logdir))
    reader.update()
    run, why = reader.choose()
    assert "bad" in run.name and "first NaN/Inf" in why
    alerts = _masked(run)
    assert [a["execution_index"] for a in alerts] == [0] and alerts[0]["inner_op"]["op_type"] == "relax.log"
    assert run.run_end.nonfinite_executions == 1
    [good] = [reader.run(name) for name in reader.runs() if name != run.name]
    assert analysis.alerts(good)["num_alerts"] == 0


def test_the_writers_rule_for_records_it_is_handed_counts_the_ops_counts():
    from tvmdbg_tb.events import health
    from tvmdbg_tb.proto import debug_event_pb2 as pb

    trace = pb.GraphExecutionTrace(tensor_debug_mode=pb.FULL_HEALTH, debug_values=[0, 0, 1, 2, 0, 0, 0, 0, 0, 0])
    assert not health.trace_nonfinite(trace)
    trace.inner_nonfinite.add(index=1, op_type="relax.log", nan=3)
    assert health.trace_nonfinite(trace)
    assert health.call_nonfinite(pb.FULL_HEALTH, None, [trace.SerializeToString()])


# -- one flag for the values that reach the output ---------------------------------------------


def _scale_shift(shape: str):
    """`x * 2 + 0.5` fused into one kernel ("carried"), `minimum(x * 2, 1) + 0.5` ("masked":
    the minimum hides the multiply's +inf), `x + 0.5` ("own loop") or `x * 2 + 1 + 0.5`
    ("chain")."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((64,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            value = x if shape == "own loop" else bb.emit(relax.op.multiply(x, relax.const(2.0, "float32")))
            if shape == "masked":
                value = bb.emit(relax.op.minimum(value, relax.const(1.0, "float32")))
            if shape == "chain":
                value = bb.emit(relax.op.add(value, relax.const(1.0, "float32")))
            out = bb.emit_output(relax.op.add(value, relax.const(0.5, "float32")))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("shape", ["carried", "masked", "own loop", "chain"])
def test_a_value_that_always_reaches_the_output_is_flagged_by_the_outputs_flag(tmp_path, monkeypatch, shape):
    """In `x * 2 + 0.5` (counted in the kernel's loops) a NaN or an infinity of x or of the
    multiply's values always reaches the output at the same position, so only the output's
    flag is built (less work per value on a memory-bound kernel); when it is up, x is
    recounted: x's and the output's summaries are numpy's, with planted NaN, infinities and
    values the multiply overflows. Under a minimum that hides the multiply's +inf, the
    multiply keeps its own flag and its exact count. An input that the output's own loop
    counts (`x + 0.5`) keeps its flag: the leaner loop ran slower (epilogue.py). Through two
    adds (`x * 2 + 1 + 0.5`) x needs no flag either; the multiply, two ops from the output, keeps
    its own (its recount stays right after the loop that reads it last)."""
    from test_instrument_modes import _expected

    from tvmdbg_tb.capture import counting

    monkeypatch.setattr(counting, "IN_LOOP_BYTES", 0)  # every buffer counted in the kernel's loops
    masked = shape == "masked"
    x = np.linspace(-1, 1, 64, dtype="float32")
    if masked:  # x * 2: +inf twice, which minimum(., 1) hides
        x[[10, 30]] = [2e38, 3e38]
    else:  # x * 2: nan, +inf, -inf, +inf, 0
        x[[3, 10, 20, 30, 40]] = [np.nan, 2e38, -2e38, np.inf, 0.0]
    finite = np.linspace(-1, 1, 64, dtype="float32")
    plain = relax.VirtualMachine(compile_module(_scale_shift(shape), fuse=True), tvm.cpu())
    expected = [plain["main"](tvm.runtime.tensor(a)).numpy() for a in (x, finite)]
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        executable = compile_module(_scale_shift(shape), fuse=True)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        outs = [vm["main"](tvm.runtime.tensor(a)).numpy() for a in (x, finite)]
    finally:
        tvmdbg.disable_dump_debug_info()
    code = executable.mod.imports[0].inspect_source("ll")
    flags = sorted(set(re.findall(r"%(tvmdbg_nf\d+|tvmdbg_inner\d+) = ", code)))
    # the output's flag; x's and the multiply's own only where the minimum can hide them, and
    # x's where the output's loop counts it
    expected_flags = {
        "carried": ["tvmdbg_nf0"],
        "masked": ["tvmdbg_inner0", "tvmdbg_nf0", "tvmdbg_nf1"],
        "chain": ["tvmdbg_inner0", "tvmdbg_nf0"],
    }
    assert flags == expected_flags.get(shape, ["tvmdbg_nf0", "tvmdbg_nf1"])
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    run = reader.run()
    for k, (array, out) in enumerate(zip((x, finite), outs)):
        np.testing.assert_array_equal(out, expected[k])  # bit for bit the plain build's
        assert list(run.execution(k).inputs[0].debug_values) == _expected("FULL_HEALTH", array), k
        assert list(run.trace(k).debug_values) == _expected("FULL_HEALTH", out), k
    assert np.isfinite(outs[0]).all() == masked
    entries = [(e.op_type, e.nan, e.neg_inf, e.pos_inf) for e in run.trace(0).inner_nonfinite]
    # An output that shows it is an alert of its own (no inner counts); a hidden +inf is counted.
    assert entries == ([("relax.multiply", 0, 0, 2)] if masked else [])
    assert not len(run.trace(1).inner_nonfinite)


def test_the_rule_of_values_that_reach_the_output():
    """counting.carries: a NaN or an infinity read once goes through adds, subtracts, casts
    between floats, a multiply by a non-zero literal or a value read and a division's
    numerator; not through a zero literal (TVM folds `m * 0`), a value read twice (`m - m`),
    a denominator, min/max/select, a call or a cast to an integer."""
    from tvm import tirx

    from tvmdbg_tb.capture import counting

    m, y = (tirx.decl_buffer((8,), "float32", name=name) for name in "my")
    i, j = tirx.Var("i", "int64"), tirx.Var("j", "int64")
    at, other = tirx.BufferLoad(m, [i]), tirx.BufferLoad(y, [i])

    def f(v):
        return tirx.const(v, "float32")

    carried = [at * f(1.0001) + f(0.5), other - at, at * other, at / other, tirx.Cast("float16", at) + f(1.0)]
    hidden = [
        at * f(0.0),
        at * f(float("inf")),
        at - at,
        other / at,
        tirx.Max(at, f(0.0)),
        tirx.Select(at > f(0.0), at, f(0.0)),
        tirx.call_intrin("float32", "tirx.exp", at),
        tirx.Cast("float32", tirx.Cast("int32", at)),
        tirx.BufferLoad(m, [j]) + f(1.0),
        other + f(1.0),
    ]
    assert [counting.carries(v, m, [i]) for v in carried] == [True] * len(carried)
    assert [counting.carries(v, m, [i]) for v in hidden] == [False] * len(hidden)
