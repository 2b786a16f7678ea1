"""A debugging session: what to record (mode, filters) and where events go (sinks).

The session turns compile-time descriptions (graphs.ExecutableInfo) into run-scoped ids and
records, and hands every finished VM call to its sinks: the dump writer, the numerics check
and user listeners are all sinks, so none of them is wired into the tracing code.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from tvmdbg_tb.capture import frames as frames_mod
from tvmdbg_tb.capture import graphs
from tvmdbg_tb.capture.frames import Frame
from tvmdbg_tb.events import layout
from tvmdbg_tb.events.modes import spec
from tvmdbg_tb.events.options import DumpOptions, ParamSummaries, op_matches
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing.op_records import OpEncoder

UNMAPPED_NOTE = (
    "compiled before tvmdbg was enabled (or loaded from a library): kernels are traced "
    "from the VM, without Relax op or source mapping"
)


_HELD = threading.local()  # calls: what after_call sinks will hear once this thread's call is over


class Sink(Protocol):
    """Where a session's events go. Every method must be fast and must not raise."""

    def on_graph(self, graph: pb.DebuggedGraph, ops: list[pb.GraphOpCreation]) -> None: ...

    def on_kernel(self, call: KernelCall) -> BaseException | None:
        """Called inside the VM callback, while the kernel's tensors are valid. Returning an
        exception stops the call: remaining kernels are skipped and it is raised to the user."""

    def on_execution(self, execution: pb.Execution, traces: list[pb.GraphExecutionTrace]) -> None: ...

    def close(self) -> None: ...

    # Optional: `idle() -> bool`, True when on_execution would do nothing (the compiled path
    # then hands a call's records straight to the writer); `after_call = True`: on_execution
    # is held until the call is over, its first-origin replay written (Session.hold_listeners).


def sink_failed(sink: Any, what: str, failure: BaseException) -> None:
    """How every sink failure is handled: said as a RuntimeWarning (once per place, Python's
    default filter), never raised into the user's program, the other sinks served on."""
    warnings.warn(f"tvmdbg: {type(sink).__name__} failed {what}: {failure!r}", RuntimeWarning, stacklevel=3)


class KernelCall:
    """One kernel that just ran, as sinks see it (its tensors are valid only during on_kernel)."""

    __slots__ = ("site", "args", "outputs", "nonfinite", "function_name", "traces")

    def __init__(self, site, args, outputs, nonfinite, function_name, traces):
        self.site: RuntimeSite = site
        self.args: tuple = args
        self.outputs: list[Any] = outputs
        self.nonfinite: list[bool] = nonfinite
        self.function_name: str = function_name
        self.traces: list[pb.GraphExecutionTrace] = traces

    def inputs(self) -> list[Any]:
        if self.site.out_positions is None:
            return list(self.args)
        outs = set(self.site.out_positions)
        return [a for i, a in enumerate(self.args) if i not in outs]


class TraceBatch(Sequence):
    """The traces of one execution: messages, or serialized payloads (the fast path) that
    are parsed only if a sink asks for messages."""

    def __init__(
        self,
        messages: list[pb.GraphExecutionTrace] | None = None,
        payloads: list[bytes] | None = None,
        nonfinite: bool | None = None,
    ):
        self._messages = messages
        self.payloads = payloads
        # For the writer's accounting of calls: whether the call's records hold a NaN or an Inf
        # (None: not known). A tracer says it of the traces; Tracer._emit adds the outputs.
        self.nonfinite = nonfinite

    def _parsed(self) -> list[pb.GraphExecutionTrace]:
        if self._messages is None:
            self._messages = [pb.GraphExecutionTrace.FromString(p) for p in self.payloads or ()]
        return self._messages

    def __len__(self) -> int:
        return len(self.payloads) if self._messages is None else len(self._messages)

    def __getitem__(self, i):
        return self._parsed()[i]

    def __iter__(self):
        return iter(self._parsed())


class OpBatch(list):
    """A function's GraphOpCreation messages (a list, as sinks read them), each the
    graph_op_creation of one of `events`, which the writer takes as they are."""

    def __init__(self, ops: list[pb.GraphOpCreation], events: list[pb.DebugEvent]):
        super().__init__(ops)
        self.events = events


class ExecutionPayload:
    """A serialized Execution (the fast path); sinks that need the message call message()."""

    __slots__ = ("payload", "_message")

    def __init__(self, payload: bytes):
        self.payload = payload
        self._message: pb.Execution | None = None

    def message(self) -> pb.Execution:
        if self._message is None:
            self._message = pb.Execution.FromString(self.payload)
        return self._message


def execution_message(execution: pb.Execution | ExecutionPayload) -> pb.Execution:
    return execution.message() if isinstance(execution, ExecutionPayload) else execution


class RuntimeSite:
    """A kernel call site with its run-scoped ids and where its outputs are in the call."""

    __slots__ = ("op_id", "graph_id", "name", "kernel", "out_positions", "slots", "info")

    def __init__(self, op_id, graph_id, name, kernel, out_positions, slots, info):
        self.op_id: int = op_id
        self.graph_id: int = graph_id
        self.name: str = name
        self.kernel: str = kernel
        # Indices of the outputs among the call's args; None: the call returns its output.
        self.out_positions: tuple[int, ...] | None = out_positions
        self.slots: tuple[int, ...] = slots  # output slots that pass the session's filters
        self.info: graphs.SiteInfo | None = info

    def outputs(self, args: tuple, ret: Any) -> list[Any]:
        if self.out_positions is None:
            from tvmdbg_tb.tracing.summary import flatten

            return flatten(ret)
        n = len(args)
        return [args[i] for i in self.out_positions if i < n]


class RuntimeFunction:
    """A Relax function of one executable: its graph id and kernel sites by symbol."""

    def __init__(self, name: str, graph_id: int, sites: list[RuntimeSite], mapped: bool, weights: range = range(0)):
        self.name = name
        self.graph_id = graph_id
        self.sites = sites
        self.mapped = mapped
        self.weights = weights  # the positions of its weights (graphs.FunctionInfo.weights)
        self.by_symbol: dict[str, list[RuntimeSite]] = {}
        for site in sites:
            self.by_symbol.setdefault(site.kernel, []).append(site)
        self.lock = threading.Lock()


class Program:
    """One executable as seen by one session."""

    def __init__(self, executable_id: str, info: graphs.ExecutableInfo | None):
        self.executable_id = executable_id
        self.info = info
        self.functions: dict[str, RuntimeFunction] = {}
        self.lock = threading.Lock()

    @property
    def mapped(self) -> bool:
        return self.info is not None and self.info.source_mapped


def _dtype_filter(tensor_dtypes) -> Callable[[str], bool] | None:
    if tensor_dtypes is None:
        return None
    if callable(tensor_dtypes):
        return lambda dtype: bool(tensor_dtypes(dtype))
    if isinstance(tensor_dtypes, str):
        tensor_dtypes = [tensor_dtypes]
    wanted = {str(getattr(d, "name", d)) for d in tensor_dtypes}
    return lambda dtype: dtype in wanted


class Session:
    """What is recorded (mode, filters) and where it goes (sinks)."""

    def __init__(self, options: DumpOptions, writer: DebugEventsWriter | None = None, exports=None):
        """exports: the tracing state's ExportWatch, which a param cache registers with
        (param_summaries="once_per_value"); a session built alone gets its own."""
        self.options = options
        self.mode = options.tensor_debug_mode
        self.op_regex = re.compile(options.op_regex) if options.op_regex else None
        self.dtype_ok = _dtype_filter(options.tensor_dtypes)
        self.writer = writer
        self.sinks: list[Sink] = []
        self._after_call: list[Sink] = []  # sinks that hear a call once it is over (listeners)
        # The writer when every other sink can say it has nothing to do (idle()), and those checks.
        self._sole_writer: DebugEventsWriter | None = None
        self._idle_checks: list[Callable[[], bool]] = []
        self.want_nonfinite = False  # some sink needs per-output finiteness
        self.replay = None  # tvmdbg_tb.replay.auto.AutoReplay when a dump is written
        # Deep mode: the options' trace_fused_ops, or a sink's (check-numerics'); see _set_sinks.
        self.trace_fused_ops = options.trace_fused_ops
        self.param_cache = None  # a SummaryCache with param_summaries="once_per_value" (health modes)
        # ... and one for the weights alone (param_summaries="weights_once_per_value", the default).
        self.weight_cache = None
        if spec(self.mode).health and options.param_summaries is not ParamSummaries.EVERY_CALL:
            from tvmdbg_tb.tracing import param_cache

            cache = param_cache.SummaryCache(exports)
            if options.param_summaries is ParamSummaries.ONCE_PER_VALUE:
                self.param_cache = cache
            else:
                self.weight_cache = cache
        self._ids = threading.Lock()
        self._graph_ids = itertools.count()
        self._op_ids = itertools.count()
        self._execution_ids = itertools.count()
        self._vm_numbers = itertools.count(1)  # Execution.vm of each traced VM
        self._programs: dict[str, Program] = {}
        self._lock = threading.Lock()
        self._locations: dict[tuple, pb.CodeLocation] = {}
        self._specs: dict[graphs.Spec, pb.TensorSpec] = {}
        self._op_encoder = OpEncoder(self._spec)

    # -- sinks -----------------------------------------------------------------------------

    def add_sink(self, sink: Sink) -> None:
        self._set_sinks([*self.sinks, sink])

    def remove_sink(self, sink: Sink) -> None:
        self._set_sinks([s for s in self.sinks if s is not sink])

    def update_sinks(self) -> None:
        """Re-reads what the sinks want (a sink's trace_fused_ops changed)."""
        self._set_sinks(self.sinks)

    def _set_sinks(self, sinks: list[Sink]) -> None:
        self.sinks = sinks
        self.trace_fused_ops = self.options.trace_fused_ops or any(getattr(s, "trace_fused_ops", False) for s in sinks)
        writers = [s for s in sinks if type(s) is WriterSink]
        rest = [s for s in sinks if type(s) is not WriterSink]
        quiet = len(writers) == 1 and all(callable(getattr(s, "idle", None)) for s in rest)
        self._sole_writer = writers[0].writer if quiet else None
        self._idle_checks = [s.idle for s in rest] if quiet else []
        self.want_nonfinite = any(getattr(s, "wants_nonfinite", False) for s in sinks)
        self._after_call = [s for s in sinks if getattr(s, "after_call", False)]

    def hold_listeners(self) -> bool:
        """Holds, on this thread, what `after_call` sinks (the execution listeners) hear of
        the current call until release_listeners(), so that they hear it once everything
        recorded for it is written, the replay of the run's first origin included (`tvmdbg
        run -f` stops there). False when nothing listens: nothing to release."""
        if getattr(_HELD, "calls", None) is not None or all(s.idle() for s in self._after_call):
            return False
        _HELD.calls = []
        return True

    def release_listeners(self) -> None:
        """Delivers what hold_listeners() held."""
        held, _HELD.calls = _HELD.calls, None
        for sink, execution, traces in held:
            try:
                sink.on_execution(execution, traces)
            except Exception as failure:
                sink_failed(sink, "on a call", failure)

    def unrecorded(self, index: int | None, function_name: str, graph_id: int, error: BaseException) -> None:
        """A call tvmdbg could not record whole (see Tracer._record): an Execution saying why
        (when its index is known), and the writer's count, which makes the dump incomplete.
        Never raises."""
        if self.writer is None:
            return
        why = f"{type(error).__name__}: {error}"
        try:
            if index is not None:
                execution = pb.Execution(
                    index=index,
                    function_name=function_name,
                    graph_id=graph_id,
                    tensor_debug_mode=self.mode,
                    record_error=why,
                )
                self.writer.write_execution(execution)
            where = f"execution {index} ({function_name})" if index is not None else "a call"
            self.writer.count_unrecorded(f"{where}: {why}")
        except Exception:
            pass

    def close(self) -> None:
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as failure:
                sink_failed(sink, "to close", failure)

    # -- ids and locations -----------------------------------------------------------------

    def next_execution_index(self) -> int:
        return next(self._execution_ids)  # atomic under the GIL; the writer only stores it

    def next_vm_number(self) -> int:
        """Execution.vm of a VM this session starts tracing: 1, 2, ... in that order."""
        return next(self._vm_numbers)

    @property
    def execution_ids(self) -> Iterator[int]:
        """The iterator next_execution_index draws from (native_call draws from it in C++)."""
        return self._execution_ids

    def code_location(
        self, frames: list[Frame], user_index: int, node: graphs.ModelNode | None = None
    ) -> pb.CodeLocation:
        """The CodeLocation of a stack, and of the model node an op was converted from
        (cached: a loop calls the VM from the same stack)."""
        if self.writer is None or (not frames and node is None):
            return pb.CodeLocation(user_frame_index=-1 if not frames else user_index)
        key = (frames if isinstance(frames, tuple) else tuple(frames), user_index, node)  # Stack: O(1)
        location = self._locations.get(key)
        if location is None:
            message = None
            if node is not None:
                message = pb.ModelNode(
                    format=node.format,
                    name=node.name,
                    op_type=node.op_type,
                    model_file=node.model_file,
                    module=node.module,
                )
            called_from = frames_mod.called_from_index(frames, user_index)
            location = self.writer.code_location(frames, user_index, called_from, message)
            if len(self._locations) < 100_000:
                self._locations[key] = location
        return location

    # -- programs --------------------------------------------------------------------------

    def program(self, info: graphs.ExecutableInfo | None, vm: Any) -> Program:
        """The session's view of an executable (registering its graphs on first use)."""
        key = info.executable_id if info is not None else f"vm-{id(vm):x}"
        program = self._programs.get(key)
        if program is not None:
            return program
        with self._lock:
            program = self._programs.get(key)
            if program is None:
                program = Program(key, info)
                if info is not None and info.source_mapped:
                    for function in info.functions.values():
                        program.functions[function.name] = self._register_function(program, function)
                self._programs[key] = program
        return program

    def register_executable(self, info: graphs.ExecutableInfo) -> None:
        self.program(info, None)

    def _passes_filters(self, name: str, kernel: str, origins, dtype: str) -> bool:
        if self.op_regex is not None and not op_matches(self.op_regex, name, kernel, origins):
            return False
        return self.dtype_ok is None or self.dtype_ok(dtype)

    def _spec(self, spec: graphs.Spec | None) -> pb.TensorSpec:
        """The message of a spec, built once per distinct spec (callers copy it into theirs)."""
        if spec is None:
            return pb.TensorSpec()
        message = self._specs.get(spec)
        if message is None:
            message = pb.TensorSpec(dtype=spec[0], shape=spec[1], shape_expr=spec[2])
            if len(self._specs) < 4096:
                self._specs[spec] = message
        return message

    def _graph(self, program: Program, name: str, params, param_names, mapped: bool) -> pb.DebuggedGraph:
        info = program.info
        graph = pb.DebuggedGraph(
            graph_id=next(self._graph_ids),
            name=name,
            executable_id=program.executable_id,
            source_mapped=mapped,
            instrumentation="compiled" if info is not None and info.compiled else "vm_instrument",
            param_names=param_names,
            params=[self._spec(p) for p in params],
            target=info.target if info is not None else "",
            note=(info.note if info is not None and info.note else "") if mapped else UNMAPPED_NOTE,
        )
        if info is not None:
            graph.code_location.CopyFrom(self.code_location(info.frames, info.user_index))
        return graph

    def _register_function(self, program: Program, function: graphs.FunctionInfo) -> RuntimeFunction:
        graph = self._graph(program, function.name, function.params, function.param_names, True)
        if function.num_inputs is not None:
            graph.num_inputs = function.num_inputs
        unfiltered = self.op_regex is None and self.dtype_ok is None
        graph_id = graph.graph_id
        op_ids = [next(self._op_ids) for _ in function.sites]
        ops, sites, events = [], [], []
        for site, op_id in zip(function.sites, op_ids):
            locations = [self.code_location(origin.frames, origin.user_index, origin.node) for origin in site.origins]
            event = self._op_encoder.event(op_id, graph_id, site, locations, op_ids)
            events.append(event)
            ops.append(event.graph_op_creation)
            if unfiltered:
                count = len(site.outputs)
                slots = _ALL_SLOTS[count] if count < len(_ALL_SLOTS) else tuple(range(count))
            else:
                slots = tuple(
                    i
                    for i, s in enumerate(site.outputs)
                    if self._passes_filters(site.name, site.kernel, site.origins, s[0])
                )
            sites.append(RuntimeSite(op_id, graph_id, site.name, site.kernel, _out_positions(site), slots, site))
        for source in function.outputs:
            returned = graph.outputs.add(kind=source.kind, name=source.name, spec=self._spec(source.spec))
            if source.kind == pb.OpInput.OP_OUTPUT and source.producer_position >= 0:
                returned.producer_op_id = op_ids[source.producer_position]
                returned.producer_output_slot = source.producer_slot
            elif source.kind == pb.OpInput.PARAM:
                returned.param_index = source.param_index
        self._emit_graph(graph, OpBatch(ops, events))
        return RuntimeFunction(function.name, graph.graph_id, sites, mapped=True, weights=function.weights)

    def _emit_graph(self, graph: pb.DebuggedGraph | None, ops: list[pb.GraphOpCreation]) -> None:
        for sink in self.sinks:
            try:
                sink.on_graph(graph, ops)
            except Exception as failure:  # at a build or a first call: never the user's error
                sink_failed(sink, "on a graph", failure)

    def function(
        self, program: Program, name: str, param_names: Callable[[str], list[str]] | None = None
    ) -> RuntimeFunction:
        """A function of program; unmapped ones get a graph on first call (with the parameter
        names param_names(name) gives: a library's VM knows them)."""
        function = program.functions.get(name)
        if function is not None:
            return function
        with program.lock:
            function = program.functions.get(name)
            if function is None:
                graph = self._graph(program, name, [], param_names(name) if param_names else [], False)
                self._emit_graph(graph, [])
                function = RuntimeFunction(name, graph.graph_id, [], mapped=False)
                program.functions[name] = function
        return function

    def dynamic_site(
        self, function: RuntimeFunction, symbol: str, args: tuple, fresh: set[int], sources: dict[int, tuple] | None
    ) -> RuntimeSite:
        """A kernel site of an unmapped function, described from its first call: its outputs'
        dtypes and ranks (every dimension unknown, -1: the next call may take another shape;
        each trace has its own), and where each input comes from when sources (vm_tracer's
        Call.sources) says: the function's parameter, or an output of an earlier kernel."""
        from tvmdbg_tb.tracing.summary import is_tensor

        with function.lock:
            occurrence = len(function.by_symbol.get(symbol, ()))
            tensors = [i for i, a in enumerate(args) if is_tensor(a)]
            outs = tuple(i for i in tensors if hash(args[i]) in fresh) or tuple(tensors[-1:])
            name = symbol if occurrence == 0 else f"{symbol}_{occurrence}"
            op_id = next(self._op_ids)
            op = pb.GraphOpCreation(
                op_id=op_id,
                graph_id=function.graph_id,
                op_name=name,
                kernel=symbol,
                call_type="call_tir" if outs else "call_packed",
                device="cpu:0",
                position=len(function.sites),
            )
            for i, arg in enumerate(args):
                if is_tensor(arg):
                    spec = pb.TensorSpec(dtype=str(arg.dtype), shape=[-1] * len(arg.shape))
                    if i in outs:
                        op.outputs.append(spec)
                        op.output_names.append(f"{name}:{len(op.output_names)}")
                    else:
                        _dynamic_input(op.inputs.add(name=f"arg{i}", spec=spec), arg, sources)
            slots = tuple(k for k, i in enumerate(outs) if self._passes_filters(name, symbol, (), str(args[i].dtype)))
            site = RuntimeSite(op_id, function.graph_id, name, symbol, outs, slots, None)
            function.sites.append(site)
            function.by_symbol.setdefault(symbol, []).append(site)
        self._emit_graph(None, [op])
        return site

    # -- executions ------------------------------------------------------------------------

    def kernel_done(self, call: KernelCall) -> BaseException | None:
        stop = None
        for sink in self.sinks:
            try:
                error = sink.on_kernel(call)
            except Exception as failure:  # a debugger bug must not change the user's program
                sink_failed(sink, "on a kernel", failure)
                continue
            if error is not None and stop is None:
                stop = error
        return stop

    def execution_done(self, execution: pb.Execution, traces: list[pb.GraphExecutionTrace]) -> None:
        held = getattr(_HELD, "calls", None)
        for sink in self.sinks:
            if held is not None and sink in self._after_call:
                held.append((sink, execution, traces))
                continue
            try:
                sink.on_execution(execution, traces)
            except Exception as failure:
                sink_failed(sink, "on a call", failure)

    def serialized_execution_done(self, payload: bytes, traces: Sequence[bytes], nonfinite: bool | None = None) -> None:
        """execution_done for a serialized Execution and its trace payloads (the compiled
        path): straight to the writer when every other sink is idle, without the two
        wrappers and the calls per VM call that the sinks' interface costs. nonfinite:
        whether they hold a NaN or an Inf, when the tracer knows."""
        writer = self._sole_writer
        if writer is not None and all([idle() for idle in self._idle_checks]):
            writer.write_call(
                payload, traces, wall_time=time.time(), nonfinite=nonfinite
            )  # queues, or records its failure
        else:
            self.execution_done(ExecutionPayload(payload), TraceBatch(payloads=traces, nonfinite=nonfinite))


_ALL_SLOTS = [tuple(range(n)) for n in range(16)]  # the output slots of an unfiltered site


def _dynamic_input(source: pb.OpInput, arg, sources: dict[int, tuple] | None) -> None:
    """An unmapped kernel's input: the function's parameter or an earlier kernel's output it
    is (by data pointer, views included), else OTHER."""
    found = sources.get(arg.data_ptr()) if sources else None
    if found is None:
        source.kind = pb.OpInput.OTHER
    elif found[0] == "param":
        source.kind, source.param_index, source.name = pb.OpInput.PARAM, found[1], found[2]
        if found[3] >= 0:
            source.tuple_item = found[3]
    else:
        source.kind, source.producer_op_id, source.producer_output_slot = pb.OpInput.OP_OUTPUT, *found


def _out_positions(site: graphs.SiteInfo) -> tuple[int, ...] | None:
    return None if site.returns_value else site.output_positions


class WriterSink:
    """Writes graphs, executions and traces to a DebugEventsWriter."""

    def __init__(self, writer: DebugEventsWriter):
        self.writer = writer

    def on_graph(self, graph: pb.DebuggedGraph | None, ops: list[pb.GraphOpCreation]) -> None:
        if graph is not None:
            self.writer.write_graph(graph)
        events = getattr(ops, "events", None)
        if events is None:
            for op in ops:
                self.writer.write_graph_op_creation(op)
            return
        now = time.time()
        for event in events:
            event.wall_time = now
            self.writer.write_event(layout.GRAPHS, event)

    def on_kernel(self, call: KernelCall) -> None:
        return None

    def on_execution(self, execution: pb.Execution, traces: Sequence[pb.GraphExecutionTrace]) -> None:
        """One writer call per VM call: the writer counts (and keeps whole, if it held the
        first NaN) a call, not its pieces."""
        payloads = getattr(traces, "payloads", None)
        if payloads is None:
            payloads = [t.SerializeToString() for t in traces]
        data = execution.payload if type(execution) is ExecutionPayload else execution.SerializeToString()
        nonfinite = getattr(traces, "nonfinite", None)
        self.writer.write_call(data, payloads, wall_time=time.time(), nonfinite=nonfinite)

    def close(self) -> None:
        self.writer.close()
