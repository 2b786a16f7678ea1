"""tvmdbg on models nobody here wrote: compile time and per-call cost on transformers' GPT-2,
BERT and ResNet (tests/real_models.py: small configs from their configs, random weights,
torch.export + from_exported_program, the default fusing pipeline).

    TVM_NUM_THREADS=1 .venv/bin/python bench/bench_real_models.py [--models gpt2,bert,resnet]
        [--compile-pairs 3] [--seconds 3] [--pairs 20] [--compile-modes ...] [--call-modes ...]
        [--baseline DIR]

Models: tests/real_models.py's small configs (gpt2, bert, resnet, llama: a Llama-style
decoder) and its realistic sizes (gpt2-768, bert-768, llama-768: 768 wide over 128 tokens,
one layer; resnet50w: ResNet-50's widths on a 64x64 image).

Compile: each tvm.compile runs in a fresh process, as a program compiles its model once;
the modes alternate round by round, the model is exported before the clock starts, and the
figure is the process's CPU time of enable_dump_debug_info, the import and tvm.compile (the
machine may be shared), in total and by stage (_StageClock), as medians and as the least of the
rounds; tvmdbg's modules are imported before the clock starts (once per process, as torch's and
TVM's are), from bytecode compiled before the rounds, as an installed package's are. The summary
kernels are compiled once per machine (tvmdbg_tb/capture/kernel_cache.py): "warm" rows
use the user cache filled before the rounds, "cold" ones a fresh cache directory holding
the native libraries but no summary kernel (a machine's first build). Per call: in one
process, calls of two builds alternate (the median of the per-pair ratios), in wall time and
in the process's CPU time over blocks of calls (every thread: BLAS or TVM threads would
show): the uninstrumented build against one traced in each mode, and FULL_HEALTH built with
the inner-op check against FULL_HEALTH built with inner_op_check=False, and (call mode
"saved") the FULL_HEALTH build saved with export_library and loaded with
tvm.runtime.load_module against the in-memory build, both traced. --baseline DIR adds the
compile mode "FULL_HEALTH-base": FULL_HEALTH with tvmdbg imported from another checkout,
in the same alternating rounds (before and after a change, side by side).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests"))

MODES = ("NO_TENSOR", "FULL_HEALTH", "FULL_STATS")


STAGES = ("total", "enable", "import", "pipeline", "codegen", "llvm", "rest")


def _compile_once(name: str, mode: str) -> dict[str, tuple[float, float]]:
    """(CPU, wall) seconds of one import and tvm.compile of the model in this (fresh) process,
    in total and by stage (_StageClock); mode "plain", a tensor debug mode,
    "FULL_HEALTH-noinner" (inner_op_check=False) or "FULL_HEALTH-cold" (the summary kernels
    compiled: the caller points TVMDBG_CACHE_DIR at a cache without them)."""
    import real_models

    exported = real_models.exported(name)
    clock = _StageClock()
    _build(exported, mode, clock)
    return clock.stages()


class _StageClock:
    """Where a compile's time goes (STAGES), so that a ratio rests on its stages and not only
    on a noisy total: "enable" (enable_dump_debug_info), "import" (from_exported_program:
    tvmdbg's emit hooks), "pipeline" (the Relax passes: tvmdbg's pass instrument), "codegen"
    (relax.vm_build._vmcodegen: tvmdbg's capture and kernel rewrites, then VM codegen), "llvm"
    (relax.vm_build._vmlink: TIR lowering and LLVM), "rest" (describing the executable and
    registering it afterwards, disabling)."""

    def __init__(self):
        self.marks: dict[str, tuple[float, float]] = {}
        self.spans: dict[str, tuple[float, float]] = {}

    def mark(self, name: str) -> None:
        self.marks[name] = (time.process_time(), time.perf_counter())

    @contextlib.contextmanager
    def timing(self, owner, attribute: str, stage: str):
        """owner.attribute timed as stage while the block runs."""
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            self.mark(stage)
            try:
                return original(*args, **kwargs)
            finally:
                self.spans[stage] = _since(self.marks[stage], (time.process_time(), time.perf_counter()))

        setattr(owner, attribute, timed)
        try:
            yield
        finally:
            setattr(owner, attribute, original)

    def stages(self) -> dict[str, tuple[float, float]]:
        out = {"total": _since(self.marks["start"], self.marks["end"]), **self.spans}
        out["enable"] = _since(self.marks["start"], self.marks["enabled"])
        out["import"] = _since(self.marks["enabled"], self.marks["imported"])
        out["pipeline"] = _since(self.marks["imported"], self.marks["codegen"])
        out["rest"] = tuple(out["total"][k] - sum(out[s][k] for s in STAGES[1:-1]) for k in (0, 1))
        return out


def _since(start: tuple[float, float], end: tuple[float, float]) -> tuple[float, float]:
    return end[0] - start[0], end[1] - start[1]


def _build(exported, mode: str, clock: _StageClock | None = None):
    """The executable of an exported model imported and compiled as a user's program does
    under tvmdbg in mode (see _compile_once), or without tvmdbg ("plain"); clock, if given,
    times its stages."""
    import real_models
    from tvm.relax import vm_build
    from tvm.relax.frontend.torch import from_exported_program

    import tvmdbg

    # tvmdbg is imported before the clock starts, in every mode, as torch and TVM are: the
    # library's import (~30 ms; `tvmdbg` loads its modules at the first attribute) is once
    # per process, not part of a compile.
    enable = tvmdbg.enable_dump_debug_info
    clock = clock or _StageClock()
    clock.mark("start")
    if mode != "plain":
        enable(
            tempfile.mkdtemp(prefix="tvmdbg_bench_"),
            tensor_debug_mode=mode.split("-")[0],
            circular_buffer_size=-1,
            inner_op_check=not mode.endswith("-noinner"),
        )
    clock.mark("enabled")
    try:  # timed after enable: outside tvmdbg's wrappers, its own work inside "codegen"
        with clock.timing(vm_build, "_vmcodegen", "codegen"), clock.timing(vm_build, "_vmlink", "llvm"):
            mod = from_exported_program(exported)  # imported under tvmdbg, as a user's model is
            clock.mark("imported")
            return real_models.compile_module(mod, fuse=True)
    finally:
        if mode != "plain":
            tvmdbg.disable_dump_debug_info()
        clock.mark("end")


def _cold_cache() -> str:
    """A fresh cache directory with the native libraries of the user cache but no summary
    kernel (tvmdbg_*.so): kernel_cache builds them as on a machine's first build."""
    from tvmdbg_tb.native import cache_dir

    directory = tempfile.mkdtemp(prefix="tvmdbg_cold_cache_")
    for entry in cache_dir().glob("*.so"):
        if not entry.name.startswith("tvmdbg_"):
            os.symlink(entry, os.path.join(directory, entry.name))
    return directory


BASELINE: list[str] = []  # --baseline: the other checkout's root


def _compile_in_fresh_process(name: str, mode: str) -> dict[str, tuple[float, float]]:
    env = {**os.environ, "PYTHONPATH": BASELINE[0] if mode.endswith("-base") else ROOT}
    cold = _cold_cache() if mode.endswith("-cold") else None
    if cold is not None:
        env["TVMDBG_CACHE_DIR"] = cold
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--one-compile", name, mode],
            capture_output=True,
            text=True,
            timeout=1800,
            cwd=ROOT,
            env=env,
        )
    finally:
        if cold is not None:
            shutil.rmtree(cold, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"compile of {name} ({mode}) failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _compile_bytecode() -> None:
    """tvmdbg's modules compiled to bytecode (__pycache__) before the rounds, as `pip install`
    does and as torch's and TVM's already are: under PYTHONDONTWRITEBYTECODE a fresh process
    would compile tvmdbg's sources again on import (~65 ms of a GPT-2 compile's ~2.1 s),
    which only the instrumented modes pay and an installed tvmdbg never does."""
    import compileall

    for root in (ROOT, *BASELINE):
        compileall.compile_dir(os.path.join(root, "tvmdbg_tb"), quiet=1)
        compileall.compile_file(os.path.join(root, "tvmdbg.py"), quiet=1)


COMPILE_MODES = ("plain", "FULL_HEALTH", "FULL_HEALTH-cold", "FULL_HEALTH-noinner", "FULL_STATS", "NO_TENSOR")


def compile_rows(name: str, pairs: int, modes: tuple[str, ...] = COMPILE_MODES) -> dict[str, dict]:
    """Per mode and stage (STAGES): "cpu" and "wall", the median seconds, "ratio" and
    "wall_ratio", the medians of the per-round ratios to plain, "extra", the median of the
    per-round CPU differences to plain, "min" and "min_extra", the least CPU seconds and
    their difference to plain's least (another process only ever adds time: the least of
    several rounds is what the compile itself costs, where the medians move with the load);
    in "total", "stage_min", the sum of each stage's least CPU seconds (a stage's least needs
    only that stage to run undisturbed in one of the rounds, the total's least every stage in
    the same round). The modes alternate round by round, in reverse order every other round (no mode always
    runs right after another)."""
    _compile_bytecode()
    modes = ("plain", *(m for m in modes if m != "plain"))
    for warm in ("FULL_HEALTH", "FULL_STATS", *(["FULL_HEALTH-base"] if "FULL_HEALTH-base" in modes else [])):
        _compile_in_fresh_process(name, warm)  # the kernel cache, once per machine
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for round_ in range(pairs):
        for mode in modes if round_ % 2 == 0 else reversed(modes):
            runs[mode].append(_compile_in_fresh_process(name, mode))
    median = statistics.median
    rows = {}
    for mode, values in runs.items():
        rows[mode] = {}
        for stage in STAGES:
            cpu = [v[stage][0] for v in values]
            plain = [p[stage][0] for p in runs["plain"]]
            wall, plain_wall = [v[stage][1] for v in values], [p[stage][1] for p in runs["plain"]]
            rows[mode][stage] = {
                "cpu": median(cpu),
                "wall": median(wall),
                "ratio": median(a / b for a, b in zip(cpu, plain)) if min(plain) > 0 else float("nan"),
                "wall_ratio": median(a / b for a, b in zip(wall, plain_wall)) if min(plain_wall) > 0 else float("nan"),
                "extra": median(a - b for a, b in zip(cpu, plain)),
                "min": min(cpu),
                "min_extra": min(cpu) - min(plain),
            }
        rows[mode]["total"]["stage_min"] = sum(rows[mode][stage]["min"] for stage in STAGES[1:])
    return rows


def _print_compile_rows(name: str, rows: dict[str, dict]) -> None:
    for mode, stages in rows.items():
        total = stages["total"]
        plain_min, plain_stage_min = rows["plain"]["total"]["min"], rows["plain"]["total"]["stage_min"]
        print(
            f"{name:<7} compile {mode:<28} CPU {total['cpu']:7.2f} s  ratio to plain {total['ratio']:.3f}   "
            f"wall {total['wall']:7.2f} s  ratio {total['wall_ratio']:.3f}   "
            f"least CPU {total['min']:7.2f} s  ratio {total['min'] / plain_min:.3f}   "
            f"least by stage {total['stage_min']:7.2f} s  ratio {total['stage_min'] / plain_stage_min:.3f}",
            flush=True,
        )
        for key, label in (("extra", "median"), ("min_extra", "least")):
            value = "cpu" if key == "extra" else "min"
            parts = [
                f"{stage} {stages[stage][value]:.3f} s {stages[stage][key] * 1000:+.0f} ms" for stage in STAGES[1:]
            ]
            print(f"{name:<7}   stages CPU ({label}, extra to plain): {'  '.join(parts)}", flush=True)


CALL_MODES = (*MODES, "inner", "saved")


def call_rows(name: str, seconds: float, pairs: int = 20, modes: tuple[str, ...] = CALL_MODES) -> list[tuple]:
    """Per comparison: (label, base us, traced us, median ratio, base CPU us, traced CPU us)."""
    import real_models
    import tvm
    from tvm import relax

    from tvmdbg_tb.events import native_records
    from tvmdbg_tb.tracing import native_call, native_rows, vm_wrapper

    for library in (native_records.LIBRARY, native_rows.LIBRARY, native_call.LIBRARY):
        library.load()  # loaded before anything is timed, as a long-running program has them
    exported = real_models.exported(name)
    args = [tvm.runtime.tensor(a) for a in real_models.torch_model(name)[1].values()]
    plain_vm = relax.VirtualMachine(_build(exported, "plain"), tvm.cpu())
    vm_wrapper.exclude(plain_vm)
    plain_main = functools.partial(plain_vm["main"], *args)
    rows = []
    for mode in (m for m in MODES if m in modes):
        executable = _build(exported, mode)
        with _traced(mode):
            traced = functools.partial(relax.VirtualMachine(executable, tvm.cpu())["main"], *args)
            rows.append((f"{mode} / plain", *_paired(plain_main, traced, seconds, pairs)))
    if "inner" in modes:
        with_check, without = _build(exported, "FULL_HEALTH"), _build(exported, "FULL_HEALTH-noinner")
        with _traced("FULL_HEALTH"):
            checked = functools.partial(relax.VirtualMachine(with_check, tvm.cpu())["main"], *args)
            unchecked = functools.partial(relax.VirtualMachine(without, tvm.cpu())["main"], *args)
            rows.append(("FULL_HEALTH inner / no inner", *_paired(unchecked, checked, seconds, pairs)))
    if "saved" in modes:
        executable = _build(exported, "FULL_HEALTH")
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, f"{name}.so")
            executable.export_library(path)
            loaded = tvm.runtime.load_module(path)
            with _traced("FULL_HEALTH"):
                in_memory = functools.partial(relax.VirtualMachine(executable, tvm.cpu())["main"], *args)
                from_disk = functools.partial(relax.VirtualMachine(loaded, tvm.cpu())["main"], *args)
                rows.append(("FULL_HEALTH loaded / in memory", *_paired(in_memory, from_disk, seconds, pairs)))
    return rows


@contextlib.contextmanager
def _traced(mode: str):
    """tvmdbg enabled in mode into a scratch logdir (the default 1000-record ring)."""
    import tvmdbg

    with tempfile.TemporaryDirectory() as logdir:
        tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=1000)
        try:
            yield
        finally:
            tvmdbg.disable_dump_debug_info()


def _paired(base, traced, seconds: float, pairs: int = 20) -> tuple[float, ...]:
    """Medians of alternating calls: wall clock per call, and the process's CPU over blocks
    of calls; at least `pairs` pairs, and calls for `seconds`."""
    block = 5 if pairs >= 20 else 1
    for _ in range(min(5, pairs)):
        base()
        traced()
    a, b, ratios, cpu_a, cpu_b = [], [], [], [], []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(a) < pairs:
        for _ in range(block):
            start = time.perf_counter()
            base()
            middle = time.perf_counter()
            traced()
            a.append(middle - start)
            b.append(time.perf_counter() - middle)
            ratios.append(b[-1] / a[-1])
        cpu_middle = time.process_time()
        for _ in range(block):
            base()
        cpu_base = time.process_time() - cpu_middle
        for _ in range(block):
            traced()
        cpu_a.append(cpu_base / block)
        cpu_b.append((time.process_time() - cpu_middle - cpu_base) / block)
    us = [statistics.median(x) * 1e6 for x in (a, b, cpu_a, cpu_b)]
    return us[0], us[1], statistics.median(ratios), us[2], us[3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2,bert,resnet")
    parser.add_argument("--compile-pairs", type=int, default=3, help="alternating compile rounds ('0': none)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per mode, of alternating calls")
    parser.add_argument("--pairs", type=int, default=20, help="at least this many alternating call pairs per row")
    parser.add_argument("--compile-modes", default=",".join(COMPILE_MODES), help="compile rows' modes")
    parser.add_argument("--call-modes", default=",".join(CALL_MODES), help="per-call rows ('' for none)")
    parser.add_argument("--baseline", default="", help="another checkout: adds compile mode FULL_HEALTH-base")
    parser.add_argument("--one-compile", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.one_compile:
        print(json.dumps(_compile_once(*options.one_compile)))
        return
    if options.baseline:
        BASELINE.append(os.path.abspath(options.baseline))
    compile_modes = tuple(filter(None, options.compile_modes.split(",")))
    if options.baseline and "FULL_HEALTH-base" not in compile_modes:
        compile_modes += ("FULL_HEALTH-base",)
    call_modes = tuple(filter(None, options.call_modes.split(",")))
    print(f"TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS', 'default')}; models: tests/real_models.py configs")
    print(f"load average at start: {os.getloadavg()}", flush=True)
    for name in options.models.split(","):
        if options.compile_pairs:
            _print_compile_rows(name, compile_rows(name, options.compile_pairs, compile_modes))
        rows = call_rows(name, options.seconds, options.pairs, call_modes) if call_modes else []
        for label, base_us, traced_us, ratio, cpu_base, cpu_traced in rows:
            print(
                f"{name:<7} call    {label:<28} {base_us:9.0f} -> {traced_us:9.0f} us  ratio {ratio:.3f}   "
                f"process CPU {cpu_base:9.0f} -> {cpu_traced:9.0f} us ({cpu_traced / cpu_base:.3f})",
                flush=True,
            )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
