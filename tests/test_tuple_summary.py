"""tuple_summary's FULL_HEALTH totals (read from its items' rows, one pass per tensor) equal
the totals of each tensor's own numpy health row, on every health dtype, NaN/inf and empty."""

from __future__ import annotations

import numpy as np
import tvm

from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing.summary import debug_values, tuple_summary


def _leaves():
    floats = np.array([1.0, -2.0, 0.0, np.nan, np.inf, -np.inf, 3.0], "float32")
    arrays = [
        floats,
        floats.astype("float16"),
        floats.astype("float64").reshape(7, 1),
        np.array([[1, -2, 0], [4, 0, -6]], "int32"),
        np.array([0, 3, 255], "uint8"),
        np.array([True, False, True]),
        np.zeros((0, 3), "float32"),
    ]
    return [tvm.runtime.tensor(a) for a in arrays], arrays


def test_full_health_tuple_totals_match_each_tensor():
    leaves, arrays = _leaves()
    summary = tuple_summary(pb.FULL_HEALTH, leaves)
    rows = [debug_values(pb.FULL_HEALTH, a, str(a.dtype), a.shape) for a in arrays]
    totals = np.sum(np.array(rows, dtype=np.float64)[:, 3:], axis=0).tolist()
    assert list(summary.debug_values) == [0, pb.DTYPE_UNKNOWN, 0, *totals]
    assert [list(item.debug_values) for item in summary.items] == rows
    assert totals[0] == sum(a.size for a in arrays) and totals[3] == 3  # sizes; NaNs
    same = tuple_summary(pb.FULL_HEALTH, leaves[:1] * 3)
    assert list(same.debug_values)[1] == rows[0][1]  # one shared dtype is named


def test_flatten_reads_nested_ffi_arrays_in_order():
    """flatten's direct read of an FFI Array gives the leaves its Python iteration gives."""
    import tvm_ffi

    from tvmdbg_tb.tracing.summary import flatten

    leaves, _ = _leaves()
    nested = tvm_ffi.Array([leaves[0], tvm_ffi.Array([leaves[1], tvm_ffi.Array([leaves[2]])]), leaves[3]])
    flat = flatten(nested)
    assert [t.same_as(r) for t, r in zip(flat, leaves[:4])] == [True] * 4 and len(flat) == 4
    assert flatten((leaves[4], [leaves[5]])) == [leaves[4], leaves[5]]
