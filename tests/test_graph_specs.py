"""Tensor specs and names of the graph records, against TVM's own printer.

graphs.tensor_specs reads dtypes and static dims without running the TVMScript printer (and
caches the interned PrimTypes it reads): what it returns, and what the dump holds, must still
be exactly what str() of the IR gives.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

import tvmdbg
from tvmdbg_tb.capture import graphs


def _printer_specs(ty) -> list[tuple[str, tuple[int, ...], str]]:
    """The reference: every dim printed by str() (the TVMScript printer)."""
    if isinstance(ty, relax.TupleType):
        return [spec for field in ty.fields for spec in _printer_specs(field)]
    if not isinstance(ty, relax.TensorType):
        return []
    dtype = str(ty.dtype)
    if isinstance(ty.shape, relax.ShapeExpr):
        values = list(ty.shape.values)
        dims = tuple(int(v.value) if isinstance(v, tvm.tirx.IntImm) else -1 for v in values)
        printed = "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"
        return [(dtype, dims, printed)]
    return [(dtype, tuple([-1] * max(int(ty.ndim), 0)), "")]


def _symbolic_module():
    """Static, symbolic, scalar and unknown-rank tensors of several dtypes, and a tuple."""
    n = tvm.tirx.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n, 4), "float32"))
    y = relax.Var("y", relax.TensorType((3,), "int8"))
    with bb.function("main", [x, y]):
        with bb.dataflow():
            e = bb.emit(relax.op.exp(x))
            s = bb.emit(relax.op.sum(e, axis=[0, 1]))
            twice = bb.emit(relax.op.add(e, e))
            flags = bb.emit(relax.op.greater(twice, relax.const(1.0, "float32")))
            wide = bb.emit(relax.op.astype(y, "int64"))
            halves = bb.emit(relax.op.astype(twice, "float16"))
            out = bb.emit_output(relax.Tuple([s, flags, wide, halves]))
        bb.emit_func_output(out)
    return bb.get()


def test_tensor_specs_match_the_printer_on_a_lowered_module():
    mod = relax.transform.LegalizeOps()(_symbolic_module())
    types = []
    for _, func in mod.functions_items():
        if not isinstance(func, relax.Function):
            continue
        types += [p.ty for p in func.params]
        for binding in graphs._bindings(func.body):
            types.append(binding.var.ty)
            value = binding.value
            if isinstance(value, relax.Call):
                types += list(value.ty_args)
    types += [relax.TensorType(ndim=2, dtype="float32"), relax.TensorType(ndim=-1, dtype="bool")]
    dtypes = set()
    for ty in types:
        expected = _printer_specs(ty)
        assert graphs.tensor_specs(ty) == expected, ty
        assert graphs.tensor_specs(ty) == expected, ty  # again, from the caches
        dtypes |= {spec[0] for spec in expected}
    assert {"float32", "int8", "int64", "bool", "float16"} <= dtypes
    assert any(-1 in spec[1] and spec[2] for ty in types for spec in _printer_specs(ty))  # symbolic dims


def test_dims_of_one_value_in_several_int_widths_print_as_their_own():
    """The printed dims are kept per (value, bit width): dims given as int32, int64 and int16
    (ShapeExpr may widen them), in any order, print as the printer does, the first and any
    later time."""
    widths = ["int64", "int32", "int16", "int64", "int32"]
    types = [
        relax.TensorType(relax.ShapeExpr([tvm.tirx.IntImm(w, 16), tvm.tirx.IntImm(w, 3)]), "float32") for w in widths
    ]
    types.append(
        relax.TensorType(relax.ShapeExpr([tvm.tirx.IntImm("int32", 16), tvm.tirx.IntImm("int64", 16)]), "int8")
    )
    for ty in types + types:
        assert graphs.tensor_specs(ty) == _printer_specs(ty), ty


def test_items_reads_an_array_like_list():
    for values in ([], [1], [3, 1, 2], ["a", "b"]):
        array = tvm.runtime.convert(values)
        assert graphs.items(array) == list(array)
        assert graphs.array_size(array) == len(values)


def test_dumped_graph_specs_and_names_match_the_ir(tmp_path):
    """A symbolic-shape model compiled and run under FULL_HEALTH: every op record of the dump
    carries the names, kernels and specs the printer gives, and the graph is complete."""
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        executable = tvm.compile(_symbolic_module(), "llvm")
        vm = relax.VirtualMachine(executable, tvm.cpu())
        x = np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)
        vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(np.array([1, -2, 3], "int8")))
    finally:
        tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    try:
        run = reader.run()
        (graph,) = [g for g in run.graphs() if g.name == "main"]
        assert graph.instrumentation == "compiled"
        assert list(graph.param_names) == ["x", "y"]
        n, four, three = tvm.tirx.Var("n", "int64"), tvm.tirx.IntImm("int64", 4), tvm.tirx.IntImm("int64", 3)
        assert [(p.dtype, list(p.shape), p.shape_expr) for p in graph.params] == [
            ("float32", [-1, 4], f"({n}, {four})"),
            ("int8", [3], f"({three},)"),
        ]
        ops = sorted(run.ops(graph.graph_id), key=lambda op: op.position)
        # exp, sum, add, greater, astype, astype: in the order the function binds them
        expected = [
            ("relax.exp", ("float32", [-1, 4], f"({n}, {four})")),
            ("relax.sum", ("float32", [], "()")),
            ("relax.add", ("float32", [-1, 4], f"({n}, {four})")),
            ("relax.greater", ("bool", [-1, 4], f"({n}, {four})")),
            ("relax.astype", ("int64", [3], f"({three},)")),
            ("relax.astype", ("float16", [-1, 4], f"({n}, {four})")),
        ]
        assert len(ops) == len(expected)
        for op, (op_type, spec) in zip(ops, expected):
            assert op.op_name and op.kernel and op.call_type == "call_tir"
            assert [(o.dtype, list(o.shape), o.shape_expr) for o in op.outputs] == [spec], op.op_name
            assert [o.op_type for o in op.original_ops] == [op_type], op.op_name
            assert all(o.var_name for o in op.original_ops) and op.code_location.stack_frame_ids
            assert op.inputs and all(item.name and item.spec.dtype for item in op.inputs), op.op_name
            # Every kernel execution of the run was recorded against these ops.
            assert len(run.op_trace_indices(op.op_id)) == 1, op.op_name
    finally:
        reader.close()
