"""Wraps tvm.relax.VirtualMachine so that, while a session is active, every VM call goes
through its tracer: the compiled one (fast_tracer) when the executable carries summary
kernels, else the VM instrument (vm_tracer). Installed once per process, reading the tracing
state in force (state.py); a pass-through when idle.
"""

from __future__ import annotations

from tvm import relax

from tvmdbg_tb.capture import hooks as capture
from tvmdbg_tb.tracing.fast_tracer import CompiledTracer, flush_implicit, usable
from tvmdbg_tb.tracing.state import ACTIVE, TracingState
from tvmdbg_tb.tracing.vm_tracer import Tracer


def exclude(vm) -> None:
    """Never trace this VM (benchmarks use it for an uninstrumented reference)."""
    vm.__dict__["_tvmdbg_excluded"] = True
    vm.__dict__.pop("_tvmdbg_bound", None)


def tracer_of(vm, state: TracingState | None = None) -> Tracer | None:
    """The vm's tracer for the session of state (default: the one in force), created on first
    use; None when it has none."""
    state = state or ACTIVE.state
    session = state.session
    if session is None or vm.__dict__.get("_tvmdbg_excluded"):
        return None
    tracer = vm.__dict__.get("_tvmdbg_tracer")
    if tracer is None or tracer.session is not session:
        paths = state.paths
        if paths.compiled and usable(session, vm):
            tracer = CompiledTracer(session, vm, native_calls=paths.native_calls)
        else:
            tracer = Tracer(session, vm)
        vm.__dict__["_tvmdbg_tracer"] = tracer
        state.vms.add(vm)
    return tracer


def detach_all(state: TracingState) -> None:
    """Removes the instrument from every VM state traced (its session ended or changed)."""
    flush_implicit()
    for vm in list(state.vms):
        vm.__dict__.pop("_tvmdbg_tracer", None)
        vm.__dict__.pop("_tvmdbg_bound", None)
        try:
            vm._set_instrument(None)
        except Exception:  # a VM torn down meanwhile: nothing left to detach
            pass
    state.vms.clear()


def bound(vm, key, session):
    """What vm[key] returned in session when native_call traces it, or None. A generation loop
    looks its functions up on every call: the bound function is kept per VM and session
    (vm's _tvmdbg_bound: (session, {name: function}))."""
    kept = vm.__dict__.get("_tvmdbg_bound")
    if kept is None or kept[0] is not session or type(key) is not str:
        return None
    return kept[1].get(key)


def keep(vm, key, session, function) -> None:
    """function is what vm[key] returns while session lasts (see bound)."""
    if type(key) is not str:
        return
    kept = vm.__dict__.get("_tvmdbg_bound")
    if kept is None or kept[0] is not session:
        kept = vm.__dict__["_tvmdbg_bound"] = (session, {})
    kept[1][key] = function


class TracedFunction:
    """What vm["f"] returns while tvmdbg is enabled: the VM function, traced."""

    __slots__ = ("_tracer", "_name", "_function")

    def __init__(self, tracer: Tracer, name: str, function):
        self._tracer = tracer
        self._name = name
        self._function = function

    def __call__(self, *args):
        return self._tracer.call(self._name, self._function, args, args)

    def __getattr__(self, name):
        return getattr(self._function, name)


def install(active) -> None:
    """Wraps relax.VirtualMachine once per process; the wrappers trace into active.state's
    session (state.ACTIVE) and pass straight through while it has none."""
    vm_class = relax.VirtualMachine
    if getattr(vm_class.__getitem__, "_tvmdbg", False):
        return
    original_init = vm_class.__init__
    original_getitem = vm_class.__getitem__
    original_set_input = vm_class.set_input
    original_invoke_stateful = vm_class.invoke_stateful
    original_time_evaluator = vm_class.time_evaluator

    def __init__(self, rt_mod, *args, **kwargs):
        original_init(self, rt_mod, *args, **kwargs)
        self._tvmdbg_info = capture.info_of(rt_mod)

    def __getitem__(self, key):
        function = bound(self, key, active.state.session)
        if function is not None:
            return function
        function = original_getitem(self, key)
        tracer = tracer_of(self, active.state)
        if tracer is None:
            return function
        traced = TracedFunction(tracer, key, function)
        if not isinstance(tracer, CompiledTracer):
            return traced
        native = tracer.traced(key, function, traced)
        if native is not traced:
            keep(self, key, tracer.session, native)
        return native

    def set_input(self, func_name, *args, **kwargs):
        original_set_input(self, func_name, *args, **kwargs)
        self.__dict__.setdefault("_tvmdbg_inputs", {})[func_name] = args

    def invoke_stateful(self, func_name):
        tracer = tracer_of(self, active.state)
        if tracer is None:
            return original_invoke_stateful(self, func_name)
        inputs = self.__dict__.get("_tvmdbg_inputs", {}).get(func_name, ())
        return tracer.call(
            func_name,
            lambda: original_invoke_stateful(self, func_name),
            (),
            inputs,
            get_outputs=lambda: self.get_outputs(func_name),
        )

    def time_evaluator(self, func_name, dev, *args, **kwargs):
        evaluator = original_time_evaluator(self, func_name, dev, *args, **kwargs)
        vm = self

        def timed(*call_args):
            tracer = tracer_of(vm, active.state)
            if tracer is None:
                return evaluator(*call_args)
            name = func_name
            if func_name == "invoke_stateful" and call_args:
                name = str(call_args[0])
            return tracer.timed(name, evaluator, call_args)

        return timed

    for name, wrapper, original in (
        ("__init__", __init__, original_init),
        ("__getitem__", __getitem__, original_getitem),
        ("set_input", set_input, original_set_input),
        ("invoke_stateful", invoke_stateful, original_invoke_stateful),
        ("time_evaluator", time_evaluator, original_time_evaluator),
    ):
        wrapper.__wrapped__ = original
        wrapper.__doc__ = original.__doc__
        wrapper._tvmdbg = True  # the mark of the installed wrappers
        setattr(vm_class, name, wrapper)
