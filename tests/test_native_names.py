"""The boundary between the C++ helpers and Python, checked from both sides: every attribute or
method name the C++ looks up on Python objects (its interned names) is one the Python package
defines, and the calls the C++ makes into Python pass the arguments the methods take. A name
renamed or removed in Python fails here, not on a user's first traced call."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from tvmdbg_tb.tracing.fast_tracer import CompiledTracer

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "tvmdbg_tb" / "native"
INTERNED = re.compile(r'\{&s_\w+,\s*"([^"]+)"\}')
# Methods of the standard library's objects the C++ calls (the writer's threading.Lock).
STANDARD = {"acquire", "release"}


def _interned(source: str) -> list[str]:
    return INTERNED.findall(source)


def _python_names() -> set[str]:
    """Every name the package defines as a function, method, class attribute, instance
    attribute (self.x = ...), dataclass field or keyword of a call (dict(x=...))."""
    names: set[str] = set()
    for path in (ROOT / "tvmdbg_tb").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)  # layout's stream names, dict keys
    return names


def test_every_name_the_cpp_looks_up_is_defined_in_python():
    defined = _python_names()
    missing = {}
    for source in sorted(NATIVE.glob("*.cc")):
        names = [n for n in _interned(source.read_text()) if not n.startswith("__")]
        gone = [n for n in names if n not in defined and n not in STANDARD]
        if gone:
            missing[source.name] = gone
    assert not missing, missing


def test_the_interned_names_are_found_at_all():
    """The pattern above reads what it means to: native_call.cc's hooks are among them."""
    names = _interned((NATIVE / "native_call.cc").read_text())
    assert {"_native_finish", "_native_plan", "next_call_number", "_sole_writer"} <= set(names), names


def test_the_calls_into_python_pass_what_the_methods_take():
    """native_call.cc's vectorcalls into CompiledTracer: _native_finish with the arguments
    FinishInPython forwards (the tracer itself first), next_call_number with a name."""
    source = (NATIVE / "native_call.cc").read_text()
    forwarded = int(re.search(r"PyObject\* forwarded\[(\d+)\]", source).group(1))
    finish = inspect.signature(CompiledTracer._native_finish).parameters
    required = [p for p in finish.values() if p.default is inspect.Parameter.empty]
    assert len(required) <= forwarded <= len(finish), (forwarded, list(finish))
    assert list(inspect.signature(CompiledTracer.next_call_number).parameters) == ["self", "function_name"]
