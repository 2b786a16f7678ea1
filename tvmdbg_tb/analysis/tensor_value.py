"""FULL_TENSOR values with numpy-style basic slicing and a bound on the elements returned."""

from __future__ import annotations

import math
import re

import numpy as np

from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.events.values import BadValue, flat_values, stored_array

DEFAULT_MAX_ELEMENTS = 10_000
MAX_ELEMENTS = 1_000_000
_PART = re.compile(r"^\s*(-?\d+)?\s*(?::\s*(-?\d+)?\s*(?::\s*(-?\d+)?\s*)?)?$")


class SliceError(ValueError):
    """A slice that does not parse or does not fit the tensor (the client's mistake)."""


_MAX_INDEX = 2**62  # beyond any tensor; numpy raises OverflowError past 2**63 - 1


def _bounded(value: int) -> int:
    if abs(value) > _MAX_INDEX:
        raise SliceError(f"slice integer {value} is out of range (|i| <= 2**62)")
    return value


def parse_slice(text: str) -> tuple:
    """ "0:4, ::2, ..., -1" -> (slice(0, 4), slice(None, None, 2), Ellipsis, -1)."""
    text = (text or "").strip().strip("[]")
    if not text:
        return ()
    if len(text) > 1000:
        raise SliceError("slice too long")
    out: list = []
    for part in text.split(","):
        if part.strip() == "...":
            if Ellipsis in out:
                raise SliceError("at most one '...' in a slice")
            out.append(Ellipsis)
            continue
        m = _PART.match(part)
        if not m or not part.strip():
            raise SliceError(f"bad slice part {part.strip()!r}: use integers, start:stop:step or ...")
        if ":" not in part:
            out.append(_bounded(int(m.group(1))))
            continue
        start, stop, step = (_bounded(int(g)) if g is not None else None for g in m.groups())
        if step == 0:
            raise SliceError("slice step cannot be zero")
        out.append(slice(start, stop, step))
    return tuple(out)


def fitting_slice(shape: list[int], max_elements: int) -> str:
    """The default view of a tensor too big to show whole, as slice text: its first matrix
    (index 0 on leading axes), then as many first rows (and columns) as max_elements allows."""
    if not shape:
        return ""
    lead = ["0"] * max(0, len(shape) - 2)
    if len(shape) == 1:
        return f"0:{min(shape[0], max_elements)}"
    rows, cols = shape[-2:]
    cols_kept = max(1, min(cols, max_elements))
    rows_kept = max(1, min(rows, max_elements // cols_kept))
    return ",".join([*lead, f"0:{rows_kept}", f"0:{cols_kept}"])


def _stored(run: RunReader, position: int):
    """(trace, dtype, array, whole) of trace `position`'s stored value: the array has the
    tensor's shape when whole, else it is the first elements, flat (a truncated value)."""
    trace = run.trace(position)
    if not trace.HasField("tensor_value"):
        raise LookupError(
            f"trace {position} holds no tensor value (run the model with tensor_debug_mode='FULL_TENSOR')"
        )
    try:
        array, whole = stored_array(trace.tensor_value)
    except BadValue as error:  # a dump's dtype or shape no tensor has: nothing to show
        raise LookupError(f"trace {position}: {error}") from None
    return trace, array.dtype, array, whole


def _axes(index: tuple, shape: tuple[int, ...]) -> list[dict]:
    """For each axis of array[index] (basic indexing), the index of the source axis it comes
    from and how its positions map back: position i is source index start + i * step. Lets a
    viewer label a sliced tensor by the tensor's own indices (element 1400 of `::100` is
    "1400", not "14")."""
    parts = list(index)
    if Ellipsis in parts:
        at = parts.index(Ellipsis)
        parts[at : at + 1] = [slice(None)] * (len(shape) - (len(parts) - 1))
    parts += [slice(None)] * (len(shape) - len(parts))
    axes = []
    for dim, (part, size) in enumerate(zip(parts, shape)):
        if isinstance(part, slice):
            start, _, step = part.indices(size)
            axes.append({"dim": dim, "start": int(start), "step": int(step)})
    return axes


def tensor_value(run: RunReader, position: int, slice_text: str = "", max_elements: int = DEFAULT_MAX_ELEMENTS) -> dict:
    """The stored value of trace `position`, sliced. Raises IndexError/LookupError when there is
    no such trace or no stored value, SliceError for a bad slice or too many elements."""
    trace, dtype, array, whole = _stored(run, position)
    value = trace.tensor_value
    shape = [int(d) for d in value.shape]
    default_slice = not slice_text.strip() and array.size > max_elements
    if default_slice:  # no slice asked and too big: a view that fits rather than an error
        slice_text = fitting_slice(list(array.shape), max_elements)
    index = parse_slice(slice_text)
    try:
        selected = array[index]
    except (IndexError, TypeError, ValueError) as error:
        raise SliceError(f"slice {slice_text!r} does not fit shape {list(array.shape)}: {error}") from None
    selected = np.asarray(selected)
    if selected.size > max_elements:
        raise SliceError(f"the slice selects {selected.size} elements, more than max_elements={max_elements}")
    values = selected.astype(np.float64).tolist() if dtype.kind == "f" else selected.tolist()
    return {
        "trace_position": int(position),
        "trace_index": int(trace.index),
        "op_name": trace.op_name,
        "output_slot": int(trace.output_slot),
        "dtype": value.dtype,
        "shape": shape,
        "slice": slice_text or "",
        "default_slice": bool(default_slice),
        "sliced_shape": list(selected.shape),
        "axes": _axes(index, array.shape),
        "values": values,
        "truncated": bool(value.truncated or not whole),
        "num_elements": int(selected.size),
    }


MAX_BINS = 200


def tensor_histogram(run: RunReader, position: int, bins: int = 30) -> dict:
    """A histogram of the finite elements of trace `position`'s stored value (all of it, not
    a slice), with the non-finite counts beside it: the shape of a tensor's values at a glance
    (a long tail, a spike at zero, values drifting out of range) next to the table."""
    if not 1 <= bins <= MAX_BINS:
        raise SliceError(f"bins must be between 1 and {MAX_BINS}, got {bins}")
    trace, dtype, array, whole = _stored(run, position)
    data = array.reshape(-1)
    if dtype.kind == "f":
        finite = data[np.isfinite(data)].astype(np.float64)
        nan = int(np.count_nonzero(np.isnan(data)))
        neg_inf = int(np.count_nonzero(data == -np.inf))
        pos_inf = int(np.count_nonzero(data == np.inf))
    elif dtype.kind in "iub":
        finite, nan, neg_inf, pos_inf = data.astype(np.float64), 0, 0, 0
    else:
        raise LookupError(f"tensor dtype {dtype} has no histogram")
    if finite.size:
        low, high = float(finite.min()), float(finite.max())
        counts, edges = _histogram(finite, bins, low, high)
    else:
        low = high = None
        counts, edges = np.zeros(0, np.int64), np.zeros(0)
    return {
        "trace_position": int(position),
        "trace_index": int(trace.index),
        "op_name": trace.op_name,
        "output_slot": int(trace.output_slot),
        "dtype": trace.tensor_value.dtype,
        "shape": [int(d) for d in trace.tensor_value.shape],
        "num_elements": int(data.size),
        "truncated": bool(trace.tensor_value.truncated or not whole),
        "finite": int(finite.size),
        "nan": nan,
        "neg_inf": neg_inf,
        "pos_inf": pos_inf,
        "min": low,
        "max": high,
        "edges": [float(e) for e in edges],
        "counts": [int(c) for c in counts],
    }


def _histogram(finite: np.ndarray, bins: int, low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """np.histogram's counts and edges over [low, high] for any finite range: a range wider than
    the largest float (finfo.min..max) is binned at half scale, and a range too narrow for
    distinct edges (numpy's "Too many bins for data range") still gives `bins` bins."""
    if high <= low:
        low, high = low - 0.5, high + 0.5
    low, high = float(low), float(high)
    scale = 1.0 if math.isfinite(high - low) else 0.5
    span = high * scale - low * scale
    edges = (low * scale + span * (np.arange(bins + 1) / bins)) / scale
    edges[0], edges[-1] = low, high
    # The bin of each value as np.histogram places it: [edge k, edge k+1), the last bin closed.
    where = np.clip(np.searchsorted(edges, finite, side="right") - 1, 0, bins - 1)
    return np.bincount(where, minlength=bins), edges


def value_health(value) -> dict:
    """FULL_HEALTH-style counts of a stored FULL_TENSOR value (pb.TensorValue), so a
    FULL_TENSOR pill shows every count a FULL_HEALTH one does; {} when the dtype is unknown.
    "partial" is true when the writer kept only the first elements."""
    try:
        array = flat_values(value)
    except BadValue:
        return {}
    out = {"size": int(array.size), "rank": len(value.shape), "partial": bool(value.truncated)}
    if array.dtype.kind == "f":
        finite = array[np.isfinite(array)]
        out.update(
            nan=int(np.count_nonzero(np.isnan(array))),
            neg_inf=int(np.count_nonzero(array == -np.inf)),
            pos_inf=int(np.count_nonzero(array == np.inf)),
        )
    else:
        finite = array
        out.update(nan=0, neg_inf=0, pos_inf=0)
    if array.dtype == np.bool_:
        positive = int(np.count_nonzero(finite))
        out.update(negative=0, zero=int(finite.size) - positive, positive=positive)
    else:
        out.update(
            negative=int(np.count_nonzero(finite < 0)),
            zero=int(np.count_nonzero(finite == 0)),
            positive=int(np.count_nonzero(finite > 0)),
        )
    return out
