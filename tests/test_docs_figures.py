"""The docs' overhead tables are the benchmark's output: README.md's and docs/performance.md's
blocks are what bench/figures.py renders from the runs kept in bench/results/ (each written by
bench_overhead.py --json), so a figure no run gave cannot stand in them."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_figures():
    spec = importlib.util.spec_from_file_location("figures", ROOT / "bench" / "figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


figures = _load_figures()


def test_each_docs_table_is_the_one_the_kept_runs_render():
    runs = figures.load()
    assert runs, "bench/results/ holds the runs the tables come from"
    for path in figures.DOCS:
        text = path.read_text()
        assert figures.BLOCK.search(text), f"{path.name} has no bench/figures.py block"
        assert figures.render(text, runs) == text, f"{path.name}: run `python bench/figures.py --write`"


def test_the_kept_runs_measured_every_row_the_readme_shows():
    table = figures.readme_table(figures.load())
    assert "—" not in table, table  # a row no kept run measured


def test_a_figure_a_run_did_not_give_fails_the_check():
    runs = figures.load()
    readme = (ROOT / "README.md").read_text()
    changed = copy.deepcopy(runs)
    row = next(r for r in changed[0]["rows"] if r["workload"] == "chain200" and r["mode"] == "FULL_HEALTH")
    row["added_us_per_kernel"] += 1.0
    assert figures.render(readme, changed) != readme
