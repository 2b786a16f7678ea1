"""A fused kernel lists every Relax op fused into it, its last one included (FuseOps gives
the last binding of a group a fresh var, so that op is found by its operands), each at the
line that created it; ops in different functions with the same var names stay apart."""

from __future__ import annotations

import numpy as np
import tvm
from models import compile_module, line_of
from tvm import relax
from tvm.script import relax as R

import tvmdbg


def _build():
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((2, 4), "float32"))
    w = relax.Var("w", R.Tensor((4, 4), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(relax.op.matmul(x, w))  # fusion: matmul
            b = bb.emit(relax.op.add(a, x))  # fusion: add
            c = bb.emit(relax.op.nn.relu(b))  # fusion: relu
            d = bb.emit(relax.op.log(c))  # fusion: log
            out = bb.emit_output(relax.op.add(d, x))  # fusion: last add
        bb.emit_func_output(out)
    y = relax.Var("x", R.Tensor((2, 4), "float32"))  # same name, another function
    with bb.function("other", [y]):
        with bb.dataflow():
            e = bb.emit(relax.op.exp(y))  # fusion: exp in other
            out2 = bb.emit_output(relax.op.multiply(e, y))  # fusion: multiply in other
        bb.emit_func_output(out2)
    return bb.get()


def test_fused_kernel_lists_all_its_ops_with_their_lines(tmp_path):
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="NO_TENSOR")
    try:
        vm = relax.VirtualMachine(compile_module(_build(), fuse=True), tvm.cpu())
        x = np.ones((2, 4), "float32")
        vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(np.eye(4, dtype="float32")))
        vm["other"](tvm.runtime.tensor(x))
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        by_name = {g.name: g.graph_id for g in run.graphs()}

        def originals(function):
            [op] = [op for op in run.ops(by_name[function]) if op.kernel.startswith("fused")]
            return [(o.op_type, run.user_frame(o.code_location).line) for o in op.original_ops]

        expected = [
            ("relax.matmul", line_of(__file__, "# fusion: matmul")),
            ("relax.add", line_of(__file__, "# fusion: add")),
            ("relax.nn.relu", line_of(__file__, "# fusion: relu")),
            ("relax.log", line_of(__file__, "# fusion: log")),
            ("relax.add", line_of(__file__, "# fusion: last add")),
        ]
        assert originals("main") == expected
        assert originals("other") == [
            ("relax.exp", line_of(__file__, "# fusion: exp in other")),
            ("relax.multiply", line_of(__file__, "# fusion: multiply in other")),
        ]


def _repeated_blocks():
    """Three identical blocks (FuseOps makes one fused function, called three times), the
    second reading a tuple item as GPT-2's attention reads a split."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((2, 8), "float32"))
    w = relax.Var("w", R.Tensor((8, 8), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            h0 = bb.emit(relax.op.matmul(x, w))  # block 0: matmul
            r0 = bb.emit(relax.op.nn.relu(relax.op.add(h0, x)))  # block 0: add relu
            parts = bb.emit(relax.op.split(r0, 2, axis=1))  # split
            half = bb.emit(relax.op.concat([relax.TupleGetItem(parts, 1), relax.TupleGetItem(parts, 0)], axis=1))
            h1 = bb.emit(relax.op.matmul(half, w))  # block 1: matmul
            r1 = bb.emit(relax.op.nn.relu(relax.op.add(h1, half)))  # block 1: add relu
            h2 = bb.emit(relax.op.matmul(r1, w))  # block 2: matmul
            r2 = bb.emit(relax.op.nn.relu(relax.op.add(h2, r1)))  # block 2: add relu
            out = bb.emit_output(r2)
        bb.emit_func_output(out)
    return bb.get()


def test_each_call_of_a_shared_fused_function_keeps_its_own_lines(tmp_path):
    """FuseOps gives identical groups one function whose bindings keep the first group's vars:
    every call site still lists its own ops at their own lines."""
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="NO_TENSOR")
    try:
        vm = relax.VirtualMachine(compile_module(_repeated_blocks(), fuse=True), tvm.cpu())
        vm["main"](tvm.runtime.tensor(np.ones((2, 8), "float32")), tvm.runtime.tensor(np.eye(8, dtype="float32")))
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        sites = [
            op for op in sorted(run.ops(run.graphs()[0].graph_id), key=lambda o: o.position) if "matmul" in op.kernel
        ]
        assert len(sites) == 3 and len({op.kernel for op in sites}) == 1  # one shared fused function
        lines = [[run.user_frame(o.code_location).line for o in op.original_ops] for op in sites]
        assert lines == [
            [line_of(__file__, f"# block {i}: matmul")] + [line_of(__file__, f"# block {i}: add relu")] * 2
            for i in range(3)
        ]
