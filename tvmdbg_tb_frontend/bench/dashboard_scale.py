"""How the dashboard behaves on a dump with millions of kernel executions.

Writes a FULL_HEALTH dump of N kernel executions through the real writer (a 4-op graph, one NaN
call near the end), serves it with a real `tensorboard`, and drives the dashboard in headless
Chromium: time to the first rows, "go to index" latency to random rows, jump-scroll render
latency, the height of the list's scroll element (it must stay under the browser's limit), and
the first-origin alert click. Prints medians and p90s of one run.

    .venv/bin/python tvmdbg_tb_frontend/bench/dashboard_scale.py --traces 1600000
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from test_dashboard_e2e import Browser, TensorBoardProcess  # noqa: E402

from tvmdbg_tb.events.options import DumpOptions  # noqa: E402
from tvmdbg_tb.events.writer import DebugEventsWriter  # noqa: E402
from tvmdbg_tb.proto import debug_event_pb2 as pb  # noqa: E402

OPS = ("lv0", "lv1", "lv2", "lv3")


def write_dump(logdir: Path, num_traces: int) -> None:
    w = DebugEventsWriter(
        str(logdir), DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1), run_id="scale"
    )
    loc = w.code_location([(__file__, 30, "model")], user_frame_index=0)
    w.write_graph(pb.DebuggedGraph(graph_id=0, name="main", executable_id="e", source_mapped=True, code_location=loc))
    for i, name in enumerate(OPS):
        inputs = [pb.OpInput(kind=pb.OpInput.OP_OUTPUT, name=OPS[i - 1], producer_op_id=i - 1)] if i else []
        w.write_graph_op_creation(
            pb.GraphOpCreation(
                op_id=i,
                graph_id=0,
                op_name=name,
                kernel=f"k{i}",
                call_type="call_tir",
                inputs=inputs,
                code_location=loc,
            )
        )
    calls = num_traces // len(OPS)
    for _ in range(calls):
        index = w.allocate_execution_index()
        nan = 8 if index == calls - 3 else 0
        traces = [
            pb.GraphExecutionTrace(
                op_id=i,
                execution_index=index,
                op_name=name,
                kernel=f"k{i}",
                tensor_debug_mode=pb.FULL_HEALTH,
                debug_values=[0, pb.FLOAT32, 1, 8, 0, 0, nan if i else 0, 0, 8 - (nan if i else 0), 0],
                dtype="float32",
                shape=[8],
                duration_us=1.0,
            )
            for i, name in enumerate(OPS)
        ]
        w.write_graph_execution_traces(traces)
        w.write_execution(pb.Execution(index=index, function_name="main", graph_id=0, num_traces=len(OPS)))
    w.close()


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=1_600_000)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        logdir = Path(tmp) / "logdir"
        t0 = time.perf_counter()
        write_dump(logdir, args.traces)
        print(f"wrote {args.traces:,} traces in {time.perf_counter() - t0:.1f} s")
        tb = TensorBoardProcess(logdir, Path(tmp) / "tb.log")
        browser = Browser()
        try:
            t0 = time.perf_counter()
            while True:  # the plugin indexes the dump in the background
                try:
                    runs = tb.api("runs")["runs"]
                    if runs and runs[0]["num_traces"] >= args.traces:
                        break
                except OSError:
                    pass
                time.sleep(0.5)
            print(f"plugin listed every trace {time.perf_counter() - t0:.1f} s after tensorboard answered")
            page = browser.page
            t0 = time.perf_counter()
            frame = browser.open_dashboard(tb)
            frame.locator(".vlist-row[data-row='0']").wait_for(timeout=60_000)
            first_rows = time.perf_counter() - t0
            total = args.traces
            scroll = frame.locator(".vlist").evaluate("e => [e.scrollHeight, e.clientHeight]")
            rng = random.Random(0)
            goto, jump = [], []
            for _ in range(args.samples):
                row = rng.randrange(total)
                t0 = time.perf_counter()
                frame.locator(".goto-input").fill(str(row))
                frame.locator(".goto-input").press("Enter")
                frame.locator(f".vlist-row.selected[data-row='{row}']").wait_for()
                goto.append(time.perf_counter() - t0)
            for _ in range(args.samples):
                fraction = rng.random()
                t0 = time.perf_counter()
                frame.locator(".vlist").evaluate(
                    f"e => {{ e.scrollTop = {fraction} * (e.scrollHeight - e.clientHeight); }}"
                )
                frame.locator(".vlist-row[data-row]:not(.loading)").first.wait_for()
                page.wait_for_function("() => true")
                frame.locator(".vlist-window .loading").first.wait_for(state="detached", timeout=10_000)
                jump.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            frame.locator("[data-testid=first-origin-alert]:not([disabled])").click()
            frame.locator(".vlist-row.selected.nonfinite").wait_for()
            frame.locator(".graph-panel .op-node.role-selected").wait_for()
            alert_click = time.perf_counter() - t0
            print(f"rows: {total:,}; list scroll height {scroll[0]:,} px (viewport {scroll[1]} px)")
            print(f"page load to first rows: {first_rows:.2f} s")
            print(
                f"go to index (n={len(goto)}): median {statistics.median(goto) * 1e3:.0f} ms, p90 {pct(goto, 0.9) * 1e3:.0f} ms"
            )
            print(
                f"jump scroll to rows drawn (n={len(jump)}): median {statistics.median(jump) * 1e3:.0f} ms, p90 {pct(jump, 0.9) * 1e3:.0f} ms"
            )
            print(f"alert click to selected row + graph: {alert_click * 1e3:.0f} ms")
            print(f"page errors: {browser.errors}")
        finally:
            browser.close()
            tb.close()


if __name__ == "__main__":
    main()
