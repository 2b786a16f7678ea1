"""Lines through passes the user applies before the build, or runs first in the build's own
pipeline (PipelinePasses): an op a pass made in place of the user's keeps the user's op, line
and identity (OriginalOp.rewritten_by names the pass).

`relax.transform.ToMixedPrecision()(mod)` re-creates most vars (re-typed ops, with the old
names reused for other ops) and inserts casts; `FastMathTransform()(mod)` keeps the vars but
swaps exp/tanh/softmax for calls of fast_* PrimFuncs, which carry no span (TVMScript's line)
and another op type. Without help, such ops inherit the line of their first consumer, or of
another op that happens to reuse their name. While tvmdbg records, every top-level pass call
outside a build (Pass.__call__, wrapped by capture.install) maps its output module onto its
input, function by function, and registers each output var the build will meet:

- a var the pass kept: the input op's entry (its emit record, or its TVMScript span), marked
  rewritten when the op changed (fast_exp for exp);
- a new var: the input op computing the same thing, matched by op and operands (operands
  mapped the same way, looking through the casts the pass inserted, parameters by position),
  else the one op the pass removed that reads the same operands, the removed ops it read
  looked through, and that the new op is named after (FuseTransposeMatmul's NT_matmul(x, w)
  for matmul(x, permute_dims(w)));
- a new cast of an op's output: that op's entry (the same value in another dtype, so it
  compares with the op); any other new op: no line of its own, so collect_origins gives it
  its consumer's.
"""

from __future__ import annotations

import threading
from collections import defaultdict

import tvm
from tvm import relax

from tvmdbg_tb.capture import graphs
from tvmdbg_tb.capture.graphs import Emitted

_CAST = "relax.astype"


class _Depth(threading.local):
    value = 0


_DEPTH = _Depth()


def wrap_pass_call(original, current, active):
    """Pass.__call__ that records the lineage of a top-level call while active() is True,
    in current().registry (the capture state in force: capture.hooks.CaptureState)."""

    def __call__(self, mod, *args, **kwargs):
        if _DEPTH.value or not active() or not isinstance(mod, tvm.IRModule):
            return original(self, mod, *args, **kwargs)
        _DEPTH.value += 1
        try:
            result = original(self, mod, *args, **kwargs)
        finally:
            _DEPTH.value -= 1
        try:
            if isinstance(result, tvm.IRModule) and not result.same_as(mod):
                record(mod, result, _pass_name(self), current().registry)
        except Exception:  # lineage is best effort; never break the user's pass
            pass
        return result

    __call__.__wrapped__ = original
    __call__.__doc__ = original.__doc__
    return __call__


# Where a build's pipeline starts lowering the user's ops: the passes before the first of these
# rewrite ops as a pass applied before the build would (FuseTransposeMatmul, as MLC-LLM runs it).
_LOWERING = frozenset({"LegalizeOps", "FuseOps", "FuseTIR", "ToNonDataflow", "RemovePurityChecking", "CallTIRRewrite"})


class PipelinePasses:
    """Follows the passes a build's pipeline runs before it lowers ops like those applied before
    the build (record): fed by a pass instrument (capture.hooks._Snapshots), it records the
    outermost passes that end before the first lowering pass starts, in the order they end (a
    pass's inner passes are covered by its own record; one that spans the lowering is not)."""

    def __init__(self, registry) -> None:
        self.registry = registry
        self.running: list[tuple[object, str, list]] = []  # (input module, name, inner passes ended)
        self.ended: list[tuple[object, object, str]] = []  # outermost passes ended: (input, output, name)
        self.lowering = False
        self.lowered = None  # the module the lowering starts from: the vars the build's ops keep

    def before(self, mod, name: str) -> None:
        if self.lowering:
            return
        if name in _LOWERING:
            self.lowered = mod
            self.finish()
            return
        self.running.append((mod, name, []))

    def after(self, mod, name: str) -> None:
        if self.lowering or not self.running:
            return
        before, started, _ = self.running.pop()
        if started == name:
            (self.running[-1][2] if self.running else self.ended).append((before, mod, name))

    def finish(self) -> None:
        """Records the passes ended so far (once: at the first lowering pass, or the build's end)."""
        if self.lowering:
            return
        self.lowering = True
        for before, after, name in [*self.ended, *(p for _, _, inner in self.running for p in inner)]:
            try:
                if isinstance(after, tvm.IRModule) and not after.same_as(before):
                    record(before, after, name, self.registry)
            except Exception:  # lineage is best effort; never break the build
                pass
        self.running, self.ended = [], []


def _pass_name(pass_obj) -> str:
    try:
        return str(pass_obj.info.name)
    except Exception:
        return type(pass_obj).__name__


def record(before, after, pass_name: str, registry) -> None:
    """Registers in registry (capture.EmitRegistry) the entries of after's vars (see module
    doc), for every Relax function both modules hold."""
    functions = dict(graphs._relax_functions(before, primitive=False))
    for name, func in graphs._relax_functions(after, primitive=False):
        old = functions.get(name)
        if old is not None and not old.same_as(func):
            _record_function(old, func, name, pass_name, registry)


def _entry(registry, binding, function_name: str) -> Emitted | None:
    """What the build would know of an input binding: its emit record, else its span."""
    var, value = binding.var, binding.value
    entry = registry.lookup(var) or registry.lookup_value(value)
    if entry is not None:
        return entry
    frames, user_index = graphs._span_frames(value, function_name)
    # Without a span (the outer call of a TVMScript statement) the op type alone: the build
    # locates it as it would have located the user's op.
    return Emitted(graphs.op_type_of(value), frames, user_index, str(var.name), from_span=bool(frames))


def _made(pass_name: str, op_type: str) -> str:
    """ "FastMathTransform: fast_exp" (a PrimFunc call by its PrimFunc), "ToMixedPrecision:
    relax.astype"."""
    return f"{pass_name}: {op_type.split(':', 1)[1] if ':' in op_type else op_type}"


def _rewritten(entry: Emitted, pass_name: str, op_type: str) -> Emitted:
    made = _made(pass_name, op_type)
    return Emitted(entry.op_type, entry.frames, entry.user_index, entry.var_name, entry.node, made, entry.from_span)


class _Resolver:
    """Operands as keys comparable across the two functions: parameters by position,
    constants alike, vars of the input function by identity (after's mapped onto before's),
    casts the pass inserted looked through."""

    def __init__(self, params):
        self.params = {hash(p): ("param", i) for i, p in enumerate(params)}
        self.mapped: dict[int, int] = {}  # var of after -> var of before
        self.through: dict[int, object] = {}  # an inserted cast's var -> its operand's key

    def key(self, arg):
        if isinstance(arg, relax.Var):
            h = hash(arg)
            if h in self.params:
                return self.params[h]
            if h in self.through:
                return self.through[h]
            return self.mapped.get(h, h)
        if isinstance(arg, tvm.ir.expr.Constant):
            return "const"
        if isinstance(arg, relax.Tuple):
            return tuple(self.key(a) for a in graphs.items(arg.fields))
        return type(arg).__name__

    def signature(self, value) -> tuple:
        op = graphs._base_op(graphs.op_type_of(value))
        args = graphs.items(value.args)
        if graphs._op_name(value) in graphs._DPS_OPS:
            args = args[1:2]
        return (op, tuple(self.key(a) for a in args))


def _record_function(before, after, function_name: str, pass_name: str, registry) -> None:
    old = [b for b in graphs._bindings(before.body) if isinstance(b.value, relax.Call)]
    entries = {hash(b.var): _entry(registry, b, function_name) for b in old}
    # What each kept var computed before this pass (an earlier pass may have rewritten the
    # user's op already: the op is this pass's only if it changed here).
    old_ops = {hash(b.var): graphs.op_type_of(b.value) for b in old}
    old_resolver = _Resolver(before.params)
    candidates: dict[tuple, list[int]] = defaultdict(list)
    for b in old:
        candidates[old_resolver.signature(b.value)].append(hash(b.var))
    claimed: set[int] = set()
    new = _Resolver(after.params)
    bindings = list(graphs._bindings(after.body))
    folded = _folded(old, {hash(b.var) for b in bindings}, old_resolver)
    for binding in bindings:
        var, value = binding.var, binding.value
        if not isinstance(value, relax.Call):
            continue
        key = hash(var)
        op_type = graphs.op_type_of(value)
        if key in entries:  # a var the pass kept
            entry = entries[key]
            if entry is not None and not graphs.same_op(old_ops[key], op_type):
                registry.register(var, _rewritten(entry, pass_name, op_type))
            elif entry is not None and entry.frames and registry.lookup(var) is None:
                registry.register(var, entry)  # a span the new value lost
            continue
        if registry.lookup(var) is not None:
            continue
        matches = [h for h in candidates.get(new.signature(value), ()) if h not in claimed]
        if not matches:  # an op made of several: the one op of its kind reading the same operands
            made = graphs._base_op(op_type)
            matches = [
                h
                for h in folded.get(tuple(map(new.key, _operands(value))), ())
                if h not in claimed and made.endswith(graphs._base_op(old_ops[h]))
            ]
            matches = matches if len(matches) == 1 else []
        if matches:
            claimed.add(matches[0])
            new.mapped[key] = matches[0]
            entry = entries.get(matches[0])
            if entry is not None:
                registry.register(var, _rewritten(entry, pass_name, op_type))
            continue
        operand = graphs.items(value.args)[0] if graphs.items(value.args) else None
        if op_type == _CAST and operand is not None:
            source = new.key(operand)
            new.through[key] = source  # read through by the ops the pass re-typed
            entry = entries.get(source) if isinstance(source, int) else None
            if entry is not None:  # a cast of an op's output: that op's value, in another dtype
                registry.register(var, _rewritten(entry, pass_name, op_type))
                continue
        # An op of the pass's own (a cast of an input, a decomposition): its consumer's line.
        registry.register(var, Emitted(op_type, [], -1, str(var.name), None, _made(pass_name, op_type)))


def _operands(value) -> list:
    """A call's tensor operands (a DPS call's arguments, not its callee)."""
    args = graphs.items(value.args)
    if graphs._op_name(value) in graphs._DPS_OPS and len(args) > 1:
        return graphs.items(args[1].fields) if isinstance(args[1], relax.Tuple) else [args[1]]
    return args


def _folded(old, kept: set[int], resolver: _Resolver) -> dict[tuple, list[int]]:
    """The ops the pass removed by their operands, with the removed ops they read looked
    through to their first operand: matmul(x, permute_dims(w)) as (x, w), the operands of the
    one op FuseTransposeMatmul makes of both (NT_matmul(x, w))."""
    removed = {hash(b.var): b.value for b in old if hash(b.var) not in kept}

    def key(arg):
        folded = removed.get(hash(arg)) if isinstance(arg, relax.Var) else None
        inner = _operands(folded) if folded is not None else []
        return resolver.key(inner[0] if inner else arg)

    by_operands: dict[tuple, list[int]] = defaultdict(list)
    for var, value in removed.items():
        by_operands[tuple(key(a) for a in _operands(value))].append(var)
    return by_operands
