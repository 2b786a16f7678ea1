"""Range alerts on a large FULL_STATS run: what the first answer costs next to indexing, and the
bulk read of every trace's debug values by digest offset against re-framing the file.

    .venv/bin/python bench/bench_range_alerts.py [--traces 1000000] [--logdir /tmp/tvmdbg_bench_ranges] [--repeat 3]

Generates once (bench_compare's run B: 100 kernels called traces/100 times, FULL_STATS).
Then, alternating within each repeat: the reader's first indexing (reader.update), the first
range_alerts (every trace's dtype and abs-max read from the trace file), a second one (nothing
new to read), and every trace's debug values read by offset (events/trace_values.py) and by
re-framing the file with vectorized.scan (CRC per record, the previous way). Prints medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _by_scan(run_path: str, offsets, width: int):
    """Every asked trace's values by framing the whole file (vectorized.scan, data CRCs)."""
    import numpy as np

    from tvmdbg_tb.events import layout, vectorized

    out = np.full((len(offsets), width), np.nan)
    order = np.argsort(offsets, kind="stable")
    sorted_offsets = offsets[order]
    path = os.path.join(run_path, layout.file_name(layout.GRAPH_EXECUTION_TRACES))
    with open(path, "rb") as f:
        position = 0
        while True:
            buf = f.read(8 << 20)
            if not buf:
                break
            b = vectorized.padded(buf)
            file_offsets, starts, lengths, _, consumed = vectorized.scan(buf, position, path, b)
            at = np.minimum(np.searchsorted(sorted_offsets, file_offsets), len(sorted_offsets) - 1)
            hit = sorted_offsets[at] == file_offsets
            out[order[at[hit]]] = vectorized.trace_debug_values(b, starts[hit], lengths[hit], width)
            if consumed == 0:
                break
            position += consumed
            f.seek(position)
    return out


def _by_offset(run_path: str, offsets, width: int):
    import numpy as np

    from tvmdbg_tb.events import trace_values

    out = np.full((len(offsets), width), np.nan)
    for positions, values in trace_values.iter_debug_values(run_path, offsets, width):
        out[positions] = values
    return out


def main() -> None:
    import bench_compare
    import numpy as np

    from tvmdbg_tb import analysis
    from tvmdbg_tb.events.reader import DebugDataReader

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=1_000_000)
    parser.add_argument("--logdir", default="/tmp/tvmdbg_bench_ranges")
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    path = os.path.join(options.logdir, str(options.traces))
    if not os.path.exists(os.path.join(path, ".complete")):
        os.makedirs(path, exist_ok=True)
        start = time.perf_counter()
        bench_compare.generate(path, "run", options.traces, drifting=False)
        open(os.path.join(path, ".complete"), "w").close()
        print(f"generated {options.traces} traces in {time.perf_counter() - start:.1f} s", flush=True)
    times: dict[str, list[float]] = {k: [] for k in ("index", "first", "again", "by_offset", "by_scan")}
    for _ in range(options.repeat):
        with DebugDataReader(path) as reader:
            start = time.perf_counter()
            reader.update()
            times["index"].append(time.perf_counter() - start)
            run = reader.run()
            start = time.perf_counter()
            found = analysis.range_alerts(run)
            times["first"].append(time.perf_counter() - start)
            start = time.perf_counter()
            analysis.range_alerts(run)
            times["again"].append(time.perf_counter() - start)
            offsets = run.trace_digests()["offset"].copy()
            values = {}
            for name, read in (("by_offset", _by_offset), ("by_scan", _by_scan)):
                start = time.perf_counter()
                values[name] = read(run.path, offsets, 15)
                times[name].append(time.perf_counter() - start)
            assert np.array_equal(values["by_offset"], values["by_scan"], equal_nan=True)
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"{run.num_traces()} traces, {found['num_alerts']} range alerts (median of {options.repeat})")
    print(f"  reader.update (first indexing)   {m['index']:.2f} s")
    print(f"  range_alerts, first answer       {m['first']:.2f} s ({m['first'] / m['index']:.2f}x the indexing)")
    print(f"  range_alerts, again              {m['again'] * 1e3:.1f} ms")
    print(f"  all debug values by offset       {m['by_offset']:.2f} s")
    print(f"  all debug values by re-framing   {m['by_scan']:.2f} s (by offset: {m['by_offset'] / m['by_scan']:.2f}x)")


if __name__ == "__main__":
    main()
