"""`tvmdbg compare` and the `compare` route: how long until the first answer, and until the
whole one, on two large FULL_STATS runs and on the README's example.

    .venv/bin/python bench/bench_compare.py [--traces 1000000] [--logdir /tmp/tvmdbg_bench_compare] [--repeat 3]
    .venv/bin/python bench/bench_compare.py --example [--repeat 3]

Large runs: generated once (with the events writer), a function of 100 kernels called
traces/100 times: the reference B, and A, equal to B except that from 70% of the calls on,
op 50's statistics drift beyond tolerance (and, through it, every later op). The README's
example (--example): examples/compare_with_torch.py --plant --mode FULL_TENSOR, a 4-kernel
MLP whose fused layer_norm + GELU kernel is opened up by replaying it op by op.

Each repeat runs `tvmdbg compare A B` in a fresh process (the time until its report's table
is printed, the time until it exits, its peak RSS) and the `compare` route on a fresh
`tensorboard` that has read both runs (the time of the first answer, and until the fused
kernel's inside is no longer "pending"). Prints medians. Targets: the first answer <= 2 s for
the example and <= 5 s for 2 x 1M traces; <= 500 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # eventgen: synthetic records
OPS = 100
DRIFT_AT = 0.7


def _stats(op_id: int, call: int, drift: float) -> list[float]:
    mean = 0.5 + op_id * 0.01 + drift
    return [0, 2, 2, 4096, 0, 0, 0, 0, 0, 4096, mean - 0.5, mean + 0.5, mean, mean * 64.0, mean + 0.5]


def generate(logdir: str, name: str, traces: int, drifting: bool) -> str:
    from eventgen import chain_ops

    from tvmdbg_tb.events.options import DumpOptions
    from tvmdbg_tb.events.writer import DebugEventsWriter
    from tvmdbg_tb.proto import debug_event_pb2 as pb

    w = DebugEventsWriter(logdir, DumpOptions(tensor_debug_mode="FULL_STATS", circular_buffer_size=-1), run_id=name)
    locations = [w.code_location([(__file__, 100 + op_id, "model")], user_frame_index=0) for op_id in range(OPS)]
    for op in chain_ops(OPS, kernel=lambda op_id: f"fused_kernel_{op_id}", location=locations.__getitem__):
        w.write_graph_op_creation(op)
    w.write_graph(pb.DebuggedGraph(graph_id=0, name="main", source_mapped=True))
    calls = traces // OPS
    drift_call = int(calls * DRIFT_AT)
    for call in range(calls):
        index = w.allocate_execution_index()
        batch = []
        for op_id in range(OPS):
            drift = 0.25 if drifting and (call > drift_call or (call == drift_call and op_id >= OPS // 2)) else 0.0
            batch.append(
                pb.GraphExecutionTrace(
                    op_id=op_id,
                    execution_index=index,
                    op_name=f"lv{op_id}",
                    kernel=f"fused_kernel_{op_id}",
                    tensor_debug_mode=pb.FULL_STATS,
                    debug_values=_stats(op_id, call, drift),
                    dtype="float32",
                    shape=[64, 64],
                )
            )
        w.write_graph_execution_traces(batch)
        w.write_execution(
            pb.Execution(index=index, function_name="main", graph_id=0, num_traces=OPS, tensor_debug_mode=pb.FULL_STATS)
        )
    w.close()
    return w.run_dir


_CHILD = (
    "import resource, sys\n"
    "from tvmdbg_tb.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stderr.write(f'PEAK_KB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')\n"
    "sys.exit(code)\n"
)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))


def cli_once(run_a: str, run_b: str) -> tuple[float, float, float, str]:
    """(seconds until the table's first line is printed, until exit, peak RSS MB, output)."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-u", "-c", _CHILD, "compare", run_a, run_b],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    first, out = None, []
    for line in child.stdout:
        out.append(line)
        if first is None and line.startswith("status "):
            first = time.perf_counter() - start
    err = child.stderr.read()
    child.wait()
    total = time.perf_counter() - start
    assert child.returncode == 1 and first is not None, err[-2000:]
    return first, total, int(err.split("PEAK_KB ")[-1].split()[0]) / 1024, "".join(out)


def route_once(logdir: str, run_a: str, run_b: str) -> tuple[float, float, dict]:
    """On a fresh tensorboard that has read both runs: (seconds of the first `compare` answer,
    until its fused kernel's inside is no longer pending, the final answer)."""
    import urllib.parse
    import urllib.request
    from pathlib import Path

    from test_dashboard_e2e import TensorBoardProcess

    tb = TensorBoardProcess(Path(logdir), Path(logdir) / "bench_tensorboard.log")
    try:
        names = [os.path.relpath(run, logdir) for run in (run_a, run_b)]  # as the runs route names them
        deadline = time.time() + 600
        while True:
            try:
                answer = tb.api("runs")
            except OSError:  # busy reading millions of records: asked again
                answer = {"runs": [], "default_run": None}
            listed = {r["run"]: r for r in answer["runs"]}
            if all(listed.get(n, {}).get("num_traces") for n in names) and answer["default_run"]:
                break
            assert time.time() < deadline, listed
            time.sleep(0.5)
        query = urllib.parse.urlencode({"run_a": names[0], "run_b": names[1]})
        url = f"{tb.url}/data/plugin/tvmdbg/compare?{query}"
        start = time.perf_counter()
        with urllib.request.urlopen(url, timeout=600) as response:
            body = json.loads(response.read())
        first = time.perf_counter() - start
        while ((body.get("first_divergence") or {}).get("inner") or {}).get("status") == "pending":
            time.sleep(0.1)
            with urllib.request.urlopen(url, timeout=600) as response:
                body = json.loads(response.read())
        return first, time.perf_counter() - start, body
    finally:
        tb.close()


def example_runs(logdir: str) -> tuple[str, str, str]:
    """The README's example runs (written once): (logdir, run A, run B)."""
    root = os.path.join(logdir, "example")
    if not os.path.exists(os.path.join(root, ".complete")):
        env = dict(_env(), TVM_NUM_THREADS="1", HF_HUB_OFFLINE="1")
        example = os.path.join(ROOT, "examples", "compare_with_torch.py")
        subprocess.run(
            [sys.executable, example, "--plant", "--mode", "FULL_TENSOR", "--logdir", root], check=True, env=env
        )
        open(os.path.join(root, ".complete"), "w").close()
    run = lambda side: os.path.join(root, side, os.listdir(os.path.join(root, side))[0])  # noqa: E731
    return root, run("tvm"), run("torch")


def large_runs(logdir: str, traces: int) -> tuple[str, str, str]:
    """Two runs of `traces` traces (written once): (logdir, run A, run B)."""
    root = os.path.join(logdir, f"large_{traces}")
    runs = {}
    for name, drifting in (("a", True), ("b", False)):
        path = os.path.join(root, name)
        done = os.path.join(path, ".complete")
        if not os.path.exists(done):
            start = time.perf_counter()
            os.makedirs(path, exist_ok=True)
            generate(path, "run", traces, drifting)
            open(done, "w").close()
            print(f"generated {name}: {traces} traces in {time.perf_counter() - start:.1f} s", flush=True)
        runs[name] = os.path.join(path, "run")
    return root, runs["a"], runs["b"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=1_000_000)
    parser.add_argument("--example", action="store_true", help="the README's example instead of large runs")
    parser.add_argument("--logdir", default="/tmp/tvmdbg_bench_compare")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-route", action="store_true", help="the CLI only")
    options = parser.parse_args()
    logdir, run_a, run_b = (
        example_runs(options.logdir) if options.example else large_runs(options.logdir, options.traces)
    )
    what = "README example" if options.example else f"2 runs x {options.traces} traces"
    cli, route = [], []
    for _ in range(options.repeat):  # the CLI and the route alternate
        cli.append(cli_once(run_a, run_b))
        if not options.no_route:
            route.append(route_once(logdir, run_a, run_b))
    med = lambda values: statistics.median(values)  # noqa: E731
    print(
        f"{what}: tvmdbg compare: report at {med([c[0] for c in cli]):.2f} s, done at {med([c[1] for c in cli]):.2f} s "
        f"(runs: {', '.join(f'{c[0]:.2f}/{c[1]:.2f}' for c in cli)}), peak RSS {max(c[2] for c in cli):.0f} MB"
    )
    if route:
        body = route[-1][2]
        first = body["first_divergence"]
        print(
            f"{what}: compare route: first answer {med([r[0] for r in route]):.2f} s, whole {med([r[1] for r in route]):.2f} s "
            f"(runs: {', '.join(f'{r[0]:.2f}/{r[1]:.2f}' for r in route)}); first divergence {first['op_name_a']} "
            f"line {first['location']['line']}, inside: {(first.get('inner') or {}).get('status')}"
        )


if __name__ == "__main__":
    main()
