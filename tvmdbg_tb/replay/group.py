"""A fused kernel's Relax ops, re-executable one by one.

FuseOps groups Relax bindings into a primitive function whose body still calls one legalized
PrimFunc per original op; FuseTIR then merges those into the single kernel the VM runs. The
module right after FuseOps (kept by capture.py) therefore holds everything needed to run the
group unfused: its bindings become a small Relax function returning every intermediate, built
and compiled lazily the first time a replay of that kernel is asked for (then cached).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tvmdbg_tb.capture import graphs
from tvmdbg_tb.events.layout import NO_INPUT


class ReplayError(RuntimeError):
    """A replay could not be built or run; the message says why, for the user."""


@dataclass
class InnerOp:
    """One binding of a fused function: what it computes and where the user wrote it."""

    index: int
    var_name: str
    prim_func: str
    input_refs: list[int]
    origin: graphs.Origin | None
    num_outputs: int = 1

    @property
    def op_type(self) -> str:
        if self.origin is not None and self.origin.op_type:
            return self.origin.op_type
        return f"relax.call_tir:{self.prim_func}" if self.prim_func else ""


@dataclass
class FusedGroup:
    """A fused kernel's inner ops and, once built, the unfused VM that replays them."""

    kernel: str
    ops: list[InnerOp]
    num_inputs: int
    _module: Any = None
    _vm: Any = None
    _error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def vm(self):
        """The compiled unfused function (built once); raises ReplayError when it cannot be."""
        with self._lock:
            if self._vm is None and self._error is None:
                try:
                    self._vm = _compile(self._module)
                except Exception as error:
                    self._error = f"the ops of `{self.kernel}` cannot be compiled alone: {error}"
            if self._error is not None:
                raise ReplayError(self._error)
            return self._vm

    def run(self, inputs: list) -> list[list[Any]]:
        """Outputs (numpy arrays) of every inner op, in order, on the kernel's inputs."""
        import numpy as np
        import tvm

        if len(inputs) != self.num_inputs:
            raise ReplayError(f"`{self.kernel}` takes {self.num_inputs} inputs, {len(inputs)} were given")
        vm = self.vm()
        device = tvm.cpu()
        args = [tvm.runtime.tensor(np.array(a, order="C", copy=None), device) for a in inputs]
        try:
            result = vm["main"](*args)
        except Exception as error:
            raise ReplayError(f"the replay of `{self.kernel}` raised: {error}") from error
        values = list(result) if len(self.ops) != 1 else [result]
        outs = []
        for op, value in zip(self.ops, values):
            # A tuple result (batch_norm's) is an Array; a record read back from a dump does
            # not say how many outputs an op has, the value does.
            leaves = list(value) if op.num_outputs > 1 or not hasattr(value, "numpy") else [value]
            outs.append([leaf.numpy() for leaf in leaves])
        return outs


_CACHE_LOCK = threading.Lock()


def group_of(site: graphs.SiteInfo) -> FusedGroup:
    """The replayable group of a fused kernel site (built once, cached on the site, and so
    is the reason it cannot be built)."""
    with _CACHE_LOCK:
        cached = site.__dict__.get("_replay_group")
        if cached is None:
            try:
                cached = _build_group(site.fused_module, site)
            except ReplayError as error:
                cached = error
            except Exception as error:
                cached = ReplayError(f"the ops of `{site.kernel}` cannot be replayed: {type(error).__name__}: {error}")
            site.__dict__["_replay_group"] = cached
    if isinstance(cached, ReplayError):
        raise ReplayError(str(cached))
    return cached


def _build_group(fused_module, site: graphs.SiteInfo) -> FusedGroup:
    from tvm import relax

    if fused_module is None:
        raise ReplayError("the executable was compiled without FuseOps: there is no fused group to replay")
    found = [gv for gv in fused_module.get_global_vars() if graphs._name(gv) == site.kernel]
    func = fused_module[found[0]] if found else None
    if not isinstance(func, relax.Function):
        raise ReplayError(f"`{site.kernel}` is not a fused Relax function of this executable (no group to replay)")
    params = list(func.params)
    if any(not isinstance(p.ty, relax.TensorType) for p in params):
        raise ReplayError(f"`{site.kernel}` takes a non-tensor parameter: replay supports tensor inputs only")
    if len(params) != site.num_inputs:
        raise ReplayError(f"`{site.kernel}` has {len(params)} parameters but its call passes {site.num_inputs}")
    bindings = list(graphs._bindings(func.body))
    param_ref = {hash(p): -1 - i for i, p in enumerate(params)}
    op_ref: dict[int, int] = {}
    ops: list[InnerOp] = []
    builder = relax.BlockBuilder()
    new_params = [relax.Var(p.name, p.ty) for p in params]
    mapping: dict[int, Any] = {hash(p): q for p, q in zip(params, new_params)}
    members = list(site.member_origins) + [None] * max(0, len(bindings) - len(site.member_origins))
    with builder.function("main", new_params):
        new_vars = []
        for k, binding in enumerate(bindings):
            value = binding.value
            _check_replayable(site.kernel, binding)
            operands = [o for o in graphs._call_operands(value) if not isinstance(o, relax.GlobalVar)]
            if isinstance(value, relax.TupleGetItem):  # an item of an earlier op's tuple (batch_norm's)
                operands = [value.tuple_value]
            refs = [param_ref.get(hash(o), op_ref.get(hash(o), NO_INPUT)) for o in operands]
            prim = ""
            if isinstance(value, relax.Call) and len(value.args) and isinstance(value.args[0], relax.GlobalVar):
                prim = graphs._name(value.args[0])
            var = builder.emit(_substitute(value, mapping), name_hint=binding.var.name)
            mapping[hash(binding.var)] = var
            op_ref[hash(binding.var)] = k
            ty = binding.var.ty
            n = len(ty.fields) if isinstance(ty, relax.TupleType) else 1
            # The site's own op's name: identical groups share one function, whose bindings
            # carry the first group's names.
            name = members[k].var_name if members[k] is not None and members[k].var_name else binding.var.name
            ops.append(InnerOp(k, name, prim, refs, members[k], n))
            new_vars.append(var)
        builder.emit_func_output(relax.Tuple(new_vars) if len(new_vars) != 1 else new_vars[0])
    module = builder.get()
    called = {op.prim_func for op in ops if op.prim_func}
    for gv in fused_module.get_global_vars():
        if graphs._name(gv) in called:
            module[gv] = fused_module[gv]
    return FusedGroup(site.kernel, ops, len(params), _module=module)


def _check_replayable(kernel: str, binding) -> None:
    from tvm import relax

    value = binding.value
    op = graphs._op_name(value)
    if op is None and isinstance(value, relax.Call):
        raise ReplayError(f"`{kernel}` calls `{graphs._name(value.op)}` (an extern or packed function): not replayable")
    if op is not None and op in graphs._PACKED_OPS | {"relax.call_dps_packed"}:
        raise ReplayError(f"`{kernel}` holds `{graphs.op_type_of(value)}` (a packed call): not replayable alone")


def _substitute(expr, mapping: dict[int, Any]):
    """expr with its vars replaced (the few node kinds a fused function's bindings hold)."""
    from tvm import relax

    if isinstance(expr, relax.Var):
        return mapping.get(hash(expr), expr)
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_substitute(f, mapping) for f in expr.fields])
    if isinstance(expr, relax.TupleGetItem):
        return relax.TupleGetItem(_substitute(expr.tuple_value, mapping), expr.index)
    if isinstance(expr, relax.Call):
        args = [_substitute(a, mapping) for a in expr.args]
        return relax.Call(expr.op, args, expr.attrs, expr.ty_args)
    return expr


def _compile(module):
    """Builds the unfused replay function with TVM's own build (not through tvmdbg's wrapper:
    the replay is no user compile) and an untraced VM."""
    import tvm
    from tvm import relax

    from tvmdbg_tb.capture import hooks as capture
    from tvmdbg_tb.tracing import vm_wrapper

    build = capture.original_build()
    executable = build(module, target=tvm.target.Target("llvm"))
    vm = relax.VirtualMachine(executable, tvm.cpu())
    vm_wrapper.exclude(vm)
    return vm
