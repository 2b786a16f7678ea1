"""The kernel writes its own stats row (compile-time path): no summary call after it.

A separate summary kernel after each kernel is one more VM call per kernel (most of a tiny
kernel's cost) and, in the health modes, a second read of the output, from memory when it is
too large for the cache. So a kernel of an instrumented call site writes its output's row
itself where that saves work:

- NO_TENSOR (stamp): the cycle counter into each output row when the kernel is done;
- health modes (fuse), by counting.py's shape: an output too large for the cache
  (counting.IN_LOOP_BYTES) that one block stores one element per iteration is counted right
  after each store (< 0 and > 0 counts and a non-finite flag), its size, rank, dims and stamp
  written after the loop; when the flag says it holds a NaN or an infinity (rare), a packed
  call of the dtype's summary kernel (compiled once) counts it instead. A smaller output
  keeps the separate summary call: it reads the output back from cache, and adds no code to
  the kernel for LLVM to compile.

The same block can count an input it reads one element at a time, at its own indices (a
buffer of the output's shape): the Relax function's parameters, which a separate summary
kernel would otherwise read once more on every call. An input too large for the cache that
the output's block does not read (a fused kernel's first op reads it: `x * 1.0001` of
`x * 1.0001 + 0.5`) is counted the same way by the block that does. Each counted buffer has
its own counters and its own row. An input whose every NaN or infinity reaches the output at
the same position (counting.carries: `x * 1.0001 + 0.5` again) has no flag of its own: the
output's, when up, recounts it too. On a memory-bound kernel whose buffers stay in the last
level cache the loops are bound by their instructions, and each flag costs as much as a pass.

The kernel takes the stats buffer and the rows (the output's, then each counted input's) as
extra parameters; it only reads its buffers, so its outputs are bit-identical. Outputs of a
dtype without counts, of a shape that is not static, or of a rank over MAX_RANK keep the
separate summary call.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import tirx

from tvmdbg_tb.capture import counting, kernel_source

_INT64 = "int64"


@dataclass
class Counting:
    """A kernel that writes its rows: the new PrimFunc, the positions of the inputs it counts
    (their rows follow its output's), and the summary kernels it may call (registered names
    are "tvmdbg." + each)."""

    prim: tirx.PrimFunc
    stats: counting.StatsParams
    inputs: tuple[int, ...] = ()
    calls: tuple[str, ...] = ()
    # The output and its non-finite flag, for the inner check (a value that always reaches
    # the output at its position needs no flag of its own: counting.carries).
    flagged: tuple = ()


def _store(stats, row, column: int, value) -> tirx.Stmt:
    return tirx.BufferStore(stats, tirx.Cast("float64", value), [row, tirx.const(column, _INT64)])


def _stamp(stats, row) -> tirx.Stmt:
    cycles = tirx.call_llvm_intrin(_INT64, "llvm.readcyclecounter")
    return _store(stats, row, 0, cycles)


def stamp(prim: tirx.PrimFunc, outputs: int) -> Counting | None:
    """NO_TENSOR: prim stamping the rows row .. row + outputs - 1 when it is done."""
    realize = counting.root(prim.body)
    if realize is None or outputs < 1:
        return None
    stats = counting.StatsParams()
    row = stats.row
    stamps = [_stamp(stats.buffer, row + tirx.const(k, _INT64) if k else row) for k in range(outputs)]
    body = [*counting.top_statements(realize), *stamps]
    params = [*prim.params, stats.handle, row]
    return Counting(counting.with_root(prim, realize, body, [], params, stats.bind), stats)


class _Counts:
    """The counters of one counted buffer and the statements that update and write them."""

    def __init__(self, buffer, k: int, guard=None):
        """guard: the flag of another buffer that a NaN or an infinity of this one always
        reaches (counting.carries): raised, it recounts both; this one needs no flag."""
        self.buffer = buffer
        self.dtype = str(buffer.dtype)
        self.floating = self.dtype in counting.FLOATS
        self.lt = counting.counter(f"tvmdbg_lt{k}", self._count_dtype())
        self.gt = counting.counter(f"tvmdbg_gt{k}", self._count_dtype())
        own = self.floating and guard is None
        self.flag = counting.flag_buffer(self.dtype, f"tvmdbg_nf{k}") if own else None
        self.guard = self.flag if own else guard  # the flag whose raising recounts this buffer

    def _count_dtype(self) -> str:
        return "int32" if _size(self.buffer.shape) < (1 << 31) else _INT64

    def locals(self) -> list:
        return [self.lt, self.gt] + ([self.flag] if self.flag is not None else [])

    def clear(self) -> list:
        return [counting.clear(buffer) for buffer in self.locals()]

    def update(self, value) -> list:
        if self.dtype == "bool":
            return [counting.add(self.gt, value)]
        zero = tirx.const(0, self.dtype)
        out = [counting.add(self.lt, value < zero), counting.add(self.gt, value > zero)]
        if self.flag is not None:
            out.append(counting.note(self.flag, value, self.dtype))
        return out

    def write(self, stats, row) -> tuple[tirx.Stmt, str | None]:
        """The row's statements (or, when the flag is up, the summary kernel's packed call)
        and the summary kernel it may call."""
        shape = self.buffer.shape
        size = _size(shape)
        lt, gt = counting.value(self.lt), counting.value(self.gt)
        written = [
            _store(stats, row, 1, tirx.const(size, _INT64)),
            _store(stats, row, 2, lt),
            _store(stats, row, 3, gt),
            _store(stats, row, 4, tirx.const(size, _INT64) - tirx.Cast(_INT64, lt) - tirx.Cast(_INT64, gt)),
            _store(stats, row, 5, tirx.const(0, _INT64)),
            _store(stats, row, 6, tirx.const(0, _INT64)),
            _store(stats, row, 7, tirx.const(len(shape), _INT64)),
            *[_store(stats, row, 8 + i, dim) for i, dim in enumerate(shape)],
            _stamp(stats, row),  # last: a row is written once its stamp is
        ]
        if self.guard is None:
            return counting.seq(written), None
        name = kernel_source.kernel_name(self.dtype)
        recount = counting.packed("tvmdbg." + name, self.buffer, stats, row)
        return tirx.IfThenElse(counting.raised(self.guard), recount, counting.seq(written)), name


def fuse(prim: tirx.PrimFunc, position: int, inputs: tuple[int, ...] = ()) -> Counting | None:
    """prim writing the row of its output (parameter `position`) and of the parameters
    `inputs` that its output's block reads element by element, into the stats rows given as
    extra parameters (stats, the output's row, then one row per counted input); None when the
    output keeps the separate summary call."""
    if position >= len(prim.params) or not _countable(prim.params[position]):
        return None
    out = prim.params[position]
    if not counting.in_loop(out):
        return None  # the separate summary kernel reads it back from cache, at no LLVM cost
    realize = counting.root(prim.body)
    if realize is None:
        return None
    top = counting.top_statements(realize)
    written = hash(out)  # its node's address, as counting.walk notes the buffers a block writes
    writers = [(found.realize, found.loops) for stmt in top for found in counting.walk(stmt) if written in found.writes]
    if not writers:
        return None
    block = writers[0][0].block if len(writers) == 1 and _stores_each_element_once(*writers[0], out) else None
    if block is None:
        return None
    elementwise = _elementwise_blocks(top)
    counting_block = _counting_blocks(elementwise, block, prim.params, position, inputs)
    counted = tuple(counting_block)
    counts = [_Counts(out, 0)]
    for k, q in enumerate(counted, 1):
        # An input the output's own loop counts keeps its flag: without it LLVM interleaved
        # that loop and reloaded its constants (`x + 1` on 1M floats: 342 -> 376 us).
        elsewhere = not counting_block[q].same_as(block)
        carried = elsewhere and counts[0].flag is not None
        carried = carried and _carried_to(counting_block[q], prim.params[q], block, elementwise)
        counts.append(_Counts(prim.params[q], k, counts[0].flag if carried else None))
    counters = [block, *counting_block.values()]  # the block counting each of counts

    stats = counting.StatsParams()
    rows = [stats.row, *(tirx.Var(f"input_row{k}", _INT64) for k in range(len(counted)))]
    params = [*prim.params, stats.handle, *rows]

    def change(candidate):
        here = [c for c, counter in zip(counts, counters) if counter.same_as(candidate)]
        if not here:
            return candidate
        store = candidate.body
        updates = [stmt for c in here for stmt in c.update(tirx.BufferLoad(c.buffer, store.indices))]
        return counting.with_body(candidate, tirx.SeqStmt([store, *updates]))

    body = [stmt for c in counts for stmt in c.clear()]
    body += [counting.map_blocks(stmt, change) for stmt in top]
    calls = []
    for c, r in zip(counts, rows):
        stmt, name = c.write(stats.buffer, r)
        body.append(stmt)
        calls += [name] if name is not None else []
    local = [buffer for c in counts for buffer in c.locals()]
    prim = counting.with_root(prim, realize, body, local, params, stats.bind)
    flagged = ((out, counts[0].flag),) if counts[0].flag is not None else ()
    return Counting(prim, stats, counted, tuple(dict.fromkeys(calls)), flagged)


def _elementwise_blocks(top: list) -> list:
    """The blocks storing one element per iteration (of the buffer they store)."""
    return [
        realize.block
        for stmt in top
        for realize, loops in counting.realized(stmt)
        if isinstance(realize.block.body, tirx.BufferStore)
        and _stores_each_element_once(realize, loops, realize.block.body.buffer)
    ]


def _carried_to(block, buffer, output_block, elementwise: list) -> bool:
    """Whether a NaN or an infinity of buffer, which block reads element by element, always
    reaches the output output_block stores, at the same position (block after block of
    elementwise, counting.carries): then the output's flag stands for buffer's."""
    for _ in range(len(elementwise) + 1):
        store = block.body
        if not counting.carries(store.value, buffer, store.indices):
            return False
        if block.same_as(output_block):
            return True
        buffer = store.buffer
        block = next((b for b in elementwise if _read_elementwise(b, buffer, b.body.buffer.shape)), None)
        if block is None:
            return False
    return False


def _counting_blocks(elementwise: list, output_block, params, position: int, inputs: tuple[int, ...]) -> dict:
    """The parameters `inputs` counted in the kernel's loops, each with the block that counts
    it: the output's block when it reads it element by element, else (a buffer too large for
    the cache: a separate summary would read it from memory again) another block storing one
    element of a buffer of its shape per iteration and reading it at the same indices (an
    earlier op of a fused kernel: `x * 1.0001` of `x * 1.0001 + 0.5`; elementwise:
    _elementwise_blocks)."""
    out = params[position]
    found = {}
    for q in dict.fromkeys(inputs):
        if q == position or q >= len(params) or not _countable(params[q]):
            continue
        if _read_elementwise(output_block, params[q], out.shape):
            found[q] = output_block
        elif counting.in_loop(params[q]):
            reader = next((b for b in elementwise if _read_elementwise(b, params[q], b.body.buffer.shape)), None)
            if reader is not None:
                found[q] = reader
    return found


def _stores_each_element_once(realize, loops: tuple, buffer) -> bool:
    """Whether the block stores each element of buffer exactly once, in serial loops: spatial,
    no init, its body that one store at its own iteration variables, each bound to a loop of
    the buffer's extent from 0, under no predicate."""
    block = realize.block
    store = block.body
    if block.init is not None or len(block.match_buffers) or len(block.alloc_buffers):
        return False
    if not isinstance(store, tirx.BufferStore) or not store.buffer.same_as(buffer):
        return False
    if not (isinstance(realize.predicate, tirx.IntImm) and int(realize.predicate.value) == 1):
        return False
    if any(loop is None or loop.kind != tirx.ForKind.SERIAL or loop.thread_binding is not None for loop in loops):
        return False
    ivs = list(block.iter_vars)
    if any(int(iv.iter_type) != 0 for iv in ivs):
        return False
    if not len(buffer.shape):  # a scalar: one store under no loop
        return not len(store.indices) and not loops
    if len(ivs) != len(buffer.shape) or len(loops) != len(ivs):
        return False
    if len(store.indices) != len(ivs) or any(not i.same_as(iv.var) for i, iv in zip(store.indices, ivs)):
        return False
    for loop, iv, dim, bound in zip(loops, ivs, buffer.shape, realize.iter_values):
        if not bound.same_as(loop.loop_var) or not _is_zero(loop.min) or not _is_zero(iv.dom.min):
            return False
        if not tvm_ffi.structural_equal(loop.extent, dim) or not tvm_ffi.structural_equal(iv.dom.extent, dim):
            return False
    return True


def _size(shape) -> int:
    """The number of elements of a static shape (-1 when a dimension is symbolic)."""
    size = 1
    for dim in shape:
        if not isinstance(dim, tirx.IntImm):
            return -1
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
    return _size(shape) >= 0 and not len(buffer.strides) and _is_zero(buffer.elem_offset)


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
