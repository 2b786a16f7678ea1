"""The library of every summary kernel that the wheel ships (kernel_cache.build_library, which
setup.py calls): it holds each kernel of the catalogue and computes what the kernel built at
first use computes; a process that finds it in the package loads the kernels from it with no
compiler on PATH and an empty cache, compiles none and warns of nothing."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from test_health_counts import _array

from tvmdbg_tb.capture import compiled, kernel_cache, kernel_source

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def library_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("kernels")
    path = kernel_cache.build_library(directory)
    assert path.name == kernel_cache.library_file_name() and path.is_file()
    return directory


def _row(function, tensor) -> list[float]:
    stats = tvm.runtime.tensor(np.zeros((1, compiled.ROW_WIDTH), "float64"))
    function(tensor, stats, 0)
    row = stats.numpy()[0]
    row[0] = 0.0  # the cycle counter
    return row.tolist()


def test_the_library_holds_every_kernel_and_counts_as_a_kernel_built_alone(library_dir):
    library = tvm.runtime.load_module(str(library_dir / kernel_cache.library_file_name()))
    catalogue = kernel_source.catalogue()
    assert len(catalogue) == 1 + 3 * len(compiled.HEALTH_DTYPES) + len(kernel_source.FLOAT_DTYPES)
    for dtype in sorted(compiled.HEALTH_DTYPES):
        array = _array(dtype, (37, 129), 3)
        tensor = tvm.runtime.tensor(array)
        for health, stats in ((True, False), (False, False), (True, True)):
            name = kernel_source.kernel_name(dtype, health, stats)
            alone = tvm.get_global_func(compiled.kernel(dtype, health, stats))
            got = _row(library[name], tensor)
            assert got[1:8] == [array.size, *_row(alone, tensor)[2:7], 2.0], (name, got)
            assert got == _row(alone, tensor), name
            if stats and dtype != "bool":  # FULL_STATS' min and max of the finite elements
                finite = array[np.isfinite(array)] if dtype.startswith("float") else array
                assert got[compiled.STATS_COLUMN : compiled.STATS_COLUMN + 2] == [finite.min(), finite.max()], name
    for dtype in kernel_source.FLOAT_DTYPES:  # the inner-op check's recount: adds to three cells,
        array = _array(dtype, (37, 129), 5)  # their sum to the kernel's total, raises row 0's flag
        stats = np.zeros((3, compiled.ROW_WIDTH), "float64")
        stats[0, 0], stats[1, compiled.INNER_COLUMN], stats[2, 3:6] = 7.0, 2.0, 1.0

        def cell(row: int, column: int, stats=stats) -> ctypes.c_void_p:
            return ctypes.c_void_p(stats.ctypes.data + row * stats.strides[0] + column * stats.strides[1])

        recount = library[kernel_source.recount_name(dtype)]
        into = (cell(2, 3), cell(1, compiled.INNER_COLUMN), cell(0, 0))  # the cells, the total, row 0
        finite = np.ones(16, dtype)
        recount(ctypes.c_void_p(finite.ctypes.data), finite.size, *into)
        assert stats[0, 1] == 0.0 and stats[1, compiled.INNER_COLUMN] == 2.0, dtype
        recount(ctypes.c_void_p(array.ctypes.data), array.size, *into)
        expected = [np.isnan(array).sum(), np.isneginf(array).sum(), np.isposinf(array).sum()]
        assert stats[2, 3:6].tolist() == [1.0 + n for n in expected], dtype
        assert stats[1, compiled.INNER_COLUMN] == 2.0 + sum(expected) and stats[0, 1] == 7.0, dtype
        assert np.count_nonzero(stats) == 6 and min(expected) > 0, dtype
    tick = library[kernel_source.TICK]
    stats = tvm.runtime.tensor(np.zeros((1, compiled.ROW_WIDTH), "float64"))
    tick(stats, 0)
    assert stats.numpy()[0, 0] > 0


def test_extremes_of_unsigned_64_bit_tensors(library_dir):
    """FULL_STATS' kernel of uint64 (its max literal does not fit TVMScript's int64 literals)."""
    library = tvm.runtime.load_module(str(library_dir / kernel_cache.library_file_name()))
    array = np.array([3, 2**64 - 1, 0, 7], "uint64")
    row = _row(library[kernel_source.kernel_name("uint64", True, True)], tvm.runtime.tensor(array))
    assert row[compiled.STATS_COLUMN : compiled.STATS_COLUMN + 2] == [0.0, float(2**64 - 1)]


_LOADER = """
import json, sys
from tvmdbg_tb import native
native.PACKAGE_DIR = __import__("pathlib").Path(sys.argv[1])
import tvm
from tvmdbg_tb.capture import compiled, kernel_cache
wanted = [(d, h, s) for d in ("float32", "int64", "bool") for h, s in ((True, False), (True, True))]
names = [compiled.kernel(*kernel) for kernel in wanted[: int(sys.argv[2])]]
names.append(compiled.kernel(None))
print(json.dumps({"names": names, "compiled": kernel_cache.compiled()}))
"""


def test_a_process_loads_the_packaged_kernels_without_compiling(library_dir, tmp_path):
    env = {
        "PATH": str(tmp_path),  # no compiler: export_library could not link a kernel
        "HOME": str(tmp_path),
        "TVMDBG_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": str(ROOT),
        "TVM_NUM_THREADS": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", _LOADER, str(library_dir), "6"], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["compiled"] == [] and len(result["names"]) == 7
    assert "tvmdbg:" not in done.stderr, done.stderr
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())


def test_without_the_library_and_a_compiler_each_process_compiles_and_says_why(tmp_path):
    """A source checkout (or another TVM build) on a machine without a C compiler: the kernels
    are compiled in memory in every process, as a warning says."""
    env = {
        "PATH": str(tmp_path),
        "HOME": str(tmp_path),
        "TVMDBG_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": str(ROOT),
        "TVM_NUM_THREADS": "1",
    }
    empty = tmp_path / "package"
    empty.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _LOADER, str(empty), "1"], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(result["compiled"]) == sorted(name.removeprefix("tvmdbg.") for name in result["names"])
    assert "summary kernels are compiled in each process" in done.stderr
    assert "no prebuilt summary kernels" in done.stderr


def test_summary_kernels_keep_their_own_buffers_on_the_stack():
    """The generic kernels (health of floats and ints, FULL_STATS', the inner-op check's
    recount) have no TVMBackendAllocWorkspace in their code: their counters and lane sums are
    stack memory, not a workspace allocated and freed on every call (kernel_source.SCRATCH)."""
    names = [
        kernel_source.kernel_name("float32"),
        kernel_source.kernel_name("int32"),
        kernel_source.kernel_name("float16", stats=True),
        kernel_source.recount_name("float64"),
    ]
    sources = kernel_source.catalogue()
    functions = {name: tvm.script.from_source(sources[name]).with_attr("global_symbol", name) for name in names}
    code = tvm.tirx.build(tvm.IRModule(functions), target=kernel_cache.TARGET).inspect_source("ll")
    assert all(f"{name}_compute_" in code for name in names)
    assert "@__TVMBackendAllocWorkspace" not in code
