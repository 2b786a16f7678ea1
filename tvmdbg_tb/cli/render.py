"""Plain-text rendering for the terminal: tables, styles, tensors, numbers.

Everything here returns strings; nothing prints (cli/terminal.py writes them, the dump's
text made visible). Colour is an option of the Style object, on only for a terminal that
wants it, so the same output reads well in a pipe or a file.
"""

from __future__ import annotations

import ast
import math
import os
import re
from collections.abc import Sequence

import numpy as np

from tvmdbg_tb.cli.terminal import plain, sgr
from tvmdbg_tb.events import summaries
from tvmdbg_tb.events.values import flat_values, stored_array
from tvmdbg_tb.proto import debug_event_pb2 as pb

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36", "highlight": "1;30;43"}


class Style:
    """ANSI styling that is a no-op when colour is off."""

    def __init__(self, color: bool = False):
        self.color = color

    @classmethod
    def for_stream(cls, stream) -> Style:
        """Colour for a real terminal, unless NO_COLOR is set or TERM is dumb."""
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        return cls(tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb")

    def __call__(self, text: str, style: str) -> str:
        if not self.color or not text:
            return text
        return f"{sgr(_CODES[style])}{text}{sgr('0')}"  # colour codes once written (cli/terminal.py)


def visible_len(text: str) -> int:
    """The width text takes on the terminal (its data made visible, without colours)."""
    return len(plain(text))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[int] = (), style=None) -> list[str]:
    """Rows as aligned columns under a header line; columns listed in `right` align right."""
    style = style or Style()
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(visible_len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = []
        for i, cell in enumerate(row):
            pad = " " * (widths[i] - visible_len(cell))
            parts.append(pad + cell if i in right else cell + pad)
        line = "  ".join(parts).rstrip()
        lines.append(style(line, "bold") if n == 0 else line)
    return lines


def shape_text(shape: Sequence[int]) -> str:
    dims = [str(int(d)) if d >= 0 else "?" for d in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def spec_text(spec: pb.TensorSpec) -> str:
    if not spec.dtype and not spec.shape and not spec.shape_expr:
        return "-"
    concrete = all(d >= 0 for d in spec.shape) and (spec.shape or spec.shape_expr in ("", "()"))
    shape = shape_text(spec.shape) if concrete else spec.shape_expr or shape_text(spec.shape)
    return f"{spec.dtype} {shape}".strip()


def micros(value: float) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:,.1f}"


def where(loc: dict | None, short: bool = False, called_from: bool = True) -> str:
    """A location dict (analysis.location) in one line: "model.py:12 (forward)", the ONNX
    node where the op came from one ("ONNX node /conv1/Conv (Conv)"), and the user's own
    call site when the line shown is a library's ("called from run.py:8 (main)").
    short: base names, no functions (for tables); called_from: False leaves it out."""
    if not loc:
        return "-"

    def frame(f: dict) -> str:
        if short:
            return f"{os.path.basename(f['file_path'])}:{f['line']}"
        return f"{f['file_path']}:{f['line']}" + (f" ({f['function']})" if f.get("function") else "")

    parts = [frame(loc)] if "file_path" in loc else []
    node = loc.get("model_node")
    if parts and node is not None and node.get("module") and not short:
        parts[0] += f" in {node['module']}"  # which layer of several running that line
    if node is not None and (node["format"] == "onnx" or not parts):
        label = "ONNX node" if node["format"] == "onnx" else f"{node['format']} node"
        parts.append(
            f"{label} {node['name']} ({node['op_type']})" + (f" of {node['model_file']}" if node["model_file"] else "")
        )
    if called_from and loc.get("called_from"):
        parts.append("called from " + frame(loc["called_from"]))
    return ", ".join(parts) or "-"


def location_text(frame: pb.StackFrame | None) -> str:
    if frame is None:
        return "-"
    return f"{frame.file_path}:{frame.line} ({frame.function})" if frame.function else f"{frame.file_path}:{frame.line}"


def health_text(mode: int, values: Sequence[float], style=None) -> str:
    """A short health word for a summary: "finite", "nan:3 +inf:1", "inf/nan", or "-"."""
    style = style or Style()
    counts = summaries.nonfinite_counts(mode, values)
    if counts is None:
        return "-"
    return counts_text(counts, style)


def counts_text(counts: tuple[int, int, int], style=None) -> str:
    """(nan, neg_inf, pos_inf) as "finite", "nan:3 +inf:1", or "inf/nan" when unknown (-1)."""
    style = style or Style()
    if tuple(counts) == (-1, -1, -1):
        return style("inf/nan", "red")
    nan, neg, pos = counts
    if not (nan or neg or pos):
        return "finite"
    parts = [f"{name}:{n}" for name, n in (("nan", nan), ("-inf", neg), ("+inf", pos)) if n]
    return style(" ".join(parts), "red")


def summary_fields(mode: int, values: Sequence[float]) -> list[tuple[str, str]]:
    """(name, value) pairs of a summary's debug_values, in the schema's order."""
    fields = summaries.describe(mode, values)
    out = []
    for name, value in fields.items():
        if name == "shape":
            value = shape_text(value)
        out.append((name, str(value)))
    return out


# -- tensor values -------------------------------------------------------------------------


def decode_tensor(value: pb.TensorValue) -> np.ndarray:
    """The numpy array of a FULL_TENSOR value (flat if truncated). Raises ValueError for a
    dtype numpy cannot hold."""
    if value.truncated:
        return flat_values(value)
    array, whole = stored_array(value)
    if not whole:
        raise ValueError(f"{array.size} values do not fill shape {shape_text(value.shape)}")
    return array


def parse_ranges(text: str) -> list[tuple[float, float]]:
    """Value ranges as tfdbg writes them: "[-inf,-1],[1,inf]" or "[[0,1]]" or "[0,1]"."""
    literal = re.sub(r"(?<![\w.])inf(?![\w.])", "1e999", text.strip())
    try:
        parsed = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        raise ValueError(f"bad range {text!r}; write e.g. [-inf,-1],[1,inf]") from None
    if isinstance(parsed, list) and len(parsed) == 2 and all(isinstance(x, (int, float)) for x in parsed):
        parsed = [parsed]
    ranges = []
    for item in parsed if isinstance(parsed, (list, tuple)) else [parsed]:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, (int, float)) for x in item)):
            raise ValueError(f"bad range {item!r} in {text!r}; each range is [low, high]")
        low, high = float(item[0]), float(item[1])
        if low > high:
            raise ValueError(f"range [{low}, {high}] is empty")
        ranges.append((low, high))
    return ranges


def in_ranges(array: np.ndarray, ranges: Sequence[tuple[float, float]]) -> np.ndarray:
    mask = np.zeros(array.shape, dtype=bool)
    if array.dtype.kind not in "biuf":
        return mask
    for low, high in ranges:
        mask |= (array >= low) & (array <= high)
    return mask


def format_array(array: np.ndarray, full: bool = False, ranges: Sequence[tuple[float, float]] = (), style=None) -> str:
    """numpy's layout of the array; with ranges, the elements inside them are marked (in
    colour on a terminal, else with a trailing "*")."""
    style = style or Style()
    options = {"threshold": array.size + 1 if full else 1000, "max_line_width": 110, "separator": ", "}
    if not ranges or array.dtype.kind not in "biuf":
        return np.array2string(array, **options)

    def text(value) -> str:
        return f"{value:.8g}" if array.dtype.kind == "f" else str(value)

    width = max((len(text(v)) for v in array.ravel()), default=1)

    def mark(value) -> str:
        cell = text(value).rjust(width)
        if not any(low <= value <= high for low, high in ranges):
            return cell + ("" if style.color else " ")
        return style(cell, "highlight") if style.color else cell + "*"

    return np.array2string(array, formatter={"all": mark}, **options)


def numeric_summary(array: np.ndarray) -> list[tuple[str, str]]:
    """Counts and statistics of an array, as (name, value) pairs."""
    out = [("size", str(array.size))]
    if array.dtype.kind == "f":
        nan = int(np.isnan(array).sum())
        neg = int(np.isneginf(array).sum())
        pos = int(np.isposinf(array).sum())
        out += [("nan", str(nan)), ("-inf", str(neg)), ("+inf", str(pos))]
        finite = array[np.isfinite(array)]
    elif array.dtype.kind in "biu":
        finite = array
    else:
        return out
    if finite.size:
        values = finite.astype(np.float64)
        out += [
            ("min", f"{values.min():.6g}"),
            ("max", f"{values.max():.6g}"),
            ("mean", f"{values.mean():.6g}"),
            ("std", f"{values.std():.6g}"),
        ]
    return out
