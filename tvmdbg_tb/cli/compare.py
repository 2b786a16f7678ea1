"""`tvmdbg compare A B`: op-by-op comparison of two runs, the first divergent op first.

Exit status: 0 within tolerance, 1 divergent, 2 cannot compare (the reason on stderr).
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

from tvmdbg_tb import storage
from tvmdbg_tb.cli.render import Style, table, where
from tvmdbg_tb.cli.session import open_logdir, pick_run


def _run(path: str):
    """A run directory or a logdir (its only or newest run)."""
    from tvmdbg_tb.compare import CompareError

    problem = storage.location_problem(path)
    if problem is not None:
        raise CompareError(f"{path}: {problem}")
    reader = open_logdir(path)
    return pick_run(reader, None, notes=sys.stderr)


def _num(value) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}"


def call_lines(result: dict) -> list[str]:
    """Every call pair's verdict (call i of A against call i of B) and the unpaired calls."""
    rows = [
        [
            ("*" if (c["function"], c["call"]) == (result["function"], result["call"]) else "") + c["status"],
            c["function"],
            str(c["call"]),
            "-" if c.get("execution_index_a") is None else str(c["execution_index_a"]),
            "-" if c.get("execution_index_b") is None else str(c["execution_index_b"]),
            f"missing in {c['missing_in']}" if c["status"] == "unpaired" else "",
        ]
        for c in result["calls"]
    ]
    return table(["call status", "function", "call", "execution A", "execution B", ""], rows, right=(2, 3, 4))


def _calls_summary(result: dict) -> str:
    paired = [c for c in result["calls"] if c["status"] != "unpaired"]
    divergent = [f"{c['function']} {c['call']}" for c in paired if c["status"] == "divergent"]
    unpaired = len(result["calls"]) - len(paired)
    return (
        f"calls: {len(paired)} paired, {len(divergent)} divergent"
        + (f" ({', '.join(divergent[:5])}{', ...' if len(divergent) > 5 else ''})" if divergent else "")
        + (f", {unpaired} unpaired (not compared)" if unpaired else "")
        + ("" if len(result["calls"]) < 2 else "; --all-calls lists them, --call K shows one")
    )


def lines(result: dict, style: Style, all_calls: bool = False) -> list[str]:
    """The report: verdict, first divergent op, the table in A's execution order, notes."""
    out = [
        f"A: {result['run_a']} ({result['mode_a']})",
        f"B: {result['run_b']} ({result['mode_b']}, the reference)",
        f"{result['function']} call {result['call']}; rtol={result['rtol']:g} atol={result['atol']:g}; "
        f"{result['matched']['aligned']} kernel outputs aligned, {result['matched']['divergent']} beyond tolerance",
        _calls_summary(result),
    ]
    if all_calls:
        out += call_lines(result)
    first = result["first_divergence"]
    if first is not None:
        at = f" at {where(first['location'])}" if first["location"] else ""
        inside = first.get("inner")
        # A fused kernel opened up: its output (the op that ends it) may only carry what an op
        # before it made; the op is named once found (inner_lines' closing line).
        what = (
            f"First divergent kernel: {first['kernel_a']}, whose output is {first['op_type']} {first['op_name_a']}{at}"
            if inside
            else f"First divergent op: {first['op_type']} {first['op_name_a']}{at}"
        )
        out.append(
            style(what, "red")
            + f": {first.get('reason', '')}, max abs error {_num(first.get('max_abs_error'))}"
            + (" (lower bound, from statistics)" if first.get("basis") == "stats" else "")
        )
        if inside and inside["status"] == "pending":
            kernels = " / ".join(k for k in (inside["kernel_a"], inside["kernel_b"]) if k)
            out.append(f"  Inside {kernels}: {inside['reason']} (below the table)...")
        elif inside:
            out += inner_lines(inside, style)
    else:
        out.append(style("Within tolerance.", "green") if result["status"] == "within" else "No origin found.")
    rows = []
    ordered = ([first] if first is not None else []) + [r for r in result["ops"] if r is not first]
    for r in ordered:
        mark = "*" if r is first else ""
        rows.append(
            [
                mark + r["status"],
                r["op_type"],
                r.get("op_name_a", "-"),
                r.get("op_name_b", "-"),
                where(r["location"], short=True, called_from=False),
                _num(r.get("max_abs_error")),
                _num(r.get("max_rel_error")),
                _num(r.get("cosine_similarity")),
                r.get("basis", "-"),
            ]
        )
    out += table(["status", "op", "A", "B", "line", "max_abs", "max_rel", "cosine", "basis"], rows, right=(5, 6, 7))
    out += [f"note: {n}" for n in result["notes"]]
    if result.get("suggestion"):
        out.append(f"note: {result['suggestion']}")
    return out


def _rewritten(row: dict) -> str:
    """ " (ToMixedPrecision: relax.astype)" for an op a pass made in place of the user's, or
    " (by ToMixedPrecision)" when it made the same op type; "" for the user's own op."""
    if not row.get("rewritten_by"):
        return ""
    pass_name, _, made = row["rewritten_by"].partition(": ")
    return f" (by {pass_name})" if made == row["op_type"] else f" ({row['rewritten_by']})"


def inner_lines(inner: dict, style: Style) -> list[str]:
    """The fused kernel opened up (compare/inner.py): its first divergent Relax op, each inner
    op's verdict against the other run, and which run(s) were replayed."""
    kernels = " / ".join(k for k in (inner["kernel_a"], inner["kernel_b"]) if k)
    replayed = " and ".join(inner["replayed"]) or "neither"
    then = [f"  {inner['suggestion']}"] if inner.get("suggestion") else []
    path = [o["kernel"] for o in inner["opened"]]
    via = f" (followed back through its inputs to {' -> '.join(path[1:])})" if len(path) > 1 else ""
    if inner["status"] == "needs_values":
        return [f"  Inside {kernels}{via}: not replayed: {inner['reason']}."] + then
    op = inner["op"]
    if op is None:
        head = f"  Inside {kernels}{via} (replayed op by op: {replayed}): {inner['reason']}."
    else:
        at = f" at {where(op['location'])}" if op["location"] else ""
        error = "" if op["made_nonfinite"] else f", max abs error {_num(op.get('max_abs_error'))}"
        made = _rewritten(op)
        head = (
            style(
                f"  Inside {kernels}{via}: the first divergent Relax op is {op['op_type']} {op['var_name']}{made}{at}",
                "red",
            )
            + f" (in {inner['kernel']}): {inner['reason']}{error} (replayed op by op: {replayed})"
        )
    rows = [
        [
            ("*" if op is not None and r["index"] == op["index"] else "")
            + ("made NaN/Inf" if r.get("made_nonfinite") else r["status"]),
            r["op_type"] + _rewritten(r),
            r["var_name"],
            (r.get("counterpart") or {}).get("op_name", "-"),
            where(r["location"], short=True, called_from=False),
            _num(r.get("max_abs_error")),
            r.get("basis", "-"),
        ]
        for r in inner["ops"]
    ]
    other = "B" if inner["walked"] == "A" else "A"
    table_lines = table(["status", "inner op", inner["walked"], other, "line", "max_abs", "basis"], rows, right=(5,))
    closing = []
    if op is not None:
        at = f" at {where(op['location'])}" if op["location"] else ""
        closing = [style(f"First divergent op: {op['op_type']} {op['var_name']}{_rewritten(op)}{at}", "red")]
    return [head] + ["    " + line for line in table_lines] + then + closing


def main(args) -> int:
    from tvmdbg_tb.analysis import dumps
    from tvmdbg_tb.compare import CompareError, Comparison

    try:
        # Both runs read at once (numpy and the file reads let two threads go on together).
        with ThreadPoolExecutor(2) as pool:
            run_a, run_b = pool.map(_run, (args.run_a, args.run_b))
        comparison = Comparison(run_a, run_b, rtol=args.rtol, atol=args.atol, call=args.call, function=args.function)
    except CompareError as error:
        if args.json:
            print(dumps({"status": "cannot_compare", "error": str(error), "first_divergence": None}))
        print(f"tvmdbg compare: cannot compare: {error}", file=sys.stderr)
        return 2
    result = comparison.result
    if args.json:
        print(dumps(comparison.open()))
    else:
        # The report at once; a fused first divergent kernel is opened (replayed op by op,
        # seconds) after it, and its inside printed then.
        style = Style.for_stream(sys.stdout)
        print("\n".join(lines(result, style, all_calls=args.all_calls)), flush=True)
        if comparison.pending:
            inner = comparison.open()["first_divergence"]["inner"]
            if inner:
                print("\n".join(inner_lines(inner, style)))
    return 1 if result["status"] == "divergent" else 0
