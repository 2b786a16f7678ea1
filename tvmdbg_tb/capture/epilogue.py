"""Health counted inside the producing kernel (compile-time path, health modes).

The separate summary kernel reads each output a second time, after it left the cache: on a
1M-element output that pass costs 0.7x the kernel itself. Here the kernel that writes the
output counts it: the block storing each output element also adds that element's tests
(< 0, > 0 and, for floats, a running sum; == 0 is what they leave) into per-lane
accumulators, and the loop storing the output is split by LANES and vectorized, so the
counts ride in the same vector loop as the values. After the kernel's own loop nest the
lanes are summed into the row, when every element was finite; otherwise the guarded summary
kernel called right after the kernel (compiled.py) finds the row unwritten and counts NaN
and infinities exactly. The tests come from the summary kernel's own generator
(kernel_source.fused_source), so the counts are the same.

The same loop can count an input that the block reads element by element (one element at the
block's own indices, a buffer of the output's shape): the Relax function's parameters, which
the separate summary kernel would otherwise read once more on every call. Each counted buffer has its own accumulators and its own row.

The fused kernel takes the stats buffer and the rows (the output's, then each counted
input's) as extra parameters and replaces the original in the module. The counts stay in
the stats buffer, read once per VM call, so a GPU target would add no host synchronisation
either (its kernels are not fused today: their blocks are thread-bound). Any kernel whose
output is not stored by one complete spatial block, one element per iteration, in a loop that
splits into vectors, keeps the separate summary call; so do outputs under MIN_ELEMENTS.
"""

from __future__ import annotations

import threading

import tvm
import tvm_ffi
from tvm import s_tir, tirx

from tvmdbg_tb.capture import kernel_source

# Smaller outputs keep the separate summary kernel: it reads them back from cache, so counting
# in the producer saves no time there, while each fused kernel is one more copy of the
# counting code for LLVM to compile (the separate kernel is compiled once per dtype and rank).
MIN_ELEMENTS = 1 << 16
# 8 lanes compile faster than 16 (the first pass and its accumulators are compiled into every
# fused kernel) and count as fast (bench_fused_health.py).
LANES = 8

_TEMPLATES: dict[tuple[str, int, int], tuple[tirx.PrimFunc, int]] = {}
_LOCK = threading.Lock()


def _template(dtype: str, rank: int, instance: int = 0) -> tuple[tirx.PrimFunc, int]:
    """The fused form of the summary kernel of dtype/rank (parsed once per process and
    instance: each buffer counted in one kernel needs its own accumulators) and the index, in
    its body, of the placeholder loop whose innermost body holds the per-element counting
    statements."""
    key = (dtype, rank, instance)
    found = _TEMPLATES.get(key)
    if found is None:
        with _LOCK:
            found = _TEMPLATES.get(key)
            if found is None:
                name = f"tvmdbg_fused_{dtype}_r{rank}_{instance}"
                func = tvm.script.from_source(kernel_source.fused_source(name, dtype, rank, LANES))
                body = list(func.body.seq)
                index = next(k for k, s in enumerate(body) if _is_placeholder(s))
                found = _TEMPLATES[key] = (func, index)
    return found


def _is_placeholder(stmt) -> bool:
    inner = stmt.body if isinstance(stmt, tirx.For) else None
    return (
        isinstance(inner, tirx.For)
        and isinstance(inner.body, tirx.SeqStmt)
        and isinstance(inner.body.seq[0], tirx.Bind)
    )


def _element_statements(loop: tirx.For) -> tuple[list, object, object]:
    """The placeholder's statements: (counting stores, the element var, the lane var)."""
    body = loop.body.body  # for io: for j: [v = ..., lane = ..., stores...]
    statements = list(body.seq)
    element, lane = statements[0], statements[1]
    return statements[2:], element.var, lane.var


def _output_block(sch: s_tir.Schedule, buffer) -> object | None:
    """The only block writing buffer, when it stores each element exactly once: a spatial
    block, no init, no predicate, one loop per dimension bound to it in order from 0, its body
    one store at its own iteration variables."""
    writers = []
    for block_rv in sch.get_child_blocks(sch.get_sblock("root")):
        block = sch.get(block_rv)
        if any(region.source.same_as(buffer) for region in block.writes):
            writers.append(block_rv)
    if len(writers) != 1:
        return None
    block_rv = writers[0]
    block = sch.get(block_rv)
    store = block.body
    if block.init is not None or not isinstance(store, tirx.BufferStore) or not store.buffer.same_as(buffer):
        return None
    if any(int(iv.iter_type) != 0 for iv in block.iter_vars):  # 0: data parallel
        return None
    loops = sch.get_loops(block_rv)
    bindings = _realize_of(sch, sch.get_sref(block_rv))
    if bindings is None or not (isinstance(bindings.predicate, tirx.IntImm) and int(bindings.predicate.value) == 1):
        return None
    if not len(buffer.shape):  # a scalar: one store, under no loop
        return block_rv if not len(store.indices) and not len(loops) else None
    if len(store.indices) != len(block.iter_vars) or any(
        not index.same_as(iv.var) for index, iv in zip(store.indices, block.iter_vars)
    ):
        return None
    if len(loops) != len(block.iter_vars):
        return None
    for loop_rv, iv, dim, value in zip(loops, block.iter_vars, buffer.shape, bindings.iter_values):
        loop = sch.get(loop_rv)
        if not value.same_as(loop.loop_var) or not _is_zero(loop.min) or not _is_zero(iv.dom.min):
            return None
        if not tvm_ffi.structural_equal(loop.extent, dim) or not tvm_ffi.structural_equal(iv.dom.extent, dim):
            return None
    return block_rv


def _realize_of(sch: s_tir.Schedule, block_sref):
    """The SBlockRealize of a block (its bindings and predicate)."""
    parent = block_sref.parent
    if parent is None:
        return None
    container = sch.get(parent) if parent.stmt is not None else None
    stack = [container.body] if container is not None else []
    target = block_sref.stmt
    while stack:
        node = stack.pop()
        if isinstance(node, s_tir.SBlockRealize) and node.block.same_as(target):
            return node
        if isinstance(node, tirx.SeqStmt):
            stack.extend(node.seq)
        elif isinstance(node, tirx.For):
            stack.append(node.body)
    return None


def _size(shape) -> int:
    """The number of elements of a static shape, 0 when a dimension is symbolic."""
    size = 1
    for dim in shape:
        if not isinstance(dim, tirx.IntImm):
            return 0
        size *= int(dim.value)
    return size


def _is_zero(value) -> bool:
    return isinstance(value, tirx.IntImm) and int(value.value) == 0


def _countable(buffer) -> bool:
    """A dense buffer of a health dtype, static shape and supported rank."""
    dtype = str(getattr(buffer, "dtype", ""))
    shape = getattr(buffer, "shape", None)
    if dtype not in kernel_source.HEALTH_DTYPES or shape is None or len(shape) > kernel_source.MAX_RANK:
        return False
    return not len(buffer.strides) and _is_zero(buffer.elem_offset)


def _read_elementwise(block, buffer, shape) -> bool:
    """Whether block reads buffer (of the output's shape) one element at its own indices:
    then the block's loop nest visits each of its elements exactly once."""
    if len(buffer.shape) != len(shape) or not all(tvm_ffi.structural_equal(a, b) for a, b in zip(buffer.shape, shape)):
        return False
    for region in block.reads:
        if region.source.same_as(buffer):
            ranges = list(region.region)
            return len(ranges) == len(block.iter_vars) and all(
                r.min.same_as(iv.var) and isinstance(r.extent, tirx.IntImm) and int(r.extent.value) == 1
                for r, iv in zip(ranges, block.iter_vars)
            )
    return False


def fuse(
    prim: tirx.PrimFunc, position: int, inputs: tuple[int, ...] = ()
) -> tuple[tirx.PrimFunc, tuple[int, ...]] | None:
    """prim counting its output (parameter `position`) and those of the parameters `inputs`
    it reads element by element into the stats rows given as extra parameters (stats, the
    output's row, then one row per counted input), with the positions of the inputs it
    counts; None when it keeps the separate summary call."""
    if position >= len(prim.params):
        return None
    out = prim.params[position]
    shape = getattr(out, "shape", None)
    if not _countable(out) or _size(shape) < MIN_ELEMENTS:
        return None
    sch = s_tir.Schedule(tvm.IRModule({"main": prim}))
    block_rv = _output_block(sch, out)
    if block_rv is None:
        return None
    rank = len(shape)
    original = sch.get(block_rv)
    counted = tuple(
        q
        for q in dict.fromkeys(inputs)
        if q != position
        and q < len(prim.params)
        and _countable(prim.params[q])
        and _read_elementwise(original, prim.params[q], shape)
    )
    if rank:  # the innermost loop in vectors of LANES (the lane index then folds to a ramp)
        inner = sch.get_loops(block_rv)[-1]
        extent = sch.get(inner).extent
        if not isinstance(extent, tirx.IntImm) or int(extent.value) % LANES:
            return None  # counted as a scalar loop it would cost more than the separate pass
        _, lanes = sch.split(inner, [None, LANES])
        sch.vectorize(lanes)
    block = sch.get(block_rv)
    store = block.body
    lane_value = tirx.floormod(block.iter_vars[-1].var, tirx.const(LANES, "int64")) if rank else tirx.const(0, "int64")
    buffers = [out, *(prim.params[q] for q in counted)]
    templates = [_template(str(buffer.dtype), rank, k) for k, buffer in enumerate(buffers)]
    statements = [store]
    for buffer, (template, index) in zip(buffers, templates):
        counting, element, lane = _element_statements(template.body.seq[index])
        statements += [tirx.Bind(element, tirx.BufferLoad(buffer, store.indices)), tirx.Bind(lane, lane_value)]
        statements += counting
    counting_block = s_tir.SBlock(
        block.iter_vars,
        block.reads,
        block.writes,
        block.name_hint,
        tirx.SeqStmt(statements),
        None,
        block.alloc_buffers,
        block.match_buffers,
        block.annotations,
    )
    sch.state.replace(sch.get_sref(block_rv), counting_block, {block: counting_block})
    producer = sch.mod["main"]
    body = producer.body
    for template, index in reversed(templates):  # the output's accumulators outermost
        seq = list(template.body.seq)
        body = tirx.SeqStmt([*seq[:index], body, *seq[index + 1 :]])
    params, sources = list(producer.params), {}
    first_stats = templates[0][0].params[1]
    for k, (buffer, (template, _)) in enumerate(zip(buffers, templates)):
        source, stats, row = template.params
        params += [source, stats, row]
        sources[source] = buffer
        if k:  # one stats buffer: the other templates' stats are the first's
            sources[stats] = first_stats
    joined = tirx.PrimFunc(params, body, producer.ret_type, producer.attrs, producer.span)
    fused = joined.specialize(sources)
    if len(fused.params) != len(prim.params) + 2 + len(counted):
        return None
    return fused, counted
