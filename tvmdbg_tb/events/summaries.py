"""The `debug_values` of the tensor debug modes (see debug_event.proto), encoded and decoded.

The layouts are the mode table's (modes.py): the instrumentation encodes with them and the
reader, plugin and CLI decode with them, so a layout is written down exactly once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tvmdbg_tb.events.modes import MODES, STATS_FIELDS, Counts, ModeSpec, spec
from tvmdbg_tb.proto import debug_event_pb2 as pb

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

# Names of the fixed leading debug_values per mode; SHAPE appends one value per dimension.
LAYOUTS: dict[int, tuple[str, ...]] = {value: m.layout for value, m in MODES.items()}


def _nonfinite_at(m: ModeSpec) -> tuple[int, int, int, int]:
    """The values a counting layout's counts need, and where it keeps nan, -inf and +inf."""
    return sum(name not in STATS_FIELDS for name in m.layout), *(
        m.layout.index(n) for n in ("nan", "neg_inf", "pos_inf")
    )


# Modes that count NaN and infinities: where; and those that keep only "any" (its flag first).
NONFINITE_AT = {value: _nonfinite_at(m) for value, m in MODES.items() if m.counts in (Counts.NONFINITE, Counts.FULL)}
ANY_NONFINITE = tuple(value for value, m in MODES.items() if m.counts is Counts.ANY)


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
    if spec(mode).dims:
        dims = values[len(names) : len(names) + out["rank"]]
        if not all(map(math.isfinite, dims)):
            return {}
        out["shape"] = [int(v) for v in dims]
    return out


_FULL_AT = {name: k for k, name in enumerate(MODES[pb.FULL_HEALTH].layout)}


def health_values(mode: int, full: Sequence[float]) -> list[float]:
    """A counting mode's debug_values picked by name from a FULL_HEALTH row (CURT_HEALTH's
    flag: any NaN or infinity); FULL_STATS' statistics are the caller's to append."""
    if spec(mode).counts is Counts.ANY:
        return [1.0 if full[_FULL_AT["neg_inf"]] + full[_FULL_AT["pos_inf"]] + full[_FULL_AT["nan"]] > 0 else 0.0]
    return [full[_FULL_AT[name]] for name in spec(mode).layout if name in _FULL_AT]


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
    where = NONFINITE_AT.get(mode)
    if where is not None:
        # Indexed directly (no describe() dict): the VM-instrument path asks once per kernel.
        size, nan, neg_inf, pos_inf = where
        if len(values) >= size:
            return int(values[nan]), int(values[neg_inf]), int(values[pos_inf])
    elif values and spec(mode).counts is Counts.ANY:
        return (-1, -1, -1) if values[0] else (0, 0, 0)
    return None
