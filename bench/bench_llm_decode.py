"""tvmdbg on TVM's own LLM path: the cost of one decode step (the `embed` and `decode` calls of
examples/generate_paged_kv.py's decoder, with TVM's paged KV cache and packed weights, and the
cache's begin/end_forward around them) traced in NO_TENSOR and FULL_HEALTH, against the same
step compiled and run without tvmdbg.

    TVM_NUM_THREADS=1 .venv/bin/python bench/bench_llm_decode.py [--width tiny|realistic]
        [--rounds 3] [--steps 300] [--parts] [--clock wall|cpu]

Each measurement is a process of its own (it compiles the model, with tvmdbg enabled or not,
prefills the prompt and times `--steps` decode steps after a warm-up; the figure is the median
step, wall time, or with --clock cpu the process's CPU time, its writer thread included); the
modes alternate round by round, and each mode's ratio is the median of
its per-round ratios to that round's uninstrumented process. tiny: 32 wide, 2 layers (the
example's); realistic: 1024 wide, 4 layers, 16 query and 4 key/value heads, a 2816-wide MLP.
The load average is printed at the start and the end (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODES = ("plain", "NO_TENSOR", "FULL_HEALTH")
WIDTHS = {
    "tiny": {},
    "realistic": {"hidden": 1024, "layers": 4, "heads": 16, "kv_heads": 4, "ffn": 2816, "vocab": 4096},
}


def _example():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import generate_paged_kv

    return generate_paged_kv


def child(mode: str, width: str, steps: int, parts: bool = False, clock: str = "wall") -> dict:
    """One process's measurement: the median decode step in microseconds; parts: also the
    median of each part of the step (PARTS), each timed alone."""
    now = time.perf_counter if clock == "wall" else time.process_time
    example = _example()
    config = example.Config(**WIDTHS[width])
    import tvmdbg

    if mode != "plain":
        tvmdbg.enable_dump_debug_info(tempfile.mkdtemp(prefix="tvmdbg_bench_llm_"), tensor_debug_mode=mode)
    executable, names = example.build(config)
    warm = max(10, steps // 10)
    generator = example.Generator(executable, example.weights(executable, names, config), max_tokens=steps + warm + 64)
    token = generator.prefill(example.PROMPT)
    timed = _timed_parts(generator, now) if parts else None
    times = []
    for _ in range(warm + steps):
        start = now()
        token = generator.decode(token)
        times.append(now() - start)
    if mode != "plain":
        tvmdbg.disable_dump_debug_info()
    out = {"mode": mode, "step_us": statistics.median(times[warm:]) * 1e6}
    if timed is not None:
        timed["rest"] = [t - sum(p[k] for p in timed.values()) for k, t in enumerate(times)]
        out["parts_us"] = {name: statistics.median(values[warm:]) * 1e6 for name, values in timed.items()}
    return out


# A decode step's parts: the embed call, the cache's begin_forward, the decode call, its
# end_forward, and the rest (looking up vm[name], reading the logits, argmax).
PARTS = ("embed", "begin_forward", "decode", "end_forward")


def _timed_parts(generator, now) -> dict[str, list[float]]:
    """Times each part of generator's steps from now on by the clock now: {part: seconds per step}."""
    timed: dict[str, list[float]] = {name: [] for name in PARTS}

    def timing(name, function):
        def call(*args):
            start = now()
            try:
                return function(*args)
            finally:
                timed[name].append(now() - start)

        return call

    class TimedVM:
        def __getitem__(self, name):
            return timing(name, vm[name])

    vm = generator.vm
    generator.embed = timing("embed", generator.embed)
    generator._begin = timing("begin_forward", generator._begin)
    generator._end = timing("end_forward", generator._end)
    generator.vm = TimedVM()
    return timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", choices=sorted(WIDTHS), default="tiny")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="timed steps per process (tiny 300, realistic 40)")
    parser.add_argument("--parts", action="store_true", help="also time each part of the step (PARTS)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="what a step's time is")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    steps = args.steps or (300 if args.width == "tiny" else 40)
    if args.child:
        print(json.dumps(child(args.child, args.width, steps, args.parts, args.clock)))
        return 0
    print(f"load average at start: {os.getloadavg()}", flush=True)
    env = {**os.environ, "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS", "1")}
    results: dict[str, list[float]] = {mode: [] for mode in MODES}
    for round_ in range(args.rounds):
        for mode in MODES:
            command = [sys.executable, __file__, "--child", mode, "--width", args.width, "--steps", str(steps)]
            command += ["--clock", args.clock]
            done = subprocess.run(
                command + ["--parts"] * args.parts, capture_output=True, text=True, env=env, check=True
            )
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            results[mode].append(measured["step_us"])
            parts = "".join(f" {name} {us:.1f}" for name, us in measured.get("parts_us", {}).items())
            print(f"round {round_ + 1} {mode:12s} {measured['step_us']:10.1f} us per decode step{parts}", flush=True)
    print(f"load average at end: {os.getloadavg()}")
    plain = results["plain"]
    print(f"{args.width}: plain step median {statistics.median(plain):.1f} us ({args.clock} time)")
    for mode in MODES[1:]:
        ratios = [traced / base for traced, base in zip(results[mode], plain)]
        print(
            f"{args.width}: {mode:12s} median {statistics.median(results[mode]):10.1f} us, "
            f"{statistics.median(ratios):.3f}x (rounds {', '.join(f'{r:.3f}' for r in ratios)})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
