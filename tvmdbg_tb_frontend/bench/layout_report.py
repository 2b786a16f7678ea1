"""What the dashboard gives each panel at 1000x700, 1440x900 and 1920x1080, measured in
headless Chromium on a real `tensorboard`: after one click on the first origin alert, the
height of the stack trace and source panes, the stack frames and source lines fully on
screen, whether the op's inputs table and its health numbers are on screen without
scrolling, the call details under the timeline, and how many Tab presses reach the first
alert, the selected graph node and the source from the run picker.

    .venv/bin/python tvmdbg_tb_frontend/bench/layout_report.py LOGDIR [--run NAME]

LOGDIR holds dumps (e.g. examples/debug_digits.py --debug --dump_dir LOGDIR/nan); the run is
the default one (the CLI's), or --run; --row N selects kernel execution N instead of the alert
(a run without alerts). Prints one line per window size.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from dashboard_checks import IN_VIEW, inner_frame  # noqa: E402
from test_dashboard_e2e import Browser, TensorBoardProcess  # noqa: E402

SIZES = [(1000, 700), (1440, 900), (1920, 1080)]

# Heights of the panes and how many of their rows are wholly inside their scroll box.
MEASURE = """(inView) => {
  const box = (sel) => document.querySelector(sel)?.getBoundingClientRect() ?? null;
  const visible = (sel, boxSel) => {
    const b = document.querySelector(boxSel)?.getBoundingClientRect();
    if (!b) return 0;
    return [...document.querySelectorAll(sel)].filter((el) => {
      const r = el.getBoundingClientRect();
      return r.height > 0 && r.top >= b.top - 1 && r.bottom <= b.bottom + 1;
    }).length;
  };
  const ok = (sel) => { const el = document.querySelector(sel); return el ? inView([el, false]) : "absent"; };
  const round = (r) => r && Math.round(r.height);
  return {
    stack_px: round(box(".stack-panel .panel-body")),
    frames: visible(".stack-panel .frame", ".stack-panel .panel-body"),
    frames_total: document.querySelectorAll(".stack-panel .frame").length,
    source_px: round(box(".source-panel .panel-body")),
    source_lines: visible(".source-panel .src-line", ".source-panel .panel-body"),
    call_details_px: round(box(".timeline-panel .execution-details")),
    call_kernels: ok(".timeline-panel .exec-kernels"),
    inputs_table: ok(".details-panel .io-table"),
    last_input: ok(".details-panel .io-table tbody tr:last-child"),
    pill_numbers_shown: [...document.querySelectorAll(".details-panel .io-table .health-pill")].some(
      (p) => /\\d/.test(p.innerText)),
  };
}"""

FOCUS = "() => { const a = document.activeElement; return a ? (a.className.baseVal ?? a.className) + '|' + (a.dataset.opName ?? '') + '|' + (a.closest('[data-panel]')?.dataset.panel ?? '') : '' }"


def tabs_to(browser, frame, predicate, limit: int = 400) -> int | None:
    """Tab presses from the run picker until the focused element satisfies predicate."""
    frame.locator(".run-select").focus()
    inner = inner_frame(browser)
    for n in range(1, limit + 1):
        browser.page.keyboard.press("Tab")
        if predicate(inner.evaluate(FOCUS)):
            return n
    return None


def measure(tb, run: str | None, size: tuple[int, int], row: int | None = None) -> dict:
    b = Browser()
    try:
        b.page.set_viewport_size({"width": size[0], "height": size[1]})
        frame = b.open_dashboard(tb)
        if run:
            frame.locator(".run-select").select_option(run)
        if row is None:
            alert = frame.locator("[data-testid=first-origin-alert]:not([disabled])")
            alert.wait_for(timeout=30_000)
            alert.click()
        else:  # a kernel execution chosen by its row (a run without alerts)
            frame.locator(".topbar .run-info", has_text="calls").wait_for()
            frame.locator(".goto-input").fill(str(row))
            frame.locator(".goto-input").press("Enter")
        frame.locator(".source-panel .src-line.highlighted").wait_for()
        frame.locator(".graph-panel .op-node.role-selected").wait_for()
        frame.locator(".details-panel .io-table").wait_for()
        b.page.wait_for_timeout(800)
        out = inner_frame(b).evaluate(f"(() => {{ const inView = {IN_VIEW}; return ({MEASURE})(inView); }})()")
        out["tabs_to_alert"] = tabs_to(b, frame, lambda f: "alert-item" in f) if row is None else None
        out["tabs_to_graph_node"] = tabs_to(b, frame, lambda f: "op-node" in f and "role-selected" in f)
        out["tabs_to_source"] = tabs_to(b, frame, lambda f: f.endswith("|source"))
        out["errors"] = b.errors[:5]
        return out
    finally:
        b.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logdir")
    parser.add_argument("--run", default=None)
    parser.add_argument("--row", type=int, default=None, help="select this kernel execution instead of the alert")
    args = parser.parse_args(argv)
    tb = TensorBoardProcess(Path(args.logdir), Path("/tmp/layout_report_tensorboard.log"))
    try:
        import time

        deadline = time.time() + 60
        while not any(r["num_alerts"] or args.row is not None for r in tb.api("runs")["runs"]):
            if time.time() > deadline:
                raise SystemExit("no run with alerts")
            time.sleep(0.3)
        for size in SIZES:
            print(f"{size[0]}x{size[1]}", json.dumps(measure(tb, args.run, size, args.row)), flush=True)
    finally:
        tb.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
