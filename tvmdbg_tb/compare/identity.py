"""Op identity across builds: what lets a fused run line up with an unfused one, and a TVM
run with a PyTorch eager reference.

A kernel's output is the output of the last Relax op folded into it, so a kernel is known by
that op, in this order of preference:

1. **Its model node** (ops the torch importer or from_onnx made: CodeLocation.model_node).
   The op that computes its node's output (OriginalOp.node_output) is known as the node
   itself, `(function, "node", name)`: the key record_torch_reference gives that fx node's
   eager output, whichever Relax ops a converter chose. Another op of the node is
   `(function, "node", name, op type, occurrence within the node)`.
2. **Its line**: `(function, op type, the file and line shown, occurrence)`, the occurrence
   counting the distinct ops (vars) of that type at that line in the function's order, fused
   or not, so two builds of the same model give the same key to the same op whatever the
   fusion. An op a pass made in place of the user's (OriginalOp.rewritten_by) keeps the
   user's op type, var and line, so it takes the key of the op it replaces.

Kernel names (which fusion changes) are never used, except for ops without any Relax op
mapping. Ops whose keys find no counterpart may still be paired by their place in the
dataflow (core.py), never by their line alone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from tvmdbg_tb.events.locations import location
from tvmdbg_tb.events.reader import RunReader

NODE = "node"


@dataclass(frozen=True)
class OpIdentity:
    key: tuple  # equal keys in two runs mean "the same op"
    op_type: str
    location: dict | None  # events.locations.location of the op's code location
    op_name: str
    kernel: str
    # Every Relax op of the kernel ({"op_type", "location"[, "rewritten_by"]}), in order; the
    # key is the last's.
    fused_ops: tuple = ()
    # The key of each of those ops (compare/inner.py pairs the ops inside fused kernels).
    fused_keys: tuple = ()


def op_identities(run: RunReader) -> dict[int, OpIdentity]:
    """op_id -> its identity, for every kernel call site of the run."""
    out: dict[int, OpIdentity] = {}
    for graph in run.graphs():
        function = graph.name
        line_ops: dict[tuple, dict[str, int]] = defaultdict(dict)  # (type, file, line) -> var -> occurrence
        node_ops: dict[tuple, dict[str, int]] = defaultdict(dict)  # (node, type) -> var -> occurrence
        kernels: Counter = Counter()
        for op in sorted(run.ops(graph.graph_id), key=lambda o: o.position):
            last = None
            fused, keys = [], []
            for original in op.original_ops:
                where = location(run, original.code_location)
                entry = {"op_type": original.op_type, "location": where}
                if original.rewritten_by:
                    entry["rewritten_by"] = original.rewritten_by
                fused.append(entry)
                node = original.code_location.model_node.name if original.code_location.HasField("model_node") else ""
                if node and original.node_output:
                    key = (function, NODE, node)
                elif node:
                    seen = node_ops[(node, original.op_type)]
                    key = (function, NODE, node, original.op_type, seen.setdefault(original.var_name, len(seen)))
                else:
                    place = (where["file_path"], where["line"]) if where and "file_path" in where else (None, None)
                    seen = line_ops[(original.op_type, *place)]
                    key = (function, original.op_type, *place, seen.setdefault(original.var_name, len(seen)))
                keys.append(key)
                last = (key, original.op_type, where)
            if last is None:
                kernels[op.kernel] += 1
                key = (function, "kernel:" + op.kernel, None, None, kernels[op.kernel] - 1)
                out[op.op_id] = OpIdentity(key, "", None, op.op_name, op.kernel)
                continue
            key, op_type, where = last
            out[op.op_id] = OpIdentity(key, op_type, where, op.op_name, op.kernel, tuple(fused), tuple(keys))
    return out


def describe_key(key: tuple) -> str:
    """A short readable form of a key: "main:relax.exp @ model.py:12 #0", "main:node addmm_3"."""
    if len(key) > 1 and key[1] == NODE:
        function, _, node, *inner = key
        return f"{function}:node {node}" + (f" ({inner[0]} #{inner[1]})" if inner else "")
    function, op_type, path, line, occurrence = key
    where = f"{path.rsplit('/', 1)[-1]}:{line}" if path else "no source"
    return f"{function}:{op_type} @ {where} #{occurrence}"
