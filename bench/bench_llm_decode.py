"""tvmdbg on TVM's own LLM path: the cost of one decode step (the `embed` and `decode` calls of
examples/generate_paged_kv.py's decoder, with TVM's paged KV cache and packed weights, and the
cache's begin/end_forward around them) traced in NO_TENSOR and FULL_HEALTH, against the same
step compiled and run without tvmdbg.

    TVM_NUM_THREADS=1 .venv/bin/python bench/bench_llm_decode.py [--width tiny|realistic]
        [--rounds 3] [--steps 300] [--parts] [--clock wall|cpu] [--build default|scheduled]

Each measurement is a process of its own (it compiles the model, with tvmdbg enabled or not,
prefills the prompt and times `--steps` decode steps after a warm-up; the figures are the median
step in wall time and in the process's CPU time, which counts tvmdbg's writer thread and not the
time other programs take the core away; --clock is the one --parts uses); the modes alternate
round by round, and each mode's ratio is the median of its per-round ratios to that round's
uninstrumented process. tiny: 32 wide, 2 layers; realistic: 1024 wide, 4 layers, 16 query and 4
key/value heads, a 2816-wide MLP (the example's WIDTHS). --build: the example's default pipeline
or its scheduled one (`build(schedule=True)`); realistic is scheduled unless told otherwise, as a
CPU runs such a model. The load average is printed at the start, after each round and at the
end (the machine may be shared); each round starts with the next mode, and --control adds a
second uninstrumented process per round, the noise floor of the ratios. --paired: plain and
traced steps alternating in one process instead (paired_child).
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
# --control: an uninstrumented process measured like a traced one, whose ratio to "plain" shows
# how far two processes of the same build differ (the resolution of the traced modes' ratios).
CONTROL = "plain again"
WIDTHS = ("tiny", "realistic")
BUILDS = ("default", "scheduled")


def _example():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import generate_paged_kv

    return generate_paged_kv


def child(mode: str, width: str, steps: int, parts: bool = False, build: str = "default", clock: str = "wall") -> dict:
    """One process's measurement: the median decode step in microseconds, wall and CPU time;
    parts: also the median of each part of the step (PARTS), each timed alone by the clock."""
    now = time.perf_counter if clock == "wall" else time.process_time
    example = _example()
    config = example.WIDTHS[width]
    import tvmdbg

    if mode != "plain":
        tvmdbg.enable_dump_debug_info(tempfile.mkdtemp(prefix="tvmdbg_bench_llm_"), tensor_debug_mode=mode)
    executable, names = example.build(config, schedule=build == "scheduled")
    warm = max(10, steps // 10)
    generator = example.Generator(executable, example.weights(executable, names, config), max_tokens=steps + warm + 64)
    token = generator.prefill(example.PROMPT)
    timed = _timed_parts(generator, now) if parts else None
    times, cpu_times = [], []
    for _ in range(warm + steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        token = generator.decode(token)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    if mode != "plain":
        tvmdbg.disable_dump_debug_info()
    out = {
        "mode": mode,
        "step_us": statistics.median(times[warm:]) * 1e6,
        "cpu_us": statistics.median(cpu_times[warm:]) * 1e6,
    }
    if timed is not None:
        steps_by_clock = times if clock == "wall" else cpu_times
        timed["rest"] = [t - sum(p[k] for p in timed.values()) for k, t in enumerate(steps_by_clock)]
        out["parts_us"] = {name: statistics.median(values[warm:]) * 1e6 for name, values in timed.items()}
    return out


def paired_child(mode: str, width: str, steps: int, build: str = "default") -> dict:
    """One process, two generators over the very same weights: the build compiled without tvmdbg
    (its VM excluded from tracing) and the build compiled and traced in `mode`, their decode
    steps alternating (the order swapped every pair), so that the process's memory placement
    and the machine's load bursts fall on both alike. Medians per step: wall, and the CPU time
    of the generating thread; tvmdbg's other threads' CPU time (its writer) over the run,
    per traced step."""
    example = _example()
    config = example.WIDTHS[width]
    import tvmdbg
    from tvmdbg_tb.tracing import vm_wrapper

    schedule = build == "scheduled"
    executable, names = example.build(config, schedule=schedule)
    params = example.weights(executable, names, config)
    warm = max(10, steps // 10)
    plain = example.Generator(executable, params, max_tokens=steps + warm + 64)
    vm_wrapper.exclude(plain.vm)
    tvmdbg.enable_dump_debug_info(tempfile.mkdtemp(prefix="tvmdbg_bench_llm_"), tensor_debug_mode=mode)
    try:
        traced = example.Generator(example.build(config, schedule=schedule)[0], params, max_tokens=steps + warm + 64)
        generators = {"plain": plain, mode: traced}
        tokens = {name: g.prefill(example.PROMPT) for name, g in generators.items()}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in generators}
        process_start, thread_start = time.process_time(), time.thread_time()
        for pair in range(warm + steps):
            for name in list(generators)[:: 1 if pair % 2 else -1]:
                start, cpu_start = time.perf_counter(), time.thread_time()
                tokens[name] = generators[name].decode(tokens[name])
                if pair >= warm:
                    times[name].append((time.perf_counter() - start, time.thread_time() - cpu_start))
        others = (time.process_time() - process_start) - (time.thread_time() - thread_start)
    finally:
        tvmdbg.disable_dump_debug_info()
    out = {"mode": mode, "others_us": others / (warm + steps) * 1e6}
    for name, values in times.items():
        key = "plain" if name == "plain" else "traced"
        out[f"{key}_step_us"] = statistics.median(wall for wall, _ in values) * 1e6
        out[f"{key}_cpu_us"] = statistics.median(cpu for _, cpu in values) * 1e6
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
    parser.add_argument("--width", choices=WIDTHS, default="tiny")
    parser.add_argument("--build", choices=BUILDS, help="the example's pipeline (default: scheduled if realistic)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="timed steps per process (tiny 300, realistic 200)")
    parser.add_argument("--parts", action="store_true", help="also time each part of the step (PARTS)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="the clock of --parts")
    parser.add_argument(
        "--control", action="store_true", help=f"also a second uninstrumented process per round ({CONTROL!r})"
    )
    parser.add_argument(
        "--paired", action="store_true", help="plain and traced steps alternating in one process (paired_child)"
    )
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    steps = args.steps or (300 if args.width == "tiny" else 200)
    build = args.build or ("scheduled" if args.width == "realistic" else "default")
    if args.child:
        if args.paired:
            print(json.dumps(paired_child(args.child, args.width, steps, build)))
        else:
            print(json.dumps(child(args.child, args.width, steps, args.parts, build, args.clock)))
        return 0
    print(f"{args.width} width, {build} build; load average at start: {os.getloadavg()}", flush=True)
    env = {**os.environ, "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS", "1")}
    if args.paired:
        return _paired(args, steps, build, env)
    runs = MODES + (CONTROL,) * args.control
    results: dict[str, dict[str, list[float]]] = {clock: {run: [] for run in runs} for clock in ("wall", "cpu")}
    for round_ in range(args.rounds):
        # Each round starts with the next run, so that no mode always follows the same one.
        for mode in runs[round_ % len(runs) :] + runs[: round_ % len(runs)]:
            child_mode = "plain" if mode == CONTROL else mode
            command = [sys.executable, __file__, "--child", child_mode, "--width", args.width, "--steps", str(steps)]
            done = subprocess.run(
                command + ["--build", build, "--clock", args.clock] + ["--parts"] * args.parts,
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            results["wall"][mode].append(measured["step_us"])
            results["cpu"][mode].append(measured["cpu_us"])
            parts = "".join(f" {name} {us:.1f}" for name, us in measured.get("parts_us", {}).items())
            print(
                f"round {round_ + 1} {mode:12s} {measured['step_us']:10.1f} us per decode step "
                f"(CPU {measured['cpu_us']:.1f} us){parts}",
                flush=True,
            )
        print(f"load average after round {round_ + 1}: {os.getloadavg()}", flush=True)
    print(f"load average at end: {os.getloadavg()}")
    for clock, by_mode in results.items():
        plain = by_mode["plain"]
        print(f"{args.width} {clock}: plain step median {statistics.median(plain):.1f} us")
        for mode in runs[1:]:
            ratios = [traced / base for traced, base in zip(by_mode[mode], plain)]
            print(
                f"{args.width} {clock}: {mode:12s} median {statistics.median(by_mode[mode]):10.1f} us, "
                f"{statistics.median(ratios):.3f}x (rounds {', '.join(f'{r:.3f}' for r in ratios)})"
            )
    return 0


def _paired(args, steps: int, build: str, env: dict) -> int:
    """--paired: per round a process per traced mode (the order rotating), each timing its
    plain and traced steps alternately; ratios per process, then their medians."""
    ratios: dict[str, dict[str, list[float]]] = {mode: {"wall": [], "cpu": [], "cpu+others": []} for mode in MODES[1:]}
    for round_ in range(args.rounds):
        for mode in MODES[1:][round_ % 2 :] + MODES[1:][: round_ % 2]:
            command = [sys.executable, __file__, "--child", mode, "--paired", "--width", args.width]
            done = subprocess.run(
                command + ["--steps", str(steps), "--build", build], capture_output=True, text=True, env=env, check=True
            )
            m = json.loads(done.stdout.strip().splitlines()[-1])
            ratios[mode]["wall"].append(m["traced_step_us"] / m["plain_step_us"])
            ratios[mode]["cpu"].append(m["traced_cpu_us"] / m["plain_cpu_us"])
            ratios[mode]["cpu+others"].append((m["traced_cpu_us"] + m["others_us"]) / m["plain_cpu_us"])
            print(
                f"round {round_ + 1} {mode:12s} plain {m['plain_step_us']:10.1f} us (CPU {m['plain_cpu_us']:.1f}), "
                f"traced {m['traced_step_us']:10.1f} us (CPU {m['traced_cpu_us']:.1f}, "
                f"+{m['others_us']:.1f} in other threads)",
                flush=True,
            )
        print(f"load average after round {round_ + 1}: {os.getloadavg()}", flush=True)
    print(f"load average at end: {os.getloadavg()}")
    for mode, by_clock in ratios.items():
        for clock, values in by_clock.items():
            print(
                f"{args.width} paired {clock:10s}: {mode:12s} {statistics.median(values):.3f}x "
                f"(processes {', '.join(f'{r:.3f}' for r in values)})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
