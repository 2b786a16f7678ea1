"""FULL_HEALTH counts of both tracing paths against a numpy reference: the TIR summary
kernel the compiled path inserts (which the VM-instrument path calls from its callback in
health modes), and the numpy summary (FULL_STATS, and where no kernel applies), on every
health dtype, odd shapes, empty tensors and planted NaN/Inf; the guarded parameter kernels
(param_summaries) count the same, and leave a row Python pre-marked untouched."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from test_instrument_modes import _expected

from tvmdbg_tb.capture import compiled
from tvmdbg_tb.capture.compiled import row_values
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import kernel_summary, param_cache
from tvmdbg_tb.tracing.summary import debug_values

DTYPES = sorted(compiled.HEALTH_DTYPES)
SHAPES = [(0,), (1,), (7,), (3, 5, 7), (2, 0, 3), (1, 1, 1, 1, 13), (37, 129)]  # the last: vector loops and tails


def _array(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("float"):
        data = rng.integers(-3, 4, size=shape).astype(dtype) * np.asarray(0.5, dtype)
        flat = data.reshape(-1)
        for i, special in enumerate([np.nan, np.inf, -np.inf, np.nan]):
            if i * 3 < flat.size:
                flat[i * 3] = special
        return data
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -5), min(info.max, 5) + 1, size=shape, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_both_paths_match_numpy(dtype):
    for seed, shape in enumerate(SHAPES):
        array = _array(dtype, shape, seed)
        expected = _expected("FULL_HEALTH", array)
        # numpy on the zero-copy view (FULL_STATS and the fallback when no kernel applies).
        got = debug_values(pb.FULL_HEALTH, tvm.runtime.tensor(array), dtype, shape)
        assert got == expected, (dtype, shape, "numpy path")
        # VM-instrument path in health modes: the summary kernel called from the callback.
        for mode in ("CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH"):
            values = kernel_summary.health_values(
                pb.TensorDebugMode.Value(mode), tvm.runtime.tensor(array), dtype, shape
            )
            assert values == _expected(mode, array), (dtype, shape, mode, "VM-instrument path")
        # Compiled path: the TIR summary kernel writing one row of the stats buffer.
        kernel = tvm.get_global_func(compiled.kernel(dtype))
        stats = tvm.runtime.tensor(np.zeros((1, compiled.ROW_WIDTH), "float64"))
        kernel(tvm.runtime.tensor(array), stats, 0)
        row = stats.numpy()[0].tolist()
        assert row[8 : 8 + len(shape)] == list(shape)
        assert row_values(pb.FULL_HEALTH, row, dtype) == expected, (dtype, shape, "kernel path")
        # The same kernel on a fresh row, and nothing on a pre-marked one (a parameter).
        stats = tvm.runtime.tensor(np.zeros((2, compiled.ROW_WIDTH), "float64"))
        view = np.from_dlpack(stats)
        view[1, 0] = param_cache.SKIPPED
        kernel(tvm.runtime.tensor(array), stats, 0)
        kernel(tvm.runtime.tensor(array), stats, 1)
        assert row_values(pb.FULL_HEALTH, view[0].tolist(), dtype) == expected, (dtype, shape, "guarded")
        assert view[1].tolist() == [param_cache.SKIPPED] + [0.0] * (compiled.ROW_WIDTH - 1)


def _kernel_values(array: np.ndarray) -> list[float]:
    dtype = str(array.dtype)
    kernel = tvm.get_global_func(compiled.kernel(dtype))
    stats = tvm.runtime.tensor(np.zeros((1, compiled.ROW_WIDTH), "float64"))
    kernel(tvm.runtime.tensor(array), stats, 0)
    return row_values(pb.FULL_HEALTH, stats.numpy()[0].tolist(), dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_kernel_special_values(dtype):
    """The one-pass float kernel detects infinities and NaN through a per-lane sum and leaves
    == 0 to what < 0 and > 0 leave: only +inf, only -inf, both, finite values whose sum
    overflows, NaN alone, NaN with infinities, signed zeros and subnormals all count exactly."""
    big = np.finfo(dtype).max
    tiny = np.finfo(dtype).smallest_subnormal
    cases = {
        "pos_inf": np.array([1, np.inf, 0, -2] * 9, dtype),
        "neg_inf": np.array([1, -np.inf, 0, -2] * 9 + [-np.inf], dtype),
        "both_inf": np.array([np.inf, -np.inf] * 17 + [0], dtype),
        "overflowing_sum": np.full(41, big, dtype),
        "overflowing_negative_sum": np.concatenate([np.full(33, -big, dtype), np.zeros(3, dtype)]),
        "nan_and_inf": np.array([np.nan, np.inf, -np.inf, 0, 3] * 7, dtype),
        "tail_inf": np.concatenate([np.ones(32, dtype), np.array([np.inf], dtype)]),
        "nan_only": np.array([np.nan, 0, -0.0, 1] * 9 + [np.nan], dtype),
        "signed_zeros_and_subnormals": np.array([-0.0, 0.0, tiny, -tiny, 0.0, -0.0, 2] * 5, dtype),
    }
    for name, array in cases.items():
        assert _kernel_values(array) == _expected("FULL_HEALTH", array), (dtype, name)
        got = debug_values(pb.FULL_HEALTH, tvm.runtime.tensor(array), dtype, array.shape)
        assert got == _expected("FULL_HEALTH", array), (dtype, name, "numpy path")
