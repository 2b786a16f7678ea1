"""Compile-time capture: where the user created each Relax op, and what each build produced.

- relax.BlockBuilder.emit/emit_output are wrapped to remember the user's stack for every var
  they bind (this covers nn.Module export, hand-written BlockBuilder code and the torch
  importer, where the fx node's own stack trace is preferred).
- Pass.__call__ is wrapped to follow the vars through passes the user applies before the
  build (lineage.py: ToMixedPrecision's re-typed ops keep their lines), and the build's pass
  instrument follows those its pipeline runs before lowering ops the same way.
- relax.build (which tvm.compile calls) is wrapped to run the pipeline under a
  PassContext with one more pass instrument that keeps the three module snapshots
  graphs.py needs, then to describe the executable and attach that description to it.
"""

from __future__ import annotations

import gc
import os
import threading
import uuid
import weakref
from collections.abc import Callable

import tvm
from tvm import relax

from tvmdbg_tb.capture import frames as frames_mod
from tvmdbg_tb.capture import graphs, importers, lineage


class EmitRegistry:
    """User stacks of the vars bound by BlockBuilder.emit while recording is on."""

    def __init__(self):
        self._lock = threading.Lock()
        # hash(var) is the object's address: keep the var alive so the key stays unique.
        self._by_var: dict[int, tuple[object, graphs.Emitted]] = {}
        self._by_name: dict[str, list[graphs.Emitted]] = {}
        self._by_value: dict[int, tuple[object, graphs.Emitted]] = {}
        # Function parameters an importer made of a model's weights: their own names
        # (importers.parameter_names), read once per model graph converted.
        self.parameter_names: dict[str, str] = {}
        self._graphs_read: set[int] = set()

    def record(self, var, expr, skip: int, name_hint: str = "") -> None:
        name = str(var.name)
        entry = self.entry(graphs.op_type_of(expr), name, skip + 1)
        if name_hint and name_hint != name:
            entry.name_hint = name_hint
        with self._lock:
            self._by_var[hash(var)] = (var, entry)
            self._by_name.setdefault(name, []).append(entry)

    def record_value(self, expr, skip: int) -> None:
        """An expression an importer normalized instead of emitting it (from_onnx binds its
        ops later, nested in the next node's expression): known by identity, as the value
        of the binding it will get (lookup_value), when it is made for a model node."""
        if not isinstance(expr, relax.Call) or importers.converting_node(skip + 1) is None:
            return
        entry = self.entry(graphs.op_type_of(expr), "", skip + 1)
        with self._lock:
            self._by_value.setdefault(hash(expr), (expr, entry))

    def entry(self, op_type: str, name: str, skip: int) -> graphs.Emitted:
        """The entry of an op made now (the caller's stack, `skip` frames up)."""
        frames, user_index = frames_mod.capture(skip + 1)
        node = None
        converting = importers.converting_node(skip + 1)
        if converting is not None:
            graph = getattr(converting[1], "graph", None)
            if converting[0] == importers.TORCH_FX and id(graph) not in self._graphs_read:
                self._graphs_read.add(id(graph))
                self.parameter_names.update(importers.parameter_names(skip + 1))
            # Under an importer: the node's own stack (the model's forward) continues the
            # user's, from the user's import call on.
            node = importers.model_node(*converting)
            node_frames = importers.node_frames(*converting)
            own = frames_mod.called_from_index(frames, user_index)
            call = user_index if own is None else own
            if node_frames:
                frames = frames[: call + 1] + node_frames if call >= 0 else node_frames
                user_index = frames_mod.user_index(frames)
            else:  # no Python stack: the node is the location (an ONNX file's node), the
                # user's import call its called_from
                frames, user_index = frames[: call + 1], -1
        return graphs.Emitted(op_type, frames, user_index, name, node)

    def register(self, var, entry: graphs.Emitted) -> None:
        """The entry of a var a pass made (lineage.py)."""
        with self._lock:
            self._by_var[hash(var)] = (var, entry)

    def lookup(self, var) -> graphs.Emitted | None:
        """The entry of this very var (identity)."""
        found = self._by_var.get(hash(var))
        if found is None or not found[0].same_as(var):
            return None
        return found[1]

    def lookup_value(self, value) -> graphs.Emitted | None:
        """The entry of this very expression (record_value)."""
        found = self._by_value.get(hash(value))
        if found is None or not found[0].same_as(value):
            return None
        return found[1]

    def find(self, name: str, op_type: str) -> graphs.Emitted | None:
        """The entry of a var with this name and op, for vars that passes re-created (e.g.
        tvm.relax.training's AppendLoss/Gradient/LegalizeOps); None when ambiguous (entries
        pointing at different user lines)."""
        matches = [e for e in self._by_name.get(name, ()) if graphs.same_op(e.op_type, op_type)]
        if not matches:
            return None
        lines = {_user_line(e) for e in matches}
        return matches[-1] if len(lines) == 1 else None

    def clear(self) -> None:
        with self._lock:
            self._by_var.clear()
            self._by_name.clear()
            self._by_value.clear()
            self.parameter_names.clear()
            self._graphs_read.clear()


def _user_line(entry: graphs.Emitted):
    return entry.frames[entry.user_index][:2] if entry.user_index >= 0 else None


class _Build(threading.local):
    """The build in progress on this thread (relax.build -> _vmcodegen)."""

    pending = None


class CaptureState:
    """What the build hooks do: set by the tracing switches (the capture part of
    tvmdbg_tb.tracing.state.TracingState), read by the hooks at each emit and build."""

    def __init__(self) -> None:
        self.recording = False
        self.on_executable = None  # callable(executable, ExecutableInfo) set by the session
        # What builds' summary kernels record (compiled.Summaries); None: no compile-time
        # instrumentation (the VM instrument traces them).
        self.compile_health = None
        # Parameters counted by the kernels that read them (epilogue.py); off under
        # param_summaries="once_per_value", which skips their summaries instead.
        self.params_in_kernels = True
        # Weights (graphs.FunctionInfo.weights) summarised by kernels too; off under
        # param_summaries="weights_once_per_value", where the tracer summarises them once.
        self.weights_in_kernels = True
        # Fused kernels count the NaN and infinities their ops make (inner_check.py).
        self.inner_ops = True
        self.registry = EmitRegistry()  # the user's stack of every var bound while recording
        self.build = _Build()


@tvm.instrument.pass_instrument
class _Snapshots:
    """Keeps the module before and after FuseOps and before the first of
    ToNonDataflow/CallTIRRewrite, and follows the passes before LegalizeOps (lineage.py)."""

    def __init__(self, registry: EmitRegistry):
        self.pre_fuse = None
        self.fused = None
        self.sites = None
        self.final = None
        self.passes = lineage.PipelinePasses(registry)

    def run_before_pass(self, mod, info):
        self.passes.before(mod, info.name)
        if info.name == "FuseOps":
            self.pre_fuse = mod
        if self.sites is None and info.name in ("ToNonDataflow", "RemovePurityChecking", "CallTIRRewrite"):
            self.sites = mod

    def run_after_pass(self, mod, info):
        self.passes.after(mod, info.name)
        if info.name == "FuseOps":
            self.fused = mod


def _wrap_normalize(original, current: Callable[[], CaptureState]):
    def normalize(self, expr, *args, **kwargs):
        result = original(self, expr, *args, **kwargs)
        state = current()
        if state.recording:
            try:
                state.registry.record_value(result, skip=1)
            except Exception:  # capture is best effort; never break the user's model
                pass
        return result

    normalize.__wrapped__ = original
    normalize.__doc__ = original.__doc__
    return normalize


def _wrap_emit(original, current: Callable[[], CaptureState]):
    def emit(self, expr, *args, **kwargs):
        state = current()
        try:
            var = original(self, expr, *args, **kwargs)
        except Exception as error:
            if state.recording:
                _note_import_failure(error, state.registry, skip=1)
            raise
        if state.recording:
            try:
                hint = kwargs.get("name_hint", args[0] if args else "")
                state.registry.record(var, expr, skip=1, name_hint=hint if isinstance(hint, str) else "")
            except Exception:  # capture is best effort; never break the user's model
                pass
        return var

    emit.__wrapped__ = original
    emit.__doc__ = original.__doc__
    return emit


def _note_import_failure(error: Exception, registry: EmitRegistry, skip: int) -> None:
    """Adds to an error raised while an importer converts a model node (TVM's converter could
    not type an op: a float16 model's bias added to a float32 matmul) a note naming the node
    and the line of the model's code that made it; never raises."""
    try:
        converting = importers.converting_node(skip + 1)
        if converting is None or not hasattr(error, "add_note"):
            return
        entry = registry.entry("", "", skip + 1)
        node = entry.node
        text = f"tvmdbg: TVM's importer failed converting {node.format} node {node.name} ({node.op_type})"
        place = frames_mod.place(entry.frames, entry.user_index)
        error.add_note(f"{text} at {place}" if place else text)
    except Exception:  # noqa: BLE001 - the user's error matters, not ours
        pass


class _PendingBuild:
    def __init__(self, mod, snapshots, target, frames, user_index, state: CaptureState):
        self.mod = mod
        self.snapshots = snapshots
        self.target = target
        self.frames = frames
        self.user_index = user_index
        self.health = state.compile_health
        self.registry = state.registry
        self.info: graphs.ExecutableInfo | None = None
        self.lowered = None  # the module VM codegen returned (its PrimFuncs: build_failure.py)

    def describe(self) -> graphs.ExecutableInfo:
        if self.info is None:
            self.info = describe(self.mod, self.snapshots, self.target, self.frames, self.user_index, self.registry)
        return self.info


class _CollectorPaused:
    """Python's cyclic collector held off while a build's module is walked and described.

    The walks keep thousands of new objects alive at once (IR wrappers for the new blocks, the
    sites' descriptions): with the collector on, every 700 of them start a collection of the
    young objects and every tenth of those a larger one. Paused, one collection after the walk sees them all. Nested and
    concurrent builds restore the collector once, as the first found it; none of these
    objects form cycles that need it meanwhile."""

    _lock = threading.Lock()
    _depth = 0
    _was_enabled = False

    def __enter__(self):
        with self._lock:
            if _CollectorPaused._depth == 0:
                _CollectorPaused._was_enabled = gc.isenabled()
                gc.disable()
            _CollectorPaused._depth += 1

    def __exit__(self, *exc):
        with self._lock:
            _CollectorPaused._depth -= 1
            if _CollectorPaused._depth == 0 and _CollectorPaused._was_enabled:
                gc.enable()


def _wrap_codegen(original, current: Callable[[], CaptureState]):
    """Instruments the lowered module right before VM codegen (see compiled.py)."""

    def vmcodegen(builder, mod, *args, **kwargs):
        state = current()
        pending = state.build.pending
        if pending is not None and pending.health is not None:
            with _CollectorPaused():
                mod = _instrumented(pending, mod, state)
        lowered = original(builder, mod, *args, **kwargs)
        if pending is not None:
            pending.lowered = lowered
        return lowered

    vmcodegen.__wrapped__ = original
    return vmcodegen


def _instrumented(pending: _PendingBuild, mod, state: CaptureState):
    """mod with the compile-time instrumentation (compiled.py) if the build supports it."""
    info = pending.describe()
    from tvmdbg_tb.capture import compiled

    if compiled.plan_supported(info):
        try:
            mod, functions = compiled.instrument(
                mod, info, pending.health, state.params_in_kernels, state.inner_ops, state.weights_in_kernels
            )
            info.compiled = functions
            info.compiled_health = pending.health
            compiled.register(info)
        except Exception as error:  # unsupported shape of module: the VM instrument traces it
            info.compiled = {}
            info.note = (info.note + "; " if info.note else "") + f"traced by the VM instrument ({error})"
    elif compiled.target_kind(info.target) not in compiled.HOST_TARGETS:
        kind = compiled.target_kind(info.target)
        info.note = (info.note + "; " if info.note else "") + (
            f"a {kind} build: traced by the VM instrument, which cannot read device tensors yet "
            "(their health is recorded as unknown)"
        )
    return mod


def _wrap_build(original, current: Callable[[], CaptureState]):
    def build(mod, *args, **kwargs):
        state = current()
        if not state.recording or state.on_executable is None:
            return original(mod, *args, **kwargs)
        frames, user_index = frames_mod.capture(1)
        snapshots = _Snapshots(state.registry)
        outer_context = tvm.transform.PassContext.current()
        context = tvm.transform.PassContext(
            opt_level=outer_context.opt_level,
            required_pass=list(outer_context.required_pass),
            disabled_pass=list(outer_context.disabled_pass),
            instruments=[*outer_context.instruments, snapshots],
            config=dict(outer_context.config),
        )
        target = args[0] if args else kwargs.get("target")
        pending = _PendingBuild(mod, snapshots, str(target or ""), frames, user_index, state)
        outer, state.build.pending = state.build.pending, pending
        try:
            with context:
                executable = original(mod, *args, **kwargs)
        except Exception as error:
            _explain_failure(error, pending, original, (mod, *args), kwargs)
            raise
        finally:
            state.build.pending = outer
        with _CollectorPaused():
            info = pending.describe()
            attach(executable, info)
            state.on_executable(executable, info)
        return executable

    build.__wrapped__ = original
    build.__doc__ = original.__doc__
    return build


def _explain_failure(error: Exception, pending: _PendingBuild, original, args, kwargs) -> None:
    """Adds to a build error that happened after VM codegen a note naming the kernels that
    fail to compile and the ops and lines that made them (build_failure.py); never raises."""
    if pending.lowered is None:
        return  # failed in the Relax pipeline, before there were kernels to blame
    try:
        import inspect

        from tvm.relax import vm_build

        from tvmdbg_tb.capture import build_failure

        bound = inspect.signature(original).bind(*args, **kwargs)
        bound.apply_defaults()
        target, pipeline = bound.arguments.get("target"), bound.arguments.get("tir_pipeline", "default")
        if isinstance(target, str):
            target = tvm.target.Target(target)

        def build_one(module):
            return tvm.tirx.build(module, target=target, pipeline=pipeline)

        kernels, complete = build_failure.failing_kernels(vm_build._filter_tir(pending.lowered), build_one)
        text = build_failure.note(kernels, complete, pending.describe())
    except Exception as failure:  # noqa: BLE001 - the user's error matters, not ours
        text = f"tvmdbg: could not tell which kernel fails to build ({failure!r})"
    if text and hasattr(error, "add_note"):
        error.add_note(text)


def describe(
    mod, snapshots: _Snapshots, target: str, frames, user_index, registry: EmitRegistry
) -> graphs.ExecutableInfo:
    """The ExecutableInfo of one build; never raises (a failure becomes a note)."""
    executable_id = uuid.uuid4().hex[:12]
    try:
        snapshots.passes.finish()
        # The ops as the lowering met them: those the pipeline's first passes made included.
        source = snapshots.passes.lowered if snapshots.passes.lowered is not None else mod
        origins, by_name, by_operand, names = graphs.collect_origins(source, registry, snapshots.fused is not None)
        fused = graphs.fused_members(snapshots.fused, by_operand, snapshots.pre_fuse, origins)
        sites_mod = snapshots.sites if snapshots.sites is not None else mod
        flows = graphs.fused_dataflow(snapshots.fused)
        functions = graphs.extract_functions(sites_mod, origins, by_name, fused, names, flows)
        note = "" if snapshots.sites is not None else "pipeline without CallTIRRewrite: sites from the input module"
        info = graphs.ExecutableInfo(executable_id, functions, target, True, note, frames, user_index)
        info.fused_module = snapshots.fused
        for function in functions.values():
            for site in function.sites:
                if len(site.member_origins) > 1:
                    site.fused_module = snapshots.fused
        return info
    except Exception as error:  # a module shape we do not understand: trace without mapping
        note = f"source mapping failed: {error!r}"
        return graphs.ExecutableInfo(executable_id, {}, target, False, note, frames, user_index)


# Executable -> its description (Executables are plain Python objects, weakly referenced).
_INFOS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def attach(executable, info: graphs.ExecutableInfo) -> None:
    try:
        _INFOS[executable] = info
    except TypeError:  # a runtime Module (a loaded library, saved.py) takes no weak reference
        try:
            executable._tvmdbg_info = info
        except AttributeError:
            pass


def info_of(rt_mod) -> graphs.ExecutableInfo | None:
    """The description of an executable if it was compiled while tvmdbg was enabled (or of a
    library loaded with the capture saved with it)."""
    try:
        return _INFOS.get(rt_mod) or getattr(rt_mod, "_tvmdbg_info", None)
    except TypeError:
        return getattr(rt_mod, "_tvmdbg_info", None)


def install(current: Callable[[], CaptureState]) -> None:
    """Wraps the TVM entry points once per process; current() is the CaptureState in force
    (tvmdbg_tb.tracing.state), read at each call: they do nothing extra while it is not
    recording."""
    bb = relax.BlockBuilder
    if getattr(bb.emit, "_tvmdbg_hook", False):
        return

    def lineage_active() -> bool:
        """Passes the user applies while recording (not those of a build's pipeline)."""
        state = current()
        return state.recording and state.build.pending is None

    from tvm.relax import vm_build

    wrapped_build = _wrap_build(vm_build.build, current)
    wrappers = [
        (bb, "normalize", _wrap_normalize(bb.normalize, current)),
        (
            tvm.ir.transform.Pass,
            "__call__",
            lineage.wrap_pass_call(tvm.ir.transform.Pass.__call__, current, lineage_active),
        ),
        (vm_build, "build", wrapped_build),
        (relax, "build", wrapped_build),
        (vm_build, "_vmcodegen", _wrap_codegen(vm_build._vmcodegen, current)),
        (tvm.runtime.Executable, "export_library", _wrap_export(tvm.runtime.Executable.export_library)),
    ]
    wrappers += [(bb, name, _wrap_emit(getattr(bb, name), current)) for name in ("emit_output", "emit")]
    for owner, name, wrapper in wrappers:  # emit last: it marks the hooks installed
        wrapper._tvmdbg_hook = True
        setattr(owner, name, wrapper)


def original_build():
    """TVM's relax.build without the hook: for builds that are no user compile (replays)."""
    build = relax.build
    return build.__wrapped__ if getattr(build, "_tvmdbg_hook", False) else build


# An annotation of files, like _INFOS of executables: the libraries exported from executables
# compiled while recording, realpath -> their description, for processes that load them from
# the file (tvmdbg_tb.disco's workers).
_EXPORTED: dict[str, graphs.ExecutableInfo] = {}


def _wrap_export(original):
    def export_library(self, file_name, *args, **kwargs):
        result = original(self, file_name, *args, **kwargs)
        info = info_of(self)
        if info is not None and isinstance(file_name, (str, os.PathLike)):
            _EXPORTED[os.path.realpath(file_name)] = info
        return result

    return export_library


def exported_info(path: str) -> graphs.ExecutableInfo | None:
    """The description of the executable last exported to path in this process, if any."""
    return _EXPORTED.get(os.path.realpath(path))
