"""Compile-time instrumentation: the fast path.

Instead of a Python callback on every VM instruction (several per kernel), the compiled
module itself records what ran: right after each kernel call site, the lowered Relax
function calls a small TIR kernel that writes one row of a per-call float64 buffer: the
CPU cycle counter (for per-kernel durations) and, in health modes, the output's element
counts (negative, zero, positive, -inf, +inf, NaN; one kernel per dtype, for any rank,
compiled once per machine: kernel_cache.py). The buffer is handed out by one packed call at
function entry ("tvmdbg.stats") and read by Python once per call, so the per-kernel cost is
one extra VM call of native code.

Row layout (ROW_WIDTH doubles): [cycles, size, lt0, gt0, eq0, neg_inf, pos_inf, rank,
dim_0..dim_7, min, max, mean, l2_norm, abs_max]; the last five (of the finite elements, NaN
when there is none) only with FULL_STATS, whose builds use the "stats" summary kernels. Row
0 is the timestamp taken before the first kernel; rows 1..K belong to the K kernel outputs in
call order; in health modes, rows after them summarise the tensor parameters (written
before the first kernel). A summary kernel leaves a row already written as it is: one that
Python pre-marked (param_cache.SKIPPED in column 0: a tensor already summarised, see
param_cache) or that the producing kernel counted itself (epilogue.py).
An unwritten row (cycles == 0) is a kernel that did not run (it raised, or a branch skipped it).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import secrets
import threading
import warnings
import weakref
from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import relax

from tvmdbg_tb.capture import counting, epilogue, graphs, inner_check, kernel_cache
from tvmdbg_tb.capture.kernel_source import (
    HEALTH_DTYPES,
    INNER_COLUMN,
    INNER_FLAG_COLUMN,
    INNER_OPS_PER_ROW,
    MAX_RANK,
    ROW_WIDTH,
    STATS_COLUMN,
    kernel_name,
    source_of,
    summary_source,
    tick_source,
)
from tvmdbg_tb.events.modes import Summaries, spec
from tvmdbg_tb.events.summaries import dtype_code, health_values

STATS_FUNC = "tvmdbg.stats"


@dataclass
class RowInfo:
    site: graphs.SiteInfo
    slot: int
    dtype: str
    health: bool  # the row holds a summary: element counts (only size and dims in SHAPE), else a timestamp
    fused: bool = False  # written by the kernel itself (epilogue.py), not a summary call


@dataclass
class InnerSite:
    """A site whose kernel checks its fused ops (inner_check.py): the buffer row of its first
    output (INNER_COLUMN: the total), the first of its inner rows, and the fused function's op
    index of each slot in them (inner_check.InnerCheck's layout)."""

    site: graphs.SiteInfo
    row: int
    inner_row: int
    ops: tuple[int, ...]

    @property
    def num_rows(self) -> int:
        return inner_check.InnerCheck(self.ops).num_rows


@dataclass
class CompiledFunction:
    """One instrumented Relax function: the meaning of each row of its buffer."""

    fid: int
    executable_id: str
    name: str
    rows: list[RowInfo]  # row i + 1 (row 0 is the entry timestamp)
    health: bool
    # Buffer rows summarising each parameter / each (flattened) returned value, or None.
    nrows: int = 0
    param_rows: list[int | None] = field(default_factory=list)
    output_rows: list[int | None] = field(default_factory=list)
    # (dtype, shape) of each parameter / returned value when fully static, else None.
    param_specs: list[tuple[str, tuple[int, ...]] | None] = field(default_factory=list)
    output_specs: list[tuple[str, tuple[int, ...]] | None] = field(default_factory=list)
    # Tuple parameters (the optimizer's parameter, gradient and state tuples): the static
    # (dtype, shape) of each leaf, flattened like the runtime value, and, in health modes, the
    # rows summarising them (written before the first kernel); None for other parameters.
    param_leaf_specs: list[list[tuple[str, tuple[int, ...]]] | None] = field(default_factory=list)
    param_leaf_rows: list[list[int] | None] = field(default_factory=list)
    # Parameters counted by a kernel that reads them (epilogue.py), by position: their rows are
    # written when that kernel runs, not before the first kernel.
    params_in_kernels: list[int] = field(default_factory=list)
    # Parameters with no summary row (its weights, under param_summaries="weights_once_per_value"):
    # the tracer summarises them once per value.
    weights: tuple[int, ...] = ()
    # The sites whose kernel counts the NaN and infinities its fused ops make (inner_check.py).
    inner: list[InnerSite] = field(default_factory=list)
    # The summary kernels the build's kernels call themselves (packed calls, epilogue.py and
    # inner_check.py): registered wherever the executable runs (a saved library, saved.py).
    packed_kernels: tuple[str, ...] = ()

    @functools.cached_property
    def hunt_mask(self) -> bytes:
        """The rows the replay's hunt for the first origin scans (replay/auto.py), one byte per
        kernel row: HUNT_COUNTS when the row holds counts, HUNT_INNER when what its fused ops
        make counts too (inner-op check); for kernels that write a non-finite literal (masks:
        their -inf is the program's, what the hunt looks for comes from a computation) only
        HUNT_NAN, a NaN in their counts (`(1 - keep) * -inf`: 0 x -inf is computed)."""
        return bytes(
            (HUNT_NAN if info.health else 0)
            if info.site.writes_literal
            else HUNT_INNER | (HUNT_COUNTS if info.health else 0)
            for info in self.rows
        )


HUNT_COUNTS, HUNT_INNER, HUNT_NAN = 1, 2, 4  # hunt_mask's bits (native_rows.first_nonfinite)
# Function ids: a stats buffer names its function by fid alone. Baked into the executable
# (tvmdbg.stats' first argument), they travel with a saved library (saved.py) into processes
# that compile their own: counted up from a random base, they are told apart across processes
# (and stay under native_call's 2**40).
_FIDS = itertools.count(secrets.randbelow(1 << 38) + (1 << 32))
# An index, not state: the instrumented functions of the executables alive, by fid (a traced
# call's buffers may come from another executable's function called inside it). Filled by
# register(), emptied of an executable's functions when its description goes.
FUNCTIONS: dict[int, CompiledFunction] = {}


def register(info) -> None:
    """Indexes the instrumented functions of info (graphs.ExecutableInfo.compiled) until info
    is collected (with its executable)."""
    fids = [function.fid for function in info.compiled.values()]
    FUNCTIONS.update({function.fid: function for function in info.compiled.values()})
    weakref.finalize(info, _unregister, fids)


def _unregister(fids: list[int]) -> None:
    for fid in fids:
        FUNCTIONS.pop(fid, None)


def row_statistics(row: list[float], dtype: str) -> list[float]:
    """FULL_STATS' [min, max, mean, l2_norm, abs_max]: the kernel's, or from counts for bool."""
    if dtype != "bool":
        return row[STATS_COLUMN : STATS_COLUMN + 5]
    size, lt, gt, eq, neg_inf, pos_inf = row[1:7]
    if size <= 0:
        return [math.nan] * 5
    low, high = (0.0 if eq else 1.0), (1.0 if gt else 0.0)
    return [low, high, gt / size, math.sqrt(gt), high]


def row_values(mode: int, row: list[float], dtype: str) -> list[float]:
    """The debug_values in a health mode or FULL_STATS of one summary row (ROW_WIDTH layout)."""
    size, lt, gt, eq, neg_inf, pos_inf, rank = row[1:8]
    nan = size - lt - gt - eq
    full = [0.0, dtype_code(dtype), rank, size, neg_inf, pos_inf, nan, lt - neg_inf, eq, gt - pos_inf]
    values = health_values(mode, full)
    return values + row_statistics(row, dtype) if spec(mode).statistics else values


def inner_flagged(array) -> bool:
    """Whether a kernel's fused ops made a NaN or an infinity in the call that wrote the stats
    buffer array (row 0's flag holds that call's start stamp, inner_check.py)."""
    stamp = array[0, 0]
    return bool(stamp) and array[0, INNER_FLAG_COLUMN] == stamp


def hunted(function: CompiledFunction, array, i: int) -> bool:
    """Whether the replay's hunt looks at kernel row i, which a scan found non-finite or
    hiding what its ops made (hunt_mask): a mask kernel's row only for a NaN in its output."""
    mask = function.hunt_mask[i]
    if mask & (HUNT_COUNTS | HUNT_INNER):
        return True
    if not mask & HUNT_NAN:
        return False
    size, lt, gt, eq = array[i + 1, 1:5].tolist()
    return size != lt + gt + eq


def output_nonfinite(function: CompiledFunction, array, i: int) -> bool:
    """Whether kernel row i (0-based: buffer row i + 1) counted a NaN or an Inf in its output."""
    if not function.rows[i].health:
        return False
    size, lt, gt, eq, neg_inf, pos_inf = array[i + 1, 1:7].tolist()
    return bool(neg_inf or pos_inf or size != lt + gt + eq)


def inner_counts(array, site: InnerSite) -> list[tuple[int, int, int, int]]:
    """(op index, nan, neg_inf, pos_inf) of each op of site's kernel that made any in the call
    that wrote array, in the order the ops ran, when the kernel's output hides them (its
    counts are finite; a kernel whose output shows them is an alert of its own); empty when
    none did or the kernel did not run."""
    row = array[site.row]
    if not row[0] or not row[INNER_COLUMN] > 0:
        return []
    size, lt, gt, eq, neg_inf, pos_inf = row[1:7].tolist()
    if neg_inf or pos_inf or size != lt + gt + eq:
        return []
    out = []
    for slot, op in enumerate(site.ops):
        r, c = site.inner_row + slot // INNER_OPS_PER_ROW, 3 * (slot % INNER_OPS_PER_ROW)
        nan, neg_inf, pos_inf = (int(v) for v in array[r, c : c + 3].tolist())
        if nan or neg_inf or pos_inf:
            out.append((op, nan, neg_inf, pos_inf))
    return out


_KERNELS: dict[str, object] = {}
_KERNELS_LOCK = threading.Lock()


def kernel(dtype: str | None, health: bool = True, stats: bool = False) -> str:
    """The global name of the summary kernel of a dtype, for tensors of any rank, registered
    once per process (prebuilt into the wheel or compiled once per machine, kernel_cache.py),
    so that VM calls reach native code directly: dtype None is the timestamp-only kernel;
    health False writes sizes and dims only (SHAPE); stats adds FULL_STATS' statistics to the
    health counts. It leaves a row already written as it is (kernel_source.summary_source)."""
    name = kernel_name(dtype, health, stats)
    global_name = "tvmdbg." + name
    if global_name in _KERNELS:  # checked before any source is made: a call site costs a lookup
        return global_name
    source = tick_source(name) if dtype is None else summary_source(name, dtype, health, stats)
    return _register(name, source)


def register_kernel(name: str) -> str:
    """kernel() of a summary kernel known by its name (kernel_source.catalogue: what a saved
    executable calls, saved.py)."""
    global_name = "tvmdbg." + name
    if global_name in _KERNELS:
        return global_name
    source = source_of(name)
    if source is None:
        raise ValueError(f"tvmdbg has no summary kernel named {name!r}")
    return _register(name, source)


def _register(name: str, source: str) -> str:
    global_name = "tvmdbg." + name
    with _KERNELS_LOCK:
        if global_name not in _KERNELS:
            function = kernel_cache.load(name, source)
            tvm.register_global_func(global_name, function, override=True)
            _KERNELS[global_name] = function
        return global_name


def _callee_name(value) -> str | None:
    return _op_callee(value.op) if isinstance(value, relax.Call) else None


def _op_callee(op) -> str | None:
    """The name of a called GlobalVar or ExternFunc (None for other callees), read once per
    node: a lowered function calls a few kernels and builtins thousands of times."""
    key = op.__chandle__()
    found = _CALLEES.get(key)
    if found is None:
        if isinstance(op, relax.GlobalVar):
            name = str(op.name_hint)
        elif isinstance(op, relax.ExternFunc):
            name = str(op.global_symbol)
        else:
            name = None
        if len(_CALLEES) > 4096:
            _CALLEES.clear()
        found = _CALLEES[key] = (op, name)  # the node kept alive: its address stays its own
    return found[1]


_CALLEES: dict[int, tuple[object, str | None]] = {}


def target_kind(target: str) -> str:
    """The kind of a build's target as ExecutableInfo keeps it ("llvm -mcpu=..." or the JSON
    form TVM 0.27 prints, {"kind": "cuda", ...}); "" when unknown."""
    text = target.strip()
    if text.startswith("{"):
        try:
            return str(json.loads(text).get("kind", ""))
        except ValueError:
            return ""
    return text.split(" ", 1)[0] if text else ""


# Targets whose tensors the CPU summary kernels can read.
HOST_TARGETS = frozenset({"", "llvm", "c"})


def plan_supported(info: graphs.ExecutableInfo) -> bool:
    """Compile-time instrumentation handles straight-line kernel calls: DPS ones, and extern
    calls that return one tensor (summarised as their result var, like a kernel's output), of
    a CPU build: its summary kernels run on the host, and would read a GPU build's device
    memory (a CUDA build is traced by the VM instrument)."""
    if not info.source_mapped or not info.functions or target_kind(info.target) not in HOST_TARGETS:
        return False
    for function in info.functions.values():
        for site in function.sites:
            if site.call_type == "call_packed" and len(site.outputs) != 1:
                return False
    return True


def instrument(
    mod,
    info: graphs.ExecutableInfo,
    health: Summaries,
    params_in_kernels: bool = True,
    inner_ops: bool = True,
    weights_in_kernels: bool = True,
) -> tuple[object, dict[str, CompiledFunction]]:
    """Adds the summary calls to every Relax function of the lowered module mod, recording
    what `health` says;
    params_in_kernels: kernels that read a parameter element by element count it;
    inner_ops: fused kernels count the NaN and infinities their ops make (inner_check.py);
    weights_in_kernels: the functions' weights (graphs.FunctionInfo.weights) get summary rows
    like the other parameters; without, none (the tracer summarises them once per value:
    CompiledFunction.weights)."""
    functions: dict[str, CompiledFunction] = {}
    updates = {}
    kernels = _rewritten_kernels(mod, info, health, params_in_kernels, inner_ops, weights_in_kernels)
    by_name = {gvar.name_hint: kernel for gvar, kernel in kernels.items()}
    for gvar, func in mod.functions_items():
        if not isinstance(func, relax.Function) or gvar.name_hint not in info.functions:
            continue
        function_info = info.functions[gvar.name_hint]
        if not function_info.sites:
            continue
        skipped = () if weights_in_kernels else tuple(function_info.weights)
        new_func, compiled = _instrument_function(func, function_info, info.executable_id, health, by_name, skipped)
        updates[gvar] = new_func
        functions[function_info.name] = compiled
    if not functions:
        return mod, {}
    for gvar, func in [*updates.items(), *[(g, k.prim) for g, k in kernels.items()]]:
        mod[gvar] = func  # nothing changed before every function was done
    packed = tuple(sorted({name for kernel in kernels.values() for name in kernel.calls}))
    for compiled in functions.values():
        compiled.packed_kernels = packed
    return mod, functions


@dataclass
class _Rewritten:
    """A kernel of the module in the form its instrumented call sites call."""

    prim: object  # the new PrimFunc: the original's parameters, then stats, row, ...
    # epilogue.py: the kernel writes its output rows itself (no summary call after it), and
    # those of the inputs it counts too (their rows follow its own).
    writes_rows: bool = False
    stats: counting.StatsParams | None = None  # its stats parameters, when it writes its rows
    counted: tuple[int, ...] = ()
    inner: inner_check.InnerCheck | None = None  # its ops' check: an inner_row parameter last
    calls: tuple[str, ...] = ()  # the summary kernels it calls itself (packed calls)
    flagged: tuple = ()  # its output and that output's non-finite flag (epilogue.Counting.flagged)


def _rewritten_kernels(
    mod, info: graphs.ExecutableInfo, health: Summaries, params_in_kernels: bool, inner_ops: bool,
    weights_in_kernels: bool = True,
) -> dict:  # fmt: skip
    """The kernels of a CPU build that write their own rows, by GlobalVar (_Rewritten): in
    NO_TENSOR their outputs' stamps, in the health modes their output's counts (epilogue.py:
    a kernel whose every call is an instrumented site writing one tensor at the same
    position; one called from one site also counts the function parameters it reads element
    by element); in the modes with counts, the values their fused ops make (inner_check.py).
    Only kernels called from instrumented sites alone change their signature. Any other
    kernel, or any surprise, keeps the separate summary call and no inner check."""
    if not info.target.startswith("llvm"):  # a GPU kernel's blocks are thread-bound: counted apart
        return {}
    stamps = health is Summaries.TIMESTAMPS
    epilogues = health is Summaries.HEALTH
    inner_ops = inner_ops and health.counts and info.fused_module is not None
    if not stamps and not epilogues and not inner_ops:
        return {}
    plan = _kernel_plan(info, params_in_kernels, weights_in_kernels)
    elsewhere = set()
    for gvar, func in mod.functions_items():  # a kernel also called from elsewhere keeps its signature
        if isinstance(func, relax.Function) and gvar.name_hint not in plan.instrumented:
            elsewhere.update(used.name_hint for used in relax.analysis.all_global_vars(func))
    kernels = {}
    fused = _FusedModule(info.fused_module) if inner_ops else None
    with counting.walks_cached():  # epilogue.fuse, inner_check.owners and add walk a kernel's blocks
        for gvar, func in mod.functions_items():
            name = gvar.name_hint
            if not isinstance(func, tvm.tirx.PrimFunc) or name in elsewhere or name not in plan.outputs:
                continue
            rewritten = _Rewritten(func)
            try:  # an unexpected kernel shape: the separate summary calls serve it
                if stamps and plan.outputs[name]:
                    found = epilogue.stamp(func, plan.outputs[name])
                elif epilogues and plan.positions[name] is not None:
                    found = epilogue.fuse(func, plan.positions[name], plan.parameters.get(name, ()))
                else:
                    found = None
                if found is not None:
                    rewritten = _Rewritten(
                        found.prim, True, found.stats, found.inputs, calls=found.calls, flagged=found.flagged
                    )
            except Exception:
                pass
            site = plan.fused_sites.get(name)
            if inner_ops and site is not None:
                try:  # a kernel the check does not fit returns unchanged; an error is a bug, said
                    rewritten = _with_inner_check(rewritten, func, site, fused)
                except Exception as error:
                    warnings.warn(
                        f"tvmdbg: no inner-op check in kernel {name} ({error!r}): a NaN or Inf its ops make and "
                        "hide inside it is not seen",
                        RuntimeWarning,
                        stacklevel=2,
                    )
            if rewritten.prim is not func:
                for called in rewritten.calls:
                    register_kernel(called)
                kernels[gvar] = rewritten
    return kernels


@dataclass
class _KernelPlan:
    """What the call sites say of each kernel (by name), for _rewritten_kernels."""

    instrumented: set[str] = field(default_factory=set)  # functions with kernel call sites
    outputs: dict[str, int] = field(default_factory=dict)  # outputs at every site (0: they differ)
    positions: dict[str, int | None] = field(default_factory=dict)  # its one counted output's position
    parameters: dict[str, tuple[int, ...]] = field(default_factory=dict)  # its parameter inputs, at its only site
    fused_sites: dict[str, graphs.SiteInfo | None] = field(default_factory=dict)  # a site with its fused ops


def _kernel_plan(info: graphs.ExecutableInfo, params_in_kernels: bool, weights_in_kernels: bool) -> _KernelPlan:
    """weights_in_kernels: as instrument()'s (without, no kernel counts a function's weights)."""
    plan = _KernelPlan()
    for name, function in info.functions.items():
        if function.sites:
            plan.instrumented.add(name)
        skipped = () if weights_in_kernels else function.weights
        for site in function.sites:
            kernel = site.kernel
            single_site = kernel not in plan.parameters and params_in_kernels
            plan.parameters[kernel] = _parameter_inputs(site, skipped) if single_site else ()
            out = site.output_positions
            count = len(out) if not site.returns_value else 0
            plan.outputs[kernel] = count if plan.outputs.get(kernel, count) == count else 0
            single = len(out) == 1 and not site.inplace_indices and site.outputs and site.outputs[0][0] in HEALTH_DTYPES
            position = out[0] if single else None
            plan.positions[kernel] = position if plan.positions.get(kernel, position) == position else None
            has_ops = len(site.member_origins) > 1 and len(out) > 0 and not site.inplace_indices
            fused = plan.fused_sites.get(kernel, site)
            plan.fused_sites[kernel] = site if has_ops and fused is not None else None
    return plan


class _FusedModule:
    """The FuseOps snapshot as the inner check reads it, kernel after kernel: its functions by
    name and its PrimFuncs' block names, each found once per build (the kernels of a model
    share most of their member PrimFuncs)."""

    def __init__(self, module):
        self.module = module
        self._block_names: dict[str, list[str] | None] = {}

    def members(self, kernel: str) -> list[list[str] | None] | None:
        """The block names of each binding of the fused function named kernel (None for a
        binding that calls no PrimFunc); None when there is no such Relax function."""
        # Looked up by name (two FFI calls), not by a map of every function's name; an
        # IRModule has no get().
        if kernel not in self.module:
            return None
        group = self.module[kernel]
        if not isinstance(group, relax.Function):
            return None
        members = []
        for binding in graphs._bindings(group.body):
            value = binding.value
            callee = value.args[0] if isinstance(value, relax.Call) and len(value.args) else None
            members.append(self._names(callee) if isinstance(callee, relax.GlobalVar) else None)
        return members

    def _names(self, callee) -> list[str] | None:
        name = callee.name_hint
        if name not in self._block_names:
            func = self.module[callee]
            self._block_names[name] = inner_check.block_names(func) if isinstance(func, tvm.tirx.PrimFunc) else None
        return self._block_names[name]


def _with_inner_check(rewritten: _Rewritten, original, site: graphs.SiteInfo, fused: _FusedModule) -> _Rewritten:
    """rewritten also counting the NaN and infinities its fused ops make (inner_check.py): its
    blocks matched to the ops of its group in the FuseOps snapshot."""
    members = fused.members(site.kernel)
    if members is None:
        return rewritten
    owners = inner_check.owners(original, members)
    if owners is None:
        return rewritten
    origins = site.member_origins
    moved = {k for k, origin in enumerate(origins) if origin is not None and origin.op_type in inner_check.PASS_THROUGH}
    owners = {block: k for block, k in owners.items() if k not in moved}
    found = inner_check.add(rewritten.prim, owners, rewritten.stats, rewritten.flagged)  # the epilogue's parameters
    if found is None:
        return rewritten
    prim, check = found
    calls = (*rewritten.calls, *check.calls)
    return _Rewritten(prim, rewritten.writes_rows, rewritten.stats, rewritten.counted, check, calls)


def _parameter_inputs(site: graphs.SiteInfo, skipped=()) -> tuple[int, ...]:
    """The positions of a site's inputs that are tensor parameters of its function, passed
    as themselves (not a view of one), the first position of a parameter passed twice; none
    of the `skipped` parameters (weights the tracer summarises)."""
    if len(site.inputs) != site.num_inputs:
        return ()
    first: dict[int, int] = {}
    for q, source in enumerate(site.inputs):
        if (
            source.param_index >= 0
            and source.tuple_item < 0
            and not source.viewed
            and source.param_index not in skipped
        ):
            first.setdefault(source.param_index, q)
    return tuple(first.values())


def _instrument_function(
    func, function_info: graphs.FunctionInfo, executable_id, health: Summaries, kernels=None, skipped=()
):
    """skipped: the positions of the parameters that get no summary row (weights the tracer
    summarises once per value)."""
    if not isinstance(func.body, relax.SeqExpr):
        raise ValueError(f"{function_info.name}: control flow is traced by the VM instrument")
    return _FunctionInstrumenter(func, function_info, executable_id, health, kernels or {}, skipped).run()


class _FunctionInstrumenter:
    """One Relax function with its summary calls (instrument()): the stats buffer's rows laid
    out, the prologue, then one walk over the bindings that adds each site's summaries."""

    def __init__(
        self, func, function_info: graphs.FunctionInfo, executable_id, health: Summaries, kernels: dict, skipped=()
    ):
        self.func, self.function_info, self.executable_id = func, function_info, executable_id
        self.health, self.kernels = health, kernels  # kernel name -> _Rewritten (_rewritten_kernels)
        self.skipped = tuple(skipped)  # parameters with no row: weights the tracer summarises
        self._lay_out_rows()
        self.fid = next(_FIDS)
        self.stats_ty = relax.TensorType((self.nrows, ROW_WIDTH), "float64")
        self.stats = relax.Var("tvmdbg_stats", self.stats_ty)
        self.tick_name = kernel(None)
        self.output_rows: dict[int, int] = dict(self.param_row)
        self.values: dict[int, object] = {}  # the tuples bound to vars, for _leaves

    def _lay_out_rows(self) -> None:
        """Row 0 the start stamp, then a row per site output, per summarised parameter, per
        leaf of a summarised tuple parameter, and the sites' inner-op rows last."""
        func, health = self.func, self.health
        self.rows: list[RowInfo] = []
        self.plan: list[tuple[graphs.SiteInfo, list[int]]] = []
        for site in self.function_info.sites:
            positions = site.output_positions
            self.plan.append((site, positions))
            for slot in range(len(positions)):
                dtype = site.outputs[slot][0] if slot < len(site.outputs) else ""
                self.rows.append(
                    RowInfo(site, slot, dtype, health is not Summaries.TIMESTAMPS and dtype in HEALTH_DTYPES)
                )
        self.counts = health.counts  # SHAPE reads the outputs' dims, nothing else
        self.params = [
            p for k, p in enumerate(func.params) if self.counts and k not in self.skipped and _summarisable(p)
        ]
        self.leaf_specs = [_tuple_leaf_specs(p) for p in func.params]
        # FULL_STATS keeps summarising tuples in numpy: their statistics combine the tensors'.
        summarised = health is Summaries.HEALTH
        self.tuples = [
            (k, p)
            for k, p in enumerate(func.params)
            if summarised and k not in self.skipped and self.leaf_specs[k] and _leaves_summarisable(p.ty)
        ]
        first_inner = 1 + len(self.rows) + len(self.params) + sum(len(self.leaf_specs[k]) for k, _ in self.tuples)
        self.inner = self._inner_checks(first_inner)
        self.inner_row_of = {check.site.position: check.inner_row for check in self.inner}
        self.nrows = self.inner[-1].inner_row + self.inner[-1].num_rows if self.inner else first_inner
        # Parameters a kernel counts as it reads them: no summary in the prologue.
        self.param_row = {hash(p): 1 + len(self.rows) + j for j, p in enumerate(self.params)}
        self.in_kernel = {
            hash(func.params[site.inputs[q].param_index])
            for site in self.function_info.sites
            for q in (self.kernels[site.kernel].counted if site.kernel in self.kernels else ())
        }

    def _inner_checks(self, first_inner: int) -> list[InnerSite]:
        """The rows of each site's inner-op check, after all others."""
        inner: list[InnerSite] = []
        row = 1
        for site in self.function_info.sites:
            check = self.kernels[site.kernel].inner if site.kernel in self.kernels else None
            if check is not None:
                start = inner[-1].inner_row + inner[-1].num_rows if inner else first_inner
                inner.append(InnerSite(site, row, start, check.ops))
            row += len(site.output_positions)
        return inner

    def summary(self, value, row: int, wanted: bool) -> relax.VarBinding:
        """A health kernel on value writing `row`, or a bare timestamp."""
        name = _health_kernel(value, self.health is Summaries.STATS) if wanted else None
        if name is not None:
            return _binding(name, [value, self.stats, _row(row)])
        return _binding(self.tick_name, [self.stats, _row(row)])

    def _prologue(self) -> list:
        """Before the first kernel (after the VM checked the arguments): get the buffer,
        summarise the tensor parameters and the leaves of tuple ones, stamp the start."""
        call = relax.Call(relax.ExternFunc(STATS_FUNC), [_row(self.fid), _row(self.nrows)], ty_args=[self.stats_ty])
        prologue = [
            relax.VarBinding(self.stats, call),
            *[self.summary(p, self.param_row[hash(p)], True) for p in self.params if hash(p) not in self.in_kernel],
        ]
        self.leaf_rows: list[list[int] | None] = [None] * len(self.func.params)
        next_row = 1 + len(self.rows) + len(self.params)
        for k, p in self.tuples:
            self.leaf_rows[k] = []
            for leaf in _tuple_items(p, prologue):
                prologue.append(self.summary(leaf, next_row, True))
                self.leaf_rows[k].append(next_row)
                next_row += 1
        prologue.append(self.summary(None, 0, False))
        return prologue

    def run(self) -> tuple[object, CompiledFunction]:
        func, body = self.func, self.func.body
        self.pending_prologue = self._prologue()
        self.next_site, self.row = 0, 1
        self.next_kernel = self.plan[0][0].kernel if self.plan else None  # the kernel of the next site
        blocks = [relax.BindingBlock(self._block(block)) for block in graphs.items(body.blocks)]
        if self.next_site != len(self.plan):
            name = self.function_info.name
            raise ValueError(f"{name}: found {self.next_site} of {len(self.plan)} kernel call sites")
        new_body = relax.SeqExpr(blocks, body.body)
        new_func = relax.Function(func.params, new_body, func.ret_ty, func.is_pure, func.attrs, func.span)
        return new_func, self._compiled(body)

    def _block(self, block) -> list:
        """A binding block's bindings with the summaries of its sites.

        One walk reads each binding and its value once (each FFI read is a call; a slice reads
        a tvm_ffi Array in one comprehension, not one checked __getitem__ per element), holding
        no more IR wrappers than the new blocks need: each is a GC-tracked Python object, and
        thousands of them kept at once trigger collections of the whole heap."""
        call_type, op_type = relax.Call, tvm.ir.Op  # read once, not per binding
        bindings = []
        for binding in graphs.items(block.bindings):
            value = binding.value
            # Most bindings of a lowered function are calls of ops (allocations, checks):
            # told apart from kernel calls by one read of the callee.
            if isinstance(value, call_type):
                op = value.op
                callee = None if isinstance(op, op_type) else _op_callee(op)
                if callee == "vm.builtin.make_tuple":
                    self.values[hash(binding.var)] = value
            else:
                op = callee = None
                if isinstance(value, relax.If):
                    raise ValueError(f"{self.function_info.name}: control flow is traced by the VM instrument")
                if isinstance(value, relax.Tuple):
                    self.values[hash(binding.var)] = value
            is_site = callee is not None and callee == self.next_kernel
            if is_site and self.pending_prologue:
                bindings.extend(self.pending_prologue)
                self.pending_prologue = []
            bindings.append(binding)
            if is_site:
                self._site(bindings, binding, op, callee)
        return bindings

    def _site(self, bindings: list, binding, op, callee: str) -> None:
        """The summaries after the next site's call (bindings[-1]); none after a kernel that
        writes its own rows (_rewritten_kernels), which gets the buffer and its rows instead."""
        site, positions = self.plan[self.next_site]
        call_args = binding.value.args
        nargs = graphs.array_size(call_args)
        rewritten = self.kernels.get(callee) if isinstance(op, relax.GlobalVar) else None
        writes = rewritten is not None and rewritten.writes_rows
        if rewritten is not None:
            self._rewrite_call(bindings, binding, op, rewritten)
        stats, tick_name = self.stats, self.tick_name
        for position in positions:
            info = self.rows[self.row - 1]
            if site.returns_value:  # an extern call: its result is the binding's var
                out = binding.var
            else:
                out = graphs.array_item(call_args, position) if position < nargs else None
            if writes:  # its counts in the health modes, its stamp in NO_TENSOR
                info.fused = True
            else:
                name = None
                if info.health and out is not None:
                    name = _site_kernel(site, info.slot, out, self.health is Summaries.STATS, self.counts)
                info.health = name is not None
                row = _row(self.row)
                bindings.append(_binding(name, [out, stats, row]) if name else _binding(tick_name, [stats, row]))
            if out is not None:
                self.output_rows.setdefault(hash(out), self.row)
            self.row += 1
        self.next_site += 1
        self.next_kernel = self.plan[self.next_site][0].kernel if self.next_site < len(self.plan) else None

    def _rewrite_call(self, bindings: list, binding, op, rewritten: _Rewritten) -> list:
        """The call of a kernel counting in its own loops, with the buffer and its row, then
        those of the parameters it counts (it writes their rows, epilogue.py), then its
        inner-op rows; those parameters."""
        value = binding.value
        args = graphs.items(value.args)
        counted_params = [args[q] for q in rewritten.counted]
        site = self.plan[self.next_site][0]
        expected = [self.func.params[site.inputs[q].param_index] for q in rewritten.counted]
        if any(hash(p) != hash(e) or hash(p) not in self.param_row for p, e in zip(counted_params, expected)):
            raise ValueError(f"{self.function_info.name}: `{site.kernel}` counts an input that is not its parameter")
        extra = [_row(self.param_row[hash(p)]) for p in counted_params]
        if rewritten.inner is not None:
            extra.append(_row(self.inner_row_of[self.next_site]))
        call = relax.Call(op, [*args, self.stats, _row(self.row), *extra], value.attrs, value.ty_args)
        bindings[-1] = relax.VarBinding(binding.var, call)
        return counted_params

    def _compiled(self, body) -> CompiledFunction:
        func = self.func
        compiled = CompiledFunction(
            self.fid,
            self.executable_id,
            self.function_info.name,
            self.rows,
            self.health is not Summaries.TIMESTAMPS,
            self.nrows,
        )
        compiled.param_rows = [self.output_rows.get(hash(p)) for p in func.params]
        leaves = _leaves(body.body, self.values)
        compiled.output_rows = [self.output_rows.get(hash(v)) if isinstance(v, relax.Var) else None for v in leaves]
        compiled.param_specs = [_static_spec(p) for p in func.params]
        compiled.output_specs = [_static_spec(v) for v in leaves]
        compiled.param_leaf_specs = self.leaf_specs
        compiled.param_leaf_rows = self.leaf_rows
        compiled.params_in_kernels = [k for k, p in enumerate(func.params) if hash(p) in self.in_kernel]
        compiled.inner = self.inner
        compiled.weights = self.skipped
        return compiled


def _tuple_leaf_specs(param) -> list[tuple[str, tuple[int, ...]]] | None:
    """The static (dtype, shape) of each tensor of a tuple parameter, flattened; None unless
    every leaf is a tensor of static shape."""
    ty = getattr(param, "ty", None)
    if not isinstance(ty, relax.TupleType) or not _all_tensors(ty):
        return None
    specs = graphs.tensor_specs(ty)
    if not specs or any(not dtype or any(d < 0 for d in shape) for dtype, shape, _ in specs):
        return None
    return [(dtype, shape) for dtype, shape, _ in specs]


def _all_tensors(ty) -> bool:
    if isinstance(ty, relax.TupleType):
        return all(_all_tensors(f) for f in ty.fields)
    return isinstance(ty, relax.TensorType)


def _leaves_summarisable(ty) -> bool:
    if isinstance(ty, relax.TupleType):
        return all(_leaves_summarisable(f) for f in ty.fields)
    return isinstance(ty, relax.TensorType) and str(ty.dtype) in HEALTH_DTYPES and 0 <= int(ty.ndim) <= MAX_RANK


def _tuple_items(value, bindings: list) -> list:
    """Vars bound (appended to bindings) to the tensors of a tuple value, depth first: the
    order in which summary.flatten lists the runtime tuple's tensors."""
    ty = value.ty
    if not isinstance(ty, relax.TupleType):
        return [value]
    out = []
    for i, field_ty in enumerate(ty.fields):
        item = relax.Var("tvmdbg_item", field_ty)
        bindings.append(relax.VarBinding(item, relax.TupleGetItem(value, i)))
        out.extend(_tuple_items(item, bindings))
    return out


def _static_spec(value) -> tuple[str, tuple[int, ...]] | None:
    """A tensor's static (dtype, shape); None for other values (a tuple of one tensor too)."""
    if not isinstance(getattr(value, "ty", None), relax.TensorType):
        return None
    specs = graphs.tensor_specs(value.ty)
    if len(specs) != 1 or any(d < 0 for d in specs[0][1]) or not specs[0][0]:
        return None
    return specs[0][0], specs[0][1]


def _site_kernel(site: graphs.SiteInfo, slot: int, out, stats: bool, counts: bool) -> str | None:
    """The summary kernel of a call site's output: from the output spec the graph walk read
    (graphs.tensor_specs of the call's output type, which CallTIRRewrite allocated the output
    from: same dtype, same rank), without reading the lowered value's type again (an FFI
    read per site); an in-place output (an input tensor) or a spec without a known rank reads it."""
    spec = site.outputs[slot] if slot < len(site.outputs) else None
    if spec is None or site.inplace_indices or not (spec[1] or spec[2]):
        return _health_kernel(out, stats, counts=counts)
    return _kernel_of(spec[0], len(spec[1]), counts, stats)


def _health_kernel(value, stats: bool, counts: bool = True) -> str | None:
    """The summary kernel of a tensor value (its type read once), None when not summarisable;
    without counts, the kernel writing its size and dims (SHAPE)."""
    ty = getattr(value, "ty", None)
    if not isinstance(ty, relax.TensorType):
        return None
    element = ty.dtype
    if element is None:
        return None
    dtype = graphs.dtype_name(element)  # read once per distinct PrimType, not per site
    return _kernel_of(dtype, int(ty.ndim), counts, stats)


def _kernel_of(dtype: str, rank: int, counts: bool, stats: bool) -> str | None:
    key = (dtype, rank, counts, stats)
    name = _SITE_KERNELS.get(key)
    if name is None:
        if dtype not in HEALTH_DTYPES or not 0 <= rank <= MAX_RANK:
            return None
        name = _SITE_KERNELS[key] = kernel(dtype, counts, stats)
    return name


# (dtype, rank, counts, stats) -> kernel(...)'s name: a call site costs one lookup.
_SITE_KERNELS: dict[tuple[str, int, bool, bool], str] = {}


def _summarisable(value) -> bool:
    ty = getattr(value, "ty", None)
    return (
        isinstance(ty, relax.TensorType)
        and ty.dtype is not None
        and str(ty.dtype) in HEALTH_DTYPES
        and 0 <= int(ty.ndim) <= MAX_RANK
    )


def _leaves(expr, values: dict) -> list:
    """The returned values, flattened like the runtime tuple (lowered tuples are built by
    vm.builtin.make_tuple)."""
    if isinstance(expr, relax.Var) and hash(expr) in values:
        value = values[hash(expr)]
        if _callee_name(value) == "vm.builtin.make_tuple":
            expr = relax.Tuple(list(value.args))
        elif isinstance(value, relax.Tuple):  # a nested tuple bound to a var (the optimizer's)
            expr = value
    if isinstance(expr, relax.Tuple):
        out = []
        for item in expr.fields:
            out.extend(_leaves(item, values))
        return out
    return [expr]


# The summary calls are built with the FFI constructors the Python classes wrap: the same
# nodes (relax.prim_value(IntImm) is the IntImm itself; relax.Call defaults ret_ty to
# Type.missing()) without the wrappers' argument conversion, which is most of a call site's
# instrumentation cost.
_new_int = tvm.ir._ffi_api.IntImm
_new_var = tvm.ir._ffi_api.Var
_new_call = tvm.ir._ffi_api.Call
_new_binding = relax._ffi_api.VarBinding


def _row(row: int):
    """The int64 immediate of a row number (or function id), shared by every build: IR nodes
    are immutable, and a 1000-kernel function needs a thousand of them."""
    if row < len(_ROWS):
        return _ROWS[row]
    if row < _MAX_SHARED_ROWS:
        with _ROWS_LOCK:  # each entry appended at its own index, whichever thread builds
            while len(_ROWS) <= row:
                _ROWS.append(_new_int("int64", len(_ROWS), None))
        return _ROWS[row]
    return _new_int("int64", row, None)


_ROWS: list = []
_ROWS_LOCK = threading.Lock()
_MAX_SHARED_ROWS = 1 << 16


_VOID = relax.TupleType([])
_VOIDS = tvm_ffi.convert([_VOID])  # the calls' ty_args, converted once
_MISSING = tvm.ir.Type.missing()


_EXTERNS: dict[str, object] = {}  # immutable IR nodes shared by every call site of a build


def _binding(name: str, args) -> relax.VarBinding:
    """A call of the registered summary kernel `name` (kernel()) on args."""
    callee = _EXTERNS.get(name)
    if callee is None:
        callee = _EXTERNS[name] = relax.ExternFunc(name)
    call = _new_call(_MISSING, callee, args, None, _VOIDS, None)
    return _new_binding(_new_var("_", _VOID, None), call, None)
