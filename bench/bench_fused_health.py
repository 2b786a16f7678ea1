"""How much counting inside the producing loop could save (issue: health in the epilogue).

    TVM_NUM_THREADS=1 python bench/bench_fused_health.py

One kernel, y = x + 1 on 1M float32 (the big1M workload), timed five ways (medians of
alternating calls, this thread's CPU time): plain; followed by the separate FULL_HEALTH
summary kernel (compiled.kernel: what smaller or unfusable outputs get); the kernel tvmdbg
builds (epilogue.fuse of TVM's legalized add: the kernel writes its row itself, calling the
summary kernel only when its output holds a NaN or an infinity); hand-written TIR with the counts fused into its loop lane by lane (the
loop split by 8, vectorized, one int32 accumulator per lane and count); and fused as a plain
scalar loop. All variants must report the same counts.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tvmdbg_tb.capture.kernel_source import ROW_WIDTH  # noqa: E402  (the stats row, as tvmdbg writes it)

N = 1 << 20
LANES = 8


def _kernels():
    import tvm
    from tvm.script import tirx as T

    @T.prim_func
    def plain(a: T.handle, b: T.handle):
        T.func_attr({"tirx.noalias": True})
        A = T.match_buffer(a, (N,), "float32")
        B = T.match_buffer(b, (N,), "float32")
        for i in range(N):
            B[i] = A[i] + T.float32(1)

    @T.prim_func
    def lanes(a: T.handle, b: T.handle, stats: T.handle, row: T.int64):
        T.func_attr({"tirx.noalias": True})
        A = T.match_buffer(a, (N,), "float32")
        B = T.match_buffer(b, (N,), "float32")
        S = T.match_buffer(stats, (1, ROW_WIDTH), "float64")
        acc = T.alloc_buffer((5, LANES), "int32", scope="local")
        for k in range(5):
            for j in T.vectorized(LANES):
                acc[k, j] = 0
        for io in range(N // LANES):
            for j in T.vectorized(LANES):
                B[io * LANES + j] = A[io * LANES + j] + T.float32(1)
                acc[0, j] = acc[0, j] + T.Cast("int32", B[io * LANES + j] < T.float32(0))
                acc[1, j] = acc[1, j] + T.Cast("int32", B[io * LANES + j] > T.float32(0))
                acc[2, j] = acc[2, j] + T.Cast("int32", B[io * LANES + j] == T.float32(0))
                acc[3, j] = acc[3, j] + T.Cast("int32", B[io * LANES + j] == T.float32("-inf"))
                acc[4, j] = acc[4, j] + T.Cast("int32", B[io * LANES + j] == T.float32("inf"))
        for k in range(5):
            S[row, 2 + k] = T.float64(0)
            for j in range(LANES):
                S[row, 2 + k] = S[row, 2 + k] + T.Cast("float64", acc[k, j])

    @T.prim_func
    def scalar(a: T.handle, b: T.handle, stats: T.handle, row: T.int64):
        T.func_attr({"tirx.noalias": True})
        A = T.match_buffer(a, (N,), "float32")
        B = T.match_buffer(b, (N,), "float32")
        S = T.match_buffer(stats, (1, ROW_WIDTH), "float64")
        acc = T.alloc_buffer((5,), "int64", scope="local")
        for k in range(5):
            acc[k] = T.int64(0)
        for i in range(N):
            B[i] = A[i] + T.float32(1)
            acc[0] = acc[0] + T.Cast("int64", B[i] < T.float32(0))
            acc[1] = acc[1] + T.Cast("int64", B[i] > T.float32(0))
            acc[2] = acc[2] + T.Cast("int64", B[i] == T.float32(0))
            acc[3] = acc[3] + T.Cast("int64", B[i] == T.float32("-inf"))
            acc[4] = acc[4] + T.Cast("int64", B[i] == T.float32("inf"))
        for k in range(5):
            S[row, 2 + k] = T.Cast("float64", acc[k])

    lib = tvm.compile(tvm.IRModule({"plain": plain, "lanes": lanes, "scalar": scalar}), "llvm")
    return lib["plain"], lib["lanes"], lib["scalar"]


def _tvmdbg_fused(inputs: tuple[int, ...] = ()):
    """The add kernel as TVM legalizes it, made to count its output (and its input x when
    inputs is (0,): a parameter counted as it is read) by epilogue.fuse."""
    import tvm
    from tvm import relax

    from tvmdbg_tb.capture import epilogue

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((N,), "float32"))
    with bb.function("main", [x]):
        out = bb.emit(relax.op.add(x, relax.const(1.0, "float32")))
        bb.emit_func_output(out)
    legal = relax.transform.LegalizeOps()(bb.get())
    prim = next(f for _, f in legal.functions_items() if isinstance(f, tvm.tirx.PrimFunc))
    found = epilogue.fuse(prim, 1, inputs)
    assert found is not None and found.inputs == inputs, "epilogue.fuse declined the add kernel"
    fused = found.prim
    return tvm.compile(tvm.IRModule({"fused": fused.with_attr("global_symbol", "fused")}), "llvm")["fused"]


def _alternating_us(variants: dict, calls: int = 300) -> dict:
    """Median thread CPU time of each variant, the variants called in turn (one round each)."""
    samples = {name: [] for name in variants}
    for _ in range(calls):
        for name, fn in variants.items():
            start = time.thread_time()
            fn()
            samples[name].append(time.thread_time() - start)
    return {name: statistics.median(values) * 1e6 for name, values in samples.items()}


def main(calls: int = 300) -> None:
    """Checks that every variant reports the same counts, then times them (calls rounds)."""
    import tvm

    from tvmdbg_tb.capture import compiled

    plain, lanes, scalar = _kernels()
    kernel = tvm.get_global_func(compiled.kernel("float32"))

    def summary(tensor, stats, row):  # on a row not written yet
        np.from_dlpack(stats)[row, 0] = 0.0
        kernel(tensor, stats, row)

    fused = _tvmdbg_fused()
    fused_input = _tvmdbg_fused((0,))
    x = tvm.runtime.tensor(np.linspace(-1, 1, N, dtype="float32"))
    y = tvm.runtime.tensor(np.zeros(N, "float32"))
    stats = tvm.runtime.tensor(np.zeros((1, ROW_WIDTH), "float64"))
    counts = []

    def tvmdbg_fused():
        view[0, 0] = 0.0  # as tvmdbg.stats hands the buffer out
        fused(x, y, stats, 0)

    stats2 = tvm.runtime.tensor(np.zeros((2, ROW_WIDTH), "float64"))
    view2 = np.from_dlpack(stats2)

    def tvmdbg_fused_input():
        view2[:, 0] = 0.0
        fused_input(x, y, stats2, 0, 1)

    view = np.from_dlpack(stats)
    for variant in (
        lambda: (plain(x, y), summary(y, stats, 0)),
        tvmdbg_fused,
        lambda: lanes(x, y, stats, 0),
        lambda: scalar(x, y, stats, 0),
    ):
        variant()
        counts.append(stats.numpy()[0, 2:7].tolist())
    assert counts[0] == counts[1] == counts[2] == counts[3], counts
    tvmdbg_fused_input()
    assert stats2.numpy()[0, 2:7].tolist() == counts[0], "the output's counts"
    summary(x, stats, 0)
    assert stats2.numpy()[1, 1:7].tolist() == stats.numpy()[0, 1:7].tolist(), "the input's counts"
    medians = _alternating_us(
        {
            "plain": lambda: plain(x, y),
            "separate summary kernel": lambda: (plain(x, y), summary(y, stats, 0)),
            "counting in the kernel (epilogue.fuse)": tvmdbg_fused,
            "the same, counting its input x too": tvmdbg_fused_input,
            "separate summaries of y and x": lambda: (plain(x, y), summary(y, stats, 0), summary(x, stats, 0)),
            "counts fused lane by lane": lambda: lanes(x, y, stats, 0),
            "counts fused, scalar loop": lambda: scalar(x, y, stats, 0),
        },
        calls,
    )
    base = medians.pop("plain")
    print(f"y = x + 1 on 1M float32: plain {base:.0f} us (medians of alternating calls)")
    for name, us in medians.items():
        print(f"  {name}: {us:.0f} us ({us / base:.2f}x)")


if __name__ == "__main__":
    main()
