"""Health counted inside the producing kernel (compile-time path, health modes).

A kernel call site whose callee is a TIR PrimFunc of the module, with one contiguous output
of a health dtype, calls a copy of that PrimFunc instead: the copy takes the stats buffer
and the row as two extra parameters and, after its own loop nest, runs the same counting
code as the separate summary kernel (compiled._summary_source, so counts are bit-identical)
on its output and stamps the row. One VM call per kernel instead of two, and the output is
read while it is still in cache; no host synchronisation is added (the counts stay in the
device-visible stats buffer read once per VM call). Extern/packed kernels, in-place and
multi-output sites and FULL_STATS keep the separate summary call (compiled.py).
"""

from __future__ import annotations

import threading

import tvm
from tvm import relax, tirx

from tvmdbg_tb.instrument import compiled

ENABLED = True  # tests and the bench compare with the separate summary call

_TEMPLATES: dict[tuple[str, int], tirx.PrimFunc] = {}
_LOCK = threading.Lock()


def _template(dtype: str, rank: int) -> tirx.PrimFunc:
    """The FULL_HEALTH summary kernel of dtype/rank as TIR (parsed once per process)."""
    key = (dtype, rank)
    found = _TEMPLATES.get(key)
    if found is None:
        with _LOCK:
            found = _TEMPLATES.get(key)
            if found is None:
                name = compiled._summary_name(dtype, rank, True)
                found = _TEMPLATES[key] = tvm.script.from_source(compiled._summary_source(name, dtype, rank, True))
    return found


def _contiguous(buffer) -> bool:
    if len(buffer.strides):
        return False
    offset = buffer.elem_offset
    return isinstance(offset, tirx.IntImm) and int(offset.value) == 0


def fused_kernel(mod, callee: relax.GlobalVar, position: int, cache: dict) -> relax.GlobalVar | None:
    """The GlobalVar of callee's copy that also writes its output's row (output = parameter
    `position`), added to mod once per (callee, position); None when the site keeps the
    separate summary call (never raises: any surprise keeps the separate call)."""
    key = (callee.name_hint, position)
    if key not in cache:
        try:
            cache[key] = _fuse(mod, callee, position)
        except Exception:
            cache[key] = None
    return cache[key]


def _fuse(mod, callee: relax.GlobalVar, position: int) -> relax.GlobalVar | None:
    prim = mod[callee] if any(g.same_as(callee) for g in mod.get_global_vars()) else None
    if not isinstance(prim, tirx.PrimFunc) or position >= len(prim.params):
        return None
    out = prim.params[position]  # buffer parameters are buffer-typed Vars in this TIR
    if not hasattr(out, "strides") or len(out.strides) or str(out.dtype) not in compiled.HEALTH_DTYPES:
        return None
    offset = out.elem_offset
    if not (hasattr(offset, "value") and int(offset.value) == 0):
        return None
    rank = len(out.shape)
    if rank > compiled.MAX_RANK:
        return None
    template = _template(str(out.dtype), rank)
    source, stats, row = template.params
    body = tirx.SeqStmt([prim.body, template.body])
    joined = tirx.PrimFunc([*prim.params, source, stats, row], body, prim.ret_type, prim.attrs, prim.span)
    fused = joined.specialize({source: out})  # the counting code reads the kernel's own output
    if len(fused.params) != len(prim.params) + 2:
        return None
    name = f"{callee.name_hint}_tvmdbg_health{position}"
    fused = fused.with_attr("global_symbol", name)
    gvar = relax.GlobalVar(name)
    mod[gvar] = fused
    return gvar
