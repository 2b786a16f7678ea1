"""The docs' overhead tables, rendered from the benchmark's own output.

    TVM_NUM_THREADS=1 PYTHONPATH=$PWD .venv/bin/python bench/bench_overhead.py --threads 1 --clock cpu \
        --workloads chain200,chain200_fallback,big1M,fused1M,mlp1M,train_step,cnn,transformer \
        --json bench/results/overhead-1.json          # once per run kept (overhead-2.json, ...)
    python bench/figures.py --write                   # README.md and docs/performance.md from them

Each figure is the range over the kept runs of that run's median (one run: its median), so a
table says what the benchmark gives today and nothing else; tests/test_docs_figures.py fails
when a table in the docs is not the one these files render.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BLOCK = re.compile(r"(<!-- bench/figures\.py: (\w+) -->\n)(.*?)(<!-- end -->)", re.S)
HEALTH = ("NO_TENSOR", "FULL_HEALTH")


def load(results: Path = RESULTS) -> list[dict]:
    """Every kept run of bench_overhead.py --json, oldest name first."""
    return [json.loads(p.read_text()) for p in sorted(results.glob("overhead-*.json"))]


def _span(values: list[float], digits: int, sign: str = "", suffix: str = "") -> str:
    if not values:
        return "—"
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return f"{sign}{low}{suffix}" if low == high else f"{sign}{low}-{high}{suffix}"


def _row(runs: list[dict], workload: str, mode: str, key: str) -> list[float]:
    return [r[key] for run in runs for r in run["rows"] if r["workload"] == workload and r["mode"] == mode]


def _pair(runs, workload: str, modes, key: str, digits: int, sign: str = "", suffix: str = "") -> str:
    return " / ".join(_span(_row(runs, workload, m, key), digits, sign, suffix) for m in modes)


def _per_call(runs: list[dict]) -> str:
    return " / ".join(
        _span([run["per_call"][m]["added_us"] for run in runs if m in run["per_call"]], 1, "+", " µs") for m in HEALTH
    )


def _compile(runs: list[dict]) -> str:
    return " / ".join(
        _span([run["compile"][k]["ratio"] for run in runs if k in run["compile"]], 3, suffix="x")
        for k in ("chain100", "chain1000")
    )


# The README's rows: (what, how its figure is read from the runs).
README_ROWS: list[tuple[str, Callable[[list[dict]], str]]] = [
    (
        "chain of 200 tiny kernels, per kernel, NO_TENSOR / FULL_HEALTH",
        lambda r: _pair(r, "chain200", HEALTH, "added_us_per_kernel", 2, "+", " µs"),
    ),
    ("fixed cost of a 10-kernel VM call, NO_TENSOR / FULL_HEALTH", _per_call),
    (
        "small CNN / transformer block, FULL_HEALTH",
        lambda r: " / ".join(_span(_row(r, w, "FULL_HEALTH", "ratio"), 3, suffix="x") for w in ("cnn", "transformer")),
    ),
    ("MLP 784-1024-1024-10, FULL_HEALTH", lambda r: _span(_row(r, "mlp1M", "FULL_HEALTH", "ratio"), 3, suffix="x")),
    (
        "training step (the demo's MLP), NO_TENSOR / FULL_HEALTH",
        lambda r: _pair(r, "train_step", HEALTH, "ratio", 3, suffix="x"),
    ),
    (
        "`x * 1.0001 + 0.5` on 1M floats, one fused kernel, FULL_HEALTH",
        lambda r: _span(_row(r, "fused1M", "FULL_HEALTH", "ratio"), 2, suffix="x"),
    ),
    ("`x + 1` on 1M floats, FULL_HEALTH", lambda r: _span(_row(r, "big1M", "FULL_HEALTH", "ratio"), 2, suffix="x")),
    (
        "fallback path (VM instrument), per kernel, NO_TENSOR / FULL_HEALTH",
        lambda r: _pair(r, "chain200_fallback", HEALTH, "added_us_per_kernel", 2, "+", " µs"),
    ),
    ("`tvm.compile` of 100 / 1000 kernels, FULL_HEALTH", _compile),
]


def readme_table(runs: list[dict]) -> str:
    lines = ["| workload | cost with tvmdbg |", "|---|---|"]
    lines += [f"| {what} | {figure(runs)} |" for what, figure in README_ROWS]
    return "\n".join(lines) + "\n"


def modes_table(runs: list[dict]) -> str:
    """Every workload and mode the runs measured: plain µs, ratio, added µs per kernel."""
    seen: list[tuple[str, str]] = []
    for run in runs:
        for r in run["rows"]:
            if (r["workload"], r["mode"]) not in seen:
                seen.append((r["workload"], r["mode"]))
    lines = ["| workload | mode | plain µs a call | traced / plain | added µs a kernel |", "|---|---|---|---|---|"]
    for workload, mode in seen:
        cells = [
            _span(_row(runs, workload, mode, "base_us"), 1),
            _span(_row(runs, workload, mode, "ratio"), 3, suffix="x"),
            _span(_row(runs, workload, mode, "added_us_per_kernel"), 2, "+"),
        ]
        lines.append(f"| {workload} | {mode} | " + " | ".join(cells) + " |")
    lines.append(f"| fixed cost of a 10-kernel VM call | NO_TENSOR / FULL_HEALTH | | | {_per_call(runs)} a call |")
    lines.append(f"| `tvm.compile` of 100 / 1000 kernels | FULL_HEALTH | | {_compile(runs)} | |")
    return "\n".join(lines) + "\n"


TABLES: dict[str, Callable[[list[dict]], str]] = {"readme": readme_table, "modes": modes_table}
DOCS = (ROOT / "README.md", ROOT / "docs" / "performance.md")


def render(text: str, runs: list[dict]) -> str:
    """text with each marked block replaced by its table."""
    return BLOCK.sub(lambda m: m.group(1) + TABLES[m.group(2)](runs) + m.group(4), text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the docs' blocks (else print the tables)")
    options = parser.parse_args()
    runs = load()
    if not runs:
        raise SystemExit(f"no runs in {RESULTS}: run bench_overhead.py --json {RESULTS}/overhead-1.json first")
    if not options.write:
        for name, table in TABLES.items():
            print(f"{name}:\n{table(runs)}")
        return
    for path in DOCS:
        path.write_text(render(path.read_text(), runs))


if __name__ == "__main__":
    main()
