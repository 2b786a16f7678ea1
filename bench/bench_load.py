"""TensorBoard under load: 32 concurrent dashboard clients for 60 s against a live 2M-trace run.

    .venv/bin/python bench/bench_load.py [--traces 2000000] [--clients 32] [--seconds 60]

A writer process (the real DebugEventsWriter, FULL_HEALTH, everything kept) writes a run of
`--traces` kernel traces (100-kernel calls, NaN born late), then stays live: one more call
every 0.1 s until the end. A real `tensorboard --logdir` process indexes it; once every trace
is listed, `--clients` threads request the dashboard's routes in a loop (pages at random
offsets of every list, op traces, graph, op info, profile, status, live state) for
`--seconds`. Printed: requests, errors (any non-200 or failed request), latency p50/p90/p99
per route and overall, and TensorBoard's RSS (VmRSS of its process: at start, indexed, peak
under load, end).
Targets: 0 errors, p99 <= 500 ms, TensorBoard RSS <= 300 MB.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

OPS = 100  # kernels per call (bench_plugin.OPS_PER_EXECUTION)


def write_live(logdir: str, traces: int) -> None:
    """The writer process: the run, then one call every 0.1 s until stdin closes."""
    import bench_plugin

    executions = traces // OPS
    w = bench_plugin.open_writer(logdir)
    started = time.perf_counter()
    bench_plugin.write_executions(w, executions, nan_execution=int(executions * 0.8))
    w.flush()
    print(f"READY {executions * OPS} traces in {time.perf_counter() - started:.0f} s", flush=True)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    while not stop.wait(0.1):
        bench_plugin.write_executions(w, 1, nan_execution=int(executions * 0.8))
        w.flush()
    w.close()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str, timeout: float = 60) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def requests_for(run: str, traces: int, executions: int, alerts: int):
    """A random dashboard request: (route name, path)."""
    base = "/data/plugin/tvmdbg/"

    def page(total: int, size: int) -> str:
        begin = random.randrange(max(total - size, 1))
        return f"begin={begin}&end={begin + size}"

    choices = [
        (4, "graph_execution/digests", lambda: f"run={run}&{page(traces, 200)}"),
        (2, "graph_execution/data", lambda: f"run={run}&{page(traces, 100)}"),
        (2, "execution/digests", lambda: f"run={run}&{page(executions, 200)}"),
        (1, "execution/data", lambda: f"run={run}&{page(executions, 50)}"),
        (2, "alerts", lambda: f"run={run}&{page(alerts, 200)}"),
        (2, "graph_execution/op_traces", lambda: f"run={run}&op_id={random.randrange(OPS)}&{page(executions, 100)}"),
        (1, "graphs/op_info", lambda: f"run={run}&op_id={random.randrange(OPS)}"),
        (1, "graphs/graph_info", lambda: f"run={run}&graph_id=0"),
        (1, "profile", lambda: f"run={run}"),
        (2, "status", lambda: f"run={run}"),
        (2, "runs", lambda: ""),
        (2, "live/state", lambda: f"run={run}"),
    ]
    weights = [c[0] for c in choices]

    def pick() -> tuple[str, str]:
        _, route, query = random.choices(choices, weights)[0]
        return route, f"{base}{route}?{query()}"

    return pick


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=2_000_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--logdir", default=None, help="default: a fresh temporary directory")
    parser.add_argument("--write-live", metavar="LOGDIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_live:
        write_live(args.write_live, args.traces)
        return
    logdir = args.logdir or tempfile.mkdtemp(prefix="tvmdbg_bench_load_")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    writer = subprocess.Popen(
        [sys.executable, __file__, "--write-live", logdir, "--traces", str(args.traces)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    port = free_port()
    tb_log = open(os.path.join(logdir, "tensorboard.log"), "w")
    tb = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--host", "127.0.0.1", "--port", str(port)]
        + ["--load_fast", "false", "--reload_interval", "5"],
        stdout=tb_log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        line = writer.stdout.readline()
        assert line.startswith("READY"), line
        print(f"writer: {line.strip()[6:]}")
        rss_start = None
        started = time.perf_counter()
        while True:  # TensorBoard up and the whole run indexed
            try:
                status, body = get(port, "/data/plugin/tvmdbg/runs")
                if rss_start is None:
                    rss_start = rss_mb(tb.pid)
                runs = json.loads(body)["runs"] if status == 200 else []
                if runs and runs[0]["num_traces"] >= args.traces:
                    break
            except OSError:
                pass
            assert tb.poll() is None, open(tb_log.name).read()[-3000:]
            time.sleep(0.5)
        run = runs[0]["run"]
        print(f"indexed {runs[0]['num_traces']} traces in {time.perf_counter() - started:.1f} s")
        alerts = json.loads(get(port, f"/data/plugin/tvmdbg/alerts?run={run}&begin=0&end=0")[1])
        pick = requests_for(run, args.traces, args.traces // OPS, alerts["num_alerts"])
        rss_indexed = rss_mb(tb.pid)

        latencies: dict[str, list[float]] = {}
        errors: list[str] = []
        rss_samples = [rss_indexed]
        cpu_before = cpu_seconds(tb.pid)
        deadline = time.perf_counter() + args.seconds
        lock = threading.Lock()

        def client() -> None:
            while time.perf_counter() < deadline:
                route, path = pick()
                t = time.perf_counter()
                try:
                    status, body = get(port, path)
                    problem = None if status == 200 else f"HTTP {status} {path}: {body[:200]!r}"
                except Exception as error:  # a refused or dropped connection is an error too
                    problem = f"{type(error).__name__} {path}: {error}"
                elapsed = (time.perf_counter() - t) * 1e3
                with lock:
                    latencies.setdefault(route, []).append(elapsed)
                    if problem:
                        errors.append(problem)

        threads = [threading.Thread(target=client, daemon=True) for _ in range(args.clients)]
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads):
            rss_samples.append(rss_mb(tb.pid))
            time.sleep(0.25)
        rss_end = rss_mb(tb.pid)
        tb_cpu = cpu_seconds(tb.pid) - cpu_before
        load = os.getloadavg()[0]
    finally:
        writer.stdin.close()
        writer.wait(timeout=120)
        tb.terminate()
        tb.wait(timeout=30)
        tb_log.close()
        if args.logdir is None:
            shutil.rmtree(logdir, ignore_errors=True)

    every = [v for values in latencies.values() for v in values]
    print(f"{args.clients} clients x {args.seconds:g} s: {len(every)} requests ({len(every) / args.seconds:.0f}/s)")
    print(f"{'route':28s} {'n':>6s} {'p50':>8s} {'p90':>8s} {'p99':>8s}  ms")
    for route, values in sorted(latencies.items()):
        p50, p90, p99 = (percentile(values, q) for q in (50, 90, 99))
        print(f"{route:28s} {len(values):6d} {p50:8.1f} {p90:8.1f} {p99:8.1f}")
    p50, p90, p99 = (percentile(every, q) for q in (50, 90, 99))
    print(f"{'all':28s} {len(every):6d} {p50:8.1f} {p90:8.1f} {p99:8.1f}")
    print(
        f"TensorBoard CPU: {tb_cpu:.1f} s in {args.seconds:g} s, {1e3 * tb_cpu / max(len(every), 1):.1f} ms per request "
        f"(machine load average {load:.1f} on {os.cpu_count()} cores)"
    )
    print(f"errors: {len(errors)}")
    for problem in errors[:10]:
        print("  ", problem)
    peak = max(rss_samples)
    print(
        f"TensorBoard RSS MB: start {rss_start:.0f}, indexed {rss_indexed:.0f}, peak under load {peak:.0f}, "
        f"end {rss_end:.0f}"
    )
    ok = not errors and p99 <= 500 and peak <= 300
    print("targets (0 errors, p99 <= 500 ms, RSS <= 300 MB):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
