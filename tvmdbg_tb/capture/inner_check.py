"""The inner-op check: a fused kernel counts the NaN and infinities its own Relax ops make.

FuseTIR merges a group of Relax ops into one kernel whose intermediate values live in
buffers allocated inside it (each op's output, and the temporaries of ops such as softmax)
and never leave it: a NaN that `where(mask, log(x), 0)` or `maximum(sqrt(x), 0)` makes and
masks does not show in the kernel's output. Here the kernel counts, for each of its ops,
the NaN, -inf and +inf its buffers held:

Counting is counting.py's shape: once a buffer is complete, a packed call of the recount
kernel compiled once (kernel_source.recount_source) on each buffer, still in cache, counts by
kind; a buffer too large for the cache (counting.IN_LOOP_BYTES) is instead flagged as it is
made (one integer OR per value, which LLVM vectorizes with the op's loop): in the block that
stores one element per iteration (element-wise ops), else by a loop over it right after the
loop nest that finished it; only on a call where its flag is up is it recounted. A buffer
whose every NaN or infinity reaches the kernel's flagged output at the same position
(epilogue.py's; counting.carries) has no flag of its own: the output's stands for it. The counts
go to the call's stats buffer (kernel_source's layout): the total to the kernel's own row
(INNER_COLUMN, the cells' sum, which the recount kernel adds to: 0 on every call where no op
made one), each op's (nan, neg_inf, pos_inf) to rows of their own, and, when any op made one,
row 0's INNER_FLAG_COLUMN takes the call's start stamp, so a call in which none did costs the
reading side one comparison. The kernel only reads its buffers: its outputs are bit-identical
to the uninstrumented build's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tvm_ffi
from tvm import tirx
from tvm.ir.expr import TensorLoad  # what tirx.BufferLoad makes

from tvmdbg_tb.capture import counting
from tvmdbg_tb.capture.kernel_source import (
    INNER_COLUMN,
    INNER_OPS_PER_ROW,
    RECOUNT_ARGUMENTS,
    recount_name,
)

# Ops that only move, select or compare values: from finite inputs they make finite outputs,
# so a non-finite value in theirs came from before them (another op, or an input). Their
# buffers are not counted: less code for LLVM to compile, and nothing lost.
PASS_THROUGH = frozenset(
    f"relax.{name}"
    for name in [
        *["reshape", "permute_dims", "broadcast_to", "expand_dims", "squeeze", "flatten", "layout_transform"],
        *["take", "strided_slice", "dynamic_strided_slice", "concat", "split", "repeat", "tile", "flip"],
        *["gather_elements", "gather_nd", "nn.relu", "maximum", "minimum", "max", "min"],
    ]
)
_SERIAL = (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED)


@dataclass
class InnerCheck:
    """What a kernel made to check its ops counts: the fused function's op index of each
    slot of its inner rows, in layout order (slot s: row inner_row + s // INNER_OPS_PER_ROW,
    columns 3 * (s % INNER_OPS_PER_ROW) + 0, 1, 2: nan, neg_inf, pos_inf)."""

    ops: tuple[int, ...]
    calls: tuple[str, ...] = ()  # the recount kernels it may call (registered as "tvmdbg." + each)

    @property
    def num_rows(self) -> int:
        return -(-len(self.ops) // INNER_OPS_PER_ROW)


def block_names(prim: tirx.PrimFunc) -> list[str]:
    """The names of a PrimFunc's blocks (not its root), in the order they run."""
    return [found.name for stmt in counting.top_statements(counting.root(prim.body)) for found in counting.walk(stmt)]


def owners(prim: tirx.PrimFunc, member_blocks: list[list[str] | None]) -> dict[str, int] | None:
    """Which op (index into member_blocks, the fused function's bindings in order, each with
    its PrimFunc's block names or None for a binding without one) each block of the fused
    kernel prim comes from. FuseTIR inlines the ops' blocks in order, renumbering the names
    it has seen (`compute` -> `compute1`, `T_add_1` -> `T_add_4`); None when the kernel's
    blocks do not follow them."""
    found = block_names(prim)
    expected = [(k, name) for k, names in enumerate(member_blocks) for name in names or ()]
    if len(found) != len(expected):
        return None
    out = {}
    for name, (k, original) in zip(found, expected):
        if _NUMBERED.sub("", name) != _NUMBERED.sub("", original):
            return None
        out[name] = k
    return out


_NUMBERED = re.compile(r"_?\d+$")


def add(
    prim: tirx.PrimFunc, block_owner: dict[str, int], stats: counting.StatsParams | None = None, flagged: tuple = ()
) -> tuple[tirx.PrimFunc, InnerCheck] | None:
    """prim counting the non-finite values of its float intermediates, by op (block_owner:
    owners()), into the stats buffer: with new parameters (stats, row, inner_row) appended,
    or, when stats is given (the kernel writes its output's row already, epilogue.py),
    reusing them and appending inner_row only. None when no intermediate is countable.
    flagged: (buffer, flag) of the kernel's flagged output (epilogue.Counting.flagged): an
    intermediate whose every NaN or infinity reaches it needs no flag of its own."""
    realize = counting.root(prim.body)
    if realize is None:
        return None
    top = counting.top_statements(realize)
    where: dict[str, int] = {}  # block name -> the top-level statement holding it
    blocks: dict[str, tuple] = {}  # block name -> (block, enclosing loops)
    written_by: dict[int, list[str]] = {}  # hash(buffer) (its address) -> the blocks writing it
    for t, stmt in enumerate(top):
        for found in counting.walk(stmt):
            name = found.name
            where[name] = t
            blocks[name] = (found.block, found.loops)
            for written in found.writes:
                written_by.setdefault(written, []).append(name)
    # (buffer, op, the writing block's name when flagged in it, the statement after which it is
    # flagged by a loop, or neither: recounted once complete; the flag of a flagged buffer that
    # carries its NaN and infinities, which then stands for its own)
    counted = []
    complete: dict[int, list[int]] = {}  # top statement -> the counted buffers it completes
    for buffer in counting.items(realize.block.alloc_buffers):
        if str(buffer.dtype) not in counting.FLOATS or str(buffer.scope()) not in ("", "global"):
            continue
        writers = list(dict.fromkeys(written_by.get(hash(buffer), ())))
        if not writers or any(name not in block_owner for name in writers):
            continue
        last = max(writers, key=lambda name: where[name])
        if len(writers) == 1 and _copies(blocks[last][0]):
            continue  # a reshape inside an op (batch_norm's): it only moves values
        op = block_owner[last]
        carrier = _carrier(buffer, flagged, written_by, blocks)
        complete.setdefault(where[last if carrier is None else carrier[1]], []).append(len(counted))
        if carrier is not None:
            counted.append((buffer, op, None, None, carrier[0]))
        elif not counting.in_loop(buffer):
            counted.append((buffer, op, None, None, None))
        elif len(writers) == 1 and _stores_elementwise(*blocks[last], buffer):
            counted.append((buffer, op, last, None, None))
        else:
            counted.append((buffer, op, None, where[last], None))
    if not counted:
        return None
    ops = tuple(sorted({op for _, op, *_ in counted}))
    own = [
        counting.flag_buffer(str(buffer.dtype), f"tvmdbg_inner{j}") if name is not None or t is not None else None
        for j, (buffer, _, name, t, _) in enumerate(counted)
    ]
    flags = [guard if guard is not None else flag for flag, (*_, guard) in zip(own, counted)]
    in_block = {name: j for j, (_, _, name, _, _) in enumerate(counted) if name is not None}
    after: dict[int, list[int]] = {}
    for j, (_, _, _, t, _) in enumerate(counted):
        if t is not None:
            after.setdefault(t, []).append(j)
    params = list(prim.params)
    bind = None
    if stats is None:
        stats = counting.StatsParams()
        params += [stats.handle, stats.row]
        bind = stats.bind
    inner_row = tirx.Var("inner_row", "int64")
    params.append(inner_row)
    cells = _Cells(stats, inner_row, ops)
    body = [counting.clear(flag) for flag in own if flag is not None] + cells.prepare()
    for t, stmt in enumerate(top):  # only blocks flagging what they store change (none in most kernels)
        body.append(counting.map_blocks(stmt, lambda b: _counting_block(b, flags, in_block)) if in_block else stmt)
        body += [_count_buffer(flags[j], counted[j][0]) for j in after.get(t, ())]
        body += [cells.recount(counted[j][0], counted[j][1], flags[j]) for j in complete.get(t, ())]
    calls = tuple(dict.fromkeys(recount_name(str(buffer.dtype)) for buffer, *_ in counted))
    local = [flag for flag in own if flag is not None]
    return counting.with_root(prim, realize, body, local, params, bind), InnerCheck(ops, calls)


# The recount call's arguments on the stack (TVM's TVMStructFieldKind of a TVMFFIAny, and
# tvm_ffi's type indices: None 0, int 1, opaque pointer 4): kernel_source.RECOUNT_ARGUMENTS in
# their order, then its result.
_TYPE_INDEX, _ZERO_PADDING, _VALUE = 13, 14, 15
_SLOT = {name: slot for slot, name in enumerate(RECOUNT_ARGUMENTS)}
_RESULT = len(RECOUNT_ARGUMENTS)
_ARG_KINDS = (*({"size": 1}.get(name, 4) for name in RECOUNT_ARGUMENTS), 0)


def _set(args, slot: int, field: int, value) -> tirx.Stmt:
    return tirx.Evaluate(tirx.tvm_struct_set(args, slot, field, value))


def _carrier(buffer, flagged: tuple, written_by: dict, blocks: dict) -> tuple | None:
    """(flag, writing block's name) of a flagged buffer of buffer's shape whose one writer
    stores each element from buffer's at the same position, carrying its NaN and infinities
    (counting.carries): a recount of buffer when that flag is up, after that block's loops,
    counts exactly what a flag of its own would have. None when there is none."""
    for target, flag in flagged:
        names = list(dict.fromkeys(written_by.get(hash(target), ())))
        if len(names) != 1 or len(target.shape) != len(buffer.shape):
            continue
        if not all(tvm_ffi.structural_equal(a, b) for a, b in zip(target.shape, buffer.shape)):
            continue
        store = counting.stored(blocks[names[0]][0])
        if store is not None and store.buffer.same_as(target) and counting.carries(store.value, buffer, store.indices):
            return flag, names[0]
    return None


def _stores_elementwise(block, loops: tuple, buffer) -> bool:
    """Whether block stores buffer once per iteration of serial loops, nothing else: a
    spatial block without init whose body is that one store."""
    if block.init is not None or len(block.match_buffers) or len(block.alloc_buffers):
        return False
    if any(int(iv.iter_type) != 0 for iv in block.iter_vars):  # 0: data parallel
        return False
    if any(loop is None or loop.kind not in _SERIAL or loop.thread_binding is not None for loop in loops):
        return False
    store = counting.stored(block)
    return store is not None and store.buffer.same_as(buffer)


def _copies(block) -> bool:
    """Whether block only stores a value it loads (a reshape, a copy): nothing it could make."""
    store = counting.stored(block)
    return block.init is None and store is not None and isinstance(store.value, TensorLoad)


def _counting_block(block, flags: list, in_block: dict[str, int]):
    j = in_block.get(block.name_hint)
    if j is None:
        return block
    store = counting.stored(block)
    noted = counting.note(flags[j], tirx.BufferLoad(store.buffer, store.indices), str(store.buffer.dtype))
    return counting.appended(block, [noted])


def _count_buffer(flag, buffer):
    """A loop nest noting every element of buffer in its flag."""
    return counting.loop_nest(
        buffer, lambda index: counting.note(flag, tirx.BufferLoad(buffer, index), str(buffer.dtype))
    )


class _Cells:
    """The stats cells of a kernel's inner check: each op's (nan, neg_inf, pos_inf) in its slot
    of the inner rows, their total in the kernel's own row, and row 0's flag. The kernel adds
    to the cells without zeroing them first: they are 0 when it starts, the host keeping them
    so (a new buffer is zeros; a buffer whose call flagged row 0, or that was not cleared
    after its call, is zeroed whole by its next taker: native_rows' Call leaves it,
    native_call's Stats and fast_tracer._stats zero it). Three stores of 0 at the kernel's
    start cost LLVM ~7M instructions (~1 ms) in a ResNet batch_norm kernel: its alias queries
    against the kernel's other accesses, not the stores."""

    def __init__(self, params: counting.StatsParams, inner_row, ops: tuple[int, ...]):
        self.stats, self.row, self.inner_row = params.buffer, params.row, inner_row
        self.slot_of = {op: slot for slot, op in enumerate(ops)}
        self.total = [self.row, tirx.const(INNER_COLUMN, "int64")]
        self.args = tirx.Var("tvmdbg_args", "handle")  # the recount calls' stack (prepare())
        # Each row's index expression and each column's constant, made once and shared by the
        # cells' stores and loads (immutable nodes: the same IR, fewer FFI constructions).
        self._rows: dict[int, object] = {}
        self._columns: dict[int, object] = {}

    def cell(self, slot: int, c: int) -> list:
        r, column = slot // INNER_OPS_PER_ROW, 3 * (slot % INNER_OPS_PER_ROW) + c
        row = self._rows.get(r)
        if row is None:
            row = self._rows[r] = self.inner_row + tirx.const(r, "int64")
        index = self._columns.get(column)
        if index is None:
            index = self._columns[column] = tirx.const(column, "int64")
        return [row, index]

    def prepare(self) -> list:
        """The recount calls' argument stack (kernel_source.recount_source's data, size,
        cells, total, start; the result), its type indices, the kernel's total cell (its
        row's INNER_COLUMN) and row 0 set once: each call then sets three values only."""
        out = [tirx.Bind(self.args, tirx.tvm_stack_alloca("tvm_ffi_any", len(_ARG_KINDS)))]
        for slot, kind in enumerate(_ARG_KINDS):
            out.append(_set(self.args, slot, _TYPE_INDEX, kind))
            out.append(_set(self.args, slot, _ZERO_PADDING, 0))
        zero = tirx.const(0, "int64")
        out.append(_set(self.args, _SLOT["total"], _VALUE, tirx.address_of(tirx.BufferLoad(self.stats, self.total))))
        out.append(_set(self.args, _SLOT["start"], _VALUE, tirx.address_of(tirx.BufferLoad(self.stats, [zero, zero]))))
        out.append(_set(self.args, _RESULT, _VALUE, zero))
        return out

    def recount(self, buffer, op: int, flag) -> tirx.Stmt:
        """The recount kernel's packed call on buffer (a flagged one's only when its flag is
        up), placed right after the statement that completes buffer: the buffer lives no
        longer than in the uninstrumented kernel, so TVM reuses its storage as it does there
        (a call at the kernel's end kept every counted buffer alive to the end, and LLVM
        compiled the copies that reuse made unnecessary: up to 25 ms for one kernel). It
        passes the buffer's data pointer and size and the address of the op's first cell
        (kernel_source.recount_source: fewer arguments, less code at each call site; the
        recount raises the kernel's total and row 0's flag), already lowered: the three values
        into the stack prepare() typed, the result back to None, the call. T.call_packed's
        lowering sets each argument's type index and padding again at each call and tests each
        pointer for null to type it (a branch per pointer): ~0.9M fewer instructions of LLVM a
        call site (a ResNet batch_norm kernel of 6 calls: 583M -> 577M)."""
        name = "tvmdbg." + recount_name(str(buffer.dtype))
        cells = tirx.address_of(tirx.BufferLoad(self.stats, self.cell(self.slot_of[op], 0)))
        call = tirx.Evaluate(tirx.call_packed_lowered(name, self.args, 0, _RESULT))
        stores = [
            _set(self.args, _SLOT["data"], _VALUE, buffer.data),
            _set(self.args, _SLOT["size"], _VALUE, counting.size(buffer)),
            _set(self.args, _SLOT["cells"], _VALUE, cells),
            _set(self.args, _RESULT, _TYPE_INDEX, 0),
            call,
        ]
        body = tirx.SeqStmt(stores)
        return body if flag is None else tirx.IfThenElse(counting.raised(flag), body, None)
