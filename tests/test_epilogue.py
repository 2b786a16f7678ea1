"""Health counted inside the producing kernel (capture/epilogue.py): the kernels that store
each output element once count it in their own loop, on every health dtype, odd and empty
shapes and planted NaN/Inf (with the size threshold lifted), with the same values as numpy and
unchanged outputs; the others (reductions, FULL_STATS, outputs that stay in cache by default)
keep the separate summary kernel."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from models import compile_module, small_cnn
from test_health_counts import _array
from test_instrument_modes import _expected
from tvm import relax

import tvmdbg
from tvmdbg_tb.capture import compiled, counting, epilogue

DTYPES = sorted(compiled.HEALTH_DTYPES)
SHAPES = [(), (0,), (1,), (7,), (16,), (64,), (3, 5, 7), (3, 5, 16), (2, 0, 32), (4, 32), (1, 1, 1, 1, 13), (1, 1, 48)]


def _where_module(dtype: str, shapes=SHAPES):
    """One function per shape: out = where(mask, x, y), an elementwise kernel of any dtype."""
    bb = relax.BlockBuilder()
    for k, shape in enumerate(shapes):
        mask = relax.Var("mask", relax.TensorType(shape, "bool"))
        x = relax.Var("x", relax.TensorType(shape, dtype))
        y = relax.Var("y", relax.TensorType(shape, dtype))
        with bb.function(f"f{k}", [mask, x, y]):
            with bb.dataflow():
                out = bb.emit_output(relax.op.where(mask, x, y))
            bb.emit_func_output(out)
    return bb.get()


def _where_calls(dtype: str) -> list[tuple[str, tuple]]:
    """A call of each f{k} of _where_module: with planted NaN/Inf (the guarded kernel counts
    those), then finite."""
    calls = []
    for finite in (False, True):
        for k, shape in enumerate(SHAPES):
            mask = np.random.default_rng(k).random(shape) < 0.6
            x, y = _array(dtype, shape, k), _array(dtype, shape, k + 100)
            if finite and dtype.startswith("float"):
                x, y = np.nan_to_num(x, posinf=3, neginf=-3), np.nan_to_num(y, posinf=2, neginf=-2)
            calls.append((f"f{k}", (mask, x, y)))
    return calls


def _traced(logdir, mode: str, build):
    """Runs build() -> (executable, [(function, inputs)]) under tvmdbg; the outputs (a tuple's
    flattened), the run read back, and each function's instrumentation (ExecutableInfo.compiled)."""
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        executable, calls = build()
        vm = relax.VirtualMachine(executable, tvm.cpu())
        outputs = []
        for name, inputs in calls:
            result = vm[name](*[tvm.runtime.tensor(a) for a in inputs])
            outputs += [result.numpy()] if hasattr(result, "numpy") else [o.numpy() for o in result]
        functions = dict(vm._tvmdbg_info.compiled)
    finally:
        tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(str(logdir))
    reader.update()
    return outputs, reader.run(), functions


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_counts_match_numpy(tmp_path, monkeypatch, dtype):
    monkeypatch.setattr(counting, "IN_LOOP_BYTES", 0)  # every output counted in its kernel
    calls = _where_calls(dtype)

    def build():
        return compile_module(_where_module(dtype), False), calls

    outputs, run, functions = _traced(tmp_path, "FULL_HEALTH", build)
    assert run.num_traces() == len(calls)
    for k, ((_, (mask, x, y)), out) in enumerate(zip(calls, outputs)):
        expected = np.where(mask, x, y)
        np.testing.assert_array_equal(out, expected)  # the fused kernel still computes its output
        trace = run.trace(k)
        assert list(trace.debug_values) == _expected("FULL_HEALTH", expected), (dtype, expected.shape, k)
    assert all(functions[f"f{k}"].rows[0].fused for k in range(len(SHAPES))), dtype


def test_outputs_that_stay_in_cache_keep_the_summary_kernel(tmp_path):
    """By default only outputs of counting.IN_LOOP_BYTES or more are counted in their kernel
    (smaller ones are still in cache for the separate summary kernel, and every counted loop
    is more code for LLVM to compile); both count the same."""
    limit = counting.IN_LOOP_BYTES // 4  # float32 elements
    shapes = [(4, 16), (limit // 16, 16), (3, limit // 3 - 1)]
    arrays = [(np.ones(s, bool), _array("float32", s, k), _array("float32", s, k)) for k, s in enumerate(shapes)]

    def build():
        return compile_module(_where_module("float32", shapes), False), [(f"f{k}", a) for k, a in enumerate(arrays)]

    outputs, run, functions = _traced(tmp_path, "FULL_HEALTH", build)
    for k, out in enumerate(outputs):
        assert list(run.trace(k).debug_values) == _expected("FULL_HEALTH", out)
    assert [functions[f"f{k}"].rows[0].fused for k in range(len(shapes))] == [False, True, False]


def _cnn():
    executable, inputs = small_cnn()  # compiled while tvmdbg is enabled
    return executable, [("main", inputs)]


def test_only_kernels_storing_each_element_once_are_fused(tmp_path, monkeypatch):
    """The CNN: convolutions (their ReLU stores the output) and the dense layer (its add)
    count their own output; the max-pools (a reduction into their output) keep the separate
    summary; the last counts match the output."""
    monkeypatch.setattr(counting, "IN_LOOP_BYTES", 0)
    outputs, run, functions = _traced(tmp_path, "FULL_HEALTH", _cnn)
    rows = functions["main"].rows
    fused = {row.site.kernel: row.fused for row in rows}
    assert {k for k in fused if k.startswith("max_pool2d")} == {"max_pool2d", "max_pool2d1"}
    assert {k: v for k, v in fused.items() if k.startswith("max_pool2d")} == {"max_pool2d": False, "max_pool2d1": False}
    assert {k: v for k, v in fused.items() if k.startswith(("fused_conv2d", "fused_matmul"))} == {
        "fused_conv2d_relu": True,
        "fused_conv2d1_relu1": True,
        "fused_matmul_add": True,
    }, fused
    last = run.trace(run.num_traces() - 1)
    assert list(last.debug_values) == _expected("FULL_HEALTH", outputs[0])


def test_full_stats_keeps_the_summary_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(counting, "IN_LOOP_BYTES", 0)
    _, _, functions = _traced(tmp_path, "FULL_STATS", _cnn)
    rows = functions["main"].rows
    assert rows and not any(row.fused for row in rows)


def test_unsupported_kernel_shapes_are_left_alone():
    """epilogue.fuse declines a reduction's output and an out-of-range position."""
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def row_sum(a: T.Buffer((4, 8), "float32"), b: T.Buffer((4,), "float32")):
        for i, j in T.grid(4, 8):
            with T.sblock("sum"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    b[vi] = T.float32(0)
                b[vi] = b[vi] + a[vi, vj]

    assert epilogue.fuse(row_sum, 1) is None
    assert epilogue.fuse(row_sum, 5) is None


def test_padding_gather_and_concat_kernels_count_their_output(tmp_path, monkeypatch):
    """Outputs made by conditional reads (pad), gathers (take) and concatenation, counted in
    their own kernel, stay right and count like numpy (a planted NaN included)."""
    monkeypatch.setattr(counting, "IN_LOOP_BYTES", 0)
    rng = np.random.default_rng(0)
    image = rng.standard_normal((1, 4, 126, 126)).astype("float32")
    image[0, 0, 0, 0] = np.nan
    indices = rng.integers(0, 4 * 128 * 128, size=70000).astype("int64")
    table = rng.standard_normal((300, 256)).astype("float32")

    def build():
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorType(image.shape, "float32"))
        i = relax.Var("i", relax.TensorType(indices.shape, "int64"))
        y = relax.Var("y", relax.TensorType(table.shape, "float32"))
        with bb.function("main", [x, i, y]):
            with bb.dataflow():
                padded = bb.emit(relax.op.nn.pad(x, (0, 0, 0, 0, 1, 1, 1, 1), pad_value=0.0))
                taken = bb.emit(relax.op.take(relax.op.reshape(padded, (4 * 128 * 128,)), i, axis=0))
                joined = bb.emit(relax.op.concat([y, y], axis=0))
                out = bb.emit_output((padded, taken, joined))
            bb.emit_func_output(out)
        return compile_module(bb.get(), False), [("main", (image, indices, table))]

    outs, run, functions = _traced(tmp_path, "FULL_HEALTH", build)
    padded = np.pad(image, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for out, expected in zip(outs, [padded, padded.reshape(-1)[indices], np.concatenate([table, table])]):
        np.testing.assert_array_equal(out, expected)
    assert [row.fused for row in functions["main"].rows] == [True, True, True]
    assert [list(run.trace(k).debug_values) for k in range(3)] == [_expected("FULL_HEALTH", o) for o in outs]


@pytest.mark.parametrize("dtype", DTYPES)
def test_parameters_counted_by_the_kernel_that_reads_them(tmp_path, monkeypatch, dtype):
    """where(mask, x, y) reads its three parameters element by element: the kernel counts
    them too (no separate pass over them), and each call's Execution input summaries are
    numpy's counts, with planted NaN/Inf (the summary kernel it then calls counts those) and
    finite data, on every shape, odd and empty ones included."""
    monkeypatch.setattr(counting, "IN_LOOP_BYTES", 0)
    calls = _where_calls(dtype)

    def build():
        return compile_module(_where_module(dtype), False), calls

    _, run, functions = _traced(tmp_path, "FULL_HEALTH", build)
    assert run.num_executions() == len(calls)
    for k, (_, arrays) in enumerate(calls):
        execution = run.execution(k)
        for summary, array in zip(execution.inputs, arrays):
            assert list(summary.debug_values) == _expected("FULL_HEALTH", array), (dtype, array.shape, k)
    in_kernels = [functions[f"f{k}"].params_in_kernels for k in range(len(SHAPES))]
    # A scalar kernel's block reads its inputs with no index: they keep the separate summary.
    assert in_kernels == [[0, 1, 2] if shape else [] for shape in SHAPES]


def test_a_nan_written_into_a_parameter_between_calls_is_counted(tmp_path):
    """The 1M-element case: y = x + 1 counts x inside the add; a NaN written into x in place
    between two calls is in the second call's input summary (every call counts it)."""
    from models import big_elementwise

    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        executable, (data,) = big_elementwise()
        vm = relax.VirtualMachine(executable, tvm.cpu())
        x = tvm.runtime.tensor(data)
        vm["main"](x)
        view = np.from_dlpack(x)
        view[12345] = np.nan
        vm["main"](x)
        function = vm._tvmdbg_info.compiled["main"]
    finally:
        tvmdbg.disable_dump_debug_info()
    assert function.params_in_kernels == [0]
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    run = reader.run()
    clean, poisoned = (list(run.execution(k).inputs[0].debug_values) for k in range(2))
    assert clean == _expected("FULL_HEALTH", data)
    assert poisoned == _expected("FULL_HEALTH", view) and poisoned[6] == 1.0  # one NaN


def test_once_per_value_keeps_the_parameters_separate_summary(tmp_path):
    """Under param_summaries="once_per_value" a parameter already summarised is skipped by
    its guarded kernel: counting it inside its consumer would redo that work every call."""
    from models import big_elementwise

    tvmdbg.enable_dump_debug_info(str(tmp_path), "FULL_HEALTH", param_summaries="once_per_value")
    try:
        executable, (data,) = big_elementwise()
        vm = relax.VirtualMachine(executable, tvm.cpu())
        x = tvm.runtime.tensor(data)
        for _ in range(2):
            vm["main"](x)
        function = vm._tvmdbg_info.compiled["main"]
    finally:
        tvmdbg.disable_dump_debug_info()
    assert function.params_in_kernels == [] and function.rows[0].fused
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    second = reader.run().execution(1).inputs[0]
    assert list(second.debug_values) == _expected("FULL_HEALTH", data) and second.summarized_in_execution == 0


def test_a_fused_kernel_counts_a_parameter_in_the_op_that_reads_it(tmp_path):
    """`x * 1.0001 + 0.5` fused (the acceptance's 1M shape): the output's block reads the
    multiply's values, not x, so the multiply's block counts x as it reads it (no separate
    pass over 4 MB); with planted NaN, infinities and zeros, then finite data, the input and
    output summaries are numpy's and the output is unchanged."""
    from models import fused_scale_shift

    data = np.linspace(-1, 1, 1 << 20, dtype="float32")
    poisoned = data.copy()
    poisoned[[3, 70000, 500000, 800000, 900000]] = [np.nan, np.inf, -np.inf, 0.0, np.nan]

    def build():
        executable, _ = fused_scale_shift()
        return executable, [("main", (poisoned,)), ("main", (data,))]

    outputs, run, functions = _traced(tmp_path, "FULL_HEALTH", build)
    assert functions["main"].params_in_kernels == [0] and functions["main"].rows[0].fused
    for k, (array, out) in enumerate(zip((poisoned, data), outputs)):
        np.testing.assert_array_equal(out, array * np.float32(1.0001) + np.float32(0.5))
        assert list(run.execution(k).inputs[0].debug_values) == _expected("FULL_HEALTH", array), k
        assert list(run.trace(k).debug_values) == _expected("FULL_HEALTH", out), k


def test_the_fused_health_bench_runs_and_its_variants_agree(capsys):
    """bench/bench_fused_health.py builds hand-written TIR against tvmdbg's stats row: every
    variant (tvmdbg's kernel counting its output, and its input too, the summary kernel, TIR
    counting lane by lane and scalar) must report the same counts of y = x + 1 on 1M floats."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "bench" / "bench_fused_health.py"
    spec = importlib.util.spec_from_file_location("bench_fused_health", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(calls=1)
    assert "counting in the kernel (epilogue.fuse)" in capsys.readouterr().out
