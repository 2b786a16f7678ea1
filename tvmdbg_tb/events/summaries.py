"""Tensor debug modes and the layout of their `debug_values` (see debug_event.proto).

One table that the instrumentation encodes with and the reader, plugin and CLI decode
with, so a layout is written down exactly once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tvmdbg_tb.proto import debug_event_pb2 as pb

MODE_NAMES = ("NO_TENSOR", "CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH", "SHAPE", "FULL_TENSOR", "FULL_STATS")

_DTYPES = {
    "float16": pb.FLOAT16,
    "float32": pb.FLOAT32,
    "float64": pb.FLOAT64,
    "bfloat16": pb.BFLOAT16,
    "int8": pb.INT8,
    "int16": pb.INT16,
    "int32": pb.INT32,
    "int64": pb.INT64,
    "uint8": pb.UINT8,
    "uint16": pb.UINT16,
    "uint32": pb.UINT32,
    "uint64": pb.UINT64,
    "bool": pb.BOOL,
    "float8_e4m3fn": pb.FLOAT8_E4M3FN,
    "float8_e5m2": pb.FLOAT8_E5M2,
}
_DTYPE_NAMES = {code: name for name, code in _DTYPES.items()}

_FULL_HEALTH = (
    "device_id",
    "dtype",
    "rank",
    "size",
    "neg_inf",
    "pos_inf",
    "nan",
    "negative",
    "zero",
    "positive",
)
# FULL_STATS: FULL_HEALTH's counts, then statistics of the finite elements (floats, kept as such).
STATS_FIELDS = ("min", "max", "mean", "l2_norm", "abs_max")

# Names of the fixed leading debug_values per mode; SHAPE appends one value per dimension.
LAYOUTS: dict[int, tuple[str, ...]] = {
    pb.NO_TENSOR: (),
    pb.CURT_HEALTH: ("has_inf_or_nan",),
    pb.CONCISE_HEALTH: ("size", "neg_inf", "pos_inf", "nan"),
    pb.FULL_HEALTH: _FULL_HEALTH,
    pb.SHAPE: ("dtype", "rank", "size"),
    pb.FULL_TENSOR: (),
    pb.FULL_STATS: _FULL_HEALTH + STATS_FIELDS,
}


_NONFINITE_INDEX = {
    mode: (len(LAYOUTS[mode]), *(LAYOUTS[mode].index(name) for name in ("nan", "neg_inf", "pos_inf")))
    for mode in (pb.CONCISE_HEALTH, pb.FULL_HEALTH, pb.FULL_STATS)
}


def mode_value(mode: str | int) -> int:
    """The TensorDebugMode enum value of a mode given by name (any case) or value."""
    if isinstance(mode, int) and not isinstance(mode, bool):
        if mode in LAYOUTS:
            return mode
    elif isinstance(mode, str) and mode.upper() in MODE_NAMES:
        return pb.TensorDebugMode.Value(mode.upper())
    raise ValueError(f"unknown tensor_debug_mode {mode!r}; expected one of {', '.join(MODE_NAMES)}")


def mode_name(mode: int) -> str:
    return pb.TensorDebugMode.Name(mode) if mode in LAYOUTS else "TENSOR_DEBUG_MODE_UNSPECIFIED"


def dtype_code(dtype: str) -> int:
    """The DType code of a dtype string ("float32", ...); DTYPE_UNKNOWN (0) for others."""
    return _DTYPES.get(str(dtype), pb.DTYPE_UNKNOWN)


def dtype_name(code: int) -> str:
    return _DTYPE_NAMES.get(int(code), "unknown")


def is_float_dtype(dtype: str) -> bool:
    return str(dtype).startswith(("float", "bfloat"))


def describe(mode: int, values: Sequence[float]) -> dict:
    """debug_values as a dict of named fields (counts as ints, dtype as a name, SHAPE's dims
    as "shape"); empty for modes without values or values that do not fit the layout (too
    few, or a count, rank or dimension that is not a finite number)."""
    names = LAYOUTS.get(mode, ())
    if not names or len(values) < len(names):
        return {}
    out: dict = {}
    for name, value in zip(names, values):
        if name in STATS_FIELDS:
            out[name] = float(value)
        elif name == "has_inf_or_nan":
            out[name] = bool(value)
        elif not math.isfinite(value):
            return {}
        else:
            out[name] = dtype_name(int(value)) if name == "dtype" else int(value)
    if mode == pb.SHAPE:
        dims = values[len(names) : len(names) + out["rank"]]
        if not all(map(math.isfinite, dims)):
            return {}
        out["shape"] = [int(v) for v in dims]
    return out


def finite_statistics(array) -> list[float]:
    """FULL_STATS' [min, max, mean, l2_norm, abs_max] of the finite elements of a numpy array,
    in float64; NaN for all five when no element is finite. (numpy is the caller's import.)"""
    import numpy as np

    values = np.asarray(array).reshape(-1)
    if values.dtype.kind in "fc":
        finite = np.isfinite(values)
        if not finite.all():
            values = values[finite]
    if values.size == 0:
        return [math.nan] * 5
    values = values.astype(np.float64, copy=False)
    low, high = float(values.min()), float(values.max())
    mean = float(values.sum()) / values.size
    # einsum's own loop, not np.dot: BLAS would wake its thread pool on every large tensor
    # (CPU time on other cores, more than the sum itself: docs/performance.md).
    return [low, high, mean, math.sqrt(float(np.einsum("i,i->", values, values))), max(-low, high)]


def nonfinite_counts(mode: int, values: Sequence[float]) -> tuple[int, int, int] | None:
    """(nan, neg_inf, pos_inf) where the mode records them; for CURT_HEALTH, which only knows
    "any", an unknown count is -1; None when the mode says nothing about finiteness."""
    if mode in (pb.CONCISE_HEALTH, pb.FULL_HEALTH, pb.FULL_STATS):
        # Indexed directly (no describe() dict): the VM-instrument path asks once per kernel.
        size, nan, neg_inf, pos_inf = _NONFINITE_INDEX[mode]
        if len(values) >= size:
            return int(values[nan]), int(values[neg_inf]), int(values[pos_inf])
    elif mode == pb.CURT_HEALTH and values:
        return (-1, -1, -1) if values[0] else (0, 0, 0)
    return None
