"""CLI timings on a large dump: the one-shot subcommands end to end, and each analyzer command
once the dump is loaded.

    .venv/bin/python bench/bench_cli.py [--traces 1500000] [--logdir /tmp/tvmdbg_bench] [--repeat 3]

Uses (and generates once, through bench_plugin.generate) the plugin benchmark's FULL_HEALTH
dump: a function of 100 kernels run traces/100 times, NaN born late and passed on. Prints the
median wall time of each `tvmdbg` subcommand (a fresh process each time: startup, reading the
dump and the answer) and of each analyzer command on the loaded dump, plus peak memory.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

ANALYZER_COMMANDS = [
    "lt",
    "lt -f has_inf_or_nan",
    "lt -s size",
    "lt -s name",
    "lt -n ^lv5 -t kernel_1",
    "le",
    "alerts",
    "profile",
    "pt lv50",
    "ni lv50",
    "li -r -d 3 lv50",
    "ri",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=1_500_000)
    parser.add_argument("--logdir", default="/tmp/tvmdbg_bench")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not os.path.isdir(args.logdir):
        from bench_plugin import generate

        print(f"generating {args.traces} traces in {args.logdir} ...", flush=True)
        generate(args.logdir, args.traces)

    tvmdbg = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]
    print(f"{'subcommand (fresh process)':44s} {'median s':>9s} {'peak MB':>8s}")
    for command in (["check"], ["alerts", "-l", "20"], ["profile", "-l", "20"], ["alerts", "--json"]):
        times, peaks = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            subprocess.run([*tvmdbg, command[0], args.logdir, *command[1:]], capture_output=True, check=False)
            times.append(time.perf_counter() - start)
            peaks.append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
        label = "tvmdbg " + " ".join([command[0], "LOGDIR", *command[1:]])
        print(f"{label:44s} {statistics.median(times):9.2f} {max(peaks):8.0f}")

    from tvmdbg_tb.cli.analyzer import Analyzer
    from tvmdbg_tb.events.reader import DebugDataReader

    start = time.perf_counter()
    reader = DebugDataReader(args.logdir)
    reader.update()
    run = reader.run()
    print(f"\nload {run.num_traces()} traces: {time.perf_counter() - start:.2f} s")
    analyzer = Analyzer(run, stdin=io.StringIO(), stdout=io.StringIO())
    print(f"{'analyzer command (200 rows where paged)':44s} {'median ms':>9s}")
    for command in ANALYZER_COMMANDS:
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            analyzer.onecmd(command)
            times.append(time.perf_counter() - start)
        print(f"{command:44s} {statistics.median(times) * 1e3:9.1f}")
    print(f"peak memory of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
