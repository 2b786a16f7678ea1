"""Non-finite values a model makes on purpose (an attention mask's -inf, absorbed by the
softmax after it) are no alerts; computed ones are, even when a later op hides them; the user
can declare more as expected (enable_dump_debug_info(expected_nonfinite=...) and
--expected-nonfinite). Real models: tests/test_real_models_health.py."""

from __future__ import annotations

import numpy as np
import pytest
import trace_paths
import tvm
from models import compile_module
from tvm import relax

import tvmdbg
from tvmdbg_tb import analysis
from tvmdbg_tb.cli.main import main as cli

SHAPE = (1, 4, 4)
SCORES = np.random.default_rng(0).normal(size=SHAPE).astype("float32")
CAUSAL = np.tril(np.ones((4, 4), dtype=bool))[None]  # every row keeps at least one column
EMPTY_ROW = CAUSAL.copy()
EMPTY_ROW[0, 0, 0] = False  # row 0 masked entirely: its softmax is NaN, zeroed after


@pytest.fixture(scope="module", params=trace_paths.PATHS)
def trace_path(request):
    with trace_paths.using(request.param):
        yield request.param


def _function(bb, params, body):
    with bb.function("main", params):
        with bb.dataflow():
            out = body(*params)
            out = bb.emit_output(out)
        bb.emit_func_output(out)
    return bb.get()


def _masked_softmax(bb, scores, mask, *, returns_mask=False, empty_rows=False, then=None):
    """The attention pattern the torch importer writes for GPT-2: a -inf fill, added to the
    scores, a softmax, and (empty_rows) the rows masked entirely set to 0 by a where."""
    fill = bb.emit(relax.op.where(mask, relax.const(0.0, "float32"), relax.const(float("-inf"), "float32")))
    masked = bb.emit(relax.op.add(scores, fill))
    probs = bb.emit(relax.op.nn.softmax(masked, axis=-1))
    if empty_rows:
        kept = bb.emit(relax.op.max(relax.op.astype(mask, "int8"), axis=[-1], keepdims=True))
        empty = bb.emit(relax.op.equal(kept, relax.const(0, "int8")))
        probs = bb.emit(relax.op.where(empty, relax.const(0.0, "float32"), probs))
    out = bb.emit(relax.op.multiply(probs, relax.const(2.0, "float32")))
    if then is not None:
        out = then(out)
    return relax.Tuple([out, masked]) if returns_mask else out


def _params(*extra):
    scores = relax.Var("scores", relax.TensorType(SHAPE, "float32"))
    mask = relax.Var("mask", relax.TensorType(SHAPE, "bool"))
    return [scores, mask, *extra]


def _record(tmp_path, mod, inputs, fuse=False, **options) -> str:
    logdir = str(tmp_path)
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=options.pop("mode", "FULL_HEALTH"), **options)
    try:
        vm = relax.VirtualMachine(compile_module(mod, fuse), tvm.cpu())
        vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
    finally:
        tvmdbg.disable_dump_debug_info()
    return logdir


def _alerts(logdir, **kwargs) -> dict:
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        return analysis.alerts(reader.run(), **kwargs)


def _origin(answer: dict) -> dict:
    assert answer["first_origin_index"] is not None, answer
    return answer["alerts"][answer["first_origin_index"]]


@pytest.mark.parametrize("fuse", [False, True])
def test_a_mask_absorbed_by_its_softmax_is_no_alert_and_check_passes(tmp_path, trace_path, fuse, capsys):
    bb = relax.BlockBuilder()
    mod = _function(bb, _params(), lambda s, m: _masked_softmax(bb, s, m))
    logdir = _record(tmp_path, mod, [SCORES, CAUSAL], fuse)
    answer = _alerts(logdir)
    assert answer["num_alerts"] == 0 and answer["first_origin_index"] is None
    benign = answer["benign"]
    if not fuse:  # fused, the -inf may never leave a kernel
        assert benign["absorbed"] == 2 and benign["expected"] == 0
        add = next(o for o in benign["ops"] if o["original_ops"] == ["relax.add"])
        assert add["neg_inf"] == 1 and add["absorbed_by"] == ["relax.nn.softmax"]
    assert cli(["check", logdir]) == 0
    out = capsys.readouterr().out
    assert "no NaN/Inf alert" in out or "all finite" in out


def test_a_row_masked_entirely_is_absorbed_with_its_nan(tmp_path):
    bb = relax.BlockBuilder()
    mod = _function(bb, _params(), lambda s, m: _masked_softmax(bb, s, m, empty_rows=True))
    logdir = _record(tmp_path, mod, [SCORES, EMPTY_ROW])
    answer = _alerts(logdir)
    softmax = next(o for o in answer["benign"]["ops"] if o["original_ops"] == ["relax.nn.softmax"])
    assert softmax["nan"] == 1 and answer["num_alerts"] == 0
    assert cli(["check", logdir, "--quiet"]) == 0


def test_a_mask_the_function_returns_is_an_alert(tmp_path):
    bb = relax.BlockBuilder()
    mod = _function(bb, _params(), lambda s, m: _masked_softmax(bb, s, m, returns_mask=True))
    logdir = _record(tmp_path, mod, [SCORES, CAUSAL])
    answer = _alerts(logdir)
    assert answer["benign"]["absorbed"] == 0
    assert [o["op_type"] for o in _origin(answer)["original_ops"]] == ["relax.where"]
    assert cli(["check", logdir]) == 1


def test_a_mask_whose_consumer_was_not_traced_is_an_alert(tmp_path):
    # op_regex leaves the softmax out: nothing shows that it absorbed the -inf.
    bb = relax.BlockBuilder()
    mod = _function(bb, _params(), lambda s, m: _masked_softmax(bb, s, m))
    logdir = _record(tmp_path, mod, [SCORES, CAUSAL], op_regex="where|add")
    answer = _alerts(logdir)
    assert answer["num_alerts"] == 2 and answer["benign"]["absorbed"] == 0
    assert cli(["check", logdir]) == 1


def _hidden_log(bb, x):
    """log(0) = -inf, then exp turns it into 0: computed, then hidden."""
    made = bb.emit(relax.op.log(x))
    return bb.emit(relax.op.exp(made))


def test_a_computed_inf_hidden_by_a_later_op_is_an_origin(tmp_path):
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    bb = relax.BlockBuilder()
    mod = _function(bb, [x], lambda x: _hidden_log(bb, x))
    logdir = _record(tmp_path, mod, [np.array([0, 1, 2, 3], "float32")])
    answer = _alerts(logdir)
    assert answer["benign"]["absorbed"] == 0
    assert [o["op_type"] for o in _origin(answer)["original_ops"]] == ["relax.log"]
    assert cli(["check", logdir]) == 1


def test_expected_nonfinite_ops_are_listed_apart_by_keyword_and_by_flag(tmp_path, capsys):
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    bb = relax.BlockBuilder()
    mod = _function(bb, [x], lambda x: _hidden_log(bb, x))
    data = [np.array([0, 1, 2, 3], "float32")]
    declared = _record(tmp_path / "declared", mod, data, expected_nonfinite="log")
    answer = _alerts(declared)
    assert answer["num_alerts"] == 0 and answer["benign"]["expected"] == 1
    assert answer["benign"]["expected_nonfinite"] == "log"
    assert cli(["check", declared]) == 0
    # The same dump without the keyword, told by the CLI flag (and the analysis' argument).
    plain = _record(tmp_path / "plain", mod, data)
    assert cli(["check", plain, "--quiet"]) == 1
    capsys.readouterr()
    assert cli(["check", plain, "--expected-nonfinite", "relax\\.log"]) == 0
    assert "1 expected by 'relax\\\\.log'" in capsys.readouterr().out
    assert cli(["alerts", plain, "--expected-nonfinite", "log"]) == 0
    assert "Expected non-finite" in capsys.readouterr().out
    assert _alerts(plain, expected_nonfinite="log")["num_alerts"] == 0
    with pytest.raises(SystemExit):
        cli(["check", plain, "--expected-nonfinite", "("])
    with pytest.raises(ValueError, match="expected_nonfinite"):
        tvmdbg.enable_dump_debug_info(tmp_path / "bad", expected_nonfinite="(")


@pytest.mark.parametrize("fuse", [False, True])
def test_the_real_bug_after_a_mask_is_the_first_origin(tmp_path, trace_path, fuse):
    # A division by a zero parameter after the masked softmax, in the same call: the mask is
    # absorbed and listed apart; the division, computed from finite inputs, is the origin.
    zero = relax.Var("zero", relax.TensorType((), "float32"))

    def body(scores, mask, zero):
        return _masked_softmax(bb, scores, mask, then=lambda out: bb.emit(relax.op.divide(out, zero)))

    bb = relax.BlockBuilder()
    mod = _function(bb, _params(zero), body)
    logdir = _record(tmp_path, mod, [SCORES, CAUSAL, np.zeros((), "float32")], fuse)
    answer = _alerts(logdir)
    origin = _origin(answer)
    assert "relax.divide" in [o["op_type"] for o in origin["original_ops"]]
    if len(origin["original_ops"]) > 1:  # fused with the softmax that absorbed the -inf: replayed
        assert origin["confirmed"] == "replay" and origin["inner_op"]["op_type"] == "relax.divide"
    assert all("relax.where" not in [o["op_type"] for o in a["original_ops"]] for a in answer["alerts"])
    assert cli(["check", logdir]) == 1
