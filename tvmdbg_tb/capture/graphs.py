"""What a compiled Relax module contains: its functions, kernel call sites, and for each
site the original Relax ops fused into it with the user's source location.

Three views of the module feed this (see capture.py): the module given to the build (original
ops, their vars and where the user created them), the module after FuseOps (which ops each
fused function holds, bindings keep their Var identity) and the module just before the
call_tir calls are lowered (the kernel call sites in the order the VM runs them).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

import tvm
import tvm_ffi
from tvm import relax

from tvmdbg_tb.capture.frames import Frame
from tvmdbg_tb.events import layout
from tvmdbg_tb.proto import debug_event_pb2 as pb

Spec = tuple[str, tuple[int, ...], str]  # dtype, shape (-1 symbolic), shape as printed

# Ops whose call is a kernel site; the value is the call_type recorded for it.
_DPS_OPS = {
    "relax.call_tir": "call_tir",
    "relax.call_tir_with_grad": "call_tir",
    "relax.call_tir_inplace": "call_tir_inplace",
    "relax.call_dps_packed": "call_dps_packed",
}
_PACKED_OPS = {"relax.call_pure_packed", "relax.call_packed"}


@dataclass(frozen=True)
class ModelNode:
    """The node of an imported model graph an op was converted from (importers.py)."""

    format: str  # "torch.fx" or "onnx"
    name: str
    op_type: str
    model_file: str = ""
    module: str = ""  # the model's module the node was made in ("model.layers.1.mlp")


@dataclass
class Origin:
    """One original Relax op: its type, the var bound to it and where it was created."""

    op_type: str
    var_name: str
    frames: list[Frame] = field(default_factory=list)
    user_index: int = -1
    node: ModelNode | None = None
    # The pass and what it made, when a pass made this op in place of the user's (lineage.py).
    rewritten_by: str = ""
    node_output: bool = False  # this op computes its node's output (mark_node_outputs)
    nonfinite_literal: bool = False  # takes a non-finite scalar constant (where(m, 0, -inf))


@dataclass
class Emitted:
    """What BlockBuilder.emit saw for one var: its op and the user's stack (and its name),
    the model node an importer was converting, and for an op a pass made in place of the
    user's, that pass (lineage.py)."""

    op_type: str
    frames: list[Frame]
    user_index: int
    var_name: str = ""
    node: ModelNode | None = None
    rewritten_by: str = ""
    from_span: bool = False  # frames read from a TVMScript span (lineage.py kept it for a pass's op)
    # The name asked of emit when the var's own name is a sanitised form of it (nn.Module
    # export binds each packed weight to its parameter's name: "layers.1.attn.qkv_proj.weight").
    name_hint: str = ""


@dataclass
class InputInfo:
    kind: int  # pb.OpInput.Kind
    name: str
    spec: Spec | None
    producer_position: int = -1
    producer_slot: int = 0
    param_index: int = -1
    tuple_item: int = -1  # an item of a tuple parameter
    viewed: bool = False  # the argument is another name or a view of that tensor (resolve)
    nonfinite_literal: bool = False  # a scalar constant holding -inf, +inf or NaN
    literal_producer: bool = False  # made by a site that writes a non-finite literal (a mask)


@dataclass
class SiteInfo:
    """One kernel call site of a Relax function."""

    position: int
    name: str
    kernel: str
    call_type: str
    inputs: list[InputInfo]
    outputs: list[Spec]
    output_names: list[str]
    origins: list[Origin]
    num_inputs: int  # runtime args before the outputs (DPS calls)
    inplace_indices: tuple[int, ...] = ()
    # A fused kernel's Relax ops in order, one entry per binding of its fused function (None
    # where no origin is known): what tvmdbg_tb.replay re-executes op by op.
    member_origins: list[Origin | None] = field(default_factory=list)
    fused_module: object = None  # the FuseOps snapshot holding this kernel's group (capture.py)
    # The data flow between those ops (fused_dataflow), one entry per binding.
    member_flow: list[MemberFlow] = field(default_factory=list)

    @property
    def returns_value(self) -> bool:
        return self.call_type == "call_packed"

    @functools.cached_property
    def writes_literal(self) -> bool:
        """Whether the kernel takes a non-finite scalar constant (an attention mask's -inf):
        the non-finite values it writes may be intended (analysis.absorption)."""
        return any(i.nonfinite_literal for i in self.inputs) or any(o.nonfinite_literal for o in self.origins)

    @functools.cached_property
    def output_positions(self) -> tuple[int, ...]:
        """The indices of the outputs among the call's arguments (DPS calls): the in-place
        indices (-1: an output appended after the inputs) or the args after the inputs."""
        if self.inplace_indices:
            appended = iter(range(self.num_inputs, self.num_inputs + len(self.inplace_indices)))
            return tuple(i if i >= 0 else next(appended) for i in self.inplace_indices)
        return tuple(range(self.num_inputs, self.num_inputs + len(self.outputs)))


@dataclass
class FunctionInfo:
    name: str
    param_names: list[str]
    params: list[Spec | None]
    sites: list[SiteInfo]
    pure: bool = True  # the Relax function declares no side effects (a replay may re-run it)
    # Where each returned value comes from, flattened like the runtime tuple (resolve).
    outputs: list[InputInfo] = field(default_factory=list)
    # Parameters [0, num_inputs) are data inputs, the rest weights (Relax's "num_input"
    # attribute); None when the function does not say.
    num_inputs: int | None = None

    @property
    def weights(self) -> range:
        """The positions of the function's weights (none when it does not say which)."""
        return range(self.num_inputs, len(self.params)) if self.num_inputs is not None else range(0)


@dataclass
class ExecutableInfo:
    """The debugger's picture of one compiled executable."""

    executable_id: str
    functions: dict[str, FunctionInfo]
    target: str = ""
    source_mapped: bool = True
    note: str = ""
    frames: list[Frame] = field(default_factory=list)
    user_index: int = -1
    # Compile-time instrumentation (compiled.CompiledFunction), by function name; empty when
    # the VM instrument traces this executable.
    compiled: dict = field(default_factory=dict)
    compiled_health: compiled.Summaries | None = None  # what its summary kernels record (if compiled)
    # The module right after FuseOps (fused functions still call the per-op legalized
    # PrimFuncs): the source of replays (tvmdbg_tb.replay); None when there was no FuseOps.
    fused_module: object = None


# -- helpers -------------------------------------------------------------------------------

# len(array) and array[i] of a tvm_ffi Array without its Python index checks (i in range).
array_size = _array_size = tvm_ffi._ffi_api.ArraySize
array_item = _array_item = tvm_ffi._ffi_api.ArrayGetItem


def items(array) -> list:
    """The elements of a tvm_ffi Array as a list, read by the two FFI calls its __getitem__
    wraps: a slice goes through Python index normalisation per element, and a compile reads a
    few Arrays per call site; any other sequence as a list."""
    if type(array) is not tvm_ffi.Array:
        return list(array)
    return [_array_item(array, i) for i in range(_array_size(array))]


def _name(node) -> str:
    for attr in ("name_hint", "global_symbol", "name"):
        value = getattr(node, attr, None)
        if isinstance(value, str) and value:
            return str(value)  # a plain str: a tvm_ffi String is two GC-tracked objects
    return type(node).__name__


# A callee (GlobalVar, ExternFunc) by node address -> (the node, kept alive so the address
# stays its own; its _name). Calls name a few kernels many times, each name an FFI read.
_CALLEE_NAMES: dict[int, tuple[object, str]] = {}


def _callee_name(node) -> str:
    """_name(node), read once per node."""
    key = node.__chandle__()
    found = _CALLEE_NAMES.get(key)
    if found is None:
        if len(_CALLEE_NAMES) > 4096:
            _CALLEE_NAMES.clear()
        found = _CALLEE_NAMES[key] = (node, _name(node))
    return found[1]


def _dim(value) -> int:
    number = getattr(value, "value", None)
    return int(number) if isinstance(number, int) else -1


# PrimType by node address -> (the type, kept alive so the address stays its own; str() of
# it; the bit width when it is a scalar int, else None). TVM interns the PrimTypes of a
# dtype, so a module's thousands of dims and tensors read a handful of entries instead of
# one FFI dtype read each.
_PRIM_TYPES: dict[int, tuple[object, str, int | None]] = {}


def _prim_type(prim_ty) -> tuple[object, str, int | None]:
    key = prim_ty.__chandle__()
    found = _PRIM_TYPES.get(key)
    if found is None:
        if len(_PRIM_TYPES) > 4096:  # not interned after all: stay bounded
            _PRIM_TYPES.clear()
        dtype = getattr(prim_ty, "dtype", None)
        scalar_int = dtype is not None and dtype.type_code == 0 and dtype.lanes == 1  # DLPack int
        found = _PRIM_TYPES[key] = (prim_ty, str(prim_ty), dtype.bits if scalar_int else None)
    return found


def _printed_dim(dim: int, value) -> str:
    """str(value) as the TVMScript printer writes it, without running the printer for ints."""
    if dim < 0:
        return str(value)
    bits = _int_bits(value)
    if bits is None:  # not a scalar int
        return str(value)
    return str(dim) if bits == 32 else f"T.int{bits}({dim})"


def tensor_specs(ty) -> list[Spec]:
    """The tensor specs of a Relax type (a tuple type gives one per field, flattened)."""
    if isinstance(ty, relax.TensorType):
        return [_tensor_spec(ty)]
    if isinstance(ty, relax.TupleType):
        out: list[Spec] = []
        for field_ty in items(ty.fields):
            out.extend(tensor_specs(field_ty))
        return out
    return []


def dtype_name(element) -> str:
    """str() of a TensorType's dtype ("" for None), read once per distinct PrimType."""
    if element is None:
        return ""
    if isinstance(element, tvm.ir.PrimType):
        return _prim_type(element)[1]
    return str(element)


def _tensor_spec(ty) -> Spec:
    element = ty.dtype
    shape = ty.shape
    if element is not None and isinstance(shape, relax.ShapeExpr):
        # The spec of a (dtype, dims) seen before, by the nodes' addresses: TVM shares the dim
        # nodes (and interns the PrimTypes) across a module's tensors, so most specs cost a
        # handle read per dim instead of reading and printing each dim.
        values = shape.values
        dim_nodes = [_array_item(values, i) for i in range(_array_size(values))]
        key = (element.__chandle__(), *[node.__chandle__() for node in dim_nodes])
        found = _SHAPE_SPECS.get(key)
        if found is not None:
            return found[2]
        spec = _shape_spec(element, dim_nodes)
        if len(_SHAPE_SPECS) > 4096:
            _SHAPE_SPECS.clear()
        _SHAPE_SPECS[key] = (element, dim_nodes, spec)  # the nodes kept alive: their addresses stay theirs
        return spec
    if isinstance(shape, relax.ShapeExpr):  # no dtype
        values = shape.values
        return _shape_spec(element, [_array_item(values, i) for i in range(_array_size(values))])
    dtype = dtype_name(element)
    ndim = int(ty.ndim)
    return _interned((dtype, tuple([-1] * max(ndim, 0)), ""))


# (PrimType address, dim node addresses...) -> (the PrimType, the dim nodes, the spec).
_SHAPE_SPECS: dict[tuple[int, ...], tuple[object, list, Spec]] = {}


def _shape_spec(element, dim_nodes: list) -> Spec:
    """The spec of a tensor type of dtype `element` and ShapeExpr dims `dim_nodes`: each
    static dim printed from its value and bit width (str() of a PrimExpr runs the TVMScript
    printer), the printed forms of (value, width) kept."""
    dtype = dtype_name(element)
    dims, texts = [], []
    for value in dim_nodes:
        dim = _dim(value)
        bits = _int_bits(value) if dim >= 0 else None
        text = _DIM_TEXTS.get((dim, bits)) if bits is not None else None
        if text is None:
            text = _printed_dim(dim, value)
            if bits is not None and len(_DIM_TEXTS) < 4096:
                _DIM_TEXTS[(dim, bits)] = text
        dims.append(dim)
        texts.append(text)
    printed = "(" + ", ".join(texts) + ("," if len(dims) == 1 else "") + ")"
    return _interned((dtype, tuple(dims), printed))


# (value, bit width) of a static int dim -> its printed form (_printed_dim).
_DIM_TEXTS: dict[tuple[int, int], str] = {}


def _int_bits(value) -> int | None:
    """The bit width of a scalar int PrimExpr (None for anything else)."""
    prim_ty = getattr(value, "ty", None)
    return _prim_type(prim_ty)[2] if isinstance(prim_ty, tvm.ir.PrimType) else None


_SPECS: dict[Spec, Spec] = {}


def _interned(spec: Spec) -> Spec:
    """One tuple per distinct spec: a model repeats a few shapes over thousands of tensors, and
    every tuple kept alive until the next collection counts towards Python's GC thresholds
    (a 1000-kernel compile kept enough objects to trigger a full collection)."""
    found = _SPECS.get(spec)
    if found is None:
        if len(_SPECS) > 4096:
            _SPECS.clear()
        found = _SPECS[spec] = spec
    return found


def _spec(expr) -> Spec | None:
    ty = getattr(expr, "ty", None)
    if isinstance(ty, relax.TensorType):
        return _tensor_spec(ty)
    specs = tensor_specs(ty)
    return specs[0] if len(specs) == 1 else None


_NESTED = (relax.SeqExpr, relax.If)


def _bindings(expr):
    """All bindings of a function body, in textual order (If branches included)."""
    if isinstance(expr, relax.SeqExpr):
        # Slices read a tvm_ffi Array in one comprehension (its iterator is one __getitem__,
        # with its checks, per element).
        for block in items(expr.blocks):
            for binding in items(block.bindings):
                yield binding
                value = binding.value
                # A negative isinstance of a relax class goes through ABCMeta; a Call's is a
                # type check: most values are calls.
                if not isinstance(value, relax.Call) and isinstance(value, _NESTED):
                    yield from _bindings(value)
        if isinstance(expr.body, _NESTED):
            yield from _bindings(expr.body)
    elif isinstance(expr, relax.If):
        yield from _bindings(expr.true_branch)
        yield from _bindings(expr.false_branch)


def _relax_functions(mod, primitive: bool):
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            attrs = func.attrs
            is_primitive = bool(attrs is not None and "Primitive" in attrs and int(attrs["Primitive"]))
            if is_primitive == primitive:
                yield _name(gvar), func


# Op by node address -> (the Op, kept alive so the address stays its own; its name). Ops are
# registry singletons: a module's thousands of calls read a few entries, not one FFI string
# read each.
_OP_NAMES: dict[int, tuple[object, str]] = {}


def _op_name(value) -> str | None:
    if not isinstance(value, relax.Call):
        return None
    op = value.op
    if not isinstance(op, tvm.ir.Op):
        return None
    key = op.__chandle__()
    found = _OP_NAMES.get(key)
    if found is None:
        if len(_OP_NAMES) > 4096:  # not singletons after all: stay bounded
            _OP_NAMES.clear()
        found = _OP_NAMES[key] = (op, str(op.name))
    return found[1]


# -- origins -------------------------------------------------------------------------------


def op_type_of(value) -> str:
    """ "relax.log" for a call of an op; "relax.call_tir:<kernel>" and "call:<function>" for
    calls of functions; "" for anything else."""
    op_type = _op_name(value)
    if op_type is None:
        return "call:" + _name(value.op) if isinstance(value, relax.Call) else ""
    if op_type in _DPS_OPS or op_type in _PACKED_OPS:
        return f"{op_type}:{_name(_array_item(value.args, 0))}"
    return op_type


_KERNEL_SUFFIX = re.compile(r"\d+$")


def _base_op(op_type: str) -> str:
    """The bare op of an op type: "relax.nn.softmax" -> "softmax",
    "relax.call_tir:tir_log1" -> "log"."""
    name = op_type.split(":", 1)[1] if ":" in op_type else op_type.rsplit(".", 1)[-1]
    name = _KERNEL_SUFFIX.sub("", name)
    return name[4:] if name.startswith("tir_") else name


def same_op(user_op_type: str, op_type: str) -> bool:
    """Whether an op the user emitted is the one behind op_type (possibly legalized)."""
    return user_op_type == op_type or (bool(user_op_type) and _base_op(user_op_type) == _base_op(op_type))


class OriginSource(Protocol):
    parameter_names: dict[str, str]  # function parameters that are a model's weights: their names

    def lookup(self, var) -> Emitted | None: ...

    def lookup_value(self, value) -> Emitted | None: ...

    def find(self, name: str, op_type: str) -> Emitted | None: ...


NameKey = tuple[str, str]  # (Relax function, var name): names repeat across functions
# var hash of an original op by the hash of one of its operands, with all its operands
ByOperand = dict[int, list[tuple[int, frozenset[int]]]]


def collect_origins(
    mod, emitted: OriginSource, by_operands: bool = True
) -> tuple[dict[int, Origin], dict[NameKey, list[Origin]], ByOperand, dict[int, str]]:
    """Original ops of mod by var identity, by (function, var name) as a fallback, an index
    of ops by their operands (to recognise the last op of a fused group, whose var FuseOps
    replaces; left empty unless by_operands: a build without FuseOps has no use for it), and
    the name of each op's var by identity (the passes keep most vars: extract_functions reads
    a site's name from there while mod is alive)."""
    by_var: dict[int, Origin] = {}
    by_name: dict[NameKey, list[Origin]] = {}
    by_operand: ByOperand = {}
    var_names: dict[int, str] = {}
    for fname, func in _relax_functions(mod, primitive=False):
        function_origins: list[tuple[int, list[int], Origin]] = []
        spanned: set[int] = set()  # ops located by a TVMScript span (_inherit_from_nested)
        literals: set[int] = set()  # vars bound to a non-finite scalar constant
        params = _name_weights(func, emitted, var_names)
        for binding in _bindings(func.body):
            var, value = binding.var, binding.value
            if not isinstance(value, relax.Call):  # op_type_of(value) is "": no op
                if isinstance(value, tvm.ir.expr.Constant) and nonfinite_scalar(value):
                    literals.add(hash(var))
                if isinstance(value, relax.TupleGetItem) and hash(value.tuple_value) in params:
                    entry = emitted.lookup(var)  # a packed weight: its parameter's own name
                    if entry is not None and entry.name_hint:
                        var_names[hash(var)] = entry.name_hint
                if isinstance(value, relax.Var):
                    source = by_var.get(hash(value))
                    if source is not None:
                        by_var[hash(var)] = source
                        by_name.setdefault((fname, str(var.name)), []).append(source)
                continue
            entry = emitted.lookup(var) or emitted.lookup_value(value)
            # The name emit read from this very var, else read here (an FFI read).
            var_name = entry.var_name if entry is not None and entry.var_name else str(var.name)
            var_names[hash(var)] = var_name
            if entry is not None and entry.op_type:  # the op the user wrote, before legalization
                op_type, frames, user_index = entry.op_type, entry.frames, entry.user_index
            else:
                op_type = op_type_of(value)
                if entry is None:
                    frames, user_index = _span_frames(value, fname)
                    if not frames:
                        entry = emitted.find(var_name, op_type)
                if entry is not None:
                    frames, user_index = entry.frames, entry.user_index
                    op_type = entry.op_type or op_type
            if entry is not None:
                if entry.rewritten_by:  # a pass's op standing for the user's: its name too
                    var_name = entry.var_name or var_name
                origin = Origin(op_type, var_name, frames, user_index, entry.node, entry.rewritten_by)
                if entry.from_span and frames:
                    spanned.add(hash(var))
            else:
                origin = Origin(op_type, var_name, frames, user_index)
                if frames:
                    spanned.add(hash(var))
            origin.nonfinite_literal = _takes_literal(value, literals)
            by_var[hash(var)] = origin
            by_name.setdefault((fname, var_name), []).append(origin)
            if not by_operands:  # read below, only if some op of the function needs them
                function_origins.append((hash(var), [], origin))
                continue
            # Operands read once (FFI container accesses add up on 1000-op models), kept
            # as hashes: IR wrappers are GC-tracked Python objects, not worth holding.
            operand_keys = _operand_keys(value)
            function_origins.append((hash(var), operand_keys, origin))
            operands = frozenset(operand_keys)
            for operand in operands:
                by_operand.setdefault(operand, []).append((hash(var), operands))
        if not by_operands and any(not origin.frames and origin.node is None for _, _, origin in function_origins):
            _read_operands(func, function_origins)
        _inherit_from_nested(function_origins, spanned)
        _inherit_from_consumers(function_origins)
        mark_node_outputs([origin for _, _, origin in function_origins])
    return by_var, by_name, by_operand, var_names


def _name_weights(func, emitted: OriginSource, var_names: dict[int, str]) -> set[int]:
    """The function's parameters (by identity); those an importer made of a model's weights
    get their own names in var_names."""
    weights = getattr(emitted, "parameter_names", None) or {}
    for param in func.params:
        own = weights.get(str(param.name))
        if own is not None:
            var_names[hash(param)] = own
    return {hash(p) for p in func.params}


# Ops that only reshape their input (lowered to vm.builtin.reshape, not kernels): a model
# node ending with one has the same values in its last other op's output.
_VIEW_OPS = frozenset(("relax.reshape", "relax.expand_dims", "relax.squeeze", "relax.flatten"))


def mark_node_outputs(origins: list[Origin]) -> None:
    """Marks, for each model node, the op that computes its output (Origin.node_output): its
    last op that is not a view, else its last op. origins: one function's ops in order."""
    last: dict[str, Origin] = {}
    for origin in origins:
        node = origin.node
        if node is None:
            continue
        known = last.get(node.name)
        if known is None or origin.op_type not in _VIEW_OPS or known.op_type in _VIEW_OPS:
            last[node.name] = origin
    for origin in last.values():
        origin.node_output = True


def nonfinite_scalar(expr, spec: Spec | None = None) -> bool:
    """Whether expr is a float constant of one element holding -inf, +inf or NaN (a literal such
    as a mask's fill value; weights, larger, are never read here)."""
    spec = spec or _spec(expr)
    if spec is None or not spec[0].startswith(("float", "bfloat")) or any(d != 1 for d in spec[1]):
        return False
    import numpy as np

    try:
        value = getattr(expr, "value", None)  # a runtime Tensor (GenericConst)
        if value is None:
            value = expr.data
        return not bool(np.isfinite(value.numpy().astype("float64")).all())
    except Exception:  # a dtype numpy cannot hold: no answer, no literal
        return False


def _takes_literal(value, literals: set[int]) -> bool:
    """Whether a call has a non-finite scalar constant among its arguments, itself or bound to
    a var (literals)."""
    for arg in items(value.args):
        if isinstance(arg, relax.Var):
            if hash(arg) in literals:
                return True
        elif isinstance(arg, tvm.ir.expr.Constant) and nonfinite_scalar(arg):
            return True
    return False


def _operand_keys(value) -> list[int]:
    return [hash(o) for o in _call_operands(value) if isinstance(o, relax.Var)]


def _read_operands(func, function_origins: list[tuple[int, list[int], Origin]]) -> None:
    """Fills the operand hashes of function_origins (collect_origins skips them when every op
    has its own location: then no op inherits one, and a call site saves its operand reads)."""
    keys = {key: operand_keys for key, operand_keys, _ in function_origins}
    for binding in _bindings(func.body):
        operand_keys = keys.get(hash(binding.var))
        if operand_keys is not None:
            operand_keys.extend(_operand_keys(binding.value))


def _call_operands(value) -> list:
    if isinstance(value, relax.Call):
        operands = []
        for arg in items(value.args):
            operands.extend(items(arg.fields) if isinstance(arg, relax.Tuple) else [arg])
        return operands
    return []


def _inherit_from_nested(function_origins: list[tuple[int, list[int], Origin]], spanned: set[int]) -> None:
    """TVMScript gives a nested expression's inner calls the statement's span and its outer
    call none (`r = relu(add(a, b))`: add has the line, relu not): an op without a location
    whose binding follows its own operand's, located by a span, is that statement's outer call
    and takes its line (its consumer is the next statement, one line too low)."""
    previous = None
    for key, operand_keys, origin in function_origins:
        if (
            not origin.frames
            and origin.node is None
            and previous is not None
            and previous[0] in spanned
            and previous[0] in operand_keys
        ):
            origin.frames, origin.user_index = previous[1].frames, previous[1].user_index
            spanned.add(key)
        previous = (key, origin)


def _inherit_from_consumers(function_origins: list[tuple[int, list[int], Origin]]) -> None:
    """Ops the user did not emit themselves (the inner calls of a nested expression given to
    one BlockBuilder.emit, ops re-created by passes) take the location of their first
    consumer that has one: the line that wrote the expression."""
    inherited: dict[int, Origin] = {}
    for key, operand_keys, origin in reversed(function_origins):
        if not origin.frames and origin.node is None:
            source = inherited.get(key)
            if source is not None:
                origin.frames, origin.user_index, origin.node = source.frames, source.user_index, source.node
        if origin.frames or origin.node is not None:
            for operand in operand_keys:
                inherited[operand] = origin


def _span_frames(value, function_name: str) -> tuple[list[Frame], int]:
    """TVMScript attaches a span (file, line) to each call: a one-frame location."""
    span = getattr(value, "span", None)
    source = getattr(span, "source_name", None) if span is not None else None
    path = getattr(source, "name", None) if source is not None else None
    if not path or not int(span.line):
        return [], -1
    return [(str(path), int(span.line), function_name)], 0


# -- sites ---------------------------------------------------------------------------------


MemberKey = tuple[int, str]  # (hash of the original op's var, its name)


def fused_members(
    fuse_snapshot, by_operand: ByOperand, pre_fuse=None, known: dict | None = None
) -> dict[object, list[MemberKey]]:
    """For each call of a fused (Primitive) function after FuseOps: its original ops, in
    order, by the hash of the call's binding var (which the later passes mostly keep: the
    kernel call site's var), by (calling function, fused function, k) for its k-th call, and
    by the fused function's name for its first call.

    FuseOps merges identical groups into one function (three attention projections become
    three calls of one `fused_matmul_add`), whose bindings keep the vars of the first group
    only, so a call's own ops are found in the module just before FuseOps (pre_fuse, where
    every op still binds its own var): the ops, in order, that read only the call's
    arguments (vars and constants) and each other, calling the same PrimFuncs as the fused
    function's bindings (_call_group). Without pre_fuse, or when that fails: FuseOps keeps
    the vars of a group's bindings except the last, which becomes a fresh var inside the
    fused function and at its call site; that last op is found among the original ops by
    its operands: group vars, or the fused function's parameters mapped to the call's
    arguments (themselves mapped back when they are earlier groups' fresh outputs); so is a
    call's last op whose var before FuseOps is not one of the original ops (known: the
    original ops by var, collect_origins' first answer).
    """
    if fuse_snapshot is None:
        return {}
    primitive = dict(_relax_functions(fuse_snapshot, primitive=True))
    pre_ops = {name: _OpTable(func) for name, func in _relax_functions(pre_fuse, primitive=False)} if pre_fuse else {}
    members: dict[object, list[MemberKey]] = {}
    for fname, caller in _relax_functions(fuse_snapshot, primitive=False):
        calls = _FusedCalls(fname, primitive, pre_ops.get(fname), by_operand, known, members)
        for binding in _bindings(caller.body):
            calls.bind(binding)
    return members


@dataclass(frozen=True)
class MemberFlow:
    """One binding of a fused function: the op it calls, where each operand comes from (k >= 0:
    binding k's output; -1 - i: the kernel's input i; layout.NO_INPUT: a constant), and whether it
    takes a non-finite scalar constant (a mask's -inf)."""

    op_type: str
    input_refs: tuple[int, ...]
    literal: bool


def fused_dataflow(fuse_snapshot) -> dict[str, list[MemberFlow]]:
    """The data flow inside each fused (Primitive) function after FuseOps, by its name: the
    same for every call of it (the analysis reads it with each call's own ops)."""
    if fuse_snapshot is None:
        return {}
    flows = {}
    for name, func in _relax_functions(fuse_snapshot, primitive=True):
        refs = {hash(p): -1 - i for i, p in enumerate(func.params)}
        flow = []
        for k, binding in enumerate(_bindings(func.body)):
            value = binding.value
            operands = [value.tuple_value] if isinstance(value, relax.TupleGetItem) else _call_operands(value)
            operands = [o for o in operands if not isinstance(o, relax.GlobalVar)]
            literal = any(isinstance(o, tvm.ir.expr.Constant) and nonfinite_scalar(o) for o in operands)
            inputs = tuple(refs.get(hash(o), layout.NO_INPUT) for o in operands)
            flow.append(MemberFlow(op_type_of(value) if isinstance(value, relax.Call) else "", inputs, literal))
            refs[hash(binding.var)] = k
        flows[name] = flow
    return flows


class _FusedCalls:
    """The calls of fused functions in one calling function, and their original ops
    (fused_members' answer, filled in members)."""

    def __init__(self, fname, primitive, table, by_operand: ByOperand, known, members):
        self.fname, self.primitive, self.table = fname, primitive, table
        self.by_operand, self.known, self.members = by_operand, known, members
        self.calls: Counter = Counter()
        self.fresh: dict[int, int] = {}  # fresh output var of a group -> original var hash
        self.aliases: dict = {}  # the caller's tuple items and var aliases (_alias_key)

    def bind(self, binding) -> None:
        value = binding.value
        if not (isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar)):
            if self.table is not None and not isinstance(value, relax.Call):
                alias = _alias_key(binding, self.aliases, self.fresh)
                if alias is not None:
                    self.aliases[hash(binding.var)] = alias
            return
        name = _name(value.op)
        func = self.primitive.get(name)
        inner = list(_bindings(func.body)) if func is not None else []
        if inner:
            self._call(binding, name, func, inner)

    def _call(self, binding, name: str, func, inner: list) -> None:
        value = binding.value
        table = self.table
        group = None
        if table is not None:
            group = table.group_by_flow(value, func, inner, self.fresh, self.aliases)
            if group is None:
                group = table.group(value, inner, self.fresh, self.aliases)
        call = (self.fname, name, self.calls[name])
        self.calls[name] += 1
        argument = {hash(p): a for p, a in zip(func.params, value.args)}
        # This call's inner vars -> its original ops (the fused function's own vars are the first call's).
        inner_ops = {hash(b.var): h for h, b in zip(group, inner)} if group is not None else {}
        keys = [(inner_ops.get(hash(b.var), hash(b.var)), str(b.var.name)) for b in inner[:-1]]
        last = inner[-1]
        last_key = inner_ops.get(hash(last.var))
        if last_key is None or (self.known is not None and last_key not in self.known):
            last_key = self._last_by_operands(last, keys, argument, inner_ops, last_key)
        keys.append((last_key, str(last.var.name)))
        if last_key != hash(last.var):
            self.fresh[hash(binding.var)] = last_key
        self.members.setdefault(name, keys)
        self.members[hash(binding.var)] = self.members[call] = keys

    def _last_by_operands(self, last, keys, argument, inner_ops, last_key) -> int:
        """The last op's var may be new before FuseOps already (a function's output var
        re-made by a pass): found among the original ops by its operands."""

        def original(var):
            if hash(var) in argument:
                var = argument[hash(var)]
            if not isinstance(var, relax.Var):
                return None
            key = hash(var)
            return inner_ops.get(key, self.fresh.get(key, key))

        operands = {original(o) for o in _call_operands(last.value) if isinstance(o, relax.Var)} - {None}
        claimed = {key for key, _ in keys}
        candidates = [
            var_hash
            for operand in operands
            for var_hash, needs in self.by_operand.get(operand, ())
            if operands <= needs and var_hash not in claimed
        ]
        return candidates[0] if candidates else (last_key or hash(last.var))


def _callee(value) -> str | None:
    """The PrimFunc (or function) a call_tir-like binding calls, by name; else the op name."""
    if not isinstance(value, relax.Call):
        return None
    op = _op_name(value)
    if op in _DPS_OPS:
        return _callee_name(_array_item(value.args, 0))
    return op if op is not None else _name(value.op)


def _tensor_operands(value) -> list:
    """A call's tensor operands (vars and constants), tuples flattened; a call_tir's PrimFunc
    is not one."""
    args = items(value.args)
    if _op_name(value) in _DPS_OPS:
        args = args[1:2]
    out = []
    for arg in args:
        for item in items(arg.fields) if isinstance(arg, relax.Tuple) else [arg]:
            if isinstance(item, (relax.Var, tvm.ir.expr.Constant)):
                out.append(item)
    return out


def _operand_handles(value, aliases: dict) -> list:
    """Keys of a call's tensor operands (vars and constants, items of tuples by the tuple's
    key and index: `_alias_key`)."""
    return [aliases.get(hash(item), hash(item)) for item in _tensor_operands(value)]


def _alias_key(binding, aliases: dict, fresh: dict | None = None):
    """The key of a var bound to another var or to an item of a tuple (None otherwise):
    that var's key, or (the tuple's key, index)."""
    value = binding.value
    if isinstance(value, relax.Var):
        key = hash(value)
        return aliases.get(key, fresh.get(key, key) if fresh else key)
    if isinstance(value, relax.TupleGetItem) and isinstance(value.tuple_value, relax.Var):
        key = hash(value.tuple_value)
        return (aliases.get(key, fresh.get(key, key) if fresh else key), int(value.index))
    return None


def _binding_of(operand) -> int | None:
    """The binding of a fused function an operand handle of group_by_flow refers to."""
    if isinstance(operand, tuple) and operand[0] == "binding":
        return operand[1]
    if isinstance(operand, tuple) and operand[0] == "item":
        return _binding_of(operand[1])
    return None


def _tuple_of(handle):
    """The op a pre-fuse operand handle reads: a tuple item's tuple."""
    return handle[0] if isinstance(handle, tuple) else handle


class _OpTable:
    """The ops of one function of the module before FuseOps: operands, readers, order."""

    def __init__(self, func):
        self.order: dict[int, int] = {}
        self.operands: dict[int, list[int]] = {}
        self.callee: dict[int, str | None] = {}
        self.readers: dict[int, list[int]] = {}
        self.claimed: set[int] = set()
        aliases: dict = {}
        for binding in _bindings(func.body):
            value = binding.value
            if not isinstance(value, relax.Call):
                alias = _alias_key(binding, aliases)
                if alias is not None:
                    aliases[hash(binding.var)] = alias
                continue
            key = hash(binding.var)
            self.order[key] = len(self.order)
            operands = self.operands[key] = _operand_handles(value, aliases)
            self.callee[key] = _callee(value)
            # A tuple item's reader is also the tuple's (a group may hold the tuple's op).
            for operand in set(operands) | {o[0] for o in operands if isinstance(o, tuple)}:
                self.readers.setdefault(operand, []).append(key)

    def group_by_flow(self, call, func, inner: list, fresh: dict[int, int], aliases: dict) -> list[int] | None:
        """The ops of one call of a fused function, found by the function's own data flow: its
        binding k is the op before FuseOps that calls the same PrimFunc on the same operands
        (the call's arguments where binding k reads a parameter, the ops found for the
        bindings it reads), ops that feed no later binding's candidates dropped, from the
        output back. Exact wherever the module says which op computes what; twins (ops of
        other call sites computing the same value from the same operands, e.g. every layer's
        slice of one shared table) remain ambiguous, and the first unclaimed is taken. None
        when a binding has no candidate."""
        local: dict[int, object] = {}  # the fused function's params and bindings -> handles
        for param, arg in zip(func.params, items(call.args)):
            if isinstance(arg, (relax.Var, tvm.ir.expr.Constant)):
                key = hash(arg)
                local[hash(param)] = aliases.get(key, fresh.get(key, key))
            else:
                return None
        candidates: list[list[int] | None] = []  # per binding: pre-fuse ops that may be it
        wanted: list[list] = []  # per binding: each operand's handle, or ("binding", j[, item])
        for k, binding in enumerate(inner):
            value = binding.value
            if isinstance(value, relax.TupleGetItem) and isinstance(value.tuple_value, relax.Var):
                local[hash(binding.var)] = ("item", local.get(hash(value.tuple_value)), int(value.index))
                candidates.append(None)
                wanted.append([])
                continue
            if not isinstance(value, relax.Call):
                candidates.append(None)
                wanted.append([])
                continue
            operands = [local.get(hash(o), hash(o)) for o in _tensor_operands(value)]
            wanted.append(operands)
            callee = _callee(value)
            pool = self._readers_of(operands[0], candidates) if operands else list(self.order)
            found = [
                key
                for key in pool
                if self.callee.get(key) == callee and self._reads(self.operands[key], operands, candidates)
            ]
            if not found:
                return None
            candidates.append(found)
            local[hash(binding.var)] = ("binding", k)
        # From the output back: keep the candidates that some kept reader reads.
        keep: list[set | None] = [set(c) if c is not None else None for c in candidates]
        for k in range(len(inner) - 1, -1, -1):
            if keep[k] is None:
                continue
            for position, operand in enumerate(wanted[k]):
                j = _binding_of(operand)
                if j is None or keep[j] is None:
                    continue
                read = {
                    _tuple_of(self.operands[key][position]) for key in keep[k] if position < len(self.operands[key])
                }
                keep[j] &= read
        chosen = []
        for k, binding in enumerate(inner):
            if keep[k] is None:
                chosen.append(hash(binding.var))
                continue
            free = [key for key in candidates[k] if key in keep[k] and key not in self.claimed and key not in chosen]
            if not free:
                return None
            chosen.append(free[0])
        self.claimed.update(key for key, b in zip(chosen, inner) if isinstance(b.value, relax.Call))
        return chosen

    def _readers_of(self, operand, candidates) -> list[int]:
        """The pre-fuse ops that may read a handle or a binding's candidates, in order."""
        j = _binding_of(operand)
        if j is None:
            handles = [operand[1]] if isinstance(operand, tuple) and operand[0] == "item" else [operand]
        else:
            handles = candidates[j] or []
        found = {r for handle in handles for r in self.readers.get(handle, ())}
        return sorted(found, key=self.order.__getitem__)

    @staticmethod
    def _reads(actual: list, operands: list, candidates) -> bool:
        """Whether a pre-fuse op's operand handles are those a binding reads."""
        if len(actual) != len(operands):
            return False
        for have, want in zip(actual, operands):
            j = _binding_of(want)
            if j is not None:
                item = want[2] if want[0] == "item" else None
                if item is None and have not in (candidates[j] or ()):
                    return False
                if item is not None and not (
                    isinstance(have, tuple) and have[1] == item and have[0] in (candidates[j] or ())
                ):
                    return False
            elif isinstance(want, tuple) and want[0] == "item":
                if have != (want[1], want[2]):
                    return False
            elif have != want:
                return False
        return True

    def group(self, call, inner: list, fresh: dict[int, int], aliases: dict) -> list[int] | None:
        """The ops of one call of a fused function (its bindings `inner`): those that read
        only the call's arguments and each other and call the PrimFuncs inner's calls call,
        in inner's order (a binding that is no call keeps its own var); None when they cannot
        be told apart. fresh: earlier calls' vars -> their last op's var; aliases: the
        caller's tuple items (_alias_key)."""
        available = set()
        for arg in items(call.args):
            for item in items(arg.fields) if isinstance(arg, relax.Tuple) else [arg]:
                if isinstance(item, (relax.Var, tvm.ir.expr.Constant)):
                    key = hash(item)
                    available.add(aliases.get(key, fresh.get(key, key)))
        expected = [_callee(b.value) for b in inner if isinstance(b.value, relax.Call)]
        heap = sorted({r for handle in available for r in self.readers.get(handle, ())}, key=self.order.__getitem__)
        found: list[int] = []
        queued = set(heap)
        while heap and len(found) < len(expected):
            key = heap.pop(0)
            if key in self.claimed or self.callee[key] != expected[len(found)]:
                continue
            if not all(
                operand in available or (isinstance(operand, tuple) and operand[0] in available)
                for operand in self.operands[key]
            ):
                continue
            found.append(key)
            available.add(key)
            for reader in self.readers.get(key, ()):
                if reader not in queued:
                    queued.add(reader)
                    heap.append(reader)
            heap.sort(key=self.order.__getitem__)
        if len(found) != len(expected):
            return None
        self.claimed.update(found)
        calls = iter(found)
        return [next(calls) if isinstance(b.value, relax.Call) else hash(b.var) for b in inner]


def extract_functions(
    sites_mod,
    origins: dict[int, Origin],
    origins_by_name: dict[NameKey, list[Origin]],
    fused: dict[object, list[MemberKey]],
    var_names: dict[int, str] | None = None,
    flows: dict[str, list[MemberFlow]] | None = None,
) -> dict[str, FunctionInfo]:
    """Kernel call sites of every (non-primitive) Relax function of sites_mod; var_names:
    names of vars by identity (collect_origins' of a module alive during this call); flows:
    the data flow inside each fused kernel (fused_dataflow)."""
    functions = {}
    for fname, func in _relax_functions(sites_mod, primitive=False):
        info = _function_info(fname, func, origins, origins_by_name, fused, var_names or {})
        for site in info.sites:
            flow = (flows or {}).get(site.kernel)
            if flow and len(flow) > 1 and len(flow) == len(site.member_origins):
                site.member_flow = flow
        functions[fname] = info
    return functions


def _origin_of(key: MemberKey, fname: str, origins, origins_by_name, kernel: str) -> Origin | None:
    """The original op of a var (hash, name) of function fname, computed by kernel: by
    identity, else by a name that is unique in that function, unless that op calls another
    function than kernel (a pass's op reusing the name of a builtin call's var): no line
    rather than a wrong one."""
    origin = origins.get(key[0])
    if origin is None:
        named = origins_by_name.get((fname, key[1]), [])
        if len(named) == 1 and _called_function(named[0].op_type) in (None, kernel):
            origin = named[0]
    return origin


def _called_function(op_type: str) -> str | None:
    """The function a packed call or a function call calls; None for any other op (a Relax op
    or a call_tir, which lowering may rename or fuse)."""
    head, _, callee = op_type.partition(":")
    return callee if head in ("relax.call_dps_packed", "call", *_PACKED_OPS) else None


# Bindings a site's argument is looked through (resolve): the same tensor under another name
# (a var, a tuple item, a tuple built in the function, a constant bound to a var).
_ALIAS_VALUES = (relax.Var, relax.TupleGetItem, relax.Tuple, tvm.ir.expr.Constant)
_MAX_ALIAS_DEPTH = 64  # nested tuple items looked through (a bound, not a limit met in practice)
# Ops and VM builtins whose result is a view of their first tensor argument (the same memory
# and values, another shape): reshapes are lowered to vm.builtin.reshape, no kernel.
_VIEW_CALLS = frozenset({"relax.reshape", "relax.memory.view", "relax.memory.ensure_zero_offset"})
_VIEW_BUILTINS = frozenset({"vm.builtin.reshape", "vm.builtin.ensure_zero_offset"})


def _viewed(value, op: str | None):
    """The tensor a view op or builtin call returns a view of, else None."""
    if op in _VIEW_CALLS:
        return _array_item(value.args, 0) if _array_size(value.args) else None
    if op in _PACKED_OPS:
        args = value.args
        if _array_size(args) > 1 and _name(_array_item(args, 0)) in _VIEW_BUILTINS:
            return _array_item(args, 1)
    elif isinstance(value.op, relax.ExternFunc) and _callee_name(value.op) in _VIEW_BUILTINS:
        return _array_item(value.args, 0) if _array_size(value.args) else None
    return None


def _function_info(fname, func, origins, origins_by_name, fused, var_names) -> FunctionInfo:
    walk = _FunctionWalk(fname, func, origins, origins_by_name, fused, var_names)
    for binding in _bindings(func.body):
        walk.bind(binding.var, binding.value)
    walk.mark_literal_producers()
    params = walk.params
    body = func.body
    returned = walk.leaves(body.body) if isinstance(body, relax.SeqExpr) else []
    attrs = func.attrs
    num_inputs = int(attrs["num_input"]) if attrs is not None and "num_input" in attrs else None
    return FunctionInfo(
        name=fname,
        param_names=[str(p.name) for p in params],
        params=[_spec(p) for p in params],
        sites=walk.sites,
        pure=bool(getattr(func, "is_pure", True)),
        outputs=[walk.resolve(leaf) for leaf in returned],
        num_inputs=num_inputs,
    )


class _FunctionWalk:
    """One pass over a lowered Relax function's bindings: its kernel call sites, where each
    argument comes from (through aliases: views and tuple items), and each site's origins."""

    def __init__(self, fname, func, origins, origins_by_name, fused, var_names):
        self.fname, self.origins, self.origins_by_name = fname, origins, origins_by_name
        self.fused, self.var_names = fused, var_names
        self.params = list(func.params)
        self.param_index = {hash(p): i for i, p in enumerate(self.params)}
        self.produced: dict[int, tuple[int, int, str]] = {}  # var -> (site position, output slot, var name)
        self.aliases: dict[int, object] = {}
        self.sites: list[SiteInfo] = []
        self.used_names: set[str] = set()
        self.kernel_calls: Counter = Counter()

    # -- where an argument comes from ------------------------------------------------------

    def resolve(self, expr) -> InputInfo:
        """Where a site's argument comes from, seen through aliases (see _alias_of): a view's
        output is its input's memory, so it keeps its producer's health and graph edge."""
        key = hash(expr)
        if isinstance(expr, relax.Var) and key not in self.aliases:  # the common case, first
            found = self.produced.get(key)
            if found is not None:  # the producer's var itself: its name was read there
                return InputInfo(pb.OpInput.OP_OUTPUT, found[2], _spec(expr), found[0], found[1])
        spec = _spec(expr)
        name = str(expr.name) if isinstance(expr, relax.Var) else None
        expr, item = self._through_aliases(expr, spec)
        if item is not None:
            return item
        if isinstance(expr, relax.Var):
            return self._var_input(expr, name, spec)
        if isinstance(expr, tvm.ir.expr.Constant):
            return InputInfo(pb.OpInput.CONSTANT, name or "const", spec, nonfinite_literal=nonfinite_scalar(expr, spec))
        return InputInfo(pb.OpInput.OTHER, name or type(expr).__name__, spec)

    def _unaliased(self, expr):
        while isinstance(expr, relax.Var) and hash(expr) in self.aliases:
            expr = self.aliases[hash(expr)]
        return expr

    def _through_aliases(self, expr, spec) -> tuple[object, InputInfo | None]:
        """expr followed through aliases and items of tuples built in the function; with the
        input when it is an item of a site's or a parameter's tuple."""
        item_var = None  # the var bound to a tuple item, whose name may be a weight's
        for _ in range(_MAX_ALIAS_DEPTH):
            while isinstance(expr, relax.Var) and hash(expr) in self.aliases:
                item_var = expr
                expr = self.aliases[hash(expr)]
            if not isinstance(expr, relax.TupleGetItem):
                break
            slot_of = int(expr.index)
            base = self._unaliased(expr.tuple_value)
            if isinstance(base, relax.Tuple):  # an item of a tuple built in the function
                expr = _array_item(base.fields, slot_of)
                continue
            if isinstance(base, relax.Var) and hash(base) in self.produced:
                position = self.produced[hash(base)][0]
                return expr, InputInfo(pb.OpInput.OP_OUTPUT, f"{base.name}[{slot_of}]", spec, position, slot_of)
            if isinstance(base, relax.Var) and hash(base) in self.param_index:
                # An item of a tuple parameter: its health is the item's (TensorSummary.items).
                index = self.param_index[hash(base)]
                named = self.var_names.get(hash(item_var)) if item_var is not None else None
                item_name = named or f"{base.name}[{slot_of}]"
                item = InputInfo(pb.OpInput.PARAM, item_name, spec, param_index=index, tuple_item=slot_of)
                return expr, item
            break
        return expr, None

    def _var_input(self, expr, name: str | None, spec) -> InputInfo:
        viewed = name is not None and name != str(expr.name)
        if hash(expr) in self.produced:
            position, slot, producer_name = self.produced[hash(expr)]
            return InputInfo(pb.OpInput.OP_OUTPUT, name or producer_name, spec, position, slot, viewed=viewed)
        if hash(expr) in self.param_index:
            index = self.param_index[hash(expr)]
            own = self.var_names.get(hash(expr)) if not viewed else None  # a weight's own name
            return InputInfo(pb.OpInput.PARAM, own or name or str(expr.name), spec, param_index=index, viewed=viewed)
        return InputInfo(pb.OpInput.OTHER, name or str(expr.name), spec)

    def leaves(self, expr) -> list:
        """The returned tensors, tuples (built in the function) flattened."""
        aliases = self.aliases
        while isinstance(expr, relax.Var) and hash(expr) in aliases and isinstance(aliases[hash(expr)], relax.Tuple):
            expr = aliases[hash(expr)]
        if isinstance(expr, relax.Tuple):
            return [leaf for item in items(expr.fields) for leaf in self.leaves(item)]
        return [expr]

    # -- the sites -------------------------------------------------------------------------

    def bind(self, var, value) -> None:
        """One binding: an alias, a kernel call site, or nothing to record."""
        if not isinstance(value, relax.Call):
            if isinstance(value, _ALIAS_VALUES):
                self.aliases[hash(var)] = value
            return
        op = _op_name(value)
        viewed = _viewed(value, op)
        if viewed is not None:  # a view or a builtin that returns its input's memory
            self.aliases[hash(var)] = viewed
            return
        site = _dps_site(var, value, op) if op in _DPS_OPS else _packed_site(var, value, op)
        if site is not None:
            self._add_site(var, *site)

    def _add_site(self, var, kernel: str, call_type: str, arg_list, outputs, inplace) -> None:
        position = len(self.sites)
        key = hash(var)
        var_name = self.var_names.get(key)
        if var_name is None:
            var_name = str(var.name)
        name = var_name if var_name not in self.used_names else f"{var_name}_{position}"
        self.used_names.add(name)
        found, site_origins = self._origins(key, kernel, var_name)
        output_names = [name] if len(outputs) == 1 else [f"{name}[{i}]" for i in range(len(outputs))]
        self.sites.append(
            SiteInfo(
                position=position,
                name=name,
                kernel=kernel,
                call_type=call_type,
                inputs=[self.resolve(a) for a in arg_list],
                outputs=outputs,
                output_names=output_names,
                origins=site_origins,
                num_inputs=len(arg_list),
                inplace_indices=inplace,
                member_origins=found,
            )
        )
        # A tuple-producing site is referenced through TupleGetItem (see resolve).
        self.produced[key] = (position, 0, var_name)

    def _origins(self, key: int, kernel: str, var_name: str) -> tuple[list[Origin | None], list[Origin]]:
        """(a fused kernel's member origins, one per binding of its fused function; the
        site's distinct origins)."""
        members = None
        if self.fused:
            call = (self.fname, kernel, self.kernel_calls[kernel])
            self.kernel_calls[kernel] += 1
            members = self.fused.get(key) or self.fused.get(call) or self.fused.get(kernel)
        found: list[Origin | None] = []
        if members is not None:
            found = [_origin_of(member, self.fname, self.origins, self.origins_by_name, kernel) for member in members]
            site_origins = [o for o in found if o is not None]
        else:
            origin = self.origins.get(key) or _origin_of(
                (key, var_name), self.fname, self.origins, self.origins_by_name, kernel
            )
            site_origins = [origin] if origin is not None else []
        unique: list[Origin] = []  # repeats dropped (an alias resolves to the op it names)
        for origin in site_origins:
            if all(origin is not seen for seen in unique):
                unique.append(origin)
        return found, unique

    def mark_literal_producers(self) -> None:
        """Inputs made by a mask kernel (the replay's hunt looks past them)."""
        sites = self.sites
        for site in sites:
            for source in site.inputs:
                if source.kind == pb.OpInput.OP_OUTPUT and 0 <= source.producer_position < len(sites):
                    source.literal_producer = sites[source.producer_position].writes_literal


def _dps_site(var, value, op: str) -> tuple | None:
    """(kernel, call type, arguments, output specs, in-place indices) of a call_tir-like call."""
    call_args = value.args
    callee, args = _array_item(call_args, 0), _array_item(call_args, 1)
    arg_list = items(args.fields) if isinstance(args, relax.Tuple) else [args]
    ty_args = value.ty_args
    out_ty = _array_item(ty_args, 0) if _array_size(ty_args) else var.ty
    outputs = [_tensor_spec(out_ty)] if isinstance(out_ty, relax.TensorType) else tensor_specs(out_ty)
    inplace: tuple[int, ...] = ()
    if op == "relax.call_tir_inplace":
        inplace = tuple(int(i) for i in value.attrs.inplace_indices)
    return (_callee_name(callee), _DPS_OPS[op], arg_list, outputs, inplace)


def _packed_site(var, value, op: str) -> tuple | None:
    """The same of a packed (extern) call that is no VM builtin; None for other calls."""
    if op not in _PACKED_OPS and not isinstance(value.op, relax.ExternFunc):
        return None
    callee = value.args[0] if op in _PACKED_OPS else value.op
    symbol = _name(callee)
    if symbol.startswith("vm."):
        return None
    arg_list = value.args[1:] if op in _PACKED_OPS else value.args[:]
    return (symbol, "call_packed", arg_list, tensor_specs(var.ty), ())
