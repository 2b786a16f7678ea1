"""Overhead of tvmdbg per tensor debug mode, against the same models uninstrumented.

    .venv/bin/python bench/bench_overhead.py [--quick] [--threads N] [--workloads a,b]

Workloads: a chain of 200 tiny element-wise kernels (added cost per kernel; chain200_fallback:
the same traced by the VM instrument), one kernel with a 1M-element output (compared with one
numpy read of that tensor), `x * 1.0001 + 0.5` on 1M floats fused into one kernel (fused1M), an MLP 784-1024-1024-10 with its weights as parameters (mlp1M;
FULL_HEALTH+once: param_summaries="once_per_value"), and whole models
compiled with fusion: the demo training step (digits MLP, tvm.relax.training), a small CNN
and a small transformer block. For each mode the model is compiled under that mode (so
compile-time instrumentation applies) next to an uninstrumented copy compiled without
tvmdbg; calls of the two alternate, so machine noise hits both alike. The table gives the
medians, the median of the per-pair ratios, and the added microseconds per kernel
(kernel count read back from the dump: records/call shows every kernel execution recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

MODES = ["NO_TENSOR", "CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH", "FULL_STATS", "SHAPE"]
# Deep mode (trace_fused_ops=True: every fused kernel call replayed op by op), measured on the
# fused models where it matters.
DEEP = "FULL_HEALTH+deep"
DEEP_WORKLOADS = {"cnn", "transformer"}
# param_summaries="once_per_value": arguments summarised once per tensor object (param_cache).
ONCE = "FULL_HEALTH+once"
ONCE_WORKLOADS = {"big1M", "mlp1M", "train_step"}


def _vm_workload(build):
    """A callable running one traced-or-not VM call of a freshly compiled model."""
    import tvm
    from tvm import relax

    from tvmdbg_tb.tracing import vm_wrapper

    executable, inputs = build()
    vm = relax.VirtualMachine(executable, tvm.cpu())
    if not _tracing[0]:
        vm_wrapper.exclude(vm)
    args = [tvm.runtime.tensor(a) for a in inputs]
    function = vm["main"]
    return lambda: function(*args)


def _mlp():
    """An MLP 784-1024-1024-10 (batch 1, fused), its ~1.8M weights passed as parameters."""
    import models
    import numpy as np
    from tvm import relax

    dims = (784, 1024, 1024, 10)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, dims[0]), "float32"))
    weights = [relax.Var(f"w{i}", relax.TensorType((dims[i], dims[i + 1]), "float32")) for i in range(3)]
    with bb.function("main", [x, *weights]):
        with bb.dataflow():
            value = x
            for i, w in enumerate(weights):
                value = bb.emit(relax.op.matmul(value, w))
                if i < 2:
                    value = bb.emit(relax.op.nn.relu(value))
            out = bb.emit_output(value)
        bb.emit_func_output(out)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((1, dims[0])).astype("float32")]
    arrays += [(rng.standard_normal((dims[i], dims[i + 1])) / 32).astype("float32") for i in range(3)]
    return models.compile_module(bb.get(), True), arrays


def _training_workload():
    import models

    from tvmdbg_tb.tracing import vm_wrapper

    training = models.digits_training(lr=0.05, fuse=True)
    if not _tracing[0]:
        vm_wrapper.exclude(training.trainer.vm)
    trainer = training.trainer
    return lambda: trainer.update(training.inputs, training.targets)


def _workloads():
    import models

    return {
        "chain200": lambda: _vm_workload(lambda: models.chain(200, 16, fuse=False)),
        # The same chain traced by the VM instrument (the path of check-numerics, control
        # flow and executables compiled before enable or loaded from disk).
        "chain200_fallback": lambda: _vm_workload(lambda: models.chain(200, 16, fuse=False)),
        "big1M": lambda: _vm_workload(models.big_elementwise),
        # `x * 1.0001 + 0.5` fused into one kernel (the multiply's values inside it).
        "fused1M": lambda: _vm_workload(models.fused_scale_shift),
        "mlp1M": lambda: _vm_workload(_mlp),
        "train_step": _training_workload,
        "cnn": lambda: _vm_workload(models.small_cnn),
        "transformer": lambda: _vm_workload(models.transformer_block),
    }


_tracing = [False]


_clock = [time.perf_counter]


def _paired(base, traced, calls: int, seconds: float) -> tuple[float, float, float]:
    """Medians of alternating calls (base, traced) and the median ratio of the pairs."""
    for _ in range(3):
        base()
        traced()
    a, b = [], []
    clock = _clock[0]
    deadline = time.perf_counter() + seconds
    while len(a) < calls or (time.perf_counter() < deadline and len(a) < 20 * calls):
        start = clock()
        base()
        middle = clock()
        traced()
        a.append(middle - start)
        b.append(clock() - middle)
    ratio = statistics.median(y / x for x, y in zip(a, b))
    return statistics.median(a) * 1e6, statistics.median(b) * 1e6, ratio


def _kernels_per_call(logdir: str) -> float:
    import tvmdbg

    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        return run.num_traces() / max(run.num_executions(), 1)


def _load_native() -> None:
    """Builds (once, cached) and loads the native helpers before anything is timed, as a
    long-running program has them (they load in the background at the first traced run)."""
    from tvmdbg_tb.events import native_records
    from tvmdbg_tb.tracing import native_call, native_rows

    native_records.LIBRARY.load()
    native_rows.LIBRARY.load()
    native_call.LIBRARY.load()


def measure(name: str, calls: int, seconds: float, modes: list[str] | None = None) -> list[tuple]:
    from tvmdbg_tb.tracing.state import Paths, TracingState, activated

    _load_native()
    if name.endswith("_fallback"):
        from tvmdbg_tb.tracing import native_filter

        native_filter.load()  # built (once, cached) before anything is timed
    with activated(TracingState(paths=Paths(compiled=not name.endswith("_fallback")))):
        return _measure_modes(name, calls, seconds, modes)


def _measure_modes(name: str, calls: int, seconds: float, modes: list[str] | None) -> list[tuple]:
    import tvmdbg

    _load_native()
    build = _workloads()[name]
    rows = []
    default = (
        ["NO_TENSOR", "FULL_HEALTH", "FULL_TENSOR"]
        if name.endswith("_fallback")
        else MODES + ([DEEP] if name in DEEP_WORKLOADS else []) + ([ONCE] if name in ONCE_WORKLOADS else [])
    )
    for mode in modes or default:
        if (mode == DEEP and name not in DEEP_WORKLOADS) or (mode == ONCE and name not in ONCE_WORKLOADS):
            continue
        _tracing[0] = False
        base = build()
        with tempfile.TemporaryDirectory() as logdir:
            tvmdbg.enable_dump_debug_info(
                logdir,
                tensor_debug_mode=mode.split("+")[0],
                circular_buffer_size=-1,
                trace_fused_ops=mode == DEEP,
                param_summaries="once_per_value" if mode == ONCE else "every_call",
            )
            try:
                _tracing[0] = True
                traced = build()
                base_us, traced_us, ratio = _paired(base, traced, calls, seconds)
            finally:
                tvmdbg.disable_dump_debug_info()
            kernels = _kernels_per_call(logdir)
        rows.append(
            (
                name,
                mode,
                base_us,
                traced_us,
                ratio,
                (traced_us - base_us) / kernels if kernels else float("nan"),
                kernels,
            )
        )
    return rows


def inner_check_cost(name: str, calls: int, seconds: float, mode: str = "FULL_HEALTH") -> tuple[float, float, float]:
    """The inner-op check's cost (docs/inner_ops.md): the workload built twice in one session,
    once without the check and once with it, both traced; calls of the two alternate.
    Returns the medians (us) and the median ratio (with / without)."""
    import tvmdbg
    from tvmdbg_tb.tracing.state import ACTIVE

    _load_native()
    build = _workloads()[name]
    with tempfile.TemporaryDirectory() as logdir:
        tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=1000)
        try:
            _tracing[0] = True
            ACTIVE.state.capture.inner_ops = False  # the switch inner_op_check=False sets
            without = build()
            ACTIVE.state.capture.inner_ops = True
            with_check = build()
            return _paired(without, with_check, calls, seconds)
        finally:
            ACTIVE.state.capture.inner_ops = True
            tvmdbg.disable_dump_debug_info()


def sustained(name: str, mode: str, calls: int = 500, reps: int = 5) -> tuple[float, ...]:
    """Process CPU time per call (every thread: the writer's flushing thread included)
    over alternating blocks of calls, each traced block's
    records flushed to disk inside it: what tracing costs in total, where the paired rows
    measure the caller's thread. Returns plain and traced us per call in process CPU time,
    the same in wall-clock time, and records per call."""
    import tvmdbg

    _load_native()
    build = _workloads()[name]
    _tracing[0] = False
    base = build()
    with tempfile.TemporaryDirectory() as logdir:
        writer = tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=-1)
        try:
            _tracing[0] = True
            traced = build()
            for _ in range(20):
                base()
                traced()
            writer.flush()
            a, b, wa, wb = [], [], [], []
            for _ in range(reps):
                start, wall_start = time.process_time(), time.perf_counter()
                for _ in range(calls):
                    base()
                middle, wall_middle = time.process_time(), time.perf_counter()
                for _ in range(calls):
                    traced()
                writer.flush()
                a.append((middle - start) / calls)
                b.append((time.process_time() - middle) / calls)
                wa.append((wall_middle - wall_start) / calls)
                wb.append((time.perf_counter() - wall_middle) / calls)
        finally:
            tvmdbg.disable_dump_debug_info()
        records = _kernels_per_call(logdir)
    us = [statistics.median(x) * 1e6 for x in (a, b, wa, wb)]
    return us[0], us[1], us[2], us[3], records


def _median_us(fn, n: int = 200) -> float:
    clock = _clock[0]
    samples = []
    for _ in range(n):
        start = clock()
        fn()
        samples.append(clock() - start)
    return statistics.median(samples) * 1e6


def health_vs_read(size: int = 1 << 20, stats: bool = False) -> tuple[float, float]:
    """The FULL_HEALTH (or FULL_STATS) summary kernel alone on a 1M float32 tensor, and a
    numpy read of it."""
    import numpy as np
    import tvm

    from tvmdbg_tb.capture import compiled

    kernel = tvm.get_global_func(compiled.kernel("float32", True, stats))
    data = np.linspace(-1, 1, size, dtype="float32")
    tensor = tvm.runtime.tensor(data)
    stats = tvm.runtime.tensor(np.zeros((1, compiled.ROW_WIDTH), "float64"))
    view = np.from_dlpack(stats)

    def summary():
        view[0, 0] = 0.0  # a row not written yet (the kernel leaves a written one as it is)
        kernel(tensor, stats, 0)

    return _median_us(summary), _median_us(data.sum)


def _model_module(builder: str):
    """The Relax module (and its fuse flag) a tests/models.py builder would compile."""
    import models

    captured = []
    original = models.compile_module
    models.compile_module = lambda mod, fuse: captured.append((mod, fuse))
    try:
        getattr(models, builder)()
    finally:
        models.compile_module = original
    return captured[0]


def compile_time(
    kernels: int, pairs: int = 3, size: int = 16, model: str = "", cpu: bool = False
) -> tuple[float, float, float]:
    """tvm.compile of a chain of `kernels` kernels of `size` elements (or of a tests/models.py
    model), plain and under FULL_HEALTH, in alternating pairs (medians in ms, median ratio).
    The summary kernels are built once per process (a warm-up compile pays for them first),
    so this is the per-call-site cost (with large outputs, also the kernels that count their
    own output)."""
    import models

    import tvmdbg

    def module():
        from tvm import relax

        if model:
            return _model_module(model)

        bb = relax.BlockBuilder()
        models.emit_chain(bb, "main", kernels, size)
        return bb.get(), False

    # Compile is single-threaded Python + LLVM: wall time by default; cpu (this thread's CPU
    # time) keeps other processes on a shared machine out of the figure.
    clock = time.thread_time if cpu else time.perf_counter
    plain, traced = [], []
    with tempfile.TemporaryDirectory() as logdir:
        for i in range(pairs + 1):
            # Only tvm.compile is timed: the module is built before (under tvmdbg, its
            # BlockBuilder.emit calls record the user's lines, a cost of building, not compiling).
            mod, fuse = module()
            start = clock()
            models.compile_module(mod, fuse)
            plain_s = clock() - start
            tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
            try:
                mod, fuse = module()
                start = clock()
                models.compile_module(mod, fuse)
                traced_s = clock() - start
            finally:
                tvmdbg.disable_dump_debug_info()
            if i:  # the first pair warms up both (and builds the summary kernels)
                plain.append(plain_s)
                traced.append(traced_s)
    ratio = statistics.median(t / p for p, t in zip(plain, traced))
    return statistics.median(plain) * 1e3, statistics.median(traced) * 1e3, ratio


def per_call_cost(mode: str, kernels: int = 10, seconds: float = 2.0) -> tuple[float, float]:
    """Medians (us) of an uninstrumented and a traced VM call of a `kernels`-kernel function
    (alternating): their difference is tvmdbg's fixed cost per VM call at that size."""
    import models

    import tvmdbg

    _load_native()
    _tracing[0] = False
    base = _vm_workload(lambda: models.chain(kernels, 16, fuse=False))
    with tempfile.TemporaryDirectory() as logdir:
        tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=1000)
        try:
            _tracing[0] = True
            traced = _vm_workload(lambda: models.chain(kernels, 16, fuse=False))
            base_us, traced_us, _ = _paired(base, traced, 500, seconds)
        finally:
            tvmdbg.disable_dump_debug_info()
    return base_us, traced_us


def _deeper(depth: int, fn):
    """fn called `depth` Python frames below the caller."""
    if depth:
        return _deeper(depth - 1, fn)
    return fn()


def stack_depth(extra: int = 30, mode: str = "NO_TENSOR", seconds: float = 2.0) -> tuple[float, float]:
    """Medians (us) of one traced VM call of a one-kernel function made from the caller's
    frame and `extra` frames deeper, alternating: the frame capture must not grow with depth."""
    import models

    import tvmdbg

    with tempfile.TemporaryDirectory() as logdir:
        tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=-1)
        try:
            _tracing[0] = True
            call = _vm_workload(lambda: models.chain(1, 16, fuse=False))
            shallow = lambda: _deeper(0, call)  # noqa: E731
            deep = lambda: _deeper(extra, call)  # noqa: E731
            _, _, _ = _paired(shallow, deep, 200, 0.1)  # warm both call points' caches
            shallow_us, deep_us, _ = _paired(shallow, deep, 500, seconds)
        finally:
            tvmdbg.disable_dump_debug_info()
    return shallow_us, deep_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    parser.add_argument("--threads", type=int, default=0, help="TVM_NUM_THREADS (0: TVM's default)")
    parser.add_argument("--workloads", default="chain200,chain200_fallback,big1M,mlp1M,train_step,cnn,transformer")
    parser.add_argument("--modes", default="", help=f"comma-separated modes (default: all; {DEEP} on cnn/transformer)")
    parser.add_argument(
        "--compile-kernels", default="100,1000", help="chain lengths for the compile-time rows ('' to skip)"
    )
    parser.add_argument(
        "--compile-models", default="", help="tests/models.py builders for compile-time rows, e.g. small_cnn"
    )
    parser.add_argument("--compile-size", type=int, default=16, help="elements per kernel of the compile-time rows")
    parser.add_argument("--compile-pairs", type=int, default=3, help="alternating compile pairs per compile-time row")
    parser.add_argument(
        "--compile-clock", choices=["wall", "cpu"], default="wall", help="clock of the compile-time rows"
    )
    parser.add_argument(
        "--clock", choices=["wall", "cpu"], default="wall", help="cpu: this thread's CPU time (use with --threads 1)"
    )
    parser.add_argument(
        "--inner-check",
        default="chain200,cnn,transformer",
        help="workloads of the inner-op check rows: FULL_HEALTH with and without it, alternating ('' to skip)",
    )
    parser.add_argument(
        "--sustained",
        default="chain200,train_step",
        help="workloads of the process-CPU rows (writer thread included; '' to skip)",
    )
    parser.add_argument(
        "--json", default="", help="also write every figure to this file (bench/figures.py renders the docs' tables)"
    )
    options = parser.parse_args()
    figures: dict = {"argv": sys.argv[1:], "rows": [], "per_call": {}, "compile": {}, "inner_check": {}}
    if options.threads:
        os.environ["TVM_NUM_THREADS"] = str(options.threads)
    if options.clock == "cpu":
        _clock[0] = time.thread_time
    calls, seconds = (20, 0.3) if options.quick else (100, 2.0)
    threads = options.threads or "default"
    print(
        f"tvmdbg overhead: median of >= {calls} alternating (uninstrumented, traced) call pairs; "
        f"clock={options.clock}, TVM_NUM_THREADS={threads}"
    )
    print(
        f"{'workload':<12} {'mode':<17} {'base_us':>10} {'traced_us':>10} {'ratio':>7} {'added_us/kernel':>16}"
        f" {'records/call':>12}"
    )
    for name in filter(None, options.workloads.split(",")):
        modes = options.modes.split(",") if options.modes else None
        for workload, mode, base_us, traced_us, ratio, per_kernel, records in measure(name, calls, seconds, modes):
            figures["rows"].append(
                dict(workload=workload, mode=mode, base_us=base_us, traced_us=traced_us, ratio=ratio)
                | dict(added_us_per_kernel=per_kernel, records_per_call=records)
            )
            print(
                f"{workload:<12} {mode:<17} {base_us:>10.1f} {traced_us:>10.1f} {ratio:>7.3f} {per_kernel:>16.2f}"
                f" {records:>12.2f}",
                flush=True,
            )
    for name in filter(None, options.inner_check.split(",")):
        without_us, with_us, ratio = inner_check_cost(name, calls, seconds)
        figures["inner_check"][name] = dict(without_us=without_us, with_us=with_us, ratio=ratio)
        print(
            f"{name} FULL_HEALTH, inner-op check off / on (alternating, both traced): {without_us:.1f} -> "
            f"{with_us:.1f} us, ratio {ratio:.3f}",
            flush=True,
        )
    for name in options.sustained.split(","):
        for mode in ("NO_TENSOR", "FULL_HEALTH") if name else ():
            plain_us, traced_us, plain_wall, traced_wall, records = sustained(
                name, mode, calls=100 if options.quick else 500
            )
            print(
                f"{name} {mode}, blocks of calls with their records flushed: process CPU (all threads) "
                f"{plain_us:.1f} -> {traced_us:.1f} us, ratio {traced_us / plain_us:.3f}, "
                f"+{(traced_us - plain_us) / records:.2f} us per kernel; wall {plain_wall:.1f} -> "
                f"{traced_wall:.1f} us, ratio {traced_wall / plain_wall:.3f}",
                flush=True,
            )
    for kernels in options.compile_kernels.split(","):
        if kernels:
            plain_ms, traced_ms, ratio = compile_time(
                int(kernels), options.compile_pairs, options.compile_size, cpu=options.compile_clock == "cpu"
            )
            figures["compile"][f"chain{kernels}"] = dict(plain_ms=plain_ms, traced_ms=traced_ms, ratio=ratio)
            sized = "" if options.compile_size == 16 else f" of {options.compile_size} elements"
            print(
                f"tvm.compile of a {kernels}-kernel chain{sized}: plain {plain_ms:.0f} ms, FULL_HEALTH "
                f"{traced_ms:.0f} ms, ratio {ratio:.3f}",
                flush=True,
            )
    for model in filter(None, options.compile_models.split(",")):
        plain_ms, traced_ms, ratio = compile_time(
            0, options.compile_pairs, model=model, cpu=options.compile_clock == "cpu"
        )
        print(f"tvm.compile of {model}: plain {plain_ms:.0f} ms, FULL_HEALTH {traced_ms:.0f} ms, ratio {ratio:.3f}")
    for mode in ("NO_TENSOR", "FULL_HEALTH"):
        base_us, traced_us = per_call_cost(mode, seconds=seconds)
        figures["per_call"][mode] = dict(base_us=base_us, traced_us=traced_us, added_us=traced_us - base_us)
        print(
            f"10-kernel VM call, {mode}: {base_us:.1f} us plain, {traced_us:.1f} us traced, "
            f"+{traced_us - base_us:.1f} us per call",
            flush=True,
        )
    for mode in ("NO_TENSOR", "FULL_HEALTH"):
        shallow_us, deep_us = stack_depth(mode=mode, seconds=seconds)
        print(
            f"traced 1-kernel VM call, {mode}: {shallow_us:.1f} us from the caller's frame, "
            f"{deep_us:.1f} us 30 frames deeper (+{deep_us - shallow_us:.1f} us)",
            flush=True,
        )
    for mode in ("FULL_HEALTH", "FULL_STATS"):
        kernel_us, read_us = health_vs_read(stats=mode == "FULL_STATS")
        print(
            f"{mode} summary kernel on a 1M float32 tensor: {kernel_us:.1f} us; numpy read (sum) of it: "
            f"{read_us:.1f} us; ratio {kernel_us / read_us:.2f}"
        )
    if options.json:
        with open(options.json, "w") as out:
            json.dump(figures, out, indent=1)


if __name__ == "__main__":
    main()
