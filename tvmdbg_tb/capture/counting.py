"""One code shape for what a kernel counts of the values it makes (epilogue.py: its output,
inner_check.py: its fused ops' values), cheap for LLVM to compile and to run.

A buffer that stays in cache is counted once it is complete, by a packed call of a summary
kernel compiled once (kernel_source: prebuilt into the wheel) on it: reading it back from
cache costs less than the call, and the kernel's own code gains no loop for LLVM to compile.
Any counting inside a kernel's loops is a reduction LLVM vectorizes and unrolls: ~15 ms of
LLVM time per counted loop (a real model's build has dozens of kernels), whatever is counted.

Only a buffer too large to stay in cache (IN_LOOP_BYTES) is counted in the loop that stores
it, where a second pass would read it from memory again: per value, integer work LLVM
vectorizes (the value's bits, sign cleared, plus the lowest exponent bit, OR-ed into a flag
whose top bit is then set when a value had every exponent bit set: NaN or an infinity; and
for an output its < 0 and > 0 counts). On the rare call where the flag is up, the same packed
call counts NaN, -inf and +inf exactly. Counting by kind in the loop (three compares and three
int64 sums per value) kept memory-bound loops from vectorizing (1.8x on a 1M-element op).
"""

from __future__ import annotations

import contextlib
import math
from typing import NamedTuple

import tvm
from tvm import s_tir, tirx
from tvm.ir.expr import Expr, TensorLoad  # TensorLoad: what tirx.BufferLoad makes

from tvmdbg_tb.capture.graphs import array_item as _array_item
from tvmdbg_tb.capture.graphs import array_size as _array_size
from tvmdbg_tb.capture.graphs import items
from tvmdbg_tb.capture.kernel_source import ROW_WIDTH

FLOATS = ("float16", "float32", "float64")
# Buffers of this size or more are counted in the loop that stores them (beyond most L2 caches).
IN_LOOP_BYTES = 1 << 21
# The flag's unsigned type, the mask clearing the sign and the lowest exponent bit: (bits &
# mask) + low never overflows and has its top bit set only when the exponent is all ones.
_FLAG = {
    "float16": ("uint16", 0x7FFF, 0x0400),
    "float32": ("uint32", 0x7FFF_FFFF, 0x0080_0000),
    "float64": ("uint64", 0x7FFF_FFFF_FFFF_FFFF, 0x0010_0000_0000_0000),
}


def in_loop(buffer) -> bool:
    """Whether buffer (of static shape) is counted in the loop that stores it."""
    size = 1
    for dim in items(buffer.shape):
        if not isinstance(dim, tirx.IntImm):
            return False
        size *= int(dim.value)
    dtype = str(buffer.dtype)
    return size * (1 if dtype == "bool" else int("".join(c for c in dtype if c.isdigit())) // 8) >= IN_LOOP_BYTES


def flag_buffer(dtype: str, name: str):
    """A one-element local flag for values of the float dtype."""
    return tirx.decl_buffer((1,), _FLAG[dtype][0], name=name, scope="local")


def clear(flag) -> tirx.Stmt:
    return tirx.BufferStore(flag, tirx.const(0, flag.dtype), [tirx.const(0, "int64")])


def note(flag, value, dtype: str) -> tirx.Stmt:
    """flag |= value's non-finite bit pattern (see the module docstring)."""
    unsigned, mask, low = _FLAG[dtype]
    bits = tirx.reinterpret(unsigned, value)
    term = tirx.bitwise_and(bits, tirx.const(mask, unsigned)) + tirx.const(low, unsigned)
    zero = [tirx.const(0, "int64")]
    return tirx.BufferStore(flag, tirx.bitwise_or(tirx.BufferLoad(flag, zero), term), zero)


def raised(flag) -> tirx.PrimExpr:
    """Whether a value noted in flag was NaN or an infinity."""
    unsigned = str(flag.dtype)
    top = 1 << (int(unsigned[4:]) - 1)
    return tirx.BufferLoad(flag, [tirx.const(0, "int64")]) >= tirx.const(top, unsigned)


def carries(value, buffer, indices) -> bool:
    """Whether a NaN or an infinity at buffer[indices] always makes value non-finite, so that
    a flag noting value stands for buffer's too (the flagged call recounts both): value reads
    buffer once, there, through adds and subtracts (of anything), multiplies (by a non-zero
    constant or a value read from memory: an infinity times zero is NaN, but a zero literal
    lets TVM fold the product away), a division's numerator and casts between float types."""
    return _reads(value, buffer) == 1 and _carried(value, buffer, indices)


def _carried(value, buffer, indices) -> bool:
    if isinstance(value, TensorLoad):
        return value.source.same_as(buffer) and all(a.same_as(b) for a, b in zip(value.indices, indices))
    if isinstance(value, tirx.Cast):
        return str(value.ty) in FLOATS and str(value.value.ty) in FLOATS and _carried(value.value, buffer, indices)
    if isinstance(value, (tirx.Add, tirx.Sub)):
        return _carried(value.a, buffer, indices) or _carried(value.b, buffer, indices)
    if isinstance(value, tirx.Mul):
        return any(
            _carried(mine, buffer, indices) and _nonzero(other)
            for mine, other in ((value.a, value.b), (value.b, value.a))
        )
    if isinstance(value, tirx.Div):
        return _carried(value.a, buffer, indices)
    return False


def _nonzero(value) -> bool:
    """A non-zero finite literal, or a value read from memory (possibly cast)."""
    if isinstance(value, tirx.Cast):
        value = value.value
    if isinstance(value, tirx.FloatImm):
        return value.value != 0 and math.isfinite(value.value)
    return isinstance(value, TensorLoad)


def _reads(value, buffer) -> int:
    """How many loads of buffer value holds."""
    if isinstance(value, TensorLoad):
        own = 1 if value.source.same_as(buffer) else 0
        return own + sum(_reads(index, buffer) for index in value.indices)
    children = [getattr(value, field, None) for field in _OPERANDS]
    children += list(getattr(value, "args", ()) or ())
    return sum(_reads(child, buffer) for child in children if isinstance(child, Expr))


_OPERANDS = ("a", "b", "value", "condition", "true_value", "false_value", "body", "base", "stride")


def counter(name: str, dtype: str = "int64"):
    """A one-element local counter."""
    return tirx.decl_buffer((1,), dtype, name=name, scope="local")


def add(count, test) -> tirx.Stmt:
    """count += test (a boolean expression)."""
    zero = [tirx.const(0, "int64")]
    return tirx.BufferStore(count, tirx.BufferLoad(count, zero) + tirx.Cast(count.dtype, test), zero)


def value(buffer) -> tirx.PrimExpr:
    return tirx.BufferLoad(buffer, [tirx.const(0, "int64")])


def packed(name: str, *args) -> tirx.Stmt:
    """A packed call of the registered function name (buffers passed as DLTensors)."""
    return tirx.Evaluate(tirx.call_packed(name, *args))


def size(buffer) -> tirx.PrimExpr:
    """How many elements buffer holds (an int64; a constant when its shape is static)."""
    shape = items(buffer.shape)  # one FFI read of the buffer's type
    if all(isinstance(dim, tirx.IntImm) for dim in shape):
        return tirx.const(math.prod(int(dim.value) for dim in shape), "int64")
    total = tirx.const(1, "int64")
    for dim in shape:
        total = total * tirx.Cast("int64", dim)
    return total


def loop_nest(buffer, body_of) -> tirx.Stmt:
    """Serial loops over every element of buffer, body_of(indices) inside."""
    index = [tirx.Var(f"i{k}", "int64") for k in range(len(buffer.shape))]
    stmt = body_of(index)
    for var, extent in reversed(list(zip(index, buffer.shape))):
        stmt = tirx.For(var, tirx.const(0, "int64"), tirx.Cast("int64", extent), tirx.ForKind.SERIAL, stmt)
    return stmt


def seq(statements: list) -> tirx.Stmt:
    return statements[0] if len(statements) == 1 else tirx.SeqStmt(statements)


# -- the stats parameters (both rewrites add them) ---------------------------------------------


class StatsParams:
    """The kernel's extra parameters for the call's stats buffer: the tensor as a bare handle
    (its data pointer read once; a Buffer parameter would add MakePackedAPI's checks of its
    type, rank, shape and strides to every kernel: ~3 ms of LLVM time each) and its row."""

    def __init__(self):
        self.handle = tirx.Var("tvmdbg_stats", "handle")
        data = tirx.Var("tvmdbg_stats_data", _pointer("float64"))
        shape_data = tirx.Var("tvmdbg_stats_shape", _pointer("int64"))
        shape = tirx.decl_buffer((2,), "int64", name="tvmdbg_stats_shape", data=shape_data)
        rows = tirx.Var("tvmdbg_rows", "int64")  # the buffer's rows, for the summary kernels it is passed to
        self.buffer = tirx.decl_buffer((rows, ROW_WIDTH), "float64", name="tvmdbg_stats", data=data)
        self.row = tirx.Var("row", "int64")
        self.bind = tirx.SeqStmt(
            [
                tirx.DeclBuffer(shape, data=_field(self.handle, _SHAPE, shape_data.ty)),
                tirx.Bind(rows, tirx.BufferLoad(shape, [tirx.const(0, "int64")])),
                tirx.DeclBuffer(self.buffer, data=_field(self.handle, _DATA, data.ty)),
            ]
        )


def _pointer(dtype: str):
    return tvm.ir.PointerType(tvm.ir.PrimType(dtype))


def _field(handle, kind: int, ty):
    return tirx.call_intrin(ty, "tirx.tvm_struct_get", handle, 0, kind)


_DATA, _SHAPE = 1, 2  # TVM's kArrData and kArrShape fields of a DLTensor (tvm_struct_get)


# -- the root block (both rewrites add to it) -------------------------------------------------


def root(stmt):
    """The root block's realize (the function body, or inside statements around it)."""
    if isinstance(stmt, s_tir.SBlockRealize):
        return stmt if stmt.block.name_hint == "root" else None
    if isinstance(stmt, tirx.SeqStmt):
        for item in stmt.seq:
            found = root(item)
            if found is not None:
                return found
    return None


def top_statements(realize) -> list:
    body = realize.block.body
    return items(body.seq) if isinstance(body, tirx.SeqStmt) else [body]


def with_root(
    prim: tirx.PrimFunc, realize, body: list, buffers: list, params: list, bind: tirx.Stmt | None = None
) -> tirx.PrimFunc:
    """prim with its root block's body replaced by body, buffers allocated in it, params, and
    bind (StatsParams.bind of new stats parameters) before the root block."""
    block = realize.block
    new_block = s_tir.SBlock(
        block.iter_vars,
        block.reads,
        block.writes,
        block.name_hint,
        seq(body),
        block.init,
        [*items(block.alloc_buffers), *buffers],
        block.match_buffers,
        block.annotations,
    )
    new_realize = s_tir.SBlockRealize(realize.iter_values, realize.predicate, new_block)
    new_body = _replace_root(prim.body, new_realize)
    if bind is not None:
        new_body = tirx.SeqStmt([bind, new_body])
    return tirx.PrimFunc(params, new_body, prim.ret_type, prim.attrs, prim.span)


def _replace_root(stmt, realize):
    if isinstance(stmt, s_tir.SBlockRealize) and stmt.block.name_hint == "root":
        return realize
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_replace_root(item, realize) for item in stmt.seq])
    return stmt


def realized(stmt, loops: tuple = ()) -> list:
    """(block realize, enclosing loops) of every block under stmt, in program order (None in
    loops marks a block or a branch between them)."""
    out: list = []
    _realized(stmt, loops, out)
    return out


def _realized(stmt, loops: tuple, out: list) -> None:
    # One list, no generator per level, and a sequence's items read by the two FFI calls its
    # __getitem__ wraps (Python index checks per item): a kernel is walked node by node.
    if isinstance(stmt, tirx.SeqStmt):
        seq = stmt.seq
        for i in range(_array_size(seq)):
            _realized(_array_item(seq, i), loops, out)
    elif isinstance(stmt, tirx.For):
        _realized(stmt.body, (*loops, stmt), out)
    elif isinstance(stmt, s_tir.SBlockRealize):
        out.append((stmt, loops))
        _realized(stmt.block.body, (*loops, None), out)
    elif isinstance(stmt, tirx.IfThenElse):
        _realized(stmt.then_case, (*loops, None), out)
        if stmt.else_case is not None:
            _realized(stmt.else_case, (*loops, None), out)


def blocks(stmt, loops: tuple = ()):
    """(block, enclosing loops) of every block under stmt, as realized() finds them."""
    for realize, enclosing in realized(stmt, loops):
        yield realize.block, enclosing


class Realized(NamedTuple):
    """One block under a statement, as walk() finds it (realized()'s order)."""

    realize: object
    loops: tuple
    block: object
    name: str
    writes: tuple[int, ...]  # hash() (the node's address) of each buffer the block writes


def walk(stmt) -> list[Realized]:
    """The blocks under stmt (realized()), each with its name and the buffers it writes: what
    epilogue.py and inner_check.py read of a kernel's blocks. Inside walks_cached() a
    statement is walked once (each FFI read of a block's fields costs a round trip: a kernel
    without an epilogue was walked three times, by epilogue.fuse, inner_check.owners and
    inner_check.add)."""
    cache = _WALKS.get("cache")
    if cache is None:
        return _walk(stmt)
    key = stmt.__chandle__()
    found = cache.get(key)
    if found is None:
        found = cache[key] = (stmt, _walk(stmt))  # the node kept alive: its address stays its own
    return found[1]


def _walk(stmt) -> list[Realized]:
    out = []
    for realize, loops in realized(stmt):
        block = realize.block
        writes = tuple(hash(region.source) for region in items(block.writes))
        out.append(Realized(realize, loops, block, str(block.name_hint), writes))
    return out


_WALKS: dict[str, dict] = {}  # "cache": statement address -> (statement, walk), inside walks_cached()


@contextlib.contextmanager
def walks_cached():
    """walk() remembering each statement's blocks while the block runs (one build's kernels:
    the nodes are immutable, and kept alive by the cache until it ends)."""
    outer = _WALKS.get("cache")
    if outer is not None:  # nested (or another thread's build): the outer one's cache serves
        yield
        return
    _WALKS["cache"] = {}
    try:
        yield
    finally:
        _WALKS.pop("cache", None)


def map_blocks(stmt, change):
    """stmt with each block reachable through loops and sequences replaced by change(block)."""
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([map_blocks(item, change) for item in stmt.seq])
    if isinstance(stmt, tirx.For):
        body = map_blocks(stmt.body, change)
        if body.same_as(stmt.body):
            return stmt
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding, stmt.annotations)
    if isinstance(stmt, s_tir.SBlockRealize):
        block = change(stmt.block)
        return stmt if block.same_as(stmt.block) else s_tir.SBlockRealize(stmt.iter_values, stmt.predicate, block)
    return stmt


def stored(block):
    """The store of a block whose body is one store, or that store followed by the updates
    of local counters epilogue.py appended after it; else None."""
    body = block.body
    if isinstance(body, tirx.SeqStmt):
        first, *rest = list(body.seq) or [None]
        if not all(isinstance(s, tirx.BufferStore) and str(s.buffer.scope()) == "local" for s in rest):
            return None
        body = first
    return body if isinstance(body, tirx.BufferStore) else None


def appended(block, statements: list) -> object:
    """block with statements after its body (with_body's regions)."""
    body = block.body
    items = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    return with_body(block, tirx.SeqStmt([*items, *statements]))


def with_body(block, body) -> object:
    """block with another body (its regions as they were: the added statements read buffers
    the block already reads, or local ones of the root block)."""
    return s_tir.SBlock(
        block.iter_vars,
        block.reads,
        block.writes,
        block.name_hint,
        body,
        block.init,
        block.alloc_buffers,
        block.match_buffers,
        block.annotations,
    )
