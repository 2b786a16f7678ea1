"""Tensor filters: named predicates over one kernel output, as tfdbg's `has_inf_or_nan`.

A filter is called as `fn(trace, value)` with the GraphExecutionTrace (op name, kernel,
output slot, dtype, shape, the summary in `debug_values`) and, in FULL_TENSOR mode, the
output's values as a numpy array (else None). It returns True when the output is of
interest. `tvmdbg run -f NAME` stops at the first VM call with a matching kernel output;
`lt -f NAME` lists the matching traces.

    import tvmdbg
    tvmdbg.register_tensor_filter("big", lambda trace, value: value is not None and abs(value).max() > 1e6)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tvmdbg_tb.events.summaries import nonfinite_counts
from tvmdbg_tb.proto import debug_event_pb2 as pb

TensorFilter = Callable[[pb.GraphExecutionTrace, "np.ndarray | None"], bool]


def has_inf_or_nan(trace: pb.GraphExecutionTrace, value: np.ndarray | None = None) -> bool:
    """True when the output holds a NaN, +Inf or -Inf (needs a health mode or FULL_TENSOR)."""
    counts = nonfinite_counts(trace.tensor_debug_mode, trace.debug_values)
    if counts is not None:
        return any(counts)
    if value is not None and value.dtype.kind in "fc":
        return not bool(np.isfinite(value).all())
    return False


_FILTERS: dict[str, TensorFilter] = {"has_inf_or_nan": has_inf_or_nan}
_BUILTIN = frozenset(_FILTERS)


def register_tensor_filter(name: str, fn: TensorFilter) -> None:
    """Registers fn(trace, value) -> bool under name, for `tvmdbg run -f name` and `lt -f name`.

    Register before the program's first VM call (e.g. in the script `tvmdbg run` runs).
    A name may be registered again to replace its filter, except the built-in ones."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a tensor filter name is an identifier, e.g. 'too_large'; got {name!r}")
    if not callable(fn):
        raise TypeError(f"tensor filter {name!r} must be callable as fn(trace, value) -> bool")
    if name in _BUILTIN:
        raise ValueError(f"{name!r} is a built-in tensor filter and cannot be replaced")
    _FILTERS[name] = fn


def get_tensor_filter(name: str) -> TensorFilter:
    try:
        return _FILTERS[name]
    except KeyError:
        raise KeyError(f"no tensor filter {name!r}; known: {', '.join(filter_names())}") from None


def filter_names() -> list[str]:
    return sorted(_FILTERS)


def passes(fn: TensorFilter, trace: pb.GraphExecutionTrace) -> bool:
    """fn applied to a trace and, when it holds one, its value (exceptions propagate)."""
    value = None
    if trace.HasField("tensor_value"):
        from tvmdbg_tb.cli.render import decode_tensor

        try:
            value = decode_tensor(trace.tensor_value)
        except ValueError:
            value = None
    return bool(fn(trace, value))
