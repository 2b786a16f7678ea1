"""The TVMScript of the summary kernels (compiled.py's row layout: [cycles, size, lt0, gt0,
eq0, neg_inf, pos_inf, rank, dim_0..dim_7, min, max, mean, l2_norm, abs_max, inner]): the separate summary kernel of each
dtype (any rank), and what a kernel counting its own output adds (epilogue.py). One generator for all of them, so they count the
same."""

from __future__ import annotations

import functools

from tvmdbg_tb.capture import stats_kernel

ROW_WIDTH = 22
STATS_COLUMN = 16  # min, max, mean, l2_norm, abs_max (FULL_STATS' last five values)
# The inner-op check (inner_check.py): in a fused kernel's row, the NaN and infinities its
# Relax ops made inside it; in row 0, the call's start stamp (column 0) when any kernel's
# ops made one; each op's (nan, neg_inf, pos_inf) in rows of their own, this many per row.
INNER_COLUMN = 21
INNER_FLAG_COLUMN = 1
INNER_OPS_PER_ROW = 7
# The recount kernels' arguments (recount_source): a kernel built with the inner-op check calls
# them with exactly these, so a saved library built with others is another tvmdbg's.
RECOUNT_ARGUMENTS = ("data", "size", "cells", "total", "start")
MAX_RANK = 8
# The storage scope of a kernel's own small buffers (counters, flags, lane sums): TVM's
# LowerTVMBuiltin keeps a CPU allocation of under 1 KiB on the stack only in the "global"
# scope; a "local" one costs a TVMBackendAllocWorkspace and FreeWorkspace pair on every call
# (four to nine of them in a summary kernel, most of its cost on a small tensor).
SCRATCH = "global"
HEALTH_DTYPES = {
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
}


TICK = "tvmdbg_tick"


def kernel_name(dtype: str | None, health: bool = True, stats: bool = False) -> str:
    """The name of the separate summary kernel of a dtype and mode (None: the timestamp-only
    kernel); stats adds FULL_STATS' statistics, health False writes sizes and dims only."""
    if dtype is None:
        return TICK
    return f"tvmdbg_{'stats' if stats else 'health' if health else 'shape'}_{dtype}"


@functools.cache
def catalogue() -> dict[str, str]:
    """Every separate summary kernel by name, with its TVMScript: generic (any rank, one per
    dtype and mode), so that one library holds all of them (kernel_cache: prebuilt into the
    wheel); and the inner-op check's recount kernels. Made once per process; callers only
    read it."""
    out = {TICK: tick_source(TICK)}
    for dtype in sorted(HEALTH_DTYPES):
        for health, stats in ((True, False), (False, False), (True, True)):
            name = kernel_name(dtype, health, stats)
            out[name] = summary_source(name, dtype, health, stats)
    for dtype in FLOAT_DTYPES:
        out[recount_name(dtype)] = recount_source(recount_name(dtype), dtype)
    return out


def source_of(name: str) -> str | None:
    """catalogue().get(name), without making every other kernel's source (a build registers
    the few its kernels call; the wheel's library, when there is one, needs the catalogue)."""
    if name == TICK:
        return tick_source(TICK)
    for dtype in FLOAT_DTYPES:
        if name == recount_name(dtype):
            return recount_source(name, dtype)
    for dtype in sorted(HEALTH_DTYPES):
        for health, stats in ((True, False), (False, False), (True, True)):
            if name == kernel_name(dtype, health, stats):
                return summary_source(name, dtype, health, stats)
    return None


FLOAT_DTYPES = ("float16", "float32", "float64")


def recount_name(dtype: str) -> str:
    """The kernel that counts NaN, -inf and +inf of a buffer of dtype for the inner-op check."""
    return f"tvmdbg_inner_{dtype}"


def recount_source(name: str, dtype: str) -> str:
    """A kernel adding the NaN, -inf and +inf counts of a dense buffer of dtype (its data
    pointer and size) to three cells of the stats rows (a pointer to the first), and, when
    any is not 0, their sum to the calling kernel's INNER_COLUMN cell (total) and row 0's
    start stamp to its INNER_FLAG_COLUMN (start: row 0): what a fused kernel calls, through a
    packed call, on its ops' values (inner_check.py, counting.py), so that the counting by
    kind is compiled once, not into every kernel. Raw pointers rather than DLTensors: every
    argument of a packed call is stores LLVM compiles at each call site (a DLTensor and five
    arguments before: ~20 ms more LLVM time over a ResNet's 57 calls); the calling kernel
    sets total and start once for all its calls. The total and the flag raised here rather
    than by the calling kernel summing its cells at its end: those loads and stores cost LLVM
    ~8M instructions (~1 ms) a ResNet batch_norm kernel."""
    f64 = 'T.handle("float64")'
    kinds = {"data": f'T.handle("{dtype}")', "size": "T.int64"} | dict.fromkeys(("cells", "total", "start"), f64)
    lines = [
        "@T.prim_func",
        f"def {name}({', '.join(f'{a}: {kinds[a]}' for a in RECOUNT_ARGUMENTS)}):",
        f'    F = T.decl_buffer((size,), "{dtype}", data=data)',
        '    C = T.decl_buffer((3,), "float64", data=cells)',
        '    K = T.decl_buffer((1,), "float64", data=total)',
        f'    R = T.decl_buffer(({INNER_FLAG_COLUMN + 1},), "float64", data=start)',
        f'    acc = T.alloc_buffer((3,), "int64", scope="{SCRATCH}")',
        "    for k in range(3):",
        "        acc[k] = T.int64(0)",
        "    for i in range(size):",
        '        acc[0] = acc[0] + T.Cast("int64", T.isnan(F[i]))',
        f'        acc[1] = acc[1] + T.Cast("int64", F[i] == T.{dtype}("-inf"))',
        f'        acc[2] = acc[2] + T.Cast("int64", F[i] == T.{dtype}("inf"))',
        "    for k in range(3):",
        '        C[k] = C[k] + T.Cast("float64", acc[k])',
        "    if acc[0] + acc[1] + acc[2] > T.int64(0):",
        '        K[0] = K[0] + T.Cast("float64", acc[0] + acc[1] + acc[2])',
        f"        R[{INNER_FLAG_COLUMN}] = R[0]",
    ]
    return "\n".join(lines) + "\n"


def tick_source(name: str) -> str:
    """The timestamp-only kernel: the cycle counter into S[row, 0]."""
    lines = ["@T.prim_func", f"def {name}(stats: T.handle, row: T.int64):", *_stats_lines()]
    lines.append('    S[row, 0] = T.Cast("float64", T.call_llvm_intrin("int64", "llvm.readcyclecounter"))')
    return "\n".join(lines) + "\n"


def _stats_lines() -> list[str]:
    """The stats rows S of the tensor argument `stats`."""
    return ["    nrows = T.int64()", f'    S = T.match_buffer(stats, (nrows, T.int64({ROW_WIDTH})), "float64")']


def summary_source(name: str, dtype: str, health: bool, stats: bool = False) -> str:
    """The separate summary kernel of dtype: a tensor of any rank (read from its DLTensor),
    one compiled kernel per dtype and mode; a row already written on entry (column 0 not 0)
    is left as it is: parameters Python pre-marked (param_cache.SKIPPED), outputs their
    producer counted itself (epilogue.py)."""
    lines = _any_rank_signature(name, dtype)
    if stats and dtype != "bool":  # the counts and the statistics in one pass
        lines += stats_kernel.stats_lines(dtype, "size", STATS_COLUMN, SCRATCH)
    elif health:
        lines += _health_lines(dtype, "size")
    lines += _any_rank_stamp_lines()
    return _guarded("\n".join(lines) + "\n")


# 8 lanes (two SSE registers per counter row): 16 spilled the counters and the sums out of
# the registers, and the sums' add chains bound the loop (a small tensor counts ~1.5x faster).
LANES = 8
_COUNT = 'T.Cast("int32", {})'  # a test of one element, as a count


def _accumulators(rows: int, lanes: int, sum_dtype: str | None, first: int = 0, indent: str = "    ") -> list[str]:
    """Rows first .. first + rows - 1 of the per-lane int32 counters acc zeroed and, for floats
    (sum_dtype), the per-lane sums fs (the tensor's flat view F is the signature's)."""
    row = f"{first} + k" if first else "k"
    lines = [
        f"{indent}for k in range({rows}):",
        f"{indent}    for j in T.vectorized({lanes}):",
        f"{indent}        acc[{row}, j] = 0",
    ]
    if sum_dtype:
        lines += [
            f'{indent}fs = T.alloc_buffer(({lanes},), "{sum_dtype}", scope="{SCRATCH}")',
            f"{indent}for j in T.vectorized({lanes}):",
            f"{indent}    fs[j] = T.{sum_dtype}(0)",
        ]
    return lines


def _counting_loop(size: str, tests: dict[int, str], sum_dtype: str | None = None) -> list[str]:
    """A loop adding each test (an int32 expression of {v}) into its acc row, LANES counters
    per row so that LLVM vectorizes it, and (sum_dtype) each element into the per-lane sum
    fs; the tail goes to lane 0."""
    element = f"F[io * {LANES} + j]"
    tail = f"F[({size}) // {LANES} * {LANES} + i]"
    lines = [f"    for io in range(({size}) // {LANES}):", f"        for j in T.vectorized({LANES}):"]
    lines += [f"            acc[{k}, j] = acc[{k}, j] + {t.format(v=element)}" for k, t in tests.items()]
    if sum_dtype:
        lines.append(f'            fs[j] = fs[j] + T.Cast("{sum_dtype}", {element})')
    lines.append(f"    for i in range(({size}) % {LANES}):")
    lines += [f"        acc[{k}, 0] = acc[{k}, 0] + {t.format(v=tail)}" for k, t in tests.items()]
    if sum_dtype:
        lines.append(f'        fs[0] = fs[0] + T.Cast("{sum_dtype}", {tail})')
    return lines


def _first_pass_tests(dtype: str) -> tuple[dict[int, str], str | None]:
    """The first pass's tests (acc row -> an int32 expression of {v}) and, for floats, the dtype
    of the per-lane sum that rides with them: shared by the summary kernel and the kernels
    counting their own output (epilogue.py), so both count the same. Two compares per
    element, < 0 and > 0 (a bool's true count is its > 0): == 0 is what they leave once NaN
    is known (_zeros_line), which saves the third compare, a third of the counting work."""
    if dtype == "bool":
        return {1: _COUNT.format("{v}")}, None
    zero = f"T.{dtype}(0)"
    tests = {
        0: _COUNT.format(f"{{v}} < {zero}"),
        1: _COUNT.format(f"{{v}} > {zero}"),
    }
    if not dtype.startswith("float"):
        return tests, None
    return tests, "float64" if dtype == "float64" else "float32"


def _zeros_line(size: str, nan: str, indent: str = "    ") -> str:
    """S[row, 4] (== 0) from the row's < 0 and > 0 counts and the NaN count: an element that is
    not NaN is < 0, > 0 or == 0 (+-inf are in the first two, as in the row's layout)."""
    return f'{indent}S[row, 4] = T.Cast("float64", {size}) - S[row, 2] - S[row, 3] - {nan}'


def _health_lines(dtype: str, size: str) -> list[str]:
    """Counts over the flattened tensor into S[row, 2:7] = lt0, gt0, eq0, -inf, +inf.

    Floats take one pass of two compares (< 0, > 0) plus a per-lane sum, which is finite only
    when no element is NaN or infinite; only a tensor whose sum is not finite (NaN,
    infinities, or finite values that overflow it) gets a second pass that counts NaN, -inf
    and +inf exactly, and only then are its counters zeroed and added up (on a small tensor
    the fixed work around the loop is much of the kernel's cost). == 0 is what is left
    (_zeros_line). The first pass runs at the speed of a plain read of the tensor (a
    per-element finiteness test is slower)."""
    tests, sum_dtype = _first_pass_tests(dtype)
    lines = [
        f'    acc = T.alloc_buffer((5, {LANES}), "int32", scope="{SCRATCH}")',  # lt0, gt0, then -inf, +inf, NaN
        f'    tot = T.alloc_buffer((5,), "int64", scope="{SCRATCH}")',
        "    for k in range(3):",
        "        tot[2 + k] = T.int64(0)",  # the second pass's: only when it runs
    ]
    lines += _accumulators(2, LANES, sum_dtype)
    lines += _counting_loop(size, tests, sum_dtype)
    if sum_dtype is not None:
        lines += _total(sum_dtype, LANES)
        lines.append("    if not T.isfinite(total[0]):")
        lines += _accumulators(3, LANES, None, first=2, indent="        ")
        second = _counting_loop(
            size,
            {
                2: _COUNT.format(f'{{v}} == T.{dtype}("-inf")'),
                3: _COUNT.format(f'{{v}} == T.{dtype}("inf")'),
                4: _COUNT.format("T.isnan({v})"),
            },
        )
        lines += ["    " + line for line in second]
        lines += _lane_totals(3, LANES, first=2, indent="        ")
    lines += _lane_totals(2, LANES)
    lines += [
        "    for k in range(2):",
        '        S[row, 2 + k] = T.Cast("float64", tot[k])',
        '        S[row, 5 + k] = T.Cast("float64", tot[2 + k])',
        _zeros_line(size, 'T.Cast("float64", tot[4])'),
    ]
    return lines


def _lane_totals(rows: int, lanes: int, first: int = 0, indent: str = "    ") -> list[str]:
    """tot[first + k]: the sum of acc row first + k's lanes, in int64 (integer adds: a short
    dependency chain where float64 adds of each lane cost much of a small tensor's summary)."""
    row = f"{first} + k" if first else "k"
    return [
        f"{indent}for k in range({rows}):",
        f"{indent}    tot[{row}] = T.int64(0)",
        f"{indent}    for j in range({lanes}):",
        f'{indent}        tot[{row}] = tot[{row}] + T.Cast("int64", acc[{row}, j])',
    ]


def _total(sum_dtype: str, lanes: int) -> list[str]:
    """total[0]: the sum of the lanes' sums (not finite when an element is NaN or infinite)."""
    return [
        f'    total = T.alloc_buffer((1,), "{sum_dtype}", scope="{SCRATCH}")',
        f"    total[0] = T.{sum_dtype}(0)",
        f"    for j in range({lanes}):",
        "        total[0] = total[0] + fs[j]",
    ]


# DLTensor fields read by tvm_struct_get (TVM's TVMStructFieldKind).
_DATA, _SHAPE, _NDIM, _BYTE_OFFSET = 1, 2, 4, 8


def _any_rank_signature(name: str, dtype: str, extra: str = "") -> list[str]:
    """A kernel on a tensor of any rank up to MAX_RANK: its rank, shape and data read from
    its DLTensor (ndim, dims, size), its flat view F, and the stats rows S. The caller
    passes a dense CPU tensor of dtype (the call site's static type says so): one kernel
    serves every rank, so a build compiles one per dtype, not one per dtype and rank."""
    size = " * ".join(f"T.if_then_else(ndim > {i}, dims[{i}], T.int64(1))" for i in range(MAX_RANK))
    itemsize = 1 if dtype == "bool" else int("".join(c for c in dtype if c.isdigit())) // 8
    return [
        "@T.prim_func",
        f"def {name}(a: T.handle, stats: T.handle, row: T.int64{extra}):",
        '    T.func_attr({"tirx.noalias": True})',
        *_stats_lines(),
        f'    ndim: T.let[T.int32] = T.min(T.tvm_struct_get(a, 0, {_NDIM}, "int32"), {MAX_RANK})',
        f'    shape: T.let[T.handle] = T.tvm_struct_get(a, 0, {_SHAPE}, "handle")',
        f'    dims = T.decl_buffer(({MAX_RANK},), "int64", data=shape)',
        f'    data: T.let[T.handle] = T.tvm_struct_get(a, 0, {_DATA}, "handle")',
        f'    offset: T.let[T.int64] = T.Cast("int64", T.tvm_struct_get(a, 0, {_BYTE_OFFSET}, "uint64"))',
        f"    size: T.let[T.int64] = {size}",
        f'    F = T.decl_buffer((size,), "{dtype}", data=data, elem_offset=offset // {itemsize})',
    ]


def _any_rank_stamp_lines() -> list[str]:
    """The row's timestamp, size, rank and dims, for _any_rank_signature's tensor."""
    return [
        '    S[row, 0] = T.Cast("float64", T.call_llvm_intrin("int64", "llvm.readcyclecounter"))',
        '    S[row, 1] = T.Cast("float64", size)',
        '    S[row, 7] = T.Cast("float64", ndim)',
        "    for i in range(ndim):",
        '        S[row, 8 + T.Cast("int64", i)] = T.Cast("float64", dims[i])',
    ]


def _guarded(source: str) -> str:
    """The kernel made a no-op when its row's column 0 is not 0 on entry (a row is cleared
    before each call, then written once): one load and compare when it runs."""
    lines = source.splitlines()
    split = next(k for k, line in enumerate(lines) if line.startswith("    S = T.match_buffer")) + 1
    body = ["    " + line for line in lines[split:]]
    return "\n".join([*lines[:split], "    if S[row, 0] == T.float64(0):", *body]) + "\n"
