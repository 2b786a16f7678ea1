"""Tensor summaries in each TensorDebugMode, computed with numpy on zero-copy views.

The layouts are those of debug_event.proto (decoded by tvmdbg_tb.events.summaries).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from tvmdbg_tb.events.modes import MODES, Counts, spec
from tvmdbg_tb.events.summaries import dtype_code, finite_statistics, health_values, is_float_dtype
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing.state import ACTIVE

# FULL_TENSOR keeps at most this many bytes of one tensor (the rest is marked truncated).
MAX_TENSOR_BYTES = 64 << 20

# tvmdbg's own DLPack reads (read-only views) on this thread, counted only while param_cache
# watches exports (the tracing state's exports.watched): they must not count as the user's.
_OWN_READS = threading.local()

_FULL_HEALTH_LAYOUT = MODES[pb.FULL_HEALTH].layout


def reading_own() -> bool:
    """Whether this thread is inside one of tvmdbg's own DLPack reads."""
    return getattr(_OWN_READS, "depth", 0) > 0


_TENSOR_TYPES: tuple[type, ...] = ()
_ARRAY_TYPE: Any = None
# Values that are one opaque argument though Python sees a tuple: a ShapeTuple (tvm_ffi's
# Shape subclasses tuple) is a shape, not a tuple of tensors.
_OPAQUE_TUPLES: tuple[type, ...] = ()
try:
    import tvm

    _TENSOR_TYPES = (tvm.runtime.Tensor,)
    _OPAQUE_TUPLES = (tvm.runtime.ShapeTuple,)
    from tvm_ffi import container as _ffi_container

    # An FFI Array's elements read without its Python __getitem__ helper (flatten runs on
    # every call's parameter and output tuples).
    _ARRAY_TYPE, _ARRAY_GET, _ARRAY_SIZE = (
        _ffi_container.Array,
        _ffi_container._ffi_api.ArrayGetItem,
        _ffi_container._ffi_api.ArraySize,
    )
except (ImportError, AttributeError):  # pragma: no cover - the instrumentation needs TVM anyway
    pass


def is_tensor(value: Any) -> bool:
    """True for a TVM runtime tensor (or anything with dtype, shape and dlpack)."""
    if isinstance(value, _TENSOR_TYPES):
        return True
    return hasattr(value, "__dlpack__") and hasattr(value, "dtype") and hasattr(value, "shape")


def as_numpy(value: Any) -> np.ndarray | None:
    """A zero-copy numpy view of a CPU tensor (or the array itself); None if impossible."""
    if isinstance(value, np.ndarray):
        return value
    try:
        if not ACTIVE.state.exports.watched:
            return np.from_dlpack(value)
        _OWN_READS.depth = getattr(_OWN_READS, "depth", 0) + 1
        try:
            return np.from_dlpack(value)
        finally:
            _OWN_READS.depth -= 1
    except Exception:  # dtypes numpy cannot view (bfloat16, float8), non-CPU tensors
        return None


def top_level_size(value: Any) -> int:
    """How many items a runtime value has at its top level (1 for a tensor or an opaque
    value): a cheap check that a function returned the structure it returned before."""
    if _ARRAY_TYPE is not None and type(value) is _ARRAY_TYPE:
        return _ARRAY_SIZE(value)
    if isinstance(value, (list, tuple)) and not isinstance(value, _OPAQUE_TUPLES):
        return len(value)
    return 1


def flatten(value: Any) -> list[Any]:
    """The leaves of a (possibly nested) tuple of runtime values."""
    if is_tensor(value) or isinstance(value, np.ndarray):
        return [value]
    if _ARRAY_TYPE is not None and type(value) is _ARRAY_TYPE:
        out = []
        for i in range(_ARRAY_SIZE(value)):
            item = _ARRAY_GET(value, i)
            if isinstance(item, _TENSOR_TYPES):
                out.append(item)
            else:
                out.extend(flatten(item))
        return out
    if isinstance(value, _OPAQUE_TUPLES):
        return [value]
    if isinstance(value, (list, tuple)) or (
        hasattr(value, "__len__") and hasattr(value, "__getitem__") and type(value).__name__ == "Array"
    ):
        out: list[Any] = []
        for item in value:
            out.extend(flatten(item))
        return out
    return [value]


def flatten_with_paths(value: Any, path: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Any]]:
    """flatten's leaves, each with the item indices that reach it from value (native_call's
    learned plans check a returned object or shape there: call_plans.py)."""
    if is_tensor(value) or isinstance(value, (np.ndarray, _OPAQUE_TUPLES)):
        return [(path, value)]
    if _ARRAY_TYPE is not None and type(value) is _ARRAY_TYPE:
        return [
            leaf for i in range(_ARRAY_SIZE(value)) for leaf in flatten_with_paths(_ARRAY_GET(value, i), (*path, i))
        ]
    if isinstance(value, (list, tuple)) or (
        hasattr(value, "__len__") and hasattr(value, "__getitem__") and type(value).__name__ == "Array"
    ):
        return [leaf for i, item in enumerate(value) for leaf in flatten_with_paths(item, (*path, i))]
    return [(path, value)]


def is_opaque(value: Any) -> bool:
    """Whether value is a shape (a ShapeTuple: one argument, though Python sees a tuple)."""
    return isinstance(value, _OPAQUE_TUPLES)


def health(array: np.ndarray, float_kind: bool) -> tuple[int, int, int, int, int, int]:
    """(neg_inf, pos_inf, nan, negative, zero, positive); the last three count finite elements."""
    if array.dtype == np.bool_:
        positive = int(np.count_nonzero(array))
        return 0, 0, 0, 0, array.size - positive, positive
    if float_kind:
        if np.isfinite(array).all():  # the common case: three passes, positive by partition
            below = int(np.count_nonzero(array < 0))
            zero = int(np.count_nonzero(array == 0))
            return 0, 0, 0, below, zero, array.size - below - zero
        # Non-finite values: NaN compares false to everything, so it is what <0, >0 and ==0
        # leave uncounted; the infinities are split only when there are any.
        below = int(np.count_nonzero(array < 0))
        above = int(np.count_nonzero(array > 0))
        zero = int(np.count_nonzero(array == 0))
        nan = array.size - below - above - zero
        infinities = int(np.count_nonzero(np.isinf(array)))
        pos_inf = int(np.count_nonzero(array == np.inf)) if infinities else 0
        neg_inf = infinities - pos_inf
        return neg_inf, pos_inf, nan, below - neg_inf, zero, above - pos_inf
    negative = 0 if array.dtype.kind == "u" else int(np.count_nonzero(array < 0))
    zero = int(np.count_nonzero(array == 0))
    return 0, 0, 0, negative, zero, array.size - negative - zero


def has_nonfinite(array: np.ndarray) -> bool:
    return array.dtype.kind in "fc" and not bool(np.isfinite(array).all())


def debug_values(mode: int, value: Any, dtype: str, shape: tuple[int, ...], device_id: int = 0) -> list[float]:
    """The debug_values of one tensor in mode (see the proto for each layout)."""
    m = spec(mode)
    if not m.summarised:
        return []
    size = 1
    for dim in shape:
        size *= int(dim)
    if m.dims:
        return [dtype_code(dtype), len(shape), size, *shape]
    array = as_numpy(value)
    if array is None:
        return []  # health unknown: say nothing rather than something wrong
    float_kind = is_float_dtype(dtype)
    if m.counts is Counts.ANY:  # no counting needed
        return [1.0 if float_kind and has_nonfinite(array) else 0.0]
    neg_inf, pos_inf, nan, negative, zero, positive = health(array, float_kind)
    full = [device_id, dtype_code(dtype), len(shape), size, neg_inf, pos_inf, nan, negative, zero, positive]
    values = health_values(mode, full)
    if m.statistics:
        values.extend(finite_statistics(array))
    return values


def tensor_value(value: Any, dtype: str, shape: tuple[int, ...]) -> pb.TensorValue:
    """FULL_TENSOR: the raw little-endian row-major bytes (copied), at most MAX_TENSOR_BYTES."""
    array = as_numpy(value)
    if array is None:
        try:
            array = value.numpy()
        except Exception:
            return pb.TensorValue(dtype=dtype, shape=shape, truncated=True)
    data = np.ascontiguousarray(array).reshape(-1)
    truncated = data.nbytes > MAX_TENSOR_BYTES
    if truncated:
        data = data[: MAX_TENSOR_BYTES // max(1, data.itemsize)]
    if data.dtype.byteorder == ">":
        data = data.astype(data.dtype.newbyteorder("<"))
    return pb.TensorValue(dtype=dtype, shape=shape, content=data.tobytes(), truncated=truncated)


def tensor_summary(mode: int, value: Any) -> pb.TensorSummary:
    """A TensorSummary of one runtime value: a tensor's in mode, a tuple's as the total over
    its tensors (health modes only), an empty one for opaque values."""
    if not (is_tensor(value) or isinstance(value, np.ndarray)):
        if isinstance(value, _OPAQUE_TUPLES):  # a shape: its rank, no health to count
            return pb.TensorSummary(dtype=type(value).__name__, shape=[len(value)])
        leaves = flatten(value)
        if leaves == [value]:
            return pb.TensorSummary(dtype=type(value).__name__)
        return tuple_summary(mode, leaves)
    dtype = str(value.dtype)
    shape = tuple(value.shape)
    m = spec(mode)
    if not m.tensor_data:
        return pb.TensorSummary(dtype=dtype, shape=shape)
    summary = pb.TensorSummary(dtype=dtype, shape=shape, debug_values=debug_values(mode, value, dtype, shape))
    if m.values:
        summary.tensor_value.CopyFrom(tensor_value(value, dtype, shape))
    return summary


def tuple_summary(mode: int, leaves: list[Any]) -> pb.TensorSummary:
    """A tuple (e.g. the parameter and gradient tuples of tvm.relax.training) summarised as
    the sum of its tensors' counts, so the health of what flows in through it is known:
    dtype "tuple", shape [number of tensors]; in FULL_HEALTH, rank 0 and the tensors' DType
    when they share one. Modes without counts (SHAPE, FULL_TENSOR) say nothing."""
    summary = pb.TensorSummary(dtype="tuple", shape=[len(leaves)])
    m = spec(mode)
    if m.tensor_data:  # each tensor on its own too (OpInput.tuple_item refers to one)
        summary.items.extend(tensor_summary(mode, leaf) for leaf in leaves)
    if m.counts is None:
        return summary
    tensors = [leaf for leaf in leaves if is_tensor(leaf) or isinstance(leaf, np.ndarray)]
    if m.layout == _FULL_HEALTH_LAYOUT:  # the items already hold each tensor's FULL_HEALTH row: one pass each
        rows = [
            list(item.debug_values)
            for leaf, item in zip(leaves, summary.items)
            if is_tensor(leaf) or isinstance(leaf, np.ndarray)
        ]
    else:
        rows = [debug_values(pb.FULL_HEALTH, t, str(t.dtype), tuple(t.shape)) for t in tensors]
    if any(not row for row in rows):
        return summary  # an element we cannot read: health unknown
    summary.debug_values.extend(tuple_health_values(mode, rows))
    if m.statistics:
        summary.debug_values.extend(_tuple_statistics(tensors))
    return summary


def tuple_health_values(mode: int, rows: list[list[float]]) -> list[float]:
    """A tuple's debug_values in a health mode (FULL_STATS: its FULL_HEALTH part) from its
    tensors' FULL_HEALTH rows: the counts summed, rank 0, the DType when they share one."""
    # Plain Python: a tuple has a handful of tensors, and this runs on every traced call.
    if not rows:  # no tensor (an empty tuple, a tuple of shapes): nothing non-finite, size 0
        rows = [[0.0] * 10]
    size, neg_inf, pos_inf, nan, negative, zero, positive = (float(sum(c)) for c in zip(*(r[3:10] for r in rows)))
    codes = {row[1] for row in rows}
    code = codes.pop() if len(codes) == 1 else pb.DTYPE_UNKNOWN
    return health_values(mode, [0, code, 0, size, neg_inf, pos_inf, nan, negative, zero, positive])


def _tuple_statistics(tensors: list[Any]) -> list[float]:
    """FULL_STATS of a tuple: the statistics of all its tensors' finite elements together."""
    rows = [debug_values(pb.FULL_STATS, t, str(t.dtype), tuple(t.shape)) for t in tensors]
    stats = [(row[7] + row[8] + row[9], *row[10:]) for row in rows if row[7] + row[8] + row[9] > 0]
    if not stats:
        return [math.nan] * 5
    count = sum(s[0] for s in stats)
    low, high = min(s[1] for s in stats), max(s[2] for s in stats)
    mean = sum(s[0] * s[3] for s in stats) / count
    return [low, high, mean, math.sqrt(sum(s[4] ** 2 for s in stats)), max(s[5] for s in stats)]
