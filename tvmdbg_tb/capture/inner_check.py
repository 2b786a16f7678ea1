"""The inner-op check: a fused kernel counts the NaN and infinities its own Relax ops make.

FuseTIR merges a group of Relax ops into one kernel whose intermediate values live in
buffers allocated inside it (each op's output, and the temporaries of ops such as softmax)
and never leave it: a NaN that `where(mask, log(x), 0)` or `maximum(sqrt(x), 0)` makes and
masks does not show in the kernel's output. Here the kernel counts, for each of its ops,
the NaN, -inf and +inf its buffers held:

- a buffer that one block stores one element per iteration (element-wise ops, the common
  case) is counted in that block, on the value just stored: in the op's own loop;
- any other (a reduction's, one written by several blocks or under a vectorized or parallel
  loop) by a loop over it right after the loop nest that finished it, while it is in cache.

The counts go to the call's stats buffer (kernel_source's layout): the total to the
kernel's own row (INNER_COLUMN), each op's (nan, neg_inf, pos_inf) to rows of their own,
and, when any op made one, row 0's INNER_FLAG_COLUMN takes the call's start stamp, so a
call in which none did costs the reading side one comparison. The kernel only reads its
buffers: its outputs are bit-identical to the uninstrumented build's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tvm import s_tir, tirx
from tvm.ir.expr import TensorLoad  # what tirx.BufferLoad makes

from tvmdbg_tb.capture.kernel_source import INNER_COLUMN, INNER_FLAG_COLUMN, INNER_OPS_PER_ROW, ROW_WIDTH

_FLOATS = ("float16", "float32", "float64")
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

    @property
    def num_rows(self) -> int:
        return -(-len(self.ops) // INNER_OPS_PER_ROW)


def block_names(prim: tirx.PrimFunc) -> list[str]:
    """The names of a PrimFunc's blocks (not its root), in the order they run."""
    return [block.name_hint for block, _ in _blocks(_root(prim.body).block.body, ())]


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
    prim: tirx.PrimFunc, block_owner: dict[str, int], stats=None, row=None
) -> tuple[tirx.PrimFunc, InnerCheck] | None:
    """prim counting the non-finite values of its float intermediates, by op (block_owner:
    owners()), into the stats buffer: with new parameters (stats, row, inner_row) appended,
    or, when stats and row are given (the kernel counts its output already, epilogue.py),
    reusing them and appending inner_row only. None when no intermediate is countable."""
    root_realize = _root(prim.body)
    if root_realize is None:
        return None
    root = root_realize.block
    top = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    where: dict[str, int] = {}  # block name -> the top-level statement holding it
    blocks: dict[str, tuple] = {}  # block name -> (block, enclosing loops)
    for t, stmt in enumerate(top):
        for block, loops in _blocks(stmt, ()):
            where[block.name_hint] = t
            blocks[block.name_hint] = (block, loops)
    counted = []  # (buffer, op, the writing block's name when counted in it, else the statement after which)
    for buffer in root.alloc_buffers:
        if str(buffer.dtype) not in _FLOATS or str(buffer.scope()) not in ("", "global"):
            continue
        writers = [name for name, (block, _) in blocks.items() if any(r.source.same_as(buffer) for r in block.writes)]
        if not writers or any(name not in block_owner for name in writers):
            continue
        last = max(writers, key=lambda name: where[name])
        if len(writers) == 1 and _copies(blocks[last][0]):
            continue  # a reshape inside an op (batch_norm's): it only moves values
        op = block_owner[last]
        if len(writers) == 1 and _stores_elementwise(*blocks[last], buffer):
            counted.append((buffer, op, last, None))
        else:
            counted.append((buffer, op, None, where[last]))
    if not counted:
        return None
    ops = tuple(sorted({op for _, op, _, _ in counted}))
    acc = tirx.decl_buffer((len(counted), 3), "int64", name="tvmdbg_inner", scope="local")
    in_block = {name: j for j, (_, _, name, _) in enumerate(counted) if name is not None}
    after: dict[int, list[int]] = {}
    for j, (_, _, _, t) in enumerate(counted):
        if t is not None:
            after.setdefault(t, []).append(j)
    body = [_zero(acc, len(counted))]
    for t, stmt in enumerate(top):
        body.append(_map_blocks(stmt, lambda block: _counting_block(block, acc, in_block)))
        body += [_count_buffer(acc, j, counted[j][0]) for j in after.get(t, ())]
    params = list(prim.params)
    if stats is None:
        nrows = tirx.Var("nrows", "int64")
        stats = tirx.decl_buffer((nrows, ROW_WIDTH), "float64", name="tvmdbg_stats")
        row = tirx.Var("row", "int64")
        params += [stats, row]
    inner_row = tirx.Var("inner_row", "int64")
    params.append(inner_row)
    body += _write(stats, row, inner_row, acc, [op for _, op, _, _ in counted], ops)
    new_root = s_tir.SBlock(
        root.iter_vars,
        root.reads,
        root.writes,
        root.name_hint,
        tirx.SeqStmt(body),
        root.init,
        [*root.alloc_buffers, acc],
        root.match_buffers,
        root.annotations,
    )
    realize = s_tir.SBlockRealize(root_realize.iter_values, root_realize.predicate, new_root)
    new_body = _replace_root(prim.body, realize)
    return tirx.PrimFunc(params, new_body, prim.ret_type, prim.attrs, prim.span), InnerCheck(ops)


def _root(stmt):
    """The root block's realize (the function body, or inside the statements around it that
    epilogue.py adds)."""
    if isinstance(stmt, s_tir.SBlockRealize):
        return stmt if stmt.block.name_hint == "root" else None
    if isinstance(stmt, tirx.SeqStmt):
        for item in stmt.seq:
            found = _root(item)
            if found is not None:
                return found
    return None


def _replace_root(stmt, realize):
    if isinstance(stmt, s_tir.SBlockRealize) and stmt.block.name_hint == "root":
        return realize
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_replace_root(item, realize) for item in stmt.seq])
    return stmt


def _blocks(stmt, loops: tuple):
    """(block, enclosing loops) of every block under stmt, in program order."""
    if isinstance(stmt, tirx.SeqStmt):
        for item in stmt.seq:
            yield from _blocks(item, loops)
    elif isinstance(stmt, tirx.For):
        yield from _blocks(stmt.body, (*loops, stmt))
    elif isinstance(stmt, s_tir.SBlockRealize):
        yield stmt.block, loops
        yield from _blocks(stmt.block.body, (*loops, None))  # a nested block: never counted in place
    elif isinstance(stmt, tirx.IfThenElse):
        yield from _blocks(stmt.then_case, (*loops, None))
        if stmt.else_case is not None:
            yield from _blocks(stmt.else_case, (*loops, None))


def _stores_elementwise(block, loops: tuple, buffer) -> bool:
    """Whether block stores buffer once per iteration of serial loops, nothing else: a
    spatial block without init whose body is that one store."""
    if block.init is not None or len(block.match_buffers) or len(block.alloc_buffers):
        return False
    if any(int(iv.iter_type) != 0 for iv in block.iter_vars):  # 0: data parallel
        return False
    if any(loop is None or loop.kind not in _SERIAL or loop.thread_binding is not None for loop in loops):
        return False
    store = block.body
    return isinstance(store, tirx.BufferStore) and store.buffer.same_as(buffer)


def _copies(block) -> bool:
    """Whether block only stores a value it loads (a reshape, a copy): nothing it could make."""
    store = block.body
    return block.init is None and isinstance(store, tirx.BufferStore) and isinstance(store.value, TensorLoad)


def _map_blocks(stmt, change):
    """stmt with each block reachable through loops and sequences replaced by change(block)."""
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_map_blocks(item, change) for item in stmt.seq])
    if isinstance(stmt, tirx.For):
        body = _map_blocks(stmt.body, change)
        if body.same_as(stmt.body):
            return stmt
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding, stmt.annotations)
    if isinstance(stmt, s_tir.SBlockRealize):
        block = change(stmt.block)
        return stmt if block.same_as(stmt.block) else s_tir.SBlockRealize(stmt.iter_values, stmt.predicate, block)
    return stmt


def _tests(value, dtype: str) -> list:
    """Each count's test of one value: NaN, -inf, +inf."""
    return [tirx.isnan(value), value == tirx.const(float("-inf"), dtype), value == tirx.const(float("inf"), dtype)]


def _add_counts(acc, j: int, buffer, index) -> list:
    """acc row j += the tests of buffer[index]."""
    value = tirx.BufferLoad(buffer, index)
    return [
        tirx.BufferStore(acc, tirx.BufferLoad(acc, [j, c]) + tirx.Cast("int64", test), [j, c])
        for c, test in enumerate(_tests(value, str(buffer.dtype)))
    ]


def _counting_block(block, acc, in_block: dict[str, int]):
    j = in_block.get(block.name_hint)
    if j is None:
        return block
    store = block.body
    counts = _add_counts(acc, j, store.buffer, store.indices)
    return s_tir.SBlock(
        block.iter_vars,
        block.reads,
        block.writes,
        block.name_hint,
        tirx.SeqStmt([store, *counts]),
        block.init,
        block.alloc_buffers,
        block.match_buffers,
        block.annotations,
    )


def _count_buffer(acc, j: int, buffer):
    """A loop nest counting every element of buffer into acc row j."""
    index = [tirx.Var(f"i{k}", "int64") for k in range(len(buffer.shape))]
    stmt = tirx.SeqStmt(_add_counts(acc, j, buffer, index))
    for var, extent in reversed(list(zip(index, buffer.shape))):
        stmt = tirx.For(var, tirx.const(0, "int64"), tirx.Cast("int64", extent), tirx.ForKind.SERIAL, stmt)
    return stmt


def _zero(acc, n: int):
    j, c = tirx.Var("j", "int64"), tirx.Var("c", "int64")
    store = tirx.BufferStore(acc, tirx.const(0, "int64"), [j, c])
    zero = tirx.const(0, "int64")
    inner = tirx.For(c, zero, tirx.const(3, "int64"), tirx.ForKind.SERIAL, store)
    return tirx.For(j, zero, tirx.const(n, "int64"), tirx.ForKind.SERIAL, inner)


def _write(stats, row, inner_row, acc, buffer_ops: list[int], ops: tuple[int, ...]) -> list:
    """The stores of the counts: each op's (nan, neg_inf, pos_inf) in its slot of the inner
    rows, their total in the kernel's row, and row 0's flag when the total is not 0."""
    out = []
    total = None
    for slot, op in enumerate(ops):
        mine = [j for j, owner in enumerate(buffer_ops) if owner == op]
        r = inner_row + tirx.const(slot // INNER_OPS_PER_ROW, "int64")
        for c in range(3):
            count = tirx.BufferLoad(acc, [mine[0], c])
            for j in mine[1:]:
                count = count + tirx.BufferLoad(acc, [j, c])
            total = count if total is None else total + count
            column = tirx.const(3 * (slot % INNER_OPS_PER_ROW) + c, "int64")
            out.append(tirx.BufferStore(stats, tirx.Cast("float64", count), [r, column]))
    column = tirx.const(INNER_COLUMN, "int64")
    out.append(tirx.BufferStore(stats, tirx.Cast("float64", total), [row, column]))
    zero = tirx.const(0, "int64")
    stamp = tirx.BufferLoad(stats, [zero, zero])
    flag = tirx.BufferStore(stats, stamp, [zero, tirx.const(INNER_FLAG_COLUMN, "int64")])
    out.append(tirx.IfThenElse(total > tirx.const(0, "int64"), flag, None))
    return out
