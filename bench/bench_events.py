"""Writes then reads N small graph execution trace records; prints records/s and peak memory.

    python bench/bench_events.py [--records 1000000]

Writing goes through DebugEventsWriter.write_graph_execution_traces (batches of 200, as the
instrumentation writes one batch per VM call); reading is a fresh DebugDataReader indexing
everything. Reader memory is measured in a child process (ru_maxrss minus the baseline after
imports) so the writer's memory does not count.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

READ_CHILD = """
import json, resource, sys, time
sys.path[:0] = {paths!r}
import numpy  # noqa: F401  (baseline includes the libraries)
from tvmdbg_tb.events.reader import DebugDataReader
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
reader = DebugDataReader({logdir!r})
reader.update()
elapsed = time.perf_counter() - t
run = reader.run()
page = time.perf_counter()
rows = [run.trace(i) for i in range(run.num_traces() // 2, run.num_traces() // 2 + 200)]
page = time.perf_counter() - page
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(n=run.num_traces(), seconds=elapsed, page_ms=page * 1e3, peak_mb=peak / 1024,
                      added_mb=(peak - base) / 1024, corruptions=len(reader.corruptions))))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()

    from eventgen import trace

    from tvmdbg_tb.events.options import DumpOptions
    from tvmdbg_tb.events.writer import DebugEventsWriter

    with tempfile.TemporaryDirectory() as logdir:
        writer = DebugEventsWriter(logdir, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1))
        # Build the messages outside the timed loop: this measures the writer, not the caller.
        batches = [[trace(op, 0) for op in range(args.batch)] for _ in range(4)]
        n_batches = args.records // args.batch
        t = time.perf_counter()
        for b in range(n_batches):
            writer.write_graph_execution_traces(batches[b % 4])
        writer.close()
        write_s = time.perf_counter() - t
        written = n_batches * args.batch
        size = os.path.getsize(os.path.join(writer.run_dir, "tvmdbg.graph_execution_traces"))
        result = subprocess.run(
            [sys.executable, "-c", READ_CHILD.format(paths=[str(ROOT)], logdir=logdir)],
            capture_output=True,
            text=True,
            check=True,
        )
        read = json.loads(result.stdout)
    assert read["n"] == written and read["corruptions"] == 0, read
    print(f"records              {written:,} ({size / 1e6:.1f} MB on disk, {size / written:.0f} B/record)")
    print(f"write                {write_s:.2f} s   {written / write_s:,.0f} records/s")
    print(f"read (index all)     {read['seconds']:.2f} s   {written / read['seconds']:,.0f} records/s")
    print(f"fetch 200 by offset  {read['page_ms']:.1f} ms")
    print(f"reader peak RSS      {read['peak_mb']:.0f} MB ({read['added_mb']:.0f} MB above the baseline after imports)")
    print(f"writer peak RSS      {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (incl. test data)")


if __name__ == "__main__":
    main()
