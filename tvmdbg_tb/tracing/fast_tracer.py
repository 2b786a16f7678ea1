"""Tracing executables instrumented at compile time (compiled.py): no per-kernel Python.

Per top-level call, Python does three things: hands out the stats buffer when the function
asks for it ("tvmdbg.stats"), reads it once when the call returns, and turns its rows into
trace payloads: each op's constant fields are serialized once per session and only the
execution index, the summary values, the runtime shape and the duration are appended
(protobuf merges repeated fields, so concatenated messages parse as one).
"""

from __future__ import annotations

import math
import platform
import struct
import threading
import time
import warnings
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import tvm

from tvmdbg_tb.capture import compiled
from tvmdbg_tb.capture import frames as frames_mod
from tvmdbg_tb.events import modes, native_records
from tvmdbg_tb.events.modes import Counts, Summaries
from tvmdbg_tb.events.summaries import dtype_code
from tvmdbg_tb.events.trace_parts import TraceParts
from tvmdbg_tb.events.wire import field_tag
from tvmdbg_tb.events.wire import varint as _varint
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import call_plans, execution_template, native_call, native_rows, param_cache
from tvmdbg_tb.tracing.native_call import NativePlan, native_plan
from tvmdbg_tb.tracing.session import RuntimeFunction, Session, TraceBatch
from tvmdbg_tb.tracing.summary import debug_values, flatten, is_tensor, top_level_size, tuple_health_values
from tvmdbg_tb.tracing.vm_tracer import Tracer, _message

_perf = time.perf_counter
_F64 = struct.Struct("<d")
_CALL_NUMBER_TAG = field_tag(pb.Execution, "call_number")


def supported_platform() -> bool:
    """The timestamps come from the x86 time-stamp counter."""
    return platform.machine().lower() in ("x86_64", "amd64")


def usable(session: Session, vm: Any) -> bool:
    """Whether vm's executable was instrumented at compile time in a way this session can use."""
    info = getattr(vm, "_tvmdbg_info", None)
    wanted = modes.spec(session.mode).summary
    if info is None or not info.compiled or session.want_nonfinite or wanted is None:
        return False
    if session.trace_fused_ops:  # deep mode needs the kernels' live inputs
        return False
    built = info.compiled_health
    if wanted is Summaries.STATS:
        return built is Summaries.STATS
    if wanted is Summaries.SHAPE:  # sizes and dims: every build but NO_TENSOR's writes them
        return built is not Summaries.TIMESTAMPS
    return wanted is Summaries.TIMESTAMPS or built.counts


class _FastCall:
    __slots__ = (
        "tracer",
        "index",
        "number",
        "function",
        "buffers",
        "start",
        "implicit",
        "bad",
        "fid",
        "skips",
        "inner",
        "plan",
    )

    def __init__(
        self,
        tracer: CompiledTracer,
        function: RuntimeFunction,
        implicit: bool,
        started: tuple[int, int, float, list] | None = None,
    ):
        """started: (index, call number, start, buffers) of a call native_call began."""
        self.tracer = tracer
        self.function = function
        if started is None:
            self.index = tracer.session.next_execution_index()
            self.number = tracer.next_call_number(function.name)  # Execution.call_number
            self.buffers: list[tuple[int, Any, np.ndarray]] = []
            self.start = _perf()
        else:
            self.index, self.number, self.start, self.buffers = started
        self.implicit = implicit
        self.bad: tuple[int, int, bool] | None = None  # first non-finite row, while replay hunts (scan_buffers)
        self.fid = 0
        # Parameter rows whose tensor was summarised before: [(row, param_cache entry)].
        self.skips: list = []
        # The inner-op check's trace bytes by (fid, buffer row), when a kernel's ops made NaN/Inf.
        self.inner: dict[tuple[int, int], bytes] | None = None
        self.plan: NativePlan | None = None  # the plan native_call ran call_rows with, if it did


class _Local(threading.local):
    """A thread's call state. `call` and `implicit` stay plain attributes (no properties):
    native_call reads and sets them as items of the thread's __dict__."""

    call: _FastCall | None = None
    implicit: tuple | None = None  # (tracer, function name, frames, user_index) in time_evaluator

    def __init__(self):
        self.call = self.implicit = None  # in the thread's __dict__ from the start (see native_call)
        self.pool: dict[int, list[tuple[Any, np.ndarray, bool]]] = {}


_LOCAL = _Local()


def _new_buffer(nrows: int) -> tuple[Any, np.ndarray]:
    """A new stats buffer of nrows rows, every row unwritten: (tensor, its numpy view)."""
    tensor = tvm.runtime.tensor(np.zeros((nrows, compiled.ROW_WIDTH), "float64"))
    return tensor, np.from_dlpack(tensor)


def _buffer(fid: int, nrows: int) -> tuple[Any, np.ndarray, bool]:
    """A free stats buffer of function fid: (tensor, its array, whether its column 0 is
    already all 0: every row unwritten). From native_call's pool once it serves tvmdbg.stats
    (one pool for both paths), else this thread's."""
    if _NATIVE_POOL:
        found = _NATIVE_POOL[0].take(fid, nrows)
        return found if found is not None else (*_new_buffer(nrows), True)
    free = _LOCAL.pool.setdefault(fid, [])
    if free:
        return free.pop()
    return (*_new_buffer(nrows), True)


def _release(fid: int, tensor, array, clean: bool = False) -> None:
    """Back to the pool; clean: its column 0 was set to 0 already (native_rows.call_rows
    does so while it reads the rows, cheaper than a numpy assignment per call)."""
    if _NATIVE_POOL:
        _NATIVE_POOL[0].release(fid, tensor, array, clean)
    else:
        _LOCAL.pool.setdefault(fid, []).append((tensor, array, clean))


def _stats(fid, nrows) -> Any:
    """The "tvmdbg.stats" packed function: the buffer (nrows rows) an instrumented function
    writes its rows to. It must never raise and must return nrows rows: kernels write there."""
    fid, nrows = int(fid), int(nrows)
    try:
        call = _LOCAL.call
        if _LOCAL.implicit is not None:
            call = _LOCAL.implicit[0]._implicit_call(fid)
        if fid not in compiled.FUNCTIONS:
            call = None  # compiled in another process: nothing maps the rows
        tensor, array, clean = _buffer(fid, nrows)
        if not clean:  # all of it: the inner-op check's cells too (a flagged call's: native_rows' Call)
            array[...] = 0.0
        if call is not None and call.skips and fid == call.fid and not call.buffers:
            for row, _ in call.skips:  # the guarded parameter kernels leave these rows
                array[row, 0] = param_cache.SKIPPED
        if call is None:  # an untraced call (tvmdbg disabled, or a raw module call)
            _release(fid, tensor, array)
        else:
            call.buffers.append((fid, tensor, array))
        return tensor
    except Exception:
        return tvm.runtime.tensor(np.zeros((nrows, compiled.ROW_WIDTH), "float64"))


tvm.register_global_func(compiled.STATS_FUNC, _stats, override=True)
_PYTHON_STATS = tvm.get_global_func(compiled.STATS_FUNC)
_NATIVE_POOL: list = []  # native_call once it serves tvmdbg.stats (install_native_stats)


def install_native_stats() -> None:
    """tvmdbg.stats served by native_call (its C function and buffer pool) once the library is
    loaded: the common traced call then hands its buffer out with no Python. An executable's
    VM resolves the function when it is created: one created before keeps this module's."""
    module = native_call.LIBRARY.loaded()
    if module is None or _NATIVE_POOL:
        return
    try:
        module.install_stats(_PYTHON_STATS, _new_buffer, compiled.ROW_WIDTH)
    except Exception as error:  # the Python function keeps serving
        warnings.warn(f"tvmdbg: the native tvmdbg.stats is unavailable: {error!r}", RuntimeWarning, stacklevel=2)
        return
    _NATIVE_POOL.append(module)


def flush_implicit() -> None:
    """Ends this thread's pending time_evaluator repetition (the session is ending)."""
    call = _LOCAL.call
    if call is not None and call.implicit:
        _LOCAL.call = None
        call.tracer._finish_fast(call, (), None, None, (), -1)


_CYCLES_PER_US: list[float] = []


def cycles_per_us() -> float:
    """Time-stamp counter rate, measured once against perf_counter."""
    if not _CYCLES_PER_US:
        tick = tvm.get_global_func(compiled.kernel(None))
        stats = tvm.runtime.tensor(np.zeros((2, compiled.ROW_WIDTH), "float64"))
        view = np.from_dlpack(stats)
        tick(stats, 0)
        start = _perf()
        while _perf() - start < 0.02:
            pass
        tick(stats, 1)
        elapsed = _perf() - start
        _CYCLES_PER_US.append(max((view[1, 0] - view[0, 0]) / (elapsed * 1e6), 1e-9))
    return _CYCLES_PER_US[0]


class CompiledTracer(Tracer):
    """Traces a VM whose executable carries the summary kernels (no VM instrument)."""

    def __init__(self, session: Session, vm: Any, native_calls: bool = True):
        """native_calls: the common call may run in C++ (native_call.cc) once it is built;
        False pins the Python path (tracing.state.Paths)."""
        self.session = session
        self.mode = session.mode
        self.mode_spec = modes.spec(self.mode)
        info = vm._tvmdbg_info
        self.program = session.program(info, vm)
        self.function_names = frozenset(info.functions)
        self._local = threading.local()
        self._count_calls(session)
        self._fids = {name: function.fid for name, function in info.compiled.items()}  # name -> fid
        self._native_calls = native_calls
        self._statics: dict[int, tuple[list[bytes], list[bool]]] = {}
        self._execution_statics: dict[tuple[str, int], bytes | None] = {}
        self._health_templates: dict[tuple[int, int, int], tuple | None] = {}
        self._locations: dict[tuple, bytes] = {}
        # The Execution's constant bytes in this mode (None: the generic path builds it).
        if self.mode_spec.counts is None:  # NO_TENSOR, SHAPE
            self._execution_bytes = lambda call, num_inputs, num_leaves: self._static_execution(
                call.function, num_inputs, num_leaves
            )
        else:
            self._execution_bytes = self._health_execution
        self._rate = cycles_per_us()
        self._cache = session.param_cache  # param_summaries="once_per_value"
        self._plans: dict[int, _PartsPlan | None] = {}  # fid -> how _parts builds its traces
        self._one_pass_args: dict[tuple[int, int, int], tuple | None] = {}  # (fid, inputs, leaves) -> _call_rows_args
        # (fid, inputs, leaves) -> the rows reused last (param_cache), the call they were first
        # seen in, and their template and plan (_reused_plan).
        self._reused_plans: dict[tuple[int, int, int], tuple] = {}
        self._leaf_counts: dict[str, tuple[int, int]] = {}  # function -> (top-level size, leaves)
        self._vm = weakref.ref(vm)
        self._native: Any = None  # native_call.Tracer once built (False: not for this tracer)
        self._learner = call_plans.PlanLearner(self)  # its plans for calls with objects, weights, shapes
        vm._set_instrument(None)
        native_rows.LIBRARY.start_loading()
        native_call.LIBRARY.start_loading()
        install_native_stats()

    def traced(self, name: str, function, fallback):
        """What vm[name] returns: function traced by native_call when it can serve it, else
        fallback (vm_wrapper.TracedFunction: the Python path, which native_call also uses for
        the calls it does not serve)."""
        native = self._native
        if native is None:
            native = self._native_tracer()
        fid = self._fids.get(name)
        if not native or fid is None:
            return fallback
        return native.bind(name, fid, function, fallback)

    def _native_tracer(self) -> Any:
        """native_call's Tracer (None: not built yet, False: this tracer never uses it; the
        parameter cache's skipped rows and the deep mode keep the Python path)."""
        libraries = (native_call.LIBRARY, native_rows.LIBRARY, native_records.LIBRARY)
        if not self._native_calls or self._cache is not None or not native_call.LIBRARY.enabled():
            self._native = False
        elif all(library.loaded() is not None for library in libraries):
            install_native_stats()
            call, rows, framing = (library.loaded() for library in libraries)
            ids = self.session.execution_ids
            self._native = call.Tracer(
                self, _LOCAL, ids, self.session, self.call_numbers, rows.CALL_ROWS, framing.QUEUE_CALL
            )
        elif any(library.failure() is not None for library in libraries):
            self._native = False
        return self._native

    # -- native_call's hooks: what its C++ hands back to Python --------------------------

    def _native_location(self) -> tuple[bytes, frames_mod.Stack, int]:
        """The caller's CodeLocation bytes, stack and user frame (a new call point)."""
        frames, user_index = frames_mod.capture_call(1)
        return self._location_bytes(frames, user_index), frames, user_index

    def _native_plan(self, name: str, num_inputs: int) -> NativePlan | None:
        """The static plan (no guard) of name called with num_inputs arguments; None when
        native_call serves it only with the plans call_plans learns. Its outputs' count is the
        function's static one (a Relax function's return structure is fixed at compile time)."""
        fid = self._fids[name]
        function = compiled.FUNCTIONS.get(fid)
        if function is None or not function.output_specs or not all(function.output_specs):
            return None
        runtime = self.session.function(self.program, name)
        plan = self._one_pass_args_of(runtime, fid, num_inputs, len(function.output_specs))
        if plan is None or (plan.summaries is None and plan.execution is None):
            return None
        return plan

    def _native_finish(
        self, name: str, invoke, index: int, call_number: int, start: float, buffers: list, args: tuple, result,
        error, frames, user_index: int, rows: tuple | None, plan: NativePlan | None = None,
    ) -> None:  # fmt: skip
        """What call() does after the VM returned, for a call native_call began and does not
        finish itself; rows: call_rows' result when it ran, with plan (the very object
        _native_plan or call_plans made: plans forgotten since cannot change which)."""
        call = _FastCall(self, self.session.function(self.program, name), False, (index, call_number, start, buffers))
        call.plan = plan
        self._after_call(call, invoke, args, args, result, error, frames, user_index, rows)

    def _native_emit(
        self, payload: bytes, statics, which: bytes, middle: bytes, tails: bytes, width: int, nonfinite: bool | None
    ) -> None:
        """A finished call's records when a sink other than the writer is busy."""
        traces = TraceParts(statics, which, middle, tails, width)
        self._safely(self.session.serialized_execution_done, payload, traces, nonfinite)

    def _native_warn(self, error: BaseException) -> None:
        """native_call could not record a call (as _record says it; the writer counts it)."""
        warnings.warn(f"tvmdbg: could not record a VM call: {error!r}", RuntimeWarning, stacklevel=2)
        self.session.unrecorded(None, "", -1, error)

    def call(self, function_name: str, invoke, args: tuple, inputs: tuple, get_outputs=None) -> Any:
        if _LOCAL.call is not None or _LOCAL.implicit is not None:
            return invoke(*args)
        frames, user_index = frames_mod.capture_call(2)
        call = _FastCall(self, self.session.function(self.program, function_name), implicit=False)
        if self._cache is not None:
            self._safely(self._plan_skips, call, inputs)
        _LOCAL.call = call
        try:
            result = invoke(*args)
        except BaseException as error:
            _LOCAL.call = None
            self._after_call(call, invoke, args, inputs, None, error, frames, user_index)
            raise
        _LOCAL.call = None
        outputs = get_outputs() if get_outputs is not None else result
        self._after_call(call, invoke, args, inputs, outputs, None, frames, user_index)
        return result

    def _after_call(self, call: _FastCall, invoke, args, inputs, outputs, error, frames, user_index, rows=None) -> None:
        """A call's records (_finish_fast), then, when the replay found its first non-finite
        row, the call re-run (tvmdbg_tb.replay.auto); for call() and native_call alike."""
        holding = self.session.hold_listeners()
        try:
            self._record(self._finish_fast, call, inputs, outputs, error, frames, user_index, rows)
            if error is None and call.bad is not None and self._vm() is not None:
                replayer = self.session.replay
                self._safely(replayer.rerun, self, self._vm(), invoke, args, call.function.name, call.index, call.bad)
        finally:
            if holding:
                self.session.release_listeners()

    def timed(self, function_name: str, evaluator, args: tuple) -> Any:
        if _LOCAL.call is not None:
            return evaluator(*args)
        frames, user_index = frames_mod.capture_call(2)
        _LOCAL.implicit = (self, function_name, frames, user_index)
        try:
            return evaluator(*args)
        finally:
            _LOCAL.implicit = None
            call, _LOCAL.call = _LOCAL.call, None
            if call is not None:
                self._record(self._finish_fast, call, (), None, None, frames, user_index)

    def _implicit_call(self, fid: int) -> _FastCall | None:
        """time_evaluator runs: each entry of the timed function starts a new Execution."""
        _, name, frames, user_index = _LOCAL.implicit
        current = _LOCAL.call
        if self._fids.get(name) != fid:
            return current  # a nested function: part of the current repetition
        if current is not None:
            _LOCAL.call = None
            self._record(self._finish_fast, current, (), None, None, frames, user_index)
        call = _FastCall(self, self.session.function(self.program, name), implicit=True)
        _LOCAL.call = call
        return call

    # -- rows -> traces --------------------------------------------------------------------

    def _static(self, fid: int, dims: dict[int, tuple[int, ...]] | None = None) -> tuple[list[bytes], list[bool]]:
        """Serialized constant fields of each row's trace (per session: ids are per run),
        and whether the row's shape is only known at run time; dims: the shapes of such rows
        in one call (call_plans.py), which the traces then hold (not cached)."""
        cached = self._statics.get(fid) if not dims else None
        if cached is None:
            function = compiled.FUNCTIONS[fid]
            runtime = self.session.function(self.program, function.name)
            statics, dynamic = [], []
            for row in function.rows:
                site = runtime.sites[row.site.position]
                spec = row.site.outputs[row.slot] if row.slot < len(row.site.outputs) else ("", (), "")
                trace = pb.GraphExecutionTrace(
                    op_id=site.op_id,
                    output_slot=row.slot,
                    op_name=site.name,
                    kernel=site.kernel,
                    graph_id=site.graph_id,
                    tensor_debug_mode=self.mode,
                    device="cpu:0",
                    dtype=spec[0],
                )
                runtime_shape = row.health and any(d < 0 for d in spec[1])
                if dims and len(statics) in dims:
                    trace.shape.extend(dims[len(statics)])
                    runtime_shape = False
                elif not runtime_shape:
                    trace.shape.extend(spec[1])
                    if self.mode_spec.dims and row.health:  # a static shape's values are constant
                        trace.debug_values.extend(debug_values(pb.SHAPE, None, spec[0], spec[1]))
                statics.append(trace.SerializeToString() if row.slot in site.slots else b"")
                dynamic.append(runtime_shape)
            cached = (statics, dynamic)
            if not dims:
                self._statics[fid] = cached
        return cached

    def _payloads(self, call: _FastCall) -> Sequence[bytes]:
        """One payload per executed row: as parts (_parts: each row's tail from one native or
        numpy pass), else plain Python on .tolist() (dynamic shapes, no native library); with
        the inner-op check's bytes (call.inner) appended to the traces they belong to."""
        inner = call.inner
        mode = self.mode
        mode_spec = self.mode_spec
        index = b"\x18" + _varint(call.index)
        rate = self._rate
        pack = _F64.pack
        payloads: list[bytes] = []
        stamps: list[float] = []
        for fid, _, array in call.buffers:
            parts = self._parts(call.index, fid, array)
            if parts is not None:
                if len(call.buffers) == 1 and not inner:
                    return parts  # framed without building its payloads
                payloads.extend(_with_inner(parts, fid, inner))
                stamps.extend(array[np.frombuffer(parts.which, np.uint32).astype(np.intp) + 1, 0].tolist())
                continue
            statics, dynamic = self._static(fid)
            infos = compiled.FUNCTIONS[fid].rows
            count = len(infos) + 1
            if mode_spec.counts is None and not any(dynamic):
                # Only the timestamps are needed (static shapes' values are in statics):
                # convert one column, not whole rows.
                stamp_column = array[:count, 0].tolist()
                previous = stamp_column[0]
                for i, cycles in enumerate(stamp_column[1:]):
                    if cycles:
                        static = statics[i]
                        if static:
                            payloads.append(static + index + b"\x59" + pack((cycles - previous) / rate))
                            stamps.append(cycles)
                        previous = cycles
                continue
            rows = array[:count].tolist()
            previous = rows[0][0]
            for i, row in enumerate(rows[1:]):
                cycles = row[0]
                if not cycles:
                    continue
                duration = (cycles - previous) / rate
                previous = cycles
                static = statics[i]
                if not static:
                    continue
                tail = b"\x59" + pack(duration)
                if mode_spec.tensor_data and infos[i].health and (not mode_spec.dims or dynamic[i]):
                    tail = _debug_values(mode, row, infos[i].dtype) + tail
                if dynamic[i]:
                    dims = b"".join([_varint(int(d)) for d in row[8 : 8 + int(row[7])]])
                    tail = b"\x7a" + _varint(len(dims)) + dims + tail
                if inner:
                    tail += inner.get((fid, i + 1), b"")
                payloads.append(static + index + tail)
                stamps.append(cycles)
        if len(call.buffers) > 1:  # nested function calls: order by time
            payloads = [payloads[i] for i in sorted(range(len(payloads)), key=stamps.__getitem__)]
        return payloads

    def _parts(self, index: int, fid: int, array: np.ndarray) -> TraceParts | None:
        """The traces of a function whose rows are all of static shape (and, in health
        modes, all hold counts) as TraceParts: every row's tail from one pass over the
        buffer, native (native_rows) or numpy (from _VECTOR_ROWS rows), no Python per
        trace. None otherwise: the row loop."""
        plan = _memo(self._plans, fid, self._parts_plan, fid)
        if plan is None:
            return None
        middle = b"\x18" + _varint(index)
        native = native_rows.LIBRARY.loaded()
        if native is not None:
            which, tails = native.trace_tails(
                array,
                plan.rows,
                compiled.ROW_WIDTH,
                plan.traced,
                plan.count,
                plan.codes,
                compiled.STATS_COLUMN,
                self._rate,
            )
            return TraceParts(plan.statics, which, middle, tails, plan.width)
        if plan.rows <= _VECTOR_ROWS:
            return None
        tails, ran = self._numpy_tails(plan, array)
        traced = plan.has_trace[ran - 1]  # rows with a trace (a slot the site does not report has none)
        which = (ran - 1)[traced].astype(np.uint32).tobytes()
        return TraceParts(plan.statics, which, middle, tails[traced].tobytes(), plan.width)

    def _parts_plan(self, fid: int, dims: dict[int, tuple[int, ...]] | None = None) -> _PartsPlan | None:
        """What _parts needs of a function, once per session (for one call's dims: see
        _static); None when it does not qualify."""
        statics, dynamic = self._static(fid, dims)
        if any(dynamic):
            return None
        infos = compiled.FUNCTIONS[fid].rows
        has_trace = np.array([bool(s) for s in statics], bool)
        if self.mode_spec.counts is None:  # NO_TENSOR, SHAPE
            return _PartsPlan(statics, len(statics) + 1, has_trace.tobytes(), has_trace, 0, b"", _DURATION_TAIL)
        layout = _TAILS.get(self.mode)
        if layout is None or not all(info.health for info in infos):
            return None
        if self.mode_spec.statistics and any(info.dtype == "bool" for info in infos):
            return None  # bool rows take their statistics from the counts
        codes = np.array([dtype_code(info.dtype) for info in infos], "float64")
        count = layout["values"].shape[0]
        return _PartsPlan(statics, len(statics) + 1, has_trace.tobytes(), has_trace, count, codes, layout)

    def _numpy_tails(self, plan: _PartsPlan, array) -> tuple[np.ndarray, np.ndarray]:
        """(tails, buffer rows that ran) in numpy: every row's tail (debug_values and
        duration fields, the bytes _debug_values and the row loop write) in one packed
        array: native_rows' pass, for when the extension is not loaded."""
        block = array[: plan.rows]
        cycles = block[:, 0]
        ran = np.flatnonzero(cycles[1:]) + 1  # rows of the kernels that ran
        tails = np.empty(len(ran), plan.layout)
        tails["duration"] = (cycles[ran] - cycles[_previous(ran)]) / self._rate
        tails["tag"] = 0x59
        if not plan.count:
            return tails, ran
        rows = block[ran]
        size, lt, gt, eq, neg_inf, pos_inf = (rows[:, k] for k in range(1, 7))
        tails["tag"], tails["length"], tails["duration_tag"] = 0x42, plan.layout["values"].itemsize, 0x59
        values = tails["values"]
        nan = size - lt - gt - eq
        if self.mode_spec.counts is Counts.FULL:
            values[:, 0] = 0.0
            values[:, 1] = plan.codes[ran - 1]
            values[:, 2] = rows[:, 7]
            values[:, 3] = size
            values[:, 4] = neg_inf
            values[:, 5] = pos_inf
            values[:, 6] = nan
            values[:, 7] = lt - neg_inf
            values[:, 8] = eq
            values[:, 9] = gt - pos_inf
            if self.mode_spec.statistics:
                values[:, 10:15] = rows[:, compiled.STATS_COLUMN : compiled.STATS_COLUMN + 5]
        elif self.mode_spec.counts is Counts.NONFINITE:
            values[:, 0] = size
            values[:, 1] = neg_inf
            values[:, 2] = pos_inf
            values[:, 3] = nan
        else:  # CURT_HEALTH
            values[:, 0] = (neg_inf + pos_inf + nan) > 0
        return tails, ran

    def _plan_skips(self, call: _FastCall, inputs) -> None:
        """The parameter rows this call need not compute (param_cache's rule)."""
        fid = self._fids.get(call.function.name)
        function = compiled.FUNCTIONS.get(fid) if fid is not None else None
        if function is None or not param_cache.reuse_allowed(call.function):
            return
        call.fid = fid
        lookup = self._cache.lookup
        for k, row in enumerate(function.param_rows[: len(inputs)]):
            if row is not None and row > len(function.rows):
                entry = lookup(inputs[k])
                if entry is not None:
                    call.skips.append((row, entry))
        for k, rows in _tuple_leaf_rows(function, inputs):
            for leaf, row in zip(flatten(inputs[k]), rows):
                entry = lookup(leaf)
                if entry is not None:
                    call.skips.append((row, entry))

    def _remember(self, call: _FastCall, inputs, leaves) -> None:
        """Stores the counts of this call's parameter and output rows (param_cache)."""
        if not call.buffers or call.buffers[0][0] != self._fids.get(call.function.name):
            return
        fid, _, array = call.buffers[0]
        function = compiled.FUNCTIONS[fid]
        skipped = {row for row, _ in call.skips}
        store, name = self._cache.store, call.function.name
        wanted = []
        for kind, values, rows in (("in", inputs, function.param_rows), ("out", leaves or (), function.output_rows)):
            for k, value in enumerate(values):
                row = rows[k] if k < len(rows) else None
                if row is None or row in skipped or not is_tensor(value):
                    continue
                if row <= len(function.rows) and not function.rows[row - 1].health:
                    continue  # a timestamp-only row
                wanted.append(((kind, name, k), value, row))
        for k, rows in _tuple_leaf_rows(function, inputs):
            for j, (leaf, row) in enumerate(zip(flatten(inputs[k]), rows)):
                if row not in skipped:
                    wanted.append((("in", name, k, j), leaf, row))  # param_cache.summarize's slots
        if wanted:
            for (slot, value, _), values_row in zip(wanted, array[[w[2] for w in wanted]].tolist()):
                if values_row[0]:  # FULL_HEALTH values derived only if a later call reuses them
                    store(slot, value, None, values_row, call.index)

    def _finish_fast(self, call: _FastCall, inputs, outputs, error, frames, user_index, rows=None) -> None:
        """rows: native_rows.call_rows' result when native_call ran it already."""
        self._fill_skips(call)
        complete = error is None and not call.implicit  # an Execution with its summaries
        one_pass = None
        nonfinite = None  # whether the records hold a NaN or an Inf, when one_pass says
        # A call native_call had no plan for: one may be learned from it (call_plans.py).
        learning = self._learner.wanted(call, len(inputs)) if complete and rows is None else None
        try:
            replayer = self.session.replay
            hunting = complete and replayer is not None and replayer.hunting
            if complete:
                num_leaves = self._num_leaves(call.function.name, outputs)
                one_pass = self._one_pass(call, len(inputs), num_leaves, hunting, rows)
            inner = call.inner = self._inner(call)
            if one_pass is not None:
                payloads, static, bad, _, nonfinite = one_pass
                fid, _, array = call.buffers[0]
                function = compiled.FUNCTIONS[fid]
                # bad: the first row the hunt looks at, else the first hiding what its ops made
                if bad >= 0 and hunting and compiled.hunted(function, array, bad):
                    call.bad = (fid, bad, compiled.output_nonfinite(function, array, bad))
                if inner:
                    payloads = _with_inner(payloads, call.buffers[0][0], inner)
            else:
                if hunting:
                    call.bad = replayer.scan_buffers(call.buffers)
                payloads = self._payloads(call)
                if error is not None:
                    payloads = [*payloads, self._failure(call, error)]
            if inner:
                nonfinite = True  # the call holds an alert: kept like a call with a NaN (writer)
            dims = self._learner.dims(learning, call.buffers[0][2]) if learning is not None else None
        finally:
            clean = one_pass is not None and one_pass[3]
            for fid, tensor, array in call.buffers:
                _release(fid, tensor, array, clean)
        remember = self._cache is not None and complete
        if complete:
            if one_pass is None:
                static = self._execution_bytes(call, len(inputs), num_leaves)
            if static is not None:  # the common case: no message built
                self._emit_static(call, static, payloads, nonfinite, frames, user_index)
                if remember:
                    self._safely(self._remember, call, inputs, flatten(outputs) if outputs is not None else None)
                return
        leaves = flatten(outputs) if outputs is not None else None
        summaries = self._row_summaries(call, inputs, leaves)
        # The traces' health, when call_rows counted it (_emit adds the outputs').
        traces = TraceBatch(payloads=payloads, nonfinite=nonfinite)
        self._emit(call, traces, inputs, leaves, error, frames, user_index, summaries)
        if remember:  # after the inputs were looked up: outputs replace their slots' entries
            self._safely(self._remember, call, inputs, leaves)
        if learning is not None:
            self._safely(self._learner.learn, call, learning, inputs, outputs, dims)

    @staticmethod
    def _fill_skips(call: _FastCall) -> None:
        """The parameter rows the call skipped (param_summaries="once_per_value") hold the
        counts of the earlier summary, as if computed now."""
        if call.skips and call.buffers and call.buffers[0][0] == call.fid:
            array = call.buffers[0][2]
            for row, entry in call.skips:
                array[row] = (
                    entry.row
                    if entry.row is not None
                    else param_cache.row_from_full(entry.counts(), tuple(entry.tensor.shape), compiled.ROW_WIDTH)
                )
        elif call.skips:
            call.skips = []

    def _emit_static(self, call: _FastCall, static: bytes, payloads, nonfinite, frames, user_index) -> None:
        """The call's Execution from its constant bytes and per-call fields, with its traces."""
        location = self._locations.get((frames, user_index)) or self._location_bytes(frames, user_index)
        payload = b"".join(
            (
                static,
                b"\x08",
                _varint(call.index),
                b"\x39",
                _F64.pack((_perf() - call.start) * 1e6),
                b"\x42",
                _varint(len(location)),
                location,
                b"\x48",
                _varint(len(payloads)),
                _CALL_NUMBER_TAG,
                _varint(call.number),
            )
        )
        self.session.serialized_execution_done(payload, payloads, nonfinite)

    def _inner(self, call: _FastCall) -> dict[tuple[int, int], bytes] | None:
        """The inner-op check's trace field (GraphExecutionTrace.inner_nonfinite) of each
        kernel whose fused ops made NaN or infinities in this call, by (fid, buffer row of
        its first output); None when none did (row 0's flag: one comparison per buffer)."""
        found = None
        for fid, _, array in call.buffers:
            if not compiled.inner_flagged(array):
                continue
            function = compiled.FUNCTIONS.get(fid)
            for site in function.inner if function is not None else ():
                counts = compiled.inner_counts(array, site)
                if counts:
                    found = found or {}
                    found[(fid, site.row)] = b"".join(self._inner_entry(site.site, *c) for c in counts)
        return found

    def _inner_entry(self, site, op: int, nan: int, neg_inf: int, pos_inf: int) -> bytes:
        """One InnerNonfinite entry, as the repeated field's bytes (field 16)."""
        origins = site.member_origins
        origin = origins[op] if op < len(origins) else None
        entry = pb.InnerNonfinite(index=op, nan=nan, neg_inf=neg_inf, pos_inf=pos_inf)
        if origin is not None:
            entry.op_type, entry.var_name = origin.op_type, origin.var_name
            entry.code_location.CopyFrom(self.session.code_location(origin.frames, origin.user_index, origin.node))
        data = entry.SerializeToString()
        return b"\x82\x01" + _varint(len(data)) + data

    def _one_pass(
        self, call: _FastCall, num_inputs: int, num_leaves: int, hunting: bool, rows: tuple | None = None
    ) -> tuple | None:
        """(the traces as TraceParts, the Execution's constant bytes or None, the first
        non-finite row or -1, whether the buffer was cleared for its next call, whether a
        trace or an output counted a NaN or an Inf (None: no counts)) of a call
        with one buffer from one native call (native_rows.call_rows: the trace tails, the
        health summaries and the replay's scan at once); None when the call needs the
        separate passes (no native library, nested calls, reused counts _reused_plan has no
        template for, dynamic shapes, FULL_STATS). The buffer is cleared only when nothing reads it after: its Execution
        is complete and no parameter cache remembers its rows. rows: call_rows' result,
        when native_call ran it (with these arguments)."""
        native = native_rows.LIBRARY.loaded()
        if native is None or len(call.buffers) != 1:
            return None
        fid, _, array = call.buffers[0]
        if call.skips:  # its Execution says which summaries it repeats
            reused = self._reused_plan(call, fid, num_inputs, num_leaves)
            plan = reused[1] if reused is not None else None
            if plan is None:
                return None
        elif rows is not None and call.plan is not None:  # the plan native_call ran call_rows with
            plan = call.plan
        else:
            plan = self._one_pass_args_of(call.function, fid, num_inputs, num_leaves)
            if plan is None:
                return None
        if rows is None:
            clear = self._cache is None and (plan.summaries is not None or plan.execution is not None)
            rows = native.call_rows(array, plan.tails, plan.summaries, plan.scan if hunting else None, clear)
        which, tail_bytes, execution, bad, cleared, nonfinite = rows
        parts = TraceParts(plan.statics, which, b"\x18" + _varint(call.index), tail_bytes, plan.width)
        return parts, plan.execution if plan.summaries is None else execution, bad, cleared, nonfinite

    def _one_pass_args_of(
        self, function: RuntimeFunction, fid: int, num_inputs: int, num_leaves: int
    ) -> NativePlan | None:
        """_call_rows_args, cached per (fid, inputs, leaves)."""
        key = (fid, num_inputs, num_leaves)
        return _memo(self._one_pass_args, key, self._call_rows_args, function, fid, num_inputs, num_leaves)

    def _call_rows_args(
        self, runtime: RuntimeFunction, fid: int, num_inputs: int, num_leaves: int
    ) -> NativePlan | None:
        """_one_pass's constants of a function, once per session (the Execution's static bytes
        in NO_TENSOR and SHAPE, its template's in the health modes); None when a pass does not
        qualify."""
        parts = _memo(self._plans, fid, self._parts_plan, fid)
        if parts is None:
            return None
        summaries = static = None
        if self.mode_spec.counts is None:  # NO_TENSOR, SHAPE
            static = self._static_execution(runtime, num_inputs, num_leaves)
        else:
            template = self._health_template_of(runtime, fid, num_inputs, num_leaves)
            if template is None or template[3] is None:
                return None
            summaries = (*template[3].native, compiled.ROW_WIDTH)
        return native_plan(parts, compiled.FUNCTIONS[fid], self._rate, summaries, static)

    def _num_leaves(self, name: str, outputs) -> int:
        """len(flatten(outputs)) without walking them on every call: a Relax function's
        return structure is static, so its count is taken once and reused while the top
        level has the same size."""
        if outputs is None:
            return 0
        top = top_level_size(outputs)
        known = self._leaf_counts.get(name)
        if known is None or known[0] != top:
            known = self._leaf_counts[name] = (top, len(flatten(outputs)))
        return known[1]

    def _static_execution(self, runtime: RuntimeFunction, num_inputs: int, num_leaves: int) -> bytes | None:
        """NO_TENSOR and SHAPE: the serialized constant part of this function's Execution,
        when inputs and outputs are fully static."""
        name = runtime.name
        key = (name, num_inputs)
        if key in self._execution_statics:
            return self._execution_statics[key]
        static = None
        fid = self._fids.get(name)
        function = compiled.FUNCTIONS.get(fid) if fid is not None else None
        if function is not None and len(function.param_specs) == num_inputs:
            leaf_specs = function.param_leaf_specs or [None] * num_inputs
            inputs = [spec if spec is not None else leaf_specs[k] for k, spec in enumerate(function.param_specs)]
        else:
            inputs = [None]
        if len(function.output_specs if function else ()) == num_leaves and all(inputs) and all(function.output_specs):
            execution = pb.Execution(
                function_name=name,
                graph_id=runtime.graph_id,
                tensor_debug_mode=self.mode,
                executable_id=self.program.executable_id,
                vm=self.vm_number,
            )
            for target, specs in ((execution.inputs, inputs), (execution.outputs, function.output_specs)):
                for spec in specs:
                    if isinstance(spec, list):  # a tuple (summary.tuple_summary's layout)
                        summary = target.add(dtype="tuple", shape=[len(spec)])
                        if self.mode_spec.dims:
                            for dtype, shape in spec:
                                _shape_summary(summary.items.add(), dtype, shape)
                    else:
                        _shape_summary(target.add(), *spec, with_values=self.mode_spec.dims)
            static = execution.SerializeToString()
        self._execution_statics[key] = static
        return static

    def _health_execution(self, call: _FastCall, num_inputs: int, num_leaves: int) -> bytes | None:
        """Health modes: the serialized Execution without its per-call fields (index,
        duration, location, num_traces), from a per-function template and one conversion of
        the summary rows; None when a value is not fully static or has no summary row."""
        if len(call.buffers) != 1:
            return None
        fid, _, array = call.buffers[0]
        template = self._health_template_of(call.function, fid, num_inputs, num_leaves)
        if template is None:
            return None
        header, row_ids, parts, vectorised = template
        if call.skips:  # reused counts add fields: their own template, or the loop below
            reused = self._reused_plan(call, fid, num_inputs, num_leaves)
            vectorised = reused[0] if reused is not None else None
        if vectorised is not None:
            if native_rows.LIBRARY.loaded() is not None:
                return vectorised.fill(array)  # in C++: cheap for any size, even after long kernels
            if len(row_ids) >= _VECTOR_SUMMARIES and _perf() - call.start < _VECTOR_CALL_SECONDS:
                return vectorised.fill_numpy(array)
        reused = {row: entry.index for row, entry in call.skips} if call.skips else {}
        return self._loop_execution(template, array, reused)

    def _reused_plan(self, call: _FastCall, fid: int, num_inputs: int, num_leaves: int) -> tuple | None:
        """(ExecutionTemplate, _one_pass's NativePlan or None) of a call whose parameter rows
        repeat earlier counts (call.skips, filled in by _fill_skips): its summaries name the
        call that computed them, so a template serves one set of (row, execution index). It is
        made when the set the previous call reused comes again in a later call (an unchanged
        weight's); a training step's updated weights come back with a new index every step,
        and those calls keep the loop (None)."""
        key = (fid, num_inputs, num_leaves)
        reused = tuple((row, entry.index) for row, entry in call.skips)
        known = self._reused_plans.get(key)
        if known is None or known[0] != reused:
            self._reused_plans[key] = (reused, call.index, None)
            return None
        built = known[2]
        if built is None and known[1] != call.index:
            built = self._reused_template(call.function, fid, num_inputs, num_leaves, dict(reused))
            self._reused_plans[key] = (reused, known[1], built)
        return built or None

    def _reused_template(
        self, runtime: RuntimeFunction, fid: int, num_inputs: int, num_leaves: int, reused: dict[int, int]
    ) -> tuple | bool:
        """_reused_plan's template and plan for one set of reused rows; False when the
        function's Execution has no template (FULL_STATS, values not static)."""
        template = self._health_template_of(runtime, fid, num_inputs, num_leaves)
        if template is None or template[3] is None:
            return False
        header, _, parts, _ = template
        vectorised = execution_template.ExecutionTemplate(
            self.mode, header, execution_template.with_reused(parts, reused)
        )
        parts_plan = _memo(self._plans, fid, self._parts_plan, fid)
        if parts_plan is None:
            return vectorised, None
        summaries = (*vectorised.native, compiled.ROW_WIDTH)
        return vectorised, native_plan(parts_plan, compiled.FUNCTIONS[fid], self._rate, summaries, None)

    def _health_template_of(self, runtime: RuntimeFunction, fid: int, num_inputs: int, num_leaves: int) -> tuple | None:
        key = (fid, num_inputs, num_leaves)
        return _memo(self._health_templates, key, self._health_template, runtime, fid, num_inputs, num_leaves)

    def _loop_execution(self, template: tuple, array: np.ndarray, reused: dict) -> bytes | None:
        """_health_execution's bytes built per summary in Python (reused counts, FULL_STATS,
        few summaries): what execution_template writes in numpy, and its reference."""
        header, row_ids, parts, _ = template
        rows = array[row_ids].tolist()  # one conversion for every summarised input and output
        if not all(row[0] for row in rows):
            return None  # a row not written: let the generic path say what it knows
        by_row = dict(zip(row_ids, rows))
        mode = self.mode
        out = [header]
        for tag, row_id, dtype, spec_bytes in parts:
            if isinstance(row_id, tuple):  # a tuple argument: its totals, then each tensor as an item
                body = self._tuple_body(mode, [by_row[r] for r in row_id], row_id, dtype, spec_bytes, reused)
            else:
                body = _summary_body(mode, by_row[row_id], dtype, spec_bytes, reused.get(row_id))
            out.append(tag + _varint(len(body)) + body)
        return b"".join(out)

    @staticmethod
    def _tuple_body(mode: int, rows: list, row_ids: tuple, items: list, spec_bytes: bytes, reused: dict) -> bytes:
        """A tuple's TensorSummary (summary.tuple_summary's layout) from its tensors' rows;
        items: each tensor's dtype and serialized dtype and shape."""
        fulls = [compiled.row_values(pb.FULL_HEALTH, row, dtype) for row, (dtype, _) in zip(rows, items)]
        totals = tuple_health_values(mode, fulls)
        parts = [b"\x0a" + _varint(8 * len(totals)) + struct.pack(f"<{len(totals)}d", *totals), spec_bytes]
        indices = [reused.get(r) for r in row_ids]
        for row, (item_dtype, item_spec), index in zip(rows, items, indices):
            item = _summary_body(mode, row, item_dtype, item_spec, index)
            parts.append(b"\xc2\x02" + _varint(len(item)) + item)  # TensorSummary.items (40)
        if indices and all(i is not None for i in indices):
            parts.append(execution_template.reused_field(min(indices)))
        return b"".join(parts)

    def _health_template(self, runtime: RuntimeFunction, fid: int, num_inputs: int, num_leaves: int) -> tuple | None:
        function = compiled.FUNCTIONS.get(fid)
        if (
            function is None
            or function.name != runtime.name
            or len(function.param_specs) != num_inputs
            or len(function.output_specs) != num_leaves
            or not all(function.output_specs)
            or None in function.output_rows[:num_leaves]
        ):
            return None
        leaf_rows = function.param_leaf_rows or [None] * num_inputs
        for k in range(num_inputs):
            tensor = function.param_specs[k] is not None and function.param_rows[k] is not None
            if not tensor and (leaf_rows[k] is None or self.mode_spec.statistics):
                return None  # FULL_STATS tuples: their statistics need the tensors (summary.py)
        header = pb.Execution(
            function_name=runtime.name,
            graph_id=runtime.graph_id,
            tensor_debug_mode=self.mode,
            executable_id=self.program.executable_id,
            vm=self.vm_number,
        ).SerializeToString()
        row_ids, parts = [], []
        inputs = [
            (function.param_specs[k], function.param_rows[k])
            if function.param_rows[k] is not None
            else (function.param_leaf_specs[k], tuple(leaf_rows[k]))
            for k in range(num_inputs)
        ]
        for tag, values in (
            (b"\x2a", inputs),  # Execution.inputs
            (b"\x32", list(zip(function.output_specs, function.output_rows))),  # Execution.outputs
        ):
            for spec, row in values:
                ids = row if isinstance(row, tuple) else (row,)
                if any(r <= len(function.rows) and not function.rows[r - 1].health for r in ids):
                    return None  # a timestamp-only row (a dtype without counts)
                row_ids.extend(ids)
                if isinstance(row, tuple):
                    items = [(d, pb.TensorSummary(dtype=d, shape=s).SerializeToString()) for d, s in spec]
                    tuple_spec = pb.TensorSummary(dtype="tuple", shape=[len(spec)]).SerializeToString()
                    parts.append((tag, row, items, tuple_spec))
                else:
                    parts.append(
                        (tag, row, spec[0], pb.TensorSummary(dtype=spec[0], shape=spec[1]).SerializeToString())
                    )
        vectorised = None
        if self.mode_spec.health and row_ids and all(not isinstance(row, tuple) or row for _, row, _, _ in parts):
            vectorised = execution_template.ExecutionTemplate(self.mode, header, parts)
        return header, row_ids, parts, vectorised

    def _location_bytes(self, frames, user_index) -> bytes:
        key = (frames if isinstance(frames, tuple) else tuple(frames), user_index)  # Stack: O(1)
        found = self._locations.get(key)
        if found is None:
            found = self.session.code_location(frames, user_index).SerializeToString()
            if len(self._locations) < 10_000:
                self._locations[key] = found
        return found

    def _row_summaries(self, call: _FastCall, inputs, leaves):
        """Execution input/output summaries read from the buffer's parameter and kernel rows
        (health modes), instead of numpy passes over the tensors."""
        if self.mode_spec.counts is None or not call.buffers:
            return None
        fid, _, array = call.buffers[0]
        function = compiled.FUNCTIONS[fid]
        if function.name != call.function.name:
            return None
        mode = self.mode
        reused = {row: entry.index for row, entry in call.skips} if call.skips else {}

        def from_rows(values, row_ids):
            out = []
            for k, value in enumerate(values):
                row = row_ids[k] if k < len(row_ids) else None
                if row is None or not array[row, 0] or not is_tensor(value):
                    out.append(None)
                    continue
                dtype = str(value.dtype)
                summary = pb.TensorSummary(
                    dtype=dtype,
                    shape=tuple(value.shape),
                    debug_values=compiled.row_values(mode, array[row].tolist(), dtype),
                )
                if row in reused:
                    summary.summarized_in_execution = reused[row]
                out.append(summary)
            return out

        return from_rows(inputs, function.param_rows), from_rows(leaves or [], function.output_rows)

    def _failure(self, call: _FastCall, error: BaseException) -> bytes:
        """The first row not written in the innermost buffer: the kernel that did not finish
        (or, for a builtin check that raised, the kernel that was next)."""
        trace = pb.GraphExecutionTrace(
            op_id=-1,
            execution_index=call.index,
            graph_id=call.function.graph_id,
            tensor_debug_mode=self.mode,
            device="cpu:0",
            duration_us=math.nan,
            error=_message(error),
        )
        for fid, _, array in reversed(call.buffers):
            unwritten = np.flatnonzero(array[1:, 0] == 0)
            if len(unwritten):
                row = compiled.FUNCTIONS[fid].rows[int(unwritten[0])]
                site = self.session.function(self.program, compiled.FUNCTIONS[fid].name).sites[row.site.position]
                trace.op_id, trace.op_name, trace.kernel, trace.graph_id = (
                    site.op_id,
                    site.name,
                    site.kernel,
                    site.graph_id,
                )
                trace.output_slot = row.slot
                break
        return trace.SerializeToString()


class _PartsPlan(NamedTuple):
    """A function's constants for _parts: its rows' statics, how many buffer rows it
    reads (row 0 and one per kernel row), which rows have a trace (bytes for the native
    pass, bools for numpy), how many debug values a tail holds, each row's dtype code
    (FULL_HEALTH, FULL_STATS) and the tail's numpy layout."""

    statics: list[bytes]
    rows: int
    traced: bytes
    has_trace: np.ndarray
    count: int
    codes: Any
    layout: np.dtype

    @property
    def width(self) -> int:
        return self.layout.itemsize


def _memo(cache: dict, key, build, *args):
    """cache[key], built by build(*args) on first use (None is a result too: "does not
    qualify" is remembered like any other answer)."""
    found = cache.get(key, False)
    if found is False:
        found = cache[key] = build(*args)
    return found


def _with_inner(parts: TraceParts, fid: int, inner: dict[tuple[int, int], bytes] | None) -> list[bytes]:
    """The payloads of parts with the inner-op check's bytes of each row appended."""
    if not inner:
        return parts.payloads()
    return [p + inner.get((fid, r + 1), b"") for p, r in zip(parts.payloads(), parts.rows())]


def _previous(ran: np.ndarray) -> np.ndarray:
    """For each buffer row that ran, the row whose timestamp its duration starts from: the
    one that ran before it (row 0 holds the call's start)."""
    return np.concatenate(([0], ran[:-1])) if len(ran) else ran


def _shape_summary(summary: pb.TensorSummary, dtype: str, shape: tuple[int, ...], with_values: bool = True) -> None:
    """A static tensor's TensorSummary in SHAPE mode (without values: NO_TENSOR's)."""
    summary.dtype = dtype
    summary.shape.extend(shape)
    if with_values:
        summary.debug_values.extend(debug_values(pb.SHAPE, None, dtype, shape))


def _tuple_leaf_rows(function: compiled.CompiledFunction, inputs) -> list[tuple[int, list[int]]]:
    """(argument position, rows of its tensors) of each tuple argument summarised by rows."""
    leaf_rows = function.param_leaf_rows[: len(inputs)]
    return [(k, rows) for k, rows in enumerate(leaf_rows) if rows is not None]


def _summary_body(mode: int, row: list[float], dtype: str, spec_bytes: bytes, reused: int | None) -> bytes:
    """One tensor's serialized TensorSummary: debug_values, dtype and shape, and where its
    counts were computed when they were reused (summarized_in_execution, field 70)."""
    body = b"\x0a" + _debug_values(mode, row, dtype)[1:] + spec_bytes
    if reused is not None:
        body += execution_template.reused_field(reused)
    return body


def _tail(count: int) -> np.dtype:
    """One trace tail: debug_values (field 8, count packed doubles) and duration_us (field
    11, a double), byte for byte what _debug_values and the row loop write."""
    return np.dtype(
        [("tag", "u1"), ("length", "u1"), ("values", "<f8", (count,)), ("duration_tag", "u1"), ("duration", "<f8")]
    )


_TAILS = {value: _tail(len(m.layout)) for value, m in modes.MODES.items() if m.counts is not None}
# NO_TENSOR and SHAPE: _DURATION_TAIL
_DURATION_TAIL = np.dtype([("tag", "u1"), ("duration", "<f8")])  # NO_TENSOR and SHAPE: duration_us
_VECTOR_ROWS = 24  # below this, numpy's fixed cost exceeds the per-row loop's
_VECTOR_SUMMARIES = 4  # without native_rows, Execution summaries from as many rows: numpy, not the loop
# ... unless the call ran longer: its kernels evicted numpy's code and data from the caches,
# and each numpy operation then costs more than the loop over a dozen summaries.
_VECTOR_CALL_SECONDS = 500e-6
_CURT = struct.Struct("<d")
_CONCISE = struct.Struct("<4d")
_FULL = struct.Struct("<10d")
_STATS = struct.Struct("<15d")
_CODES: dict[str, int] = {}


def _debug_values(mode: int, row: list[float], dtype: str) -> bytes:
    """The debug_values field (tag, length, packed doubles) of one row in mode."""
    size, lt, gt, eq, neg_inf, pos_inf, rank = row[1:8]
    nan = size - lt - gt - eq
    m = modes.MODES.get(mode, modes.UNKNOWN)
    counts = m.counts
    if counts is Counts.FULL and not m.statistics:
        code = _CODES.get(dtype)
        if code is None:
            code = _CODES[dtype] = dtype_code(dtype)
        return b"\x42\x50" + _FULL.pack(0.0, code, rank, size, neg_inf, pos_inf, nan, lt - neg_inf, eq, gt - pos_inf)
    if counts is Counts.ANY:
        return b"\x42\x08" + _CURT.pack(1.0 if neg_inf + pos_inf + nan > 0 else 0.0)
    if m.statistics:
        if dtype == "bool":
            return b"\x42\x78" + _STATS.pack(*compiled.row_values(mode, row, dtype))
        code = _CODES.get(dtype)
        if code is None:
            code = _CODES[dtype] = dtype_code(dtype)
        return b"\x42\x78" + _STATS.pack(
            0.0, code, rank, size, neg_inf, pos_inf, nan, lt - neg_inf, eq, gt - pos_inf,
            row[16], row[17], row[18], row[19], row[20],
        )  # fmt: skip
    if counts is Counts.NONFINITE:
        return b"\x42\x20" + _CONCISE.pack(size, neg_inf, pos_inf, nan)
    if m.dims:
        r = int(rank)
        data = struct.pack(f"<{3 + r}d", dtype_code(dtype), r, size, *row[8 : 8 + r])
        return b"\x42" + _varint(len(data)) + data
    return b""
