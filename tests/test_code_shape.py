"""The shape of the code, read with ast: short functions, and no state in module globals.

- No function in tvmdbg_tb is longer than MAX_LINES (generated code and the code templates
  in LONG aside, each with its reason).
- No module keeps mutable state in a global: what tracing changes lives in the one
  TracingState (tvmdbg_tb/tracing/state.py, reached through state.ACTIVE); what remains at
  module level is constant (a table built once and never changed), a lock, or a cache or index
  listed in CACHES with why it is one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "tvmdbg_tb"
MAX_LINES = 80

# Functions allowed past MAX_LINES: code templates, whose length is the code they emit.
LONG = {
    "capture/stats_kernel.py:stats_lines": "the TVMScript lines of FULL_STATS' summary kernel, emitted as they read",
}

# Module globals that change while the process runs, and why each is no state to gather.
CACHES = {
    "tracing/state.py:ACTIVE": "the one tracing state in force",
    # Memoised lookups: the same answer for the same key, whoever asks.
    "analysis/alerts.py:_monitors": "an AlertMonitor per RunReader (weak keys): observers of the reader's records",
    "analysis/graph_index.py:_indexes": "an op index per RunReader (weak keys), built from its graphs",
    "analysis/unfinished.py:_NONFINITE_HITS": "per RunReader (weak keys): its NaN/Inf watchpoint hits, extended as read",
    "analysis/profile.py:_cache": "profiles of runs by their state key (bounded, least recently used)",
    "analysis/ranges.py:_monitors": "a RangeMonitor per RunReader (weak keys): observers of the reader's records",
    "capture/compiled.py:_FIDS": "function ids, unique in the process (stats buffers name their function by it)",
    "capture/compiled.py:FUNCTIONS": "an index of the live executables' instrumented functions by fid",
    "capture/compiled.py:_KERNELS": "summary kernels compiled in this process, by name",
    "capture/compiled.py:_CALLEES": "callee names of IR call nodes, by node handle",
    "capture/counting.py:_WALKS": "the blocks of each kernel statement, by node handle, while one build's kernels are rewritten",
    "capture/compiled.py:_SITE_KERNELS": "the summary kernel of each output spec",
    "capture/compiled.py:_ROWS": "row-index constants by value, made once",
    "capture/compiled.py:_EXTERNS": "ExternFunc nodes by name, made once",
    "capture/frames.py:_USER_CACHE": "whether a file is the user's, by path",
    "capture/frames.py:_MODEL_CACHE": "whether a file is model code, by path (cleared with the setting below)",
    "capture/frames.py:_CALL_STACKS": "captured call stacks by code position",
    "capture/frames.py:_MODEL_PLACES": "the model-code setting (enable's model_code), read on every captured stack",
    "capture/graphs.py:_CALLEE_NAMES": "callee names by node handle",
    "capture/graphs.py:_PRIM_TYPES": "PrimFunc types by handle",
    "capture/graphs.py:_SHAPE_SPECS": "shape specs by handle",
    "capture/graphs.py:_DIM_TEXTS": "dimension texts by handle",
    "capture/graphs.py:_SPECS": "tensor specs by type handle",
    "capture/graphs.py:_OP_NAMES": "op names by handle",
    "capture/hooks.py:_INFOS": "the description of each executable (weak keys): an annotation of TVM objects",
    "capture/hooks.py:_EXPORTED": "the description of each library exported while recording, by path",
    "capture/kernel_cache.py:_MODULES": "the summary-kernel libraries loaded from the machine's cache",
    "capture/kernel_cache.py:_UNSAVED_SAID": "whether the cache's failure to save was said (once per process)",
    "capture/kernel_cache.py:_COMPILED": "the summary kernels this process compiled (kernel_cache.compiled())",
    "capture/kernel_cache.py:_PACKAGED": "the wheel's summary-kernel library, looked for once",
    "events/records.py:_HEADERS": "record headers by length",
    "native/__init__.py:_UNFINISHED": "compilers still running, stopped at exit",
    "replay/offline.py:_GROUPS": "compiled replay groups by kernel (bounded)",
    "tracing/fast_tracer.py:_LOCAL": "this thread's stats-buffer pools and its call in progress",
    "tracing/fast_tracer.py:_CYCLES_PER_US": "the time-stamp counter's rate, measured once",
    "tracing/fast_tracer.py:_CODES": "Execution byte templates by shape",
    "tracing/fast_tracer.py:_NATIVE_POOL": "native_call once it serves tvmdbg.stats (installed once per process)",
    "tracing/saved.py:_INSTALLED": "whether export_library and load_module are wrapped (once per process)",
    "tracing/saved.py:_ORIGINALS": "TVM's export_library and load_module before they were wrapped",
    "tracing/kernel_summary.py:_FUNCTIONS": "the summary kernels' packed functions by dtype",
    "tracing/kernel_summary.py:_ROW": "the summary kernels' output row, allocated once",
    "tracing/session.py:_HELD": "this thread's executions held for the listeners until its call ends",
    "tracing/summary.py:_OWN_READS": "this thread's count of tvmdbg's own tensor reads",
    "capture/lineage.py:_DEPTH": "this thread's nesting of pass calls",
    "cli/filters.py:_FILTERS": "tensor filters registered by name for `tvmdbg run -f` (as tfdbg's)",
    "events/records.py:_ZERO_OPERATORS": "GF(2) operators of CRC32C's zero extension, computed on first use",
    "disco/functions.py:_INFOS": "in a disco worker: the descriptions the controller sent, by library path",
    "disco/functions.py:_VMS": "in a disco worker: the VMs it loaded (their functions are found by module)",
}

_MUTATORS = {"append", "extend", "add", "update", "setdefault", "pop", "popitem", "clear", "remove", "insert"}
_MUTATORS |= {"discard", "appendleft", "move_to_end", "__setitem__", "__delitem__"}
_SYNC = {"Lock", "RLock", "Event", "Condition", "Semaphore", "BoundedSemaphore", "getLogger"}


def _functions():
    for path in sorted(ROOT.rglob("*.py")):
        if "proto" in path.relative_to(ROOT).parts:
            continue  # generated (protos/generate.py)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, node


def test_no_function_is_longer_than_80_lines():
    long = {}
    for path, node in _functions():
        length = node.end_lineno - node.lineno + 1
        key = f"{path.relative_to(ROOT)}:{node.name}"
        if length > MAX_LINES and key not in LONG:
            long[key] = length
    assert long == {}


def test_the_listed_long_functions_still_are():
    """An exception that is no longer needed goes from the list."""
    lengths = {f"{p.relative_to(ROOT)}:{n.name}": n.end_lineno - n.lineno + 1 for p, n in _functions()}
    assert {key: lengths.get(key, 0) > MAX_LINES for key in LONG} == dict.fromkeys(LONG, True)


def _module_state(path: Path) -> set[str]:
    """Module globals of path that a function changes: assigned under `global`, or holding a
    container or object that is mutated (item assignment, a mutating method, an attribute
    set, next() on an iterator), or a thread-local; locks and loggers aside. A table filled
    at import, at module level, is a constant."""
    tree = ast.parse(path.read_text())
    declared: dict[str, ast.expr] = {}
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
                declared[target.id] = node.value
    changed: set[str] = set()
    local_classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    in_functions = [
        n for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    ]
    for node in in_functions:
        if isinstance(node, ast.Global):
            changed.update(node.names)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                while isinstance(target, (ast.Subscript, ast.Attribute)):
                    target = target.value
                    if isinstance(target, ast.Name) and target.id in declared:
                        changed.add(target.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            owner = node.func.value
            while isinstance(owner, (ast.Attribute, ast.Subscript)):
                owner = owner.value
            if isinstance(owner, ast.Name) and owner.id in declared:
                changed.add(owner.id)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "next" and node.args:
            changed.update(a.id for a in node.args[:1] if isinstance(a, ast.Name) and a.id in declared)
    for name, value in declared.items():
        if isinstance(value, ast.Call):
            callee = value.func.attr if isinstance(value.func, ast.Attribute) else getattr(value.func, "id", "")
            if callee in _SYNC:
                changed.discard(name)
            elif callee == "local" or (callee in local_classes and _is_thread_local(local_classes[callee])):
                changed.add(name)
    return {name for name in changed if name in declared}


def _is_thread_local(cls: ast.ClassDef) -> bool:
    return any(ast.unparse(base).endswith("local") for base in cls.bases)


def test_no_module_keeps_state_outside_the_tracing_state_and_listed_caches():
    found = set()
    for path in sorted(ROOT.rglob("*.py")):
        if "proto" in path.relative_to(ROOT).parts:
            continue
        found |= {f"{path.relative_to(ROOT)}:{name}" for name in _module_state(path)}
    assert sorted(found - set(CACHES)) == []
    assert sorted(set(CACHES) - found) == []  # a cache that went goes from the list


@pytest.mark.parametrize(
    "source, state",
    [
        ("X = []\ndef f():\n    X.append(1)\n", {"X"}),
        ("X = {}\ndef f():\n    X['a'] = 1\n", {"X"}),
        ("X = None\ndef f():\n    global X\n    X = 1\n", {"X"}),
        ("class S:\n    a = 0\nS_ = S()\ndef f():\n    S_.a = 1\n", {"S_"}),
        ("import threading\nL = threading.local()\n", {"L"}),
        ("TABLE = {1: 2}\ndef f():\n    return TABLE[1]\n", set()),
        ("TABLE = {}\nTABLE[1] = 2\n", set()),
        ("IDS = iter(range(9))\ndef f():\n    return next(IDS)\n", {"IDS"}),
        ("import threading\nLOCK = threading.Lock()\n", set()),
    ],
)
def test_the_state_finder_finds_planted_state(tmp_path, source, state):
    path = tmp_path / "m.py"
    path.write_text(source)
    assert _module_state(path) == state


# The mode table (events/modes.py) is the one place a mode's number is tested.
MODE_TABLE = "events/modes.py"
_MODE_NAMES = {"NO_TENSOR", "CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH", "SHAPE", "FULL_TENSOR", "FULL_STATS"}


def _is_mode(node: ast.expr) -> bool:
    """pb.<MODE>."""
    return isinstance(node, ast.Attribute) and node.attr in _MODE_NAMES and ast.unparse(node.value) == "pb"


def _names_a_mode(node: ast.expr) -> bool:
    text = ast.unparse(node).lower()
    return text.endswith("mode") or text.endswith("mode_value") or text == "mode"


def _mode_tests(tree: ast.AST) -> list[str]:
    """Comparisons of a mode with pb.<MODE> or a number, and collections of pb.<MODE> values."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            options = [e for s in sides if isinstance(s, (ast.Tuple, ast.List, ast.Set)) for e in s.elts]
            if (
                any(_is_mode(s) for s in sides + options)
                or any(_names_a_mode(s) for s in sides)
                and any(isinstance(s, ast.Constant) and type(s.value) is int for s in sides + options)
            ):
                found.append(ast.unparse(node))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and sum(map(_is_mode, node.elts)) > 1:
            found.append(ast.unparse(node))
    return found


def test_modes_are_asked_of_the_mode_table_not_tested_by_number():
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        key = str(path.relative_to(ROOT))
        if "proto" in path.relative_to(ROOT).parts or key == MODE_TABLE:
            continue
        tests = _mode_tests(ast.parse(path.read_text()))
        if tests:
            found[key] = tests
    assert found == {}


@pytest.mark.parametrize(
    "source, found",
    [
        ("if mode == pb.FULL_TENSOR: pass", True),
        ("if self.mode in (pb.NO_TENSOR, pb.SHAPE): pass", True),
        ("rows = mode == 2", True),
        ("HEALTH = (pb.CURT_HEALTH, pb.FULL_HEALTH)", True),
        ("if spec(mode).comparable: pass", False),
        ("x = debug_values(pb.FULL_HEALTH, t)", False),
        ("if count == 2: pass", False),
    ],
)
def test_the_mode_test_finder_finds_planted_tests(source, found):
    assert bool(_mode_tests(ast.parse(source))) == found
