"""Scale benchmark of the plugin: load (index) time, page latency and memory on 1.5M traces.

    .venv/bin/python bench/bench_plugin.py [--traces 1500000] [--logdir /tmp/tvmdbg_bench_plugin] [--repeat 3]

Generates (once; reused when present) a FULL_HEALTH dump through the real writer: a function
of 100 kernels run 15000 times, NaN born in one kernel of a late execution and passed on to
the rest, as in a training run that diverges. Then, in a fresh process (so memory is the
plugin's alone), builds the plugin, reads the dump once (the load) and times 200-row pages of
`graph_execution/digests` and `alerts` at random offsets through the WSGI app. Repeated in
fresh processes; medians are printed.
Targets: indexed <= 5 s, page <= 20 ms median, plugin memory <= 300 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))  # eventgen: synthetic records

OPS_PER_EXECUTION = 100


def open_writer(logdir: str, circular_buffer_size: int = -1):
    """A FULL_HEALTH writer of run "bench" with one graph of OPS_PER_EXECUTION chained ops."""
    from eventgen import chain_ops

    from tvmdbg_tb.events.options import DumpOptions
    from tvmdbg_tb.events.writer import DebugEventsWriter
    from tvmdbg_tb.proto import debug_event_pb2 as pb

    w = DebugEventsWriter(
        logdir, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=circular_buffer_size), run_id="bench"
    )
    loc = w.code_location([(__file__, 10, "model")], user_frame_index=0)
    w.write_graph(pb.DebuggedGraph(graph_id=0, name="main", source_mapped=True, code_location=loc))
    spec = pb.TensorSpec(dtype="float32", shape=[64, 64])
    for op in chain_ops(
        OPS_PER_EXECUTION, kernel=lambda op_id: f"fused_kernel_{op_id % 17}", location=lambda op_id: loc, outputs=[spec]
    ):
        w.write_graph_op_creation(op)
    return w


def write_executions(w, executions: int, nan_execution: int) -> None:
    """Appends `executions` calls of the graph; NaN is born in its middle op at call
    `nan_execution` (counted from the run's first call) and passed on to every later op."""
    from tvmdbg_tb.proto import debug_event_pb2 as pb

    nan_op = OPS_PER_EXECUTION // 2
    for _ in range(executions):
        index = w.allocate_execution_index()
        batch = []
        for op_id in range(OPS_PER_EXECUTION):
            bad = index > nan_execution or (index == nan_execution and op_id >= nan_op)
            nan = 4096 if bad else 0
            batch.append(
                pb.GraphExecutionTrace(
                    op_id=op_id,
                    execution_index=index,
                    op_name=f"lv{op_id}",
                    kernel=f"fused_kernel_{op_id % 17}",
                    tensor_debug_mode=pb.FULL_HEALTH,
                    debug_values=[0, pb.FLOAT32, 2, 4096, 0, 0, nan, 0, 4096 - nan, 0],
                    device="cpu:0",
                    duration_us=3.0 + op_id % 7,
                    dtype="float32",
                    shape=[64, 64],
                )
            )
        w.write_graph_execution_traces(batch)
        w.write_execution(pb.Execution(index=index, function_name="main", graph_id=0, num_traces=OPS_PER_EXECUTION))


def generate(logdir: str, traces: int, nan_at: float) -> None:
    executions = traces // OPS_PER_EXECUTION
    w = open_writer(logdir)
    write_executions(w, executions, int(executions * nan_at))
    w.close()


def measure(logdir: str) -> dict:
    """Runs in a fresh process: load, then page latencies; returns the figures."""
    import numpy as np

    rss_start = _rss_mb()
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client
    from werkzeug.wrappers import Response

    from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin

    rss_imported = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    plugin = TvmDebuggerPlugin(base_plugin.TBContext(logdir=logdir), start_reader=False)
    plugin.poll()
    load_s, load_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    apps = plugin.get_plugin_apps()
    run = plugin._reader.run("bench")
    n_traces, n_corruptions = run.num_traces(), len(run.corruptions)
    rng = np.random.default_rng(0)

    def page_ms(route: str, total: int, repeats: int = 200) -> tuple[float, float, float]:
        """(median, p99) wall time and median CPU time of 200-row pages at random offsets, ms."""
        client = Client(apps[route], Response)
        times, cpu = [], []
        for _ in range(repeats):
            begin = int(rng.integers(0, max(total - 200, 1)))
            t, c = time.perf_counter(), time.process_time()
            query = {"run": "bench", "begin": begin, "end": begin + 200}
            r = client.get(f"/data/plugin/tvmdbg{route}", query_string=query)
            times.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
            assert r.status_code == 200, r.get_data(as_text=True)
        return float(np.median(times)), float(np.percentile(times, 99)), float(np.median(cpu))

    from tvmdbg_tb import analysis

    alerts = analysis.monitor(run)
    profile_client = Client(apps["/profile"], Response)
    t = time.perf_counter()
    assert profile_client.get("/data/plugin/tvmdbg/profile", query_string={"run": "bench"}).status_code == 200
    profile_ms = (time.perf_counter() - t) * 1e3
    digests = page_ms("/graph_execution/digests", n_traces)
    alert_pages = page_ms("/alerts", alerts.num_alerts(), repeats=50)
    return {
        "traces": n_traces,
        "alerts": alerts.num_alerts(),
        "first_origin_alert": alerts.first_origin_index(),
        "corruptions": n_corruptions,
        "load_s": round(load_s, 3),
        "load_cpu_s": round(load_cpu_s, 3),  # CPU time: less sensitive to a busy machine
        "digests_page_ms_median": round(digests[0], 2),
        "digests_page_ms_p99": round(digests[1], 2),
        "digests_page_cpu_ms_median": round(digests[2], 2),
        "alerts_page_ms_median": round(alert_pages[0], 2),
        "alerts_page_ms_p99": round(alert_pages[1], 2),
        "profile_first_ms": round(profile_ms, 1),
        "rss_start_mb": round(rss_start, 1),
        "rss_after_imports_mb": round(rss_imported, 1),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "plugin_peak_mb": round(_peak_rss_mb() - rss_imported, 1),
    }


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=1_500_000)
    parser.add_argument("--logdir", default="/tmp/tvmdbg_bench_plugin")
    parser.add_argument("--nan-at", type=float, default=0.9, help="fraction of the run after which NaN appears")
    parser.add_argument("--repeat", type=int, default=3, help="measuring processes (medians are reported)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logdir = os.path.join(args.logdir, f"{args.traces}" if args.nan_at == 0.9 else f"{args.traces}_nan{args.nan_at}")
    if args.measure:
        print(json.dumps(measure(logdir)))
        return
    if not os.path.isdir(os.path.join(logdir, "bench")):
        t = time.perf_counter()
        generate(logdir, args.traces, args.nan_at)
        print(f"generated {args.traces} traces in {time.perf_counter() - t:.1f} s under {logdir}")
    size = sum(os.path.getsize(os.path.join(logdir, "bench", f)) for f in os.listdir(os.path.join(logdir, "bench")))
    print(f"dump size: {size / 2**20:.0f} MiB")
    runs = []
    for _ in range(args.repeat):  # each in a fresh process: memory is the plugin's alone
        out = subprocess.run(
            [sys.executable, __file__, "--measure", "--traces", str(args.traces), "--logdir", args.logdir]
            + ["--nan-at", str(args.nan_at)],
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print("run:", runs[-1])
    figures = {key: statistics.median(run[key] for run in runs) for key in runs[0] if runs[0][key] is not None}
    print(f"median of {len(runs)} runs:")
    for key, value in figures.items():
        print(f"  {key:28s} {value}")
    ok = figures["load_s"] <= 5 and figures["digests_page_ms_median"] <= 20 and figures["plugin_peak_mb"] <= 300
    print("targets (load <= 5 s, page <= 20 ms median, plugin memory <= 300 MB):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
