"""An s3:// logdir against a local one, in one process, alternating: tvmdbg's per-call cost
(FULL_HEALTH, a chain of 200 tiny kernels), the writer's throughput, and the bytes uploaded
per byte of dump (segments are uploaded once: no object is ever re-uploaded whole).

    TVM_NUM_THREADS=1 PYTHONPATH=$PWD python bench/bench_storage.py [--rounds 6] [--calls 400]

The S3 server is moto's, in a process of its own on 127.0.0.1 (so the process CPU time counts
the upload client, not the server), the network the loopback: the figures say what tvmdbg's
own machinery costs (staging, sealing, the upload thread), not what a real bucket's latency
adds (uploads never run on the traced program's thread).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


CLOCKS = {"wall": time.perf_counter, "thread_cpu": time.thread_time, "process_cpu": time.process_time}


def per_call(targets: dict[str, str], rounds: int, calls: int) -> dict[str, dict[str, list[float]]]:
    """Microseconds per VM call of the traced chain by clock (wall; the calling thread's CPU;
    the process's CPU, the flushing and upload threads included), per target, rounds
    alternating."""
    import tvm
    from models import chain
    from tvm import relax

    import tvmdbg

    tvmdbg.enable_dump_debug_info(targets["local"], "FULL_HEALTH", circular_buffer_size=-1)
    executable, inputs = chain(200)  # compiled while recording: the summary kernels are in it
    tvmdbg.disable_dump_debug_info()
    x = tvm.runtime.tensor(inputs[0])
    out = {clock: {name: [] for name in targets} for clock in CLOCKS}
    for _ in range(rounds):
        for name, logdir in targets.items():
            tvmdbg.enable_dump_debug_info(logdir, "FULL_HEALTH", circular_buffer_size=-1)
            vm = relax.VirtualMachine(executable, tvm.cpu())
            for _ in range(50):
                vm["main"](x)
            start = {clock: read() for clock, read in CLOCKS.items()}
            for _ in range(calls):
                vm["main"](x)
            for clock, read in CLOCKS.items():
                out[clock][name].append((read() - start[clock]) / calls * 1e6)
            tvmdbg.disable_dump_debug_info()  # on s3: waits for the uploads, not timed
    return out


def throughput(targets: dict[str, str], rounds: int, records: int) -> tuple[dict[str, list[float]], list[float]]:
    """MB/s of dump written (queued to closed: on s3, uploaded) per target, and on s3 the bytes
    uploaded per byte of dump, rounds alternating."""
    import eventgen

    from tvmdbg_tb.events.options import DumpOptions
    from tvmdbg_tb.events.writer import DebugEventsWriter

    speeds: dict[str, list[float]] = {name: [] for name in targets}
    ratios = []
    options = DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    for _ in range(rounds):
        for name, logdir in targets.items():
            start = time.perf_counter()
            writer = DebugEventsWriter(logdir, options)
            for op in eventgen.chain_ops(200):
                writer.write_graph_op_creation(op)
            for _ in range(records // 200):
                index = writer.allocate_execution_index()
                writer.write_graph_execution_traces([eventgen.trace(k, index) for k in range(200)])
                writer.write_execution(eventgen.execution(index, 200))
            writer.close()
            elapsed = time.perf_counter() - start
            dumped = sum(f.size for f in writer._files.values())
            speeds[name].append(dumped / elapsed / 1e6)
            if writer.uploaded_bytes:
                ratios.append(writer.uploaded_bytes / dumped)
    return speeds, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    # Seals (and so uploads) several times inside each timed stretch, not once per 5 s.
    os.environ.setdefault("TVMDBG_SEAL_SECONDS", "0.5")
    from object_store import s3_server

    with s3_server(process=True) as s3, tempfile.TemporaryDirectory() as tmp:
        targets = {"local": os.path.join(tmp, "logs"), "s3": s3.bucket() + "/logs"}
        calls = per_call(targets, args.rounds, args.calls)
        speeds, ratios = throughput(targets, args.rounds, args.records)
    ratios_by_clock = {}
    for clock, by_target in calls.items():
        pairs = [s / loc for s, loc in zip(by_target["s3"], by_target["local"])]
        ratios_by_clock[clock] = {
            "us_local": round(statistics.median(by_target["local"]), 1),
            "us_s3": round(statistics.median(by_target["s3"]), 1),
            "median_ratio": round(statistics.median(pairs), 3),
            "pairs": [round(p, 3) for p in pairs],
        }
    result = {
        "load_average": os.getloadavg(),
        "seal_seconds": os.environ["TVMDBG_SEAL_SECONDS"],
        "per_call_s3_over_local": ratios_by_clock,
        "write_MB_per_s": {k: round(statistics.median(v), 1) for k, v in speeds.items()},
        "uploaded_bytes_per_dump_byte": round(max(ratios), 4),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
