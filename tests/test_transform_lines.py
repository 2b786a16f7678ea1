"""Lines and compare identity through the passes users apply before tvm.compile: ops that
ToMixedPrecision re-types or adds and the fast ops FastMathTransform swaps in keep the line
and identity of the user's op (OriginalOp.rewritten_by names the pass), so a FastMathTransform
build names its fast op at the user's line, and a ToMixedPrecision build keeps each op's own
line (three ReLUs on three lines stay on three lines)."""

from __future__ import annotations

import numpy as np
import tvm
from models import compile_module, line_of
from tvm import relax
from tvm.script import relax as R

import tvmdbg
from tvmdbg_tb import analysis

X = np.random.default_rng(0).normal(size=(4, 8)).astype("float32")
W = (np.random.default_rng(1).normal(size=(8, 8)) * 0.3).astype("float32")


@tvm.script.ir_module
class Script:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            a = R.matmul(x, w)  # script: matmul 1
            r1 = R.nn.relu(a)  # script: relu 1
            b = R.matmul(r1, w)  # script: matmul 2
            r2 = R.nn.relu(b)  # script: relu 2
            r3 = R.nn.relu(R.add(r2, r1))  # script: relu 3
            e = R.exp(r3 * R.const(0.1, "float32"))  # script: exp
            t = R.tanh(e)  # script: tanh
            s = R.nn.softmax(t)  # script: softmax
            out = R.add(s, x)  # script: out
            R.output(out)
        return out


def _blockbuilder():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 8), "float32"))
    w = relax.Var("w", relax.TensorType((8, 8), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(relax.op.matmul(x, w))  # bb: matmul 1
            r1 = bb.emit(relax.op.nn.relu(a))  # bb: relu 1
            b = bb.emit(relax.op.matmul(r1, w))  # bb: matmul 2
            r2 = bb.emit(relax.op.nn.relu(b))  # bb: relu 2
            r3 = bb.emit(relax.op.nn.relu(relax.op.add(r2, r1)))  # bb: relu 3
            out = bb.emit_output(relax.op.add(r3, x))  # bb: out
        bb.emit_func_output(out)
    return bb.get()


def _run(logdir, make, transform=None, fuse=True, mode="FULL_STATS") -> str:
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        mod = make()
        if transform is not None:
            mod = transform(mod)
        vm = relax.VirtualMachine(compile_module(mod, fuse), tvm.cpu())
        vm["main"](tvm.runtime.tensor(X), tvm.runtime.tensor(W))
    finally:
        tvmdbg.disable_dump_debug_info()
    return str(logdir)


def _original_ops(logdir) -> list[tuple[str, int, str]]:
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        ops = sorted(run.ops(), key=lambda o: o.position)
        return [
            (o.op_type, run.user_frame(o.code_location).line, o.rewritten_by) for op in ops for o in op.original_ops
        ]


def test_fast_math_ops_keep_the_users_line_and_name_the_pass(tmp_path):
    ops = _original_ops(_run(tmp_path / "fast", lambda: Script, relax.transform.FastMathTransform(), fuse=False))
    for op_type, fast, marker in (("relax.exp", "fast_exp", "exp"), ("relax.tanh", "fast_tanh", "tanh")):
        assert (op_type, line_of(__file__, f"# script: {marker}"), f"FastMathTransform: {fast}") in ops
    softmax = ("relax.nn.softmax", line_of(__file__, "# script: softmax"), "FastMathTransform: fast_softmax")
    assert softmax in ops
    # Ops the pass left alone are not marked.
    assert ("relax.matmul", line_of(__file__, "# script: matmul 1"), "") in ops


def test_fast_math_build_names_the_fast_op_at_the_users_line(tmp_path):
    """Against the plain build, value for value (no tolerance): the first kernel that differs
    is the first fast op, compared with the exp it replaced, at the exp's line."""
    plain = _run(tmp_path / "plain", lambda: Script, mode="FULL_TENSOR")
    fast = _run(tmp_path / "fast", lambda: Script, relax.transform.FastMathTransform(), mode="FULL_TENSOR")
    result = analysis.compare(fast, plain, rtol=0.0, atol=0.0)
    assert not [r for r in result["ops"] if r["kind"] == "op" and r["status"] == "not_comparable"]
    first = result["first_divergence"]
    assert first is not None and first["location"]["line"] in (
        line_of(__file__, "# script: exp"),
        line_of(__file__, "# script: tanh"),
    )
    made = [o.get("rewritten_by", "") for o in first["fused_ops_a"]]
    assert any(m.startswith("FastMathTransform: fast_") for m in made), first["fused_ops_a"]
    assert "fast_" in first["kernel_a"]
    # At a tolerance fit for fast math, the builds agree.
    assert analysis.compare(fast, plain, rtol=1e-4, atol=1e-5)["status"] == "within"


def test_mixed_precision_keeps_each_ops_own_line(tmp_path):
    for name, make, marker in (("bb", _blockbuilder, "bb"), ("script", lambda: Script, "script")):
        transform = relax.transform.ToMixedPrecision(out_dtype="float32")
        ops = _original_ops(_run(tmp_path / name, make, transform, fuse=False))
        # The re-typed ReLUs (a cast of a ReLU's output also stands for its ReLU: "relax.astype").
        relus = [line for op_type, line, made in ops if made == "ToMixedPrecision: relax.nn.relu"]
        assert relus == [line_of(__file__, f"# {marker}: relu {i}") for i in (1, 2, 3)]
        casts = [line for op_type, line, made in ops if op_type == "relax.nn.relu" and made.endswith("astype")]
        assert set(casts) <= set(relus)
        matmuls = sorted({line for op_type, line, _ in ops if op_type == "relax.matmul"})
        assert matmuls == [line_of(__file__, f"# {marker}: matmul {i}") for i in (1, 2)]


def test_mixed_precision_build_compares_op_by_op_with_float32(tmp_path):
    """Every kernel of the float16 build, fused or not, lines up with the float32 build's op
    (a cast of an op's output stands for that op): nothing is left "not comparable" but the
    casts of the inputs, and the ReLUs agree within float16's tolerance."""
    reference = _run(tmp_path / "fp32", _blockbuilder, fuse=False)
    for fuse in (False, True):
        mixed = _run(
            tmp_path / f"fp16_{fuse}", _blockbuilder, relax.transform.ToMixedPrecision(out_dtype="float32"), fuse
        )
        result = analysis.compare(mixed, reference, rtol=2e-2, atol=2e-2)
        assert result["status"] == "within", [r for r in result["ops"] if r["status"] == "divergent"]
        loose = [r for r in result["ops"] if r["kind"] == "op" and r["status"] == "not_comparable"]
        assert all(r["op_type"] == "relax.astype" for r in loose), loose
        if not fuse:  # each ReLU against its own float32 ReLU, at its line
            relus = {
                r["location"]["line"]
                for r in result["ops"]
                if r["op_type"] == "relax.nn.relu" and r["status"] == "within"
            }
            assert relus == {line_of(__file__, f"# bb: relu {i}") for i in (1, 2, 3)}
