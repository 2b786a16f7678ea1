"""Watchpoints: conditions checked on kernel outputs while live control is on.

A watchpoint is a condition (NaN/Inf, |value| above a threshold, all zero, a value range,
a relative change since the op's previous execution) and a scope (all ops, an op-name
regular expression, or one op by name). It is checked on numpy views of the outputs inside
the VM callback, where the tensors are valid. Pure numpy: no TVM, no I/O.

Nothing a watchpoint asks for may hurt the program it watches: patterns are matched once per
op name with a time limit (the `regex` package's timeout; a pattern that backtracks
catastrophically is refused, or disabled when a later name trips it), never per kernel call;
"changed" keeps its previous values within a byte budget shared by all watchpoints.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import regex

CONDITIONS = ("nan_or_inf", "abs_above", "all_zero", "value_range", "changed")
MAX_PATTERN_CHARS = 1000  # op_regex and op_name
NAME_MATCH_SECONDS = 0.05  # one pattern against one op name, as names appear (compiles, new kernels)
SET_MATCH_SECONDS = 0.25  # one pattern against every op name known when it is set


class WatchpointError(ValueError):
    """A watchpoint request that cannot be honoured (bad condition, parameter or scope, or a
    limit reached); `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class ByteBudget:
    """Bytes that "changed" watchpoints may keep, shared by all watchpoints of a program."""

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.used = 0
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> bool:
        with self._lock:
            if self.used + nbytes > self.limit:
                return False
            self.used += nbytes
            return True

    def give(self, nbytes: int) -> None:
        with self._lock:
            self.used = max(0, self.used - nbytes)


def _number(value: Any, name: str, condition: str) -> float:
    """A JSON/Python real number (not a bool, not a string), not NaN."""
    if value is None:
        raise WatchpointError(f"condition {condition!r} needs the parameter {name!r}")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise WatchpointError(f"parameter {name!r} must be a number, got {type(value).__name__} {_short(value)}")
    number = float(value)
    if math.isnan(number):
        raise WatchpointError(f"parameter {name!r} must not be NaN")
    return number


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise WatchpointError(f"{name} must be a non-empty string, got {type(value).__name__} {_short(value)}")
    if len(value) > MAX_PATTERN_CHARS:
        raise WatchpointError(f"{name} is {len(value)} characters long; at most {MAX_PATTERN_CHARS}")
    return value


@dataclass
class Watchpoint:
    """One condition and its scope. Build it with make_watchpoint (which validates)."""

    id: int
    condition: str
    threshold: float | None = None  # abs_above; changed (percent)
    min: float | None = None  # value_range
    max: float | None = None  # value_range
    op_name: str | None = None  # one op, by exact name
    op_regex: str | None = None  # ops whose name or kernel matches (search)
    pause: bool = True  # pause the program at a hit (when live control is on)
    hits: int = 0
    disabled: str | None = None  # why the watchpoint no longer checks anything
    _unwatched: set = field(default_factory=set, repr=False)  # "changed": outputs over the byte budget
    _pattern: regex.Pattern | None = field(default=None, repr=False)
    _matched: dict = field(default_factory=dict, repr=False)  # (op name, kernel) -> bool (op_regex)
    _previous: dict = field(default_factory=dict, repr=False)  # (op_id, slot) -> last value (changed)
    _budget: ByteBudget | None = field(default=None, repr=False)

    def scope(self) -> str:
        if self.op_name is not None:
            return f"op {self.op_name}"
        if self.op_regex is not None:
            return f"ops matching /{self.op_regex}/"
        return "all ops"

    def describe(self) -> str:
        text = {
            "nan_or_inf": "NaN or Inf",
            "abs_above": f"|value| > {self.threshold:g}" if self.threshold is not None else "",
            "all_zero": "all zero",
            "value_range": f"a value outside [{self.min:g}, {self.max:g}]" if self.min is not None else "",
            "changed": f"changed by more than {self.threshold:g}% since the previous execution"
            if self.threshold is not None
            else "",
        }[self.condition]
        return f"#{self.id} {text} on {self.scope()}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "condition": self.condition,
            "threshold": self.threshold,
            "min": self.min,
            "max": self.max,
            "op_name": self.op_name,
            "op_regex": self.op_regex,
            "pause": self.pause,
            "hits": self.hits,
            "description": self.describe(),
            "disabled": self.disabled,
            "kept_bytes": self.kept_bytes(),
            "unwatched_outputs": len(self._unwatched),
        }

    def kept_bytes(self) -> int:
        return sum(value.nbytes for value in list(self._previous.values()))

    def match(self, names, seconds: float) -> None:
        """Matches op_regex against (op name, kernel) pairs not matched yet, in `seconds` at
        most in all (TimeoutError past it); each pair is matched once in the watchpoint's life."""
        if self._pattern is None:
            return
        deadline = time.monotonic() + seconds
        for key in names:
            if key in self._matched:
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("pattern matching timed out")
            op_name, kernel = key
            found = self._pattern.search(op_name, timeout=left) or self._pattern.search(kernel, timeout=left)
            self._matched[key] = found is not None

    def covers(self, key: tuple[str, str]) -> bool:
        """Whether this watchpoint checks the op (op name, kernel). op_regex: after match()."""
        if self.disabled is not None:
            return False
        if self.op_name is not None:
            return key[0] == self.op_name
        if self._pattern is not None:
            return self._matched.get(key, False)
        return True

    def release(self) -> None:
        """Forgets the kept values ("changed"), giving their bytes back to the budget."""
        kept, self._previous = self.kept_bytes(), {}
        if self._budget is not None:
            self._budget.give(kept)

    def check(self, key: tuple[int, int], array: np.ndarray) -> str | None:
        """What makes this output a hit (a short text), or None. key: (op_id, output slot)."""
        if array.dtype.kind not in "fiub" or array.size == 0:
            return None
        condition = self.condition
        if condition == "nan_or_inf":
            if array.dtype.kind != "f":
                return None
            nan = int(np.count_nonzero(np.isnan(array)))
            inf = int(np.count_nonzero(np.isinf(array)))
            if nan or inf:
                return f"{nan} NaN, {inf} Inf of {array.size}"
            return None
        if condition == "all_zero":
            return f"all {array.size} values are zero" if not np.any(array) else None
        if condition == "abs_above":
            with np.errstate(invalid="ignore"):
                above = int(np.count_nonzero(np.abs(array.astype(np.float64)) > self.threshold))
            return f"{above} of {array.size} values with |value| > {self.threshold:g}" if above else None
        if condition == "value_range":
            values = array.astype(np.float64)
            with np.errstate(invalid="ignore"):
                outside = int(np.count_nonzero((values < self.min) | (values > self.max)))
            return f"{outside} of {array.size} values outside [{self.min:g}, {self.max:g}]" if outside else None
        return self._changed(key, array)

    def _changed(self, key: tuple[int, int], array: np.ndarray) -> str | None:
        """Relative L2 change against this op output's previous execution, whose values are kept
        (in their own dtype, one buffer per output reused) while the byte budget allows."""
        previous = self._previous.get(key)
        if previous is None or previous.shape != array.shape or previous.dtype != array.dtype:
            freed = previous.nbytes if previous is not None else 0
            if self._budget is not None and not self._budget.take(array.nbytes - freed):
                if previous is not None:
                    del self._previous[key]
                    self._budget.give(freed)
                self._unwatched.add(key)
                return None
            self._previous[key] = np.array(array, copy=True)
            return None  # nothing to compare with yet
        base = float(np.linalg.norm(previous.astype(np.float64)))
        delta = float(np.linalg.norm(array.astype(np.float64) - previous))
        np.copyto(previous, array)
        if not math.isfinite(delta) or not math.isfinite(base):
            return None  # NaN/Inf has its own condition
        percent = 100.0 * delta / base if base else (math.inf if delta > 0 else 0.0)
        if percent > self.threshold:
            return f"changed by {percent:.3g}% (> {self.threshold:g}%) since the previous execution"
        return None


def make_watchpoint(
    watchpoint_id: int,
    condition: str,
    *,
    threshold: float | None = None,
    min: float | None = None,  # noqa: A002 - the public keyword names the bound
    max: float | None = None,  # noqa: A002
    op_name: str | None = None,
    op_regex: str | None = None,
    pause: bool = True,
) -> Watchpoint:
    """A validated Watchpoint; WatchpointError names the field that is wrong."""
    if not isinstance(condition, str) or condition not in CONDITIONS:
        raise WatchpointError(f"unknown watchpoint condition {_short(condition)}; one of {', '.join(CONDITIONS)}")
    if not isinstance(pause, (bool, np.bool_)):
        raise WatchpointError(f"pause must be true or false, got {type(pause).__name__} {_short(pause)}")
    wp = Watchpoint(watchpoint_id, condition, pause=bool(pause))
    if condition in ("abs_above", "changed"):
        wp.threshold = _number(threshold, "threshold", condition)
        if wp.threshold < 0:
            raise WatchpointError(f"threshold must be >= 0, got {wp.threshold:g}")
    if condition == "value_range":
        wp.min = _number(min, "min", condition)
        wp.max = _number(max, "max", condition)
        if wp.min > wp.max:
            raise WatchpointError(f"min ({wp.min:g}) must be <= max ({wp.max:g})")
    if op_name is not None and op_regex is not None:
        raise WatchpointError("give op_name (one op) or op_regex (a pattern), not both")
    if op_name is not None:
        wp.op_name = _text(op_name, "op_name")
    if op_regex is not None:
        try:
            wp._pattern = regex.compile(_text(op_regex, "op_regex"))
        except regex.error as error:
            raise WatchpointError(f"op_regex {op_regex!r} is not a valid regular expression: {error}") from None
        wp.op_regex = op_regex
    return wp


def parse_watch_spec(spec: str) -> tuple[str, dict]:
    """ "CONDITION[:key=value,...]" (the CLI's --watch) -> (condition, keyword options), e.g.
    "abs_above:threshold=1e3,op_regex=matmul". Values are numbers except op_name/op_regex."""
    condition, _, rest = spec.partition(":")
    options: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in ("threshold", "min", "max", "op_name", "op_regex"):
            raise WatchpointError(
                f"bad watch option {item!r} in {spec!r}: use key=value with threshold, min, max, op_name or op_regex"
            )
        if key in ("op_name", "op_regex"):
            options[key] = value
            continue
        try:
            options[key] = float(value)
        except ValueError:
            raise WatchpointError(f"bad watch option {item!r} in {spec!r}: {key} must be a number") from None
    return condition.strip(), options
