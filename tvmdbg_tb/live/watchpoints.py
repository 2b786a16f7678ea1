"""Watchpoints: conditions checked on every kernel output while live control is on.

A watchpoint is a condition (NaN/Inf, |value| above a threshold, all zero, a value range,
a relative change since the op's previous execution) and a scope (all ops, an op-name
regular expression, or one op by name). It is checked on numpy views of the outputs inside
the VM callback, where the tensors are valid. Pure numpy: no TVM, no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CONDITIONS = ("nan_or_inf", "abs_above", "all_zero", "value_range", "changed")


class WatchpointError(ValueError):
    """A watchpoint request that cannot be honoured (bad condition, parameter or scope)."""


def _number(params: dict, name: str, condition: str) -> float:
    if name not in params or params[name] is None or params[name] == "":
        raise WatchpointError(f"condition {condition!r} needs the parameter {name!r}")
    value = params[name]
    if isinstance(value, bool):
        raise WatchpointError(f"parameter {name!r} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise WatchpointError(f"parameter {name!r} must be a number, got {value!r}") from None
    if math.isnan(number):
        raise WatchpointError(f"parameter {name!r} must not be NaN")
    return number


@dataclass
class Watchpoint:
    """One condition and its scope. Build it with make_watchpoint (which validates)."""

    id: int
    condition: str
    threshold: float | None = None  # abs_above; changed (percent)
    min: float | None = None  # value_range
    max: float | None = None  # value_range
    op_name: str | None = None  # one op, by exact name
    op_regex: str | None = None  # ops whose name or kernel matches (re.search)
    pause: bool = True  # pause the program at a hit (when live control is on)
    hits: int = 0
    _pattern: re.Pattern | None = field(default=None, repr=False)
    _previous: dict = field(default_factory=dict, repr=False)  # (op_id, slot) -> last array (changed)

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
        }

    def covers(self, op_name: str, kernel: str) -> bool:
        if self.op_name is not None:
            return op_name == self.op_name
        if self._pattern is not None:
            return bool(self._pattern.search(op_name) or self._pattern.search(kernel))
        return True

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
        # changed: relative L2 change against this op output's previous execution
        current = array.astype(np.float64, copy=True)
        previous = self._previous.get(key)
        self._previous[key] = current
        if previous is None or previous.shape != current.shape:
            return None
        base = float(np.linalg.norm(previous))
        delta = float(np.linalg.norm(current - previous))
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
    """A validated Watchpoint; WatchpointError says what is wrong."""
    if condition not in CONDITIONS:
        raise WatchpointError(f"unknown watchpoint condition {condition!r}; one of {', '.join(CONDITIONS)}")
    params = {"threshold": threshold, "min": min, "max": max}
    wp = Watchpoint(watchpoint_id, condition, pause=bool(pause))
    if condition in ("abs_above", "changed"):
        wp.threshold = _number(params, "threshold", condition)
        if wp.threshold < 0:
            raise WatchpointError(f"threshold must be >= 0, got {wp.threshold:g}")
    if condition == "value_range":
        wp.min = _number(params, "min", condition)
        wp.max = _number(params, "max", condition)
        if wp.min > wp.max:
            raise WatchpointError(f"min ({wp.min:g}) must be <= max ({wp.max:g})")
    if op_name is not None and op_regex is not None:
        raise WatchpointError("give op_name (one op) or op_regex (a pattern), not both")
    if op_name is not None:
        if not isinstance(op_name, str) or not op_name:
            raise WatchpointError(f"op_name must be a non-empty string, got {op_name!r}")
        wp.op_name = op_name
    if op_regex is not None:
        if not isinstance(op_regex, str) or not op_regex:
            raise WatchpointError(f"op_regex must be a non-empty string, got {op_regex!r}")
        try:
            wp._pattern = re.compile(op_regex)
        except re.error as error:
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
        options[key] = value if key in ("op_name", "op_regex") else _number({key: value}, key, condition)
    return condition.strip(), options
