"""Kernel-level tracing of Relax VM calls through the VM's per-call instrument.

Every top-level call (vm["f"](...), invoke_stateful, time_evaluator runs) becomes one
Execution; every kernel call site it runs becomes GraphExecutionTraces (one per traced
output). Tensors handed to the instrument are valid only during the callback, so summaries
are computed there, on zero-copy numpy views.
"""

from __future__ import annotations

import itertools
import math
import struct
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

from tvmdbg_tb.capture import frames as frames_mod
from tvmdbg_tb.events.health import execution_nonfinite
from tvmdbg_tb.events.modes import spec
from tvmdbg_tb.events.summaries import nonfinite_counts
from tvmdbg_tb.events.wire import varint
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import kernel_summary, native_filter, param_cache
from tvmdbg_tb.tracing.session import KernelCall, RuntimeFunction, RuntimeSite, Session, TraceBatch
from tvmdbg_tb.tracing.summary import (
    as_numpy,
    debug_values,
    flatten,
    has_nonfinite,
    is_tensor,
    tensor_summary,
    tensor_value,
)

SKIP_RUN = 1
_perf = time.perf_counter
_F64 = struct.Struct("<d")
_MAX_SHAPES = 4096


class _Activation:
    """One Relax function being run (a top-level call or a nested closure call)."""

    __slots__ = ("function", "counts", "relevant")

    def __init__(self, function: RuntimeFunction, relevant: frozenset[str] | None):
        self.function = function
        self.counts: dict[str, int] = {}
        # Symbols worth a look (its kernel sites and the nested functions); None: all of them.
        self.relevant = relevant if function.mapped else None


class _Call:
    """State of one top-level VM call on one thread."""

    __slots__ = (
        "index",
        "number",
        "function",
        "stack",
        "pending",
        "traces",
        "start",
        "stop",
        "fresh",
        "implicit",
        "builtin",
        "nonfinite",
        "sources",
    )

    def __init__(
        self, index: int, number: int, function: RuntimeFunction, implicit: bool, relevant: frozenset[str] | None
    ):
        self.index = index
        self.number = number  # Execution.call_number
        self.function = function
        self.stack = [_Activation(function, relevant)]
        self.pending: list[tuple[RuntimeSite | None, str, float, bool]] = []
        self.traces: list[pb.GraphExecutionTrace | bytes] = []  # serialized (_payloads); failures as messages
        self.start = _perf()
        self.stop: BaseException | None = None
        self.fresh: set[int] = set()  # tensors allocated and not yet written (unmapped functions)
        self.implicit = implicit
        self.builtin: str | None = None  # a skipped builtin that started and did not return
        self.nonfinite = False  # a trace counted a NaN or an Inf (health modes)
        # An unmapped function's tensors by data pointer: ("param", k) for its inputs, (op_id,
        # slot) for its kernels' outputs so far (the data flow a library carries no graph of).
        self.sources: dict[int, tuple] | None = None


class Tracer:
    """Traces one VirtualMachine for one session."""

    def __init__(self, session: Session, vm: Any):
        self.session = session
        self.mode = session.mode
        info = getattr(vm, "_tvmdbg_info", None)
        self.program = session.program(info, vm)
        self.function_names = frozenset(info.functions) if info is not None and info.source_mapped else frozenset()
        self._local = threading.local()
        self._count_calls(session)
        self._param_names = _param_name_reader(vm)
        self._relevant_symbols: dict[str, tuple[RuntimeFunction, frozenset[str]]] = {}
        self._trace_statics: dict[tuple, bytes] = {}  # (site, slot, dtype) -> constant fields
        self._shape_fields: dict[tuple, bytes] = {}  # shape -> its serialized field (bounded)
        # The VM calls a native pre-filter that forwards only the calls _instrument reads
        # (kept in step by _steer); without it, _instrument itself.
        self._native = native_filter.attach(vm, self._instrument, self._kernel, self.function_names)
        if self._native is None:
            vm._set_instrument(self._instrument)

    # -- top-level calls -------------------------------------------------------------------

    def call(self, function_name: str, invoke, args: tuple, inputs: tuple, get_outputs=None) -> Any:
        local = self._local
        if getattr(local, "call", None) is not None or getattr(local, "implicit", None) is not None:
            return invoke(*args)  # a call made while another is traced (e.g. from a listener)
        frames, user_index = frames_mod.capture_call(2)
        call = self._begin(function_name, implicit=False)
        if not call.function.mapped:
            call.sources = _input_sources(inputs, self._param_names(function_name))
        local.call = call
        self._steer(call, fresh=True)
        try:
            result = invoke(*args)
        except BaseException as error:
            local.call = None
            self._end_native(call, failed=True)
            self._record(self._finish, call, inputs, None, error, frames, user_index)
            raise
        local.call = None
        self._end_native(call, failed=False)
        outputs = get_outputs() if get_outputs is not None else result
        holding = self.session.hold_listeners()  # listeners hear the call with its replay written
        try:
            self._record(self._finish, call, inputs, outputs, None, frames, user_index)
            if self.session.replay is not None:  # tvmdbg_tb.replay.auto: replay what was captured
                self._safely(self.session.replay.on_call_done)
        finally:
            if holding:
                self.session.release_listeners()
        if call.stop is not None:
            raise call.stop
        return result

    def timed(self, function_name: str, evaluator, args: tuple) -> Any:
        """Runs a time_evaluator: each repetition of the function becomes an Execution."""
        local = self._local
        if getattr(local, "call", None) is not None:
            return evaluator(*args)
        frames, user_index = frames_mod.capture_call(2)
        local.implicit = (function_name, frames, user_index)
        if self._native is not None:
            self._native.enter(native_filter.ALL)  # the first call of a repetition starts one
        try:
            return evaluator(*args)
        finally:
            call = getattr(local, "call", None)
            local.call = None
            local.implicit = None
            self._end_native(call, failed=False)
            if call is not None:
                self._record(self._finish, call, (), None, None, frames, user_index)

    def _end_native(self, call: _Call | None, failed: bool) -> None:
        """No call traced on this thread any more: the native filter answers alone. A call
        that raised gets what the filter saw start and not return, as the pure-Python
        instrument would have: the kernel pending, the builtin running."""
        native = self._native
        if native is None:
            return
        native.activate(native_filter.IDLE)
        if call is not None and failed:
            builtin, kernel = native.started()
            if kernel is not None:
                call.pending.append((self._site(call, kernel, ()), kernel, 0.0, False))
            call.builtin = builtin

    def _steer(self, call: _Call, fresh: bool) -> None:
        """Points the native filter, if any, at the running activation's symbols (fresh: a new call)."""
        native = self._native
        if native is None:
            return
        number = native.set_of(call.stack[-1].relevant)
        if fresh:
            native.enter(number)
        else:
            native.activate(number)

    def _count_calls(self, session: Session) -> None:
        """The VM's number (Execution.vm) and its call counters (Execution.call_number): a
        counter per function name, drawn from by next_call_number and by native_call."""
        self.vm_number = session.next_vm_number()
        self.call_numbers: dict[str, Iterator[int]] = {}

    def next_call_number(self, function_name: str) -> int:
        """The how-manieth call of function_name this VM makes (Execution.call_number): counted
        per VM, so two models or two threads' VMs in one process keep their own steps."""
        counter = self.call_numbers.get(function_name)
        if counter is None:
            counter = self.call_numbers.setdefault(function_name, itertools.count(1))
        return next(counter)

    def _begin(self, function_name: str, implicit: bool) -> _Call:
        function = self.session.function(self.program, function_name, self._param_names)
        index = self.session.next_execution_index()
        return _Call(index, self.next_call_number(function_name), function, implicit, self._relevant(function))

    def _relevant(self, function: RuntimeFunction) -> frozenset[str]:
        """The symbols of function's kernel sites and of the functions it may call."""
        found = self._relevant_symbols.get(function.name)
        if found is None or found[0] is not function:
            found = self._relevant_symbols[function.name] = (
                function,
                frozenset(function.by_symbol) | self.function_names,
            )
        return found[1]

    def _record(self, finish, call, *args) -> None:
        """finish(call, *args), which writes the call's records. A failure (a debugger bug)
        never reaches the user's program, and never leaves the dump silently short of a call:
        it is warned about, and the session leaves an Execution saying the call was not
        recorded, which the writer counts (the dump is then incomplete)."""
        try:
            finish(call, *args)
        except Exception as error:
            warnings.warn(f"tvmdbg: could not record a VM call: {error!r}", RuntimeWarning, stacklevel=3)
            self.session.unrecorded(call.index, call.function.name, call.function.graph_id, error)

    def _safely(self, fn, *args) -> None:
        try:
            fn(*args)
        except Exception as error:  # a debugger bug must not change the user's program
            warnings.warn(f"tvmdbg: could not record a VM call: {error!r}", RuntimeWarning, stacklevel=3)

    def _finish(self, call: _Call, inputs, outputs, error, frames, user_index) -> None:
        if error is not None:
            self._record_failure(call, error)
        # The traces' health, for the writer: known from the counts in the modes that count.
        nonfinite = call.nonfinite if spec(self.mode).counts is not None else None
        self._emit(call, _trace_batch(call.traces, nonfinite), inputs, outputs, error, frames, user_index)

    def _emit(self, call, traces: TraceBatch, inputs, outputs, error, frames, user_index, known=None) -> None:
        """Builds the call's Execution and hands it with its traces to the session's sinks.

        known: (input summaries, output summaries) already computed (None entries are not)."""
        duration = (_perf() - call.start) * 1e6
        mode = self.mode
        execution = pb.Execution(
            index=call.index,
            function_name=call.function.name,
            graph_id=call.function.graph_id,
            tensor_debug_mode=mode,
            duration_us=duration,
            num_traces=len(traces),
            executable_id=self.program.executable_id,
            call_number=call.number,
            vm=self.vm_number,
        )
        known_inputs, known_outputs = known if known is not None else ((), ())
        cache = self.session.param_cache
        weights = call.function.weights if self.session.weight_cache is not None else ()
        name = call.function.name
        for k, value in enumerate(inputs):
            summary = known_inputs[k] if k < len(known_inputs) else None
            if summary is None:
                # param_summaries="once_per_value", or a weight under "weights_once_per_value"
                chosen = cache if cache is not None else (self.session.weight_cache if k in weights else None)
                if chosen is not None and error is None:
                    lookup = param_cache.reuse_allowed(call.function)
                    summary = param_cache.summarize(chosen, mode, value, ("in", name, k), call.index, lookup)
                else:
                    summary = tensor_summary(mode, value)
            execution.inputs.append(summary)
        if outputs is not None:
            for k, value in enumerate(flatten(outputs)):
                summary = known_outputs[k] if k < len(known_outputs) else None
                if summary is None:
                    if cache is not None and error is None:  # counted where produced
                        summary = param_cache.summarize(cache, mode, value, ("out", name, k), call.index, False)
                    else:
                        summary = tensor_summary(mode, value)
                execution.outputs.append(summary)
        if error is not None:
            execution.error = _message(error)
        elif getattr(call, "stop", None) is not None:
            execution.error = _message(call.stop)
        execution.code_location.CopyFrom(self.session.code_location(frames, user_index))
        if traces.nonfinite is False:  # the traces are finite: the outputs decide (the writer's count)
            traces.nonfinite = execution_nonfinite(execution)
        self.session.execution_done(execution, traces)

    def _record_failure(self, call: _Call, error: BaseException) -> None:
        """The call that raised is the one that saw BEFORE but no AFTER."""
        if call.builtin is not None:  # a builtin the instrument let pass (a shape check...)
            call.pending.append((None, call.builtin, 0.0, False))
        if not call.pending:
            return
        site, symbol, _, _ = call.pending[-1]
        call.pending.clear()
        trace = pb.GraphExecutionTrace(
            op_id=site.op_id if site is not None else -1,
            execution_index=call.index,
            op_name=site.name if site is not None else symbol,
            kernel=symbol,
            graph_id=site.graph_id if site is not None else call.function.graph_id,
            tensor_debug_mode=self.mode,
            device="cpu:0",
            duration_us=math.nan,
            error=_message(error),
        )
        call.traces.append(trace)

    # -- the VM instrument -----------------------------------------------------------------

    def _instrument(self, func, symbol, before, ret, *args):
        call = getattr(self._local, "call", None)
        if call is None:
            implicit = getattr(self._local, "implicit", None)
            if implicit is None:
                return 0
            call = self._local.call = self._begin(implicit[0], implicit=True)
            self._steer(call, fresh=True)
        # Most calls are VM builtins (allocations, null values, checks): in a mapped function
        # one set lookup tells they are neither a kernel site nor a nested function, the same
        # way before and after the call (the activation only changes on a nested function).
        relevant = call.stack[-1].relevant
        if relevant is not None and symbol not in relevant:
            call.builtin = symbol if before else None  # the builtin running, if it raises
            if self._native is not None:
                self._native.note(call.builtin)
            return 0
        try:
            if before:
                return self._before(call, str(symbol), args)
            self._after(call, ret, args)
        except Exception as error:  # never let a debugger bug reach the VM
            warnings.warn(f"tvmdbg: tracing a kernel failed: {error!r}", RuntimeWarning, stacklevel=2)
        return 0

    def _before(self, call: _Call, symbol: str, args: tuple) -> int:
        if symbol in self.function_names:
            nested = self.session.function(self.program, symbol)
            call.stack.append(_Activation(nested, self._relevant(nested)))
            call.pending.append((None, symbol, 0.0, True))
            self._steer(call, fresh=False)
            return 0
        site = self._site(call, symbol, args)
        call = self._local.call  # a time_evaluator repetition may have started a new call
        if site is not None and call.stop is not None:
            return SKIP_RUN  # a sink asked to stop: the error is raised when the call returns
        call.pending.append((site, symbol, _perf(), False))
        return 0

    def _site(self, call: _Call, symbol: str, args: tuple) -> RuntimeSite | None:
        activation = call.stack[-1]
        function = activation.function
        if function.mapped:
            sites = function.by_symbol.get(symbol)
            if sites is None:
                return None
            k = activation.counts.get(symbol, 0)
            if k >= len(sites):
                if not (call.implicit and len(call.stack) == 1):
                    return None
                call = self._next_repetition(call)  # time_evaluator: the function ran again
                activation = call.stack[-1]
                k = 0
            activation.counts[symbol] = k + 1
            return sites[k]
        if symbol.startswith("vm."):
            if call.fresh and symbol != "vm.builtin.alloc_tensor":
                for arg in args:  # a builtin (a KV cache's attention) may write into them: not fresh
                    if is_tensor(arg):
                        call.fresh.discard(hash(arg))
            return None
        k = activation.counts.get(symbol, 0)
        activation.counts[symbol] = k + 1
        sites = function.by_symbol.get(symbol, ())
        if k < len(sites):
            return sites[k]
        sources = call.sources if len(call.stack) == 1 else None  # a nested function's inputs are not its caller's
        return self.session.dynamic_site(function, symbol, args, call.fresh, sources)

    def _payloads(self, index: int, site: RuntimeSite, outputs, duration: float) -> tuple[list[bytes], bool]:
        """The serialized traces of one kernel run: each (site, slot, dtype)'s constant
        fields serialized once, then the execution index, the debug values (and tensor), the
        duration and the shape appended as raw fields (concatenated messages merge); and
        whether an output may be non-finite (its values say so, or FULL_TENSOR: not counted)."""
        mode = self.mode
        counted = spec(mode).summarised
        suspect = keeps_values = spec(mode).values  # values are not counted: may be non-finite
        out = []
        for slot in site.slots:
            if slot >= len(outputs):
                continue
            value = outputs[slot]
            if not is_tensor(value):
                continue
            dtype = str(value.dtype)
            shape = tuple(value.shape)
            key = (site, slot, dtype)
            static = self._trace_statics.get(key)
            if static is None:
                static = self._trace_statics[key] = pb.GraphExecutionTrace(
                    op_id=site.op_id,
                    output_slot=slot,
                    op_name=site.name,
                    kernel=site.kernel,
                    graph_id=site.graph_id,
                    tensor_debug_mode=mode,
                    device="cpu:0",
                    dtype=dtype,
                ).SerializeToString()
            parts = [static, b"\x18", varint(index)]
            values = _values(mode, value, dtype, shape) if counted else None
            if values:
                packed = struct.pack(f"<{len(values)}d", *values)
                parts += [b"\x42", varint(len(packed)), packed]  # debug_values (8)
                if not suspect:
                    counts = nonfinite_counts(mode, values)
                    suspect = counts is not None and any(counts)
            if keeps_values:
                tensor = tensor_value(value, dtype, shape).SerializeToString()
                parts += [b"\x4a", varint(len(tensor)), tensor]  # tensor_value (9)
            parts += [b"\x59", _F64.pack(duration)]  # duration_us (11)
            if shape:
                field = self._shape_fields.get(shape)
                if field is None:
                    dims = b"".join([varint(int(d)) for d in shape])
                    field = b"\x7a" + varint(len(dims)) + dims  # shape (15)
                    if len(self._shape_fields) < _MAX_SHAPES:  # dynamic shapes: not kept forever
                        self._shape_fields[shape] = field
                parts.append(field)
            out.append(b"".join(parts))
        return out, suspect

    def _next_repetition(self, call: _Call) -> _Call:
        implicit = self._local.implicit
        self._record(self._finish, call, (), None, None, implicit[1], implicit[2])
        fresh = self._begin(implicit[0], implicit=True)
        self._local.call = fresh
        self._steer(fresh, fresh=True)
        return fresh

    def _after(self, call: _Call, ret, args: tuple) -> None:
        call = self._local.call  # may have moved on to the next repetition
        if not call.pending:
            return
        site, symbol, start, nested = call.pending.pop()
        if nested:
            if len(call.stack) > 1:
                call.stack.pop()
                self._steer(call, fresh=False)
            return
        if site is None:
            if symbol == "vm.builtin.alloc_tensor" and not call.stack[-1].function.mapped:
                call.fresh.add(hash(ret))
                if call.sources is not None:  # reused storage: what it held before is gone
                    call.sources.pop(ret.data_ptr(), None)
            return
        self._done(call, site, ret, args, (_perf() - start) * 1e6)

    def _kernel(self, _callee, symbol, duration: float, ret, *args) -> int:
        """The native filter's call when a kernel returned whose start it took (a mapped
        function's site, no stop asked): what _before and _after do, at once."""
        call = getattr(self._local, "call", None)
        if call is None:
            return 0
        try:
            site = self._site(call, str(symbol), args)
            if site is not None:
                self._done(self._local.call, site, ret, args, duration)
        except Exception as error:  # never let a debugger bug reach the VM
            warnings.warn(f"tvmdbg: tracing a kernel failed: {error!r}", RuntimeWarning, stacklevel=2)
        return 0

    def _done(self, call: _Call, site: RuntimeSite, ret, args: tuple, duration: float) -> None:
        """Records one kernel run (duration in microseconds)."""
        outputs = site.outputs(args, ret)
        if call.fresh:
            for value in outputs:
                call.fresh.discard(hash(value))
        if call.sources is not None and len(call.stack) == 1:
            for slot, value in enumerate(outputs):
                if is_tensor(value):
                    call.sources[value.data_ptr()] = (site.op_id, slot)
        replayer = self.session.replay
        watching = replayer is not None and replayer.watching
        payloads, suspect = self._payloads(call.index, site, outputs, duration)
        call.traces.extend(payloads)
        call.nonfinite |= suspect
        if not self.session.want_nonfinite and (not watching or not (suspect or replayer.watching_all)):
            return  # the replay only hunts non-finite outputs: nothing to parse for it here
        # The replay and the kernel sinks read messages: parsed (cheaper than built field by field).
        traces = [pb.GraphExecutionTrace.FromString(p) for p in payloads]
        if watching:
            replayer.on_traces(self.program, call.index, site, args, outputs, traces)
        if self.session.want_nonfinite:
            nonfinite = [_nonfinite(v) for v in outputs]
            kernel = KernelCall(site, args, outputs, nonfinite, call.function.name, traces)
            began = _perf()
            stop = self.session.kernel_done(kernel)
            # The time the sinks held the call (a live pause, a watchpoint's check) is not the
            # call's: its recorded duration stays what the model took.
            call.start += _perf() - began
            if stop is not None and call.stop is None:
                call.stop = stop
                if self._native is not None:
                    self._native.stop()  # the remaining kernel starts come back to _before


def _input_sources(inputs: tuple, names: list[str]) -> dict[int, tuple]:
    """Call.sources at the start of a call: the function's tensor inputs by data pointer,
    ("param", index, name, tuple item or -1); a tuple's tensors (packed weights) item by item."""
    sources = {}
    for k, value in enumerate(inputs):
        name = names[k] if k < len(names) else f"input {k}"
        if is_tensor(value):
            sources[value.data_ptr()] = ("param", k, name, -1)
            continue
        leaves = flatten(value)
        if leaves != [value]:
            for j, leaf in enumerate(leaves):
                if is_tensor(leaf):
                    sources.setdefault(leaf.data_ptr(), ("param", k, f"{name}[{j}]", j))
    return sources


def _param_name_reader(vm: Any):
    """name -> the parameter names of a VM function, as the executable keeps them (a library
    loaded from disk included); [] when the VM cannot say. Read once per function."""
    known: dict[str, list[str]] = {}
    held = weakref.ref(vm)  # the VM holds its tracer: no cycle through this closure

    def param_names(name: str) -> list[str]:
        if name not in known:
            vm = held()
            try:
                arity = vm._get_function_arity(name)
                known[name] = [str(vm._get_function_param_name(name, i)) for i in range(arity)]
            except Exception:  # a VM without these functions, or a closure: no names
                known[name] = []
        return known[name]

    return param_names


def _values(mode: int, value, dtype: str, shape: tuple[int, ...]) -> list[float]:
    """A kernel output's debug_values: counted by the summary kernel in health modes, else
    (and whenever that kernel does not apply) in numpy."""
    found = kernel_summary.health_values(mode, value, dtype, shape)
    return found if found is not None else debug_values(mode, value, dtype, shape)


def _trace_batch(traces: list, nonfinite: bool | None = None) -> TraceBatch:
    """A call's traces (serialized ones and messages, in kernel order) as one batch."""
    if all(type(t) is bytes for t in traces):
        return TraceBatch(payloads=traces, nonfinite=nonfinite)
    return TraceBatch(payloads=[t if type(t) is bytes else t.SerializeToString() for t in traces], nonfinite=nonfinite)


def _nonfinite(value) -> bool:
    if not is_tensor(value):
        return False
    array = as_numpy(value)
    return array is not None and has_nonfinite(array)


def _message(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
