"""The device summary kernels (tvmdbg_tb/capture/device_kernels.py), checked without a GPU: the
definition, and the GPU schedule's loops without their thread bindings, built for llvm and run
on planted arrays of every dtype (sizes below, at and past the grid, none a multiple of the
block), against numpy's exact counts and finite statistics; the bound schedule compiled for
CUDA by nvcc, its source holding the two launches and the warp all-reduce. No figure here is
from a GPU."""

from __future__ import annotations

import functools
import glob
import os
import shutil

import ml_dtypes
import numpy as np
import pytest
import tvm

from tvmdbg_tb.capture import device_kernels as dk
from tvmdbg_tb.capture.kernel_source import ROW_WIDTH, STATS_COLUMN
from tvmdbg_tb.events.summaries import finite_statistics

GRID = dk.BLOCKS * dk.THREADS
SIZES = (1, 5, dk.THREADS + 1, GRID - 1, 2 * GRID + 17)
NUMPY = {"bfloat16": ml_dtypes.bfloat16}


@functools.cache
def _built(dtype: str, stats: bool, scheduled: bool):
    func = dk.definition(dtype, stats)
    if scheduled:
        func = dk.schedule(func, bind=False)
    return tvm.compile(tvm.IRModule({"k": func}), target="llvm")[dk.kernel_name(dtype, stats)]


def _planted(dtype: str, size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(size) < 0.3
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        low = max(info.min, -100)
        return rng.integers(low, 100, size, endpoint=True).astype(dtype)
    values = (rng.standard_normal(size) * 4).astype(np.float32)
    values[rng.random(size) < 0.1] = 0.0
    for planted in (np.nan, np.inf, -np.inf):
        values[rng.integers(0, size, max(1, size // 50))] = planted
    return values.astype(NUMPY.get(dtype, dtype))


def _row(dtype: str, stats: bool, scheduled: bool, values: np.ndarray, row: int = 2) -> np.ndarray:
    buffer = tvm.runtime.tensor(np.zeros((4, ROW_WIDTH)))
    _built(dtype, stats, scheduled)(tvm.runtime.tensor(values), buffer, row)
    out = buffer.numpy()
    assert not out[[0, 1, 3]].any()  # only the row asked for is written
    return out[row]


def _expected_counts(values: np.ndarray) -> list[int]:
    wide = values.astype(np.float64)
    return [int((wide < 0).sum()), int((wide > 0).sum()), int((wide == 0).sum())] + [
        int(np.isneginf(wide).sum()),
        int(np.isposinf(wide).sum()),
    ]


@pytest.mark.parametrize("scheduled", [False, True], ids=["definition", "gpu_loops"])
@pytest.mark.parametrize("dtype", dk.DTYPES)
def test_counts_are_numpys_exactly(dtype, scheduled):
    for k, size in enumerate(SIZES):
        values = _planted(dtype, size, seed=k)
        row = _row(dtype, False, scheduled, values)
        assert row[dk.SIZE_COLUMN] == size
        assert row[list(dk.COUNT_COLUMNS)].astype(int).tolist() == _expected_counts(values), (dtype, size)
        nan = size - row[2] - row[3] - row[4]  # as compiled.row_values reads it
        assert nan == int(np.isnan(values.astype(np.float64)).sum())


@pytest.mark.parametrize("scheduled", [False, True], ids=["definition", "gpu_loops"])
@pytest.mark.parametrize("dtype", [d for d in dk.DTYPES if d != "bool"])
def test_statistics_are_those_of_the_finite_values(dtype, scheduled):
    for k, size in enumerate(SIZES):
        values = _planted(dtype, size, seed=10 + k)
        row = _row(dtype, True, scheduled, values)
        assert row[list(dk.COUNT_COLUMNS)].astype(int).tolist() == _expected_counts(values)
        expected = finite_statistics(values.astype(np.float64))
        got = row[STATS_COLUMN : STATS_COLUMN + 5]
        np.testing.assert_allclose(got, expected, rtol=1e-9, equal_nan=True, err_msg=f"{dtype} {size}")


def test_no_finite_value_gives_nan_statistics():
    values = np.array([np.nan, np.inf, -np.inf], "float32")
    row = _row("float32", True, True, values)
    assert np.isnan(row[STATS_COLUMN : STATS_COLUMN + 5]).all()
    assert row[list(dk.COUNT_COLUMNS)].tolist() == [1, 1, 0, 1, 1]


NVCC = shutil.which("nvcc") or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))), None)


@pytest.mark.skipif(NVCC is None, reason="no nvcc: CUDA builds cannot compile here")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_the_gpu_schedule_compiles_for_cuda(dtype, monkeypatch):
    monkeypatch.setenv("PATH", os.path.dirname(NVCC) + os.pathsep + os.environ.get("PATH", ""))
    cuda = tvm.target.Target({"kind": "cuda", "arch": "sm_90"})
    for stats in (False, True):
        lib = tvm.compile(tvm.IRModule({"k": dk.schedule(dk.definition(dtype, stats))}), target=cuda)
        modules, stack = [], [lib.mod]
        while stack:
            modules.append(stack.pop())
            stack.extend(modules[-1].imports)
        source = next(m for m in modules if m.kind == "cuda").inspect_source()
        kernels = source.count("__global__ void") // 2  # each declared, then defined
        assert kernels >= (8 if stats else 4), source[:2000]  # two launches per reduction, and the row's writes
        assert f"__launch_bounds__({dk.THREADS})" in source
        assert "__shfl" in source  # the partials reduced across a block's threads
        assert ("CUDART_INF" in source) == (dtype != "int32")  # the infinities counted
