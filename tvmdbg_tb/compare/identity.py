"""Op identity across builds: what lets a fused run line up with an unfused one.

A kernel's output is the output of the last Relax op folded into it, so a kernel is known by
that op: (function, op type, the user's file and line, occurrence index of that op type at
that line). The occurrence counts every original op of the function in order, fused or not,
so two builds of the same model give the same key to the same op whatever the fusion; kernel
names (which fusion changes) are never used, except for ops without any Relax op mapping.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tvmdbg_tb.events.reader import RunReader


@dataclass(frozen=True)
class OpIdentity:
    key: tuple  # equal keys in two runs mean "the same op"
    op_type: str
    location: dict | None  # {"file_path", "line", "function"} of the user's frame
    op_name: str
    kernel: str
    # Every Relax op of the kernel ({"op_type", "location"}), in order; the key is the last's.
    fused_ops: tuple = ()


def _frame(run: RunReader, loc) -> dict | None:
    frame = run.user_frame(loc) if loc is not None and loc.stack_frame_ids else None
    if frame is None:
        return None
    return {"file_path": frame.file_path, "line": int(frame.line), "function": frame.function}


def op_identities(run: RunReader) -> dict[int, OpIdentity]:
    """op_id -> its identity, for every kernel call site of the run."""
    out: dict[int, OpIdentity] = {}
    for graph in run.graphs():
        seen: Counter = Counter()
        for op in sorted(run.ops(graph.graph_id), key=lambda o: o.position):
            last = None
            fused = []
            for original in op.original_ops:
                where = _frame(run, original.code_location)
                fused.append({"op_type": original.op_type, "location": where})
                place = (where["file_path"], where["line"]) if where else (None, None)
                site = (original.op_type, *place)
                seen[site] += 1
                last = (original.op_type, where, site, seen[site] - 1)
            if last is None:
                site = ("kernel:" + op.kernel, None, None)
                seen[site] += 1
                out[op.op_id] = OpIdentity((graph.name, *site, seen[site] - 1), "", None, op.op_name, op.kernel)
                continue
            op_type, where, site, occurrence = last
            key = (graph.name, *site, occurrence)
            out[op.op_id] = OpIdentity(key, op_type, where, op.op_name, op.kernel, tuple(fused))
    return out


def describe_key(key: tuple) -> str:
    """A short readable form of a key: "relax.exp @ model.py:12 #0"."""
    function, op_type, path, line, occurrence = key
    where = f"{path.rsplit('/', 1)[-1]}:{line}" if path else "no source"
    return f"{function}:{op_type} @ {where} #{occurrence}"
