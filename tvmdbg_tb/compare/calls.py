"""Which call of run A is compared with which call of run B, and which one is shown.

The rule: the i-th call of a function in A is compared with the i-th call of the same
function in B (VM calls of one function in both runs, in order). When the counts differ,
the calls without a counterpart are listed as `unpaired` and a note says so: they are not
compared, never counted as equal. By default the table shows the first pair (in A's order)
that diverges, else the last pair; `function` and `call` pick one instead.
"""

from __future__ import annotations

from collections import Counter


class CallError(ValueError):
    """The requested function or call has no pair in the two runs."""


def pair_calls(order_a: list[tuple[str, int]], order_b: list[tuple[str, int]]) -> tuple[list, list[dict], list[str]]:
    """(keys of the paired calls in A's order, unpaired call records, notes on count mismatches)."""
    in_b = set(order_b)
    in_a = set(order_a)
    paired = [key for key in order_a if key in in_b]
    unpaired = [
        {"function": f, "call": k, "status": "unpaired", "missing_in": "B"} for f, k in order_a if (f, k) not in in_b
    ]
    unpaired += [
        {"function": f, "call": k, "status": "unpaired", "missing_in": "A"} for f, k in order_b if (f, k) not in in_a
    ]
    counts_a, counts_b = Counter(f for f, _ in order_a), Counter(f for f, _ in order_b)
    notes = []
    for function in sorted(set(counts_a) | set(counts_b)):
        na, nb = counts_a[function], counts_b[function]
        if na != nb:
            more = "A" if na > nb else "B"
            lo, hi = min(na, nb), max(na, nb)
            extra = f"call {lo} of {more} has" if hi - lo == 1 else f"calls {lo}..{hi - 1} of {more} have"
            notes.append(
                f"{function} was called {na} times in A and {nb} times in B: calls are paired by order "
                f"(call i with call i), so {extra} no counterpart (not compared)"
            )
    return paired, unpaired, notes


def pick(keys: list[tuple[str, int]], statuses: list[str | None], function: str | None, call: int | None) -> int:
    """Index in keys of the pair to show: the requested one, else the first divergent (among
    the requested function's calls), else the last."""
    candidates = [
        i for i, (f, k) in enumerate(keys) if (function is None or f == function) and (call is None or k == call)
    ]
    if not candidates:
        functions = sorted({f for f, _ in keys})
        counts = Counter(f for f, _ in keys)
        wanted = f"call {call} of {function or 'any function'}" if call is not None else f"function {function!r}"
        raise CallError(
            f"no paired {wanted}: paired calls are " + ", ".join(f"{f} 0..{counts[f] - 1}" for f in functions)
        )
    if call is not None:
        return candidates[0]
    divergent = [i for i in candidates if statuses[i] == "divergent"]
    return divergent[0] if divergent else candidates[-1]
