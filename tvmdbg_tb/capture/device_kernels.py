"""Summary kernels for device builds (CUDA): a traced output's counts and statistics reduced
on the GPU into its stats-buffer row (kernel_source.py's layout), with no host copy of the
tensor.

One definition per dtype and mode: reduction blocks over a flat view of the tensor, which an
llvm build runs as written. The GPU schedule only moves loops (rfactor, reorder, split,
decompose_reduction, bind), so it computes what the definition says: BLOCKS x THREADS threads
each reduce a strided share of the tensor into a partial row of every column, then one block
per column reduces the partials across its threads (a warp-shuffle all-reduce). The partial
rows' initial values are set outside the share loop: a thread whose share is empty (a tensor
smaller than the grid) still leaves zeros, not whatever the scratch memory held.
"""

from __future__ import annotations

from typing import Any

from tvmdbg_tb.capture.kernel_source import ROW_WIDTH, STATS_COLUMN

BLOCKS = 64
THREADS = 256
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
DTYPES = (*FLOAT_DTYPES, "int8", "int32", "int64", "uint8", "bool")
SIZE_COLUMN = 1
# The counting columns of a row, in order: < 0, > 0, == 0, -inf, +inf (NaN: size minus the
# first three, as compiled.row_values reads it).
COUNT_COLUMNS = (2, 3, 4, 5, 6)
_SUMS = ("count", "sums")  # the reduction blocks that add (their partials start at 0)
_REDUCTIONS = (*_SUMS, "low", "high")  # low and high: min and max of the finite values


def kernel_name(dtype: str, stats: bool = False) -> str:
    return f"tvmdbg_device_{'stats' if stats else 'health'}_{dtype}"


def _compare_dtype(dtype: str) -> str:
    """The dtype the kernels compare an element in: float16 and bfloat16 widened to float32."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def _value(dtype: str) -> str:
    """An element as the kernels compare it."""
    c = _compare_dtype(dtype)
    return "x[vi]" if c == dtype else f'T.Cast("{c}", x[vi])'


def _count_terms(dtype: str) -> list[str]:
    """Each counting column's test of one element (an int32 0 or 1)."""
    if dtype == "bool":
        return ["0", 'T.Cast("int32", x[vi])', '1 - T.Cast("int32", x[vi])', "0", "0"]
    v, c = _value(dtype), _compare_dtype(dtype)
    tests = [f"{v} < T.{c}(0)", f"{v} > T.{c}(0)", f"{v} == T.{c}(0)"]
    if dtype in FLOAT_DTYPES:
        tests += [f'{v} == T.{c}("-inf")', f'{v} == T.{c}("inf")']
    terms = [f'T.Cast("int32", {t})' for t in tests]
    return terms + ["0"] * (5 - len(terms))  # no infinities in an integer


def _select(terms: list[str], var: str = "vk") -> str:
    """terms[vk] as one expression (a chain of selects)."""
    out = terms[-1]
    for k in range(len(terms) - 2, -1, -1):
        out = f"T.Select({var} == {k}, {terms[k]}, {out})"
    return out


def source(dtype: str, stats: bool = False) -> str:
    """The TVMScript of the device summary kernel of dtype: (a flat tensor of n elements, the
    stats buffer, the row to write). It writes the row's size and counting columns (and, with
    stats, FULL_STATS' five statistics of the finite values); the caller writes the stamp,
    rank and dims, which it knows from the tensor's shape."""
    name = kernel_name(dtype, stats)
    terms = _count_terms(dtype)
    lines = [
        "@T.prim_func(s_tir=True)",
        f"def {name}(a: T.handle, stats: T.handle, row: T.int64):",
        '    T.func_attr({"tirx.noalias": True})',
        "    n = T.int64()",
        "    nrows = T.int64()",
        f'    x = T.match_buffer(a, (n,), "{dtype}")',
        f'    S = T.match_buffer(stats, (nrows, T.int64({ROW_WIDTH})), "float64")',
        f'    counts = T.sblock_alloc_buffer((T.int64({len(terms)}),), "int64")',
    ]
    lines += _reduction("count", len(terms), "counts[vk]", f'T.Cast("int64", {_select(terms)})', "T.int64(0)")
    lines += [
        f"    for k in range({len(terms)}):",
        '        with T.sblock("count_row"):',
        f"            vk = T.axis.spatial({len(terms)}, k)",
        f'            S[row, vk + {COUNT_COLUMNS[0]}] = T.Cast("float64", counts[vk])',
        "    for t in range(1):",
        '        with T.sblock("size"):',
        f'            S[row, {SIZE_COLUMN}] = T.Cast("float64", n)',
    ]
    if stats and dtype != "bool":
        lines += _statistics(dtype)
    return "\n".join(lines) + "\n"


def _reduction(name: str, width: int, target: str, term: str, start: str) -> list[str]:
    return [
        f"    for k, i in T.grid({width}, n):",
        f'        with T.sblock("{name}"):',
        '            vk, vi = T.axis.remap("SR", [k, i])',
        "            with T.init():",
        f"                {target} = {start}",
        f"            {target} = {target} + {term}" if name in _SUMS else f"            {target} = {term}",
    ]


def _statistics(dtype: str) -> list[str]:
    """Sum and sum of squares (float64), min and max of the finite values, then FULL_STATS'
    [min, max, mean, l2_norm, abs_max] (NaN for all five when no value is finite)."""
    v = f'T.Cast("float64", {_value(dtype)})'
    finite = f"T.isfinite({_value(dtype)})" if dtype in FLOAT_DTYPES else "True"
    big, small = 'T.max_value("float64")', 'T.min_value("float64")'  # the reducers' identities
    lines = ['    sums = T.sblock_alloc_buffer((T.int64(3),), "float64")']
    lines += _reduction(
        "sums",
        3,
        "sums[vk]",
        f"T.Select({finite}, {_select([v, f'{v} * {v}', 'T.float64(1)'])}, T.float64(0))",
        "T.float64(0)",
    )
    lines += ['    low = T.sblock_alloc_buffer((T.int64(1),), "float64")']
    lines += _reduction("low", 1, "low[vk]", f"T.min(low[vk], T.Select({finite}, {v}, {big}))", big)
    lines += ['    high = T.sblock_alloc_buffer((T.int64(1),), "float64")']
    lines += _reduction("high", 1, "high[vk]", f"T.max(high[vk], T.Select({finite}, {v}, {small}))", small)
    c = STATS_COLUMN
    none = "sums[2] == T.float64(0)"
    nan = 'T.float64("nan")'
    return lines + [
        "    for t in range(1):",
        '        with T.sblock("statistics"):',
        f"            S[row, {c}] = T.Select({none}, {nan}, low[0])",
        f"            S[row, {c + 1}] = T.Select({none}, {nan}, high[0])",
        f"            S[row, {c + 2}] = T.Select({none}, {nan}, sums[0] / T.max(sums[2], T.float64(1)))",
        f"            S[row, {c + 3}] = T.Select({none}, {nan}, T.sqrt(sums[1]))",
        f"            S[row, {c + 4}] = T.Select({none}, {nan}, T.max(T.float64(0) - low[0], high[0]))",
    ]


def definition(dtype: str, stats: bool = False) -> Any:
    """The kernel's PrimFunc as written (reduction blocks, no schedule)."""
    import tvm

    name = kernel_name(dtype, stats)
    return tvm.script.from_source(source(dtype, stats)).with_attr("global_symbol", name)


def schedule(func: Any, bind: bool = True) -> Any:
    """func scheduled for the GPU: every reduction block in two launches (module doc). bind
    False leaves the loops serial, the same structure an llvm build can run."""
    import tvm
    from tvm import s_tir

    name = func.attrs["global_symbol"]
    sch = s_tir.Schedule(tvm.IRModule({name: func}))
    for block in sch.get_child_blocks(sch.get_sblock("root", func_name=name)):
        if sch.get(block).name_hint in _REDUCTIONS:
            _two_launches(sch, block, bind)
        elif bind:  # the row's writes (count_row, size, statistics): one thread each
            sch.bind(sch.get_loops(block)[0], "threadIdx.x")
    return sch.mod[name]


def _two_launches(sch: Any, block: Any, bind: bool) -> None:
    k, i = sch.get_loops(block)
    _, share = sch.split(i, [None, BLOCKS * THREADS])
    partial = sch.rfactor(share, 0)
    k1, outer, share1 = sch.get_loops(partial)
    sch.reorder(share1, outer, k1)
    if bind:
        grid, thread = sch.split(share1, [BLOCKS, THREADS])
        sch.bind(grid, "blockIdx.x")
        sch.bind(thread, "threadIdx.x")
        column, across = sch.get_loops(block)
        sch.bind(column, "blockIdx.x")
        _, lane = sch.split(across, [None, THREADS])
        sch.bind(lane, "threadIdx.x")
    sch.decompose_reduction(partial, outer)  # zeros set before the share loop, whatever it runs
