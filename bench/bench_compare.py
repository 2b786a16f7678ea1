"""`tvmdbg compare` on two large FULL_STATS runs: wall time and peak memory of the command.

    .venv/bin/python bench/bench_compare.py [--traces 1000000] [--logdir /tmp/tvmdbg_bench_compare] [--repeat 3]

Generates once (with the events writer) two runs of a function of 100 kernels called
traces/100 times: the reference B, and A, equal to B except that from 70% of the calls on,
op 50's statistics drift beyond tolerance (and, through it, every later op). Then runs
`tvmdbg compare A B --json` in a fresh process each time and prints the median wall time,
the peak RSS of that process, and the first divergence it found (which must be call 7000,
op lv50). Targets: <= 10 s and <= 500 MB for 1M traces per run.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=1_000_000)
    parser.add_argument("--logdir", default="/tmp/tvmdbg_bench_compare")
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    runs = {}
    for name, drifting in (("a", True), ("b", False)):
        path = os.path.join(options.logdir, f"{name}_{options.traces}")
        done = os.path.join(path, ".complete")
        if not os.path.exists(done):
            start = time.perf_counter()
            os.makedirs(path, exist_ok=True)
            generate(path, "run", options.traces, drifting)
            open(done, "w").close()
            print(f"generated {name}: {options.traces} traces in {time.perf_counter() - start:.1f} s", flush=True)
        runs[name] = os.path.join(path, "run")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    times, peaks, answer = [], [], None
    for _ in range(options.repeat):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, "compare", runs["a"], runs["b"], "--json"],
            capture_output=True,
            text=True,
            env=env,
        )
        times.append(time.perf_counter() - start)
        peaks.append(int(done.stderr.split("PEAK_KB ")[-1].split()[0]) / 1024)
        answer = json.loads(done.stdout)
        assert done.returncode == 1, done.stderr[-2000:]
    first = answer["first_divergence"]
    print(
        f"tvmdbg compare, 2 runs x {options.traces} traces: median {statistics.median(times):.2f} s "
        f"(runs: {', '.join(f'{t:.2f}' for t in times)}), peak RSS {max(peaks):.0f} MB; "
        f"first divergence: call {answer['call']} op {first['op_name_a']} line {first['location']['line']}"
    )


if __name__ == "__main__":
    main()
