"""TVMScript lines of FULL_STATS' summary kernel body: the FULL_HEALTH counts and the
statistics (min, max, mean, L2 norm, abs-max of the finite elements) in ONE pass over the
tensor, so FULL_STATS reads each output once like FULL_HEALTH does.

The pass assumes every element finite (the common case): per lane it counts < 0 and > 0 and
keeps min, max, sum and sum of squares (a NaN or inf element makes a sum non-finite, so no
finite test is needed). Only a tensor whose sums are not finite (non-finite elements, or
squares that overflowed in the float32 block sums) takes a second, masked pass that tells
NaN/-inf/+inf apart and recomputes the statistics over the finite elements, summing in
float64. Kept apart from the health kernels
(compiled.py) so that both can change independently.
"""

from __future__ import annotations

LANES = 8  # 16 lanes spill the six accumulators out of SSE registers (slower)
BLOCK = 256  # iterations summed in the block dtype before they are added in float64


def extreme(dtype: str, largest: bool) -> str:
    """The identity of min (largest=True) or max in dtype: +/-inf for floats, the limits for ints
    (T.max_value: a uint64 literal above int64's range does not parse)."""
    if dtype.startswith("float"):
        return f'T.{dtype}("{"inf" if largest else "-inf"}")'
    return f'T.{"max" if largest else "min"}_value("{dtype}")'


def stats_lines(dtype: str, size: str, stats_column: int, scratch: str) -> list[str]:
    """Body lines (4-space indented, after the tensor's flat view F and S are declared) writing S[row, 2:7] = lt0,
    gt0, eq0, -inf, +inf and S[row, stats_column:stats_column + 5] = min, max, mean,
    l2_norm, abs_max of A's finite elements (NaN when there are none). Not for bool. Its own
    buffers take the storage scope `scratch` (kernel_source.SCRATCH).

    Sums of 16- and 32-bit floats run in float32 within blocks of LANES * BLOCK elements
    and are added in float64 per block: precision near float64's at float32 speed."""
    floating = dtype.startswith("float")
    block_dtype = "float32" if dtype in ("float16", "float32") else "float64"
    span = LANES * BLOCK
    zero = f"T.{dtype}(0)"
    lines = [
        f'    acc = T.alloc_buffer((6, {LANES}), "int32", scope="{scratch}")',
        f'    mn = T.alloc_buffer(({LANES},), "{dtype}", scope="{scratch}")',
        f'    mx = T.alloc_buffer(({LANES},), "{dtype}", scope="{scratch}")',
        f'    sm = T.alloc_buffer(({LANES},), "float64", scope="{scratch}")',
        f'    sq = T.alloc_buffer(({LANES},), "float64", scope="{scratch}")',
        f'    bs = T.alloc_buffer(({LANES},), "{block_dtype}", scope="{scratch}")',
        f'    bq = T.alloc_buffer(({LANES},), "{block_dtype}", scope="{scratch}")',
        f'    bad = T.alloc_buffer((1,), "int64", scope="{scratch}")',
    ]

    def reset(indent: str) -> list[str]:
        out = [
            "for k in range(6):",
            f"    for j in T.vectorized({LANES}):",
            "        acc[k, j] = 0",
            f"for j in T.vectorized({LANES}):",
            f"    mn[j] = {extreme(dtype, True)}",
            f"    mx[j] = {extreme(dtype, False)}",
            "    sm[j] = T.float64(0)",
            "    sq[j] = T.float64(0)",
        ]
        return [indent + line for line in out]

    def count(v: str, j: str, masked: bool) -> list[str]:
        cast = 'T.Cast("int32", {})'
        if masked:  # the second pass: what the first could not tell apart
            tests = {
                3: f'{v} == T.{dtype}("-inf")',
                4: f'{v} == T.{dtype}("inf")',
                2: f"T.isnan({v})",
                5: f"T.isfinite({v})",
            }
        elif floating:  # no finite test: a non-finite element shows in the sums (below)
            tests = {0: f"{v} < {zero}", 1: f"{v} > {zero}"}
        else:
            tests = {0: f"{v} < {zero}", 1: f"{v} > {zero}", 2: f"{v} == {zero}"}
        return [f"acc[{k}, {j}] = acc[{k}, {j}] + {cast.format(t)}" for k, t in tests.items()]

    def update(v: str, j: str, acc_s: str, acc_q: str, acc_dtype: str, masked: bool) -> list[str]:
        cast = f'T.Cast("{acc_dtype}", {v})'
        if masked:
            fin = f"T.isfinite({v})"
            return [
                f'mn[{j}] = T.min(mn[{j}], T.if_then_else({fin}, {v}, T.{dtype}("inf")))',
                f'mx[{j}] = T.max(mx[{j}], T.if_then_else({fin}, {v}, T.{dtype}("-inf")))',
                f"{acc_s}[{j}] = {acc_s}[{j}] + T.if_then_else({fin}, {cast}, T.{acc_dtype}(0))",
                f"{acc_q}[{j}] = {acc_q}[{j}] + T.if_then_else({fin}, {cast} * {cast}, T.{acc_dtype}(0))",
            ]
        return [
            f"mn[{j}] = T.min(mn[{j}], {v})",
            f"mx[{j}] = T.max(mx[{j}], {v})",
            f"{acc_s}[{j}] = {acc_s}[{j}] + {cast}",
            f"{acc_q}[{j}] = {acc_q}[{j}] + {cast} * {cast}",
        ]

    def one_pass(masked: bool, indent: str) -> list[str]:
        if masked:  # rare (non-finite elements or overflowed squares): sums straight in float64
            v = f"F[bo * {LANES} + j]"
            tail = f"F[({size}) // {LANES} * {LANES} + i]"
            out = [f"for bo in range(({size}) // {LANES}):", f"    for j in T.vectorized({LANES}):"]
            out += ["        " + u for u in count(v, "j", True) + update(v, "j", "sm", "sq", "float64", True)]
            out.append(f"for i in range(({size}) % {LANES}):")
            out += ["    " + u for u in count(tail, "0", True) + update(tail, "0", "sm", "sq", "float64", True)]
            return [indent + line for line in out]
        out = [
            f"for bo in range(({size}) // {span}):",
            f"    for j in T.vectorized({LANES}):",
            f"        bs[j] = T.{block_dtype}(0)",
            f"        bq[j] = T.{block_dtype}(0)",
            f"    for bi in range({BLOCK}):",
            f"        for j in T.vectorized({LANES}):",
        ]
        v = f"F[bo * {span} + bi * {LANES} + j]"
        out += ["            " + u for u in count(v, "j", masked) + update(v, "j", "bs", "bq", block_dtype, masked)]
        out += [
            f"    for j in T.vectorized({LANES}):",
            '        sm[j] = sm[j] + T.Cast("float64", bs[j])',
            '        sq[j] = sq[j] + T.Cast("float64", bq[j])',
            f"for i in range(({size}) % {span}):",
        ]
        tail = f"F[({size}) // {span} * {span} + i]"
        out += ["    " + u for u in count(tail, "0", masked) + update(tail, "0", "sm", "sq", "float64", masked)]
        return [indent + line for line in out]

    lines += reset("    ")
    lines += one_pass(False, "    ")
    if floating:
        # Any NaN or inf element makes a lane's sum or sum of squares non-finite (so can an
        # overflow of the squares): only then the masked pass counts the finite elements.
        lines += [
            "    bad[0] = T.int64(0)",
            f"    for j in range({LANES}):",
            '        bad[0] = bad[0] + T.Cast("int64", T.isfinite(sm[j] + sq[j]))',
            f"    if bad[0] < {LANES}:",
            # lt0/gt0 of the first pass are right (NaN and inf compare as they should for the
            # signs: -inf < 0, +inf > 0); the statistics are redone over the finite elements.
            f"        for j in T.vectorized({LANES}):",
            f"            mn[j] = {extreme(dtype, True)}",
            f"            mx[j] = {extreme(dtype, False)}",
            "            sm[j] = T.float64(0)",
            "            sq[j] = T.float64(0)",
            *one_pass(True, "        "),
            f"        bad[0] = {size}",
            f"        for j in range({LANES}):",
            '            bad[0] = bad[0] - T.Cast("int64", acc[5, j])',
            "    else:",
            "        bad[0] = T.int64(0)",
        ]
    else:
        lines.append("    bad[0] = T.int64(0)")
    lines += [
        "    for k in range(5):",
        "        S[row, 2 + k] = T.float64(0)",
        f"        for j in range({LANES}):",
        '            S[row, 2 + k] = S[row, 2 + k] + T.Cast("float64", acc[k, j])',
    ]
    if floating:
        # acc[2] counted NaNs (second pass, else 0): turn it into the zero count.
        lines.append(f'    S[row, 4] = T.Cast("float64", {size}) - S[row, 2] - S[row, 3] - S[row, 4]')
    c = stats_column
    lines += [
        f'    S[row, {c}] = T.Cast("float64", mn[0])',
        f'    S[row, {c + 1}] = T.Cast("float64", mx[0])',
        f"    S[row, {c + 2}] = T.float64(0)",
        f"    S[row, {c + 3}] = T.float64(0)",
        f"    for j in range({LANES}):",
        f'        S[row, {c}] = T.min(S[row, {c}], T.Cast("float64", mn[j]))',
        f'        S[row, {c + 1}] = T.max(S[row, {c + 1}], T.Cast("float64", mx[j]))',
        f"        S[row, {c + 2}] = S[row, {c + 2}] + sm[j]",
        f"        S[row, {c + 3}] = S[row, {c + 3}] + sq[j]",
    ]
    # Finished here rather than in Python (per row, Python is the costlier side).
    finite = f'T.Cast("float64", ({size}) - bad[0])'
    lines += [
        f"    if {finite} > T.float64(0):",
        f"        S[row, {c + 2}] = S[row, {c + 2}] / {finite}",
        f"        S[row, {c + 3}] = T.sqrt(S[row, {c + 3}])",
        f"        S[row, {c + 4}] = T.max(S[row, {c + 1}], T.float64(0) - S[row, {c}])",
        "    else:",
        *[f'        S[row, {c + k}] = T.float64("nan")' for k in range(5)],
    ]
    return lines
