"""The dashboard's declared TypeScript types, read from its sources, and a check of a JSON
value against one of them (the test of the plugin's answers: tests/test_route_schema.py).

Covers the part of TypeScript the dashboard's API types use: interfaces (with `extends`),
type aliases, object literals with optional fields, arrays, unions, intersections, literal
strings and numbers, null/undefined, `Record<K, V>`, `Omit<T, keys>`, `Readonly<T>`. Anything
else is an error of this reader, never a silent pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SOURCES = Path(__file__).resolve().parent.parent / "tvmdbg_tb_frontend" / "src"

_TOKEN = re.compile(r'\s*(=>|\[\]|"[^"]*"|\'[^\']*\'|-?\d+(?:\.\d+)?|[A-Za-z_$][\w$]*|[{}()<>\[\]|&;:,?])')


@dataclass
class Object:
    fields: dict[str, tuple[Any, bool]] = field(default_factory=dict)  # name -> (type, optional)
    index: Any = None  # the value type of `[key: string]: T`


def _tokens(text: str) -> list[str]:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    tokens, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"cannot read TypeScript at {text[pos : pos + 40]!r}")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[str]):
        self.tokens = tokens
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ValueError(f"expected {expected!r}, got {token!r} at {' '.join(self.tokens[self.at : self.at + 8])}")
        self.at += 1
        return token

    def type(self) -> Any:
        if self.peek() == "|":  # a leading bar
            self.take()
        options = [self.intersection()]
        while self.peek() == "|":
            self.take()
            options.append(self.intersection())
        return options[0] if len(options) == 1 else ("union", options)

    def intersection(self) -> Any:
        parts = [self.postfix()]
        while self.peek() == "&":
            self.take()
            parts.append(self.postfix())
        return parts[0] if len(parts) == 1 else ("all", parts)

    def postfix(self) -> Any:
        base = self.primary()
        while self.peek() == "[]":
            self.take()
            base = ("array", base)
        return base

    def primary(self) -> Any:
        token = self.take()
        if token == "(" and self._arrow_after_parens():
            return self.function_type()
        if token == "(":
            inner = self.type()
            self.take(")")
            return inner
        if token == "{":
            return self.object_body()
        if token[0] in "\"'":
            return ("literal", token[1:-1])
        if re.fullmatch(r"-?\d+(?:\.\d+)?", token):
            return ("literal", float(token))
        if self.peek() == "<":
            self.take()
            arguments = [self.type()]
            while self.peek() == ",":
                self.take()
                arguments.append(self.type())
            self.take(">")
            return ("generic", token, arguments)
        return ("name", token)

    def _arrow_after_parens(self) -> bool:
        depth, at = 1, self.at
        while at < len(self.tokens) and depth:
            depth += self.tokens[at] == "("
            depth -= self.tokens[at] == ")"
            at += 1
        return at < len(self.tokens) and self.tokens[at] == "=>"

    def function_type(self) -> Any:
        """`(args) => T`: no JSON value has it."""
        depth = 1
        while depth:
            token = self.take()
            depth += token == "("
            depth -= token == ")"
        self.take("=>")
        self.type()
        return ("unreadable", "a function type")

    def object_body(self) -> Object:
        result = Object()
        while self.peek() != "}":
            if self.peek() == "readonly":
                self.take()
            if self.peek() == "[":
                self.take("[")
                self.take()
                self.take(":")
                self.type()
                self.take("]")
                self.take(":")
                result.index = self.type()
            else:
                name = self.take()
                optional = self.peek() == "?"
                if optional:
                    self.take()
                if self.peek() == "(":  # a method: not part of JSON
                    depth = 0
                    while True:
                        token = self.take()
                        depth += token == "("
                        depth -= token == ")"
                        if depth == 0:
                            break
                    self.take(":")
                    self.type()
                else:
                    self.take(":")
                    result.fields[name.strip("\"'")] = (self.type(), optional)
            if self.peek() in (";", ","):
                self.take()
        self.take("}")
        return result


def declarations(sources: Path = SOURCES) -> dict[str, Any]:
    """Every interface and type alias declared in the dashboard's sources, by name."""
    found: dict[str, Any] = {}
    for path in sorted(sources.rglob("*.ts")):
        text = path.read_text()
        for match in re.finditer(r"^(?:export )?interface (\w+)(?: extends ([^{]+))?\s*\{", text, re.M):
            body, _ = _balanced(text, match.end() - 1, "{", "}")
            bases = [_Parser(_tokens(b)).type() for b in _split_top(match.group(2) or "")]
            found[match.group(1)] = ("interface", bases, _Parser(_tokens(body)).primary())
        for match in re.finditer(r"^(?:export )?type (\w+)\s*=", text, re.M):
            end = _statement_end(text, match.end())
            try:
                found[match.group(1)] = _Parser(_tokens(text[match.end() : end])).type()
            except ValueError as error:  # a function type (FetchLike) and such: no JSON answer is one
                found[match.group(1)] = ("unreadable", f"{path.name}: {error}")
    return found


def route_types(sources: Path = SOURCES) -> dict[str, list[tuple[Path, Any]]]:
    """The types the dashboard reads each route's answer as: (file, type) of every
    `get<T>("route"` in its sources."""
    routes: dict[str, list[tuple[Path, Any]]] = {}
    for path in sorted(sources.rglob("*.ts")):
        text = path.read_text()
        for match in re.finditer(r"\.get<", text):
            inner, end = _balanced(text, match.end() - 1, "<", ">")
            route = re.match(r'\s*\(\s*"([^"]+)"', text[end:])
            if route is None:
                continue  # the generic helper itself
            routes.setdefault(route.group(1), []).append((path, _Parser(_tokens(inner[1:-1])).type()))
    return routes


def _balanced(text: str, start: int, opening: str, closing: str) -> tuple[str, int]:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing and not (closing == ">" and text[i - 1] == "="):
            depth -= 1
            if depth == 0:
                return text[start : i + 1], i + 1
    raise ValueError(f"unbalanced {opening} at {text[start : start + 40]!r}")


def _statement_end(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] in "{(<[":
            depth += 1
        elif text[i] in "})>]" and not (text[i] == ">" and text[i - 1] == "="):
            depth -= 1
        elif text[i] == ";" and depth == 0:
            return i
    return len(text)


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for c in text:
        depth += c in "<({"
        depth -= c in ">)}"
        if c == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += c
    return [p for p in (*parts, current) if p.strip()]


class Checker:
    """Checks JSON values against the declared types; errors name the path of each mismatch."""

    def __init__(self, declared: dict[str, Any]):
        self.declared = declared
        self.strict = True

    def check(self, value: Any, declared_type: Any, path: str = "$", strict: bool | None = None) -> list[str]:
        """The mismatches of value; strict: a field the type does not declare is one."""
        if strict is not None:
            self.strict, saved = strict, self.strict
            try:
                return self.check(value, declared_type, path)
            finally:
                self.strict = saved
        kind = declared_type[0] if isinstance(declared_type, tuple) else "object"
        if kind == "object":
            return self._object(value, declared_type, path)
        if kind == "name":
            return self._named(value, declared_type[1], path)
        if kind == "literal":
            return [] if value == declared_type[1] else [f"{path}: {value!r} is not {declared_type[1]!r}"]
        if kind == "array":
            if not isinstance(value, list):
                return [f"{path}: {_shown(value)} is not an array"]
            return [e for i, item in enumerate(value) for e in self.check(item, declared_type[1], f"{path}[{i}]")]
        if kind == "union":
            attempts = [self.check(value, option, path) for option in declared_type[1]]
            if any(not errors for errors in attempts):
                return []
            return min(attempts, key=len)
        if kind == "all":
            merged = self.resolve_object(declared_type, path)
            return self._object(value, merged, path)
        if kind == "generic":
            return self._generic(value, declared_type, path)
        if kind == "unreadable":
            raise ValueError(f"{path}: this reader cannot read the declared type ({declared_type[1]})")
        raise ValueError(f"unknown type {declared_type!r}")

    def _named(self, value: Any, name: str, path: str) -> list[str]:
        primitive = {"number": (int, float), "string": (str,), "boolean": (bool,)}
        if name in primitive:
            if isinstance(value, bool) and name == "number":
                return [f"{path}: {value!r} is not a number"]
            return [] if isinstance(value, primitive[name]) else [f"{path}: {_shown(value)} is not a {name}"]
        if name in ("null", "undefined"):
            return [] if value is None else [f"{path}: {_shown(value)} is not null"]
        if name in ("unknown", "any"):
            return []
        if name not in self.declared:
            raise ValueError(f"{path}: the dashboard declares no type {name!r}")
        found = self.declared[name]
        if isinstance(found, tuple) and found[0] == "interface":
            return self._object(value, self.resolve_object(("name", name), path), path)
        return self.check(value, found, path)

    def _generic(self, value: Any, declared_type: Any, path: str) -> list[str]:
        _, name, arguments = declared_type
        if name == "Record":
            if not isinstance(value, dict):
                return [f"{path}: {_shown(value)} is not an object"]
            return [e for k, v in value.items() for e in self.check(v, arguments[1], f"{path}.{k}")]
        if name in ("Omit", "Readonly", "Partial"):
            return self._object(value, self.resolve_object(declared_type, path), path)
        if name == "Array":
            return self.check(value, ("array", arguments[0]), path)
        raise ValueError(f"{path}: unsupported generic {name}")

    def resolve_object(self, declared_type: Any, path: str) -> Object:
        """The fields of an object-like type (an interface with its bases, an intersection,
        Omit<>, Partial<>, Readonly<>)."""
        if isinstance(declared_type, Object):
            return declared_type
        kind = declared_type[0]
        if kind == "name":
            found = self.declared[declared_type[1]]
            if isinstance(found, tuple) and found[0] == "interface":
                merged = Object()
                for base in found[1]:
                    merged.fields.update(self.resolve_object(base, path).fields)
                merged.fields.update(found[2].fields)
                merged.index = found[2].index
                return merged
            return self.resolve_object(found, path)
        if kind == "all":
            merged = Object()
            for part in declared_type[1]:
                resolved = self.resolve_object(part, path)
                merged.fields.update(resolved.fields)
                merged.index = merged.index or resolved.index
            return merged
        if kind == "generic" and declared_type[1] in ("Omit", "Readonly", "Partial"):
            base = self.resolve_object(declared_type[2][0], path)
            fields = dict(base.fields)
            if declared_type[1] == "Omit":
                for name in _literals(declared_type[2][1]):
                    fields.pop(name, None)
            if declared_type[1] == "Partial":
                fields = {k: (t, True) for k, (t, _) in fields.items()}
            return Object(fields, base.index)
        raise ValueError(f"{path}: {declared_type!r} is not an object type")

    def _object(self, value: Any, declared_type: Any, path: str) -> list[str]:
        if not isinstance(value, dict):
            return [f"{path}: {_shown(value)} is not an object"]
        declared = self.resolve_object(declared_type, path)
        errors = []
        for name, (field_type, optional) in declared.fields.items():
            if name not in value:
                if not optional:
                    errors.append(f"{path}.{name}: missing (declared required)")
                continue
            errors += self.check(value[name], field_type, f"{path}.{name}")
        for name in value:
            if name not in declared.fields:
                if declared.index is None and self.strict:
                    errors.append(f"{path}.{name}: not declared by the dashboard")
                elif declared.index is not None:
                    errors += self.check(value[name], declared.index, f"{path}.{name}")
        return errors


def _literals(declared_type: Any) -> list[str]:
    if declared_type[0] == "literal":
        return [declared_type[1]]
    if declared_type[0] == "union":
        return [name for option in declared_type[1] for name in _literals(option)]
    raise ValueError(f"Omit<> keys must be literal strings, got {declared_type!r}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."
