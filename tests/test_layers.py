"""The architecture as a test: data flows one way, so imports do too.

Every `import` in tvmdbg_tb (module level or inside a function: a lazy import is still a
dependency) is read with ast. No two modules may depend on each other, directly or through a
cycle, and a package may import only packages below it in LAYERS.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "tvmdbg_tb"

# Lowest first. `tvmdbg_tb` itself only holds the version and lazily resolved public names.
LAYERS = [
    "tvmdbg_tb",
    "proto",
    "native",  # C++ helpers built on the user's machine
    "storage",  # where files live: a local directory or an object store (record files below framing)
    "events",  # writer, files, reader
    "capture",  # compile time: what a build holds and where its ops came from
    "tracing",  # run time: sessions and VM tracers that write events
    "replay",  # fused kernels re-run op by op, on top of the instrumentation
    "live",  # watchpoints and pausing, on top of the instrumentation
    "debugger",  # the public API composing the three above
    "disco",  # per-rank dumps of a TVM disco session, on top of the public API
    "compare",  # two runs' records aligned and compared
    "analysis",  # JSON views of a run for the front ends
    "plugin",  # TensorBoard routes
    "cli",  # terminal front end
]


def _modules() -> dict[str, Path]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The tvmdbg_tb modules `name` imports (a package's names resolve to the package)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in modules and target != name:
                found.add(target)
    return found


@functools.cache
def _graph() -> dict[str, set[str]]:
    """The import graph, read once per test process (the tests only read it)."""
    modules = _modules()
    return {name: frozenset(_imports(name, path, modules)) for name, path in modules.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_the_import_graph_is_read():
    """Guards the checks below against reading nothing."""
    graph = _graph()
    assert "tvmdbg_tb.events.writer" in graph["tvmdbg_tb.tracing.session"]
    assert "tvmdbg_tb.events.reader" in graph["tvmdbg_tb.plugin.plugin"]
    assert {_layer(m) for m in graph} == set(LAYERS)


def test_no_two_modules_import_each_other():
    assert _cycles(_graph()) == []


def test_cycle_detection_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_layers_below_it(layer):
    graph = _graph()
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _layer(module) == layer
        for target in targets
        if rank[_layer(target)] > rank[layer]
    )
    assert upward == []
