"""native_call's plans for calls that are not all tensors of static shape, learned from a call.

native_call.cc records a call in C++ from a plan: the bytes of its traces and Execution that
stay the same from call to call, and where each call's counts go. fast_tracer makes one for a
function whose arguments and results are all tensors of static shape (_native_plan). An LLM's
functions are not: `decode` takes and returns the KV cache (an object), takes the weights
(summarised once per value: param_cache.py), and `embed` takes the prompt's tokens (a symbolic
length). Their records are still the same bytes from call to call while the same kind of
object comes in and goes out, the same weights come in with no write seen since their summary,
and the shapes are the same. So a plan is learned from a call the Python path recorded, with a
guard checking exactly that after each call (native_call.cc, Passes):

- an object argument or result: its type (its summary is its type's name);
- a tensor of symbolic shape (an argument, a result): its shape; a kernel output of symbolic
  shape: the dims its summary row holds (health modes);
- the weights summarised once per value: the same tensor objects, and the parameter cache's
  generation (it grows when any summary it holds stops holding: a write or an export seen;
  native_call reads its generation_cell).

The Python path records every call no plan's guard passes for, and may teach another plan
then: up to MAX_PLANS per function and argument count (then they are all forgotten and
learned again, so a loop that moved on to other shapes gets its plans back).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from tvmdbg_tb.capture import compiled
from tvmdbg_tb.events.modes import spec
from tvmdbg_tb.events.wire import varint
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import execution_template, param_cache
from tvmdbg_tb.tracing.native_call import NativePlan, native_plan
from tvmdbg_tb.tracing.summary import flatten, flatten_with_paths, is_opaque, is_tensor, tensor_summary

MAX_PLANS = 4  # native_call.cc kMaxVariants
_MAX_ATTEMPTS = 64  # calls of one function a plan is tried from, beyond the plans learned
# The guard's checks (native_call.cc Check).
_ARG_TYPE, _ARG_SHAPE, _ARG_SAME, _OUT_TYPE, _OUT_SHAPE, _ROWS = range(6)
_INPUTS, _OUTPUTS = b"\x2a", b"\x32"  # Execution.inputs, Execution.outputs
_RANK_COLUMN = 7  # a summary row: stamp, size, <0, >0, ==0, -inf, +inf, rank, dims...


class PlanLearner:
    """Teaches one CompiledTracer's native_call.Tracer its plans. native_call keeps them, and
    hands a call it leaves to Python the very plan it ran call_rows with (_native_finish)."""

    def __init__(self, tracer: Any):
        self.tracer = tracer
        self._attempts: dict[tuple[int, int], int] = {}
        mode = tracer.mode_spec
        self._plannable = mode.health or not mode.tensor_data  # NO_TENSOR and the health modes

    def wanted(self, call: Any, num_inputs: int) -> int | None:
        """The call's function id when a plan may be learned from it (its records complete,
        from one buffer, its function without a static plan), else None."""
        tracer = self.tracer
        native = tracer._native
        if not native or not self._plannable or len(call.buffers) != 1 or call.skips:
            return None
        fid = call.buffers[0][0]
        if tracer._fids.get(call.function.name) != fid:
            return None
        key = (fid, num_inputs)
        if self._attempts.get(key, 0) >= _MAX_ATTEMPTS + MAX_PLANS:
            return None
        if key not in self._attempts:
            try:
                static = tracer._native_plan(call.function.name, num_inputs) is not None
            except Exception:  # native_call, which asked first, said so (a warning); no plans then
                static = True
            if static:  # a static plan serves it
                self._attempts[key] = _MAX_ATTEMPTS + MAX_PLANS
                return None
        return fid

    def dims(self, fid: int, array: np.ndarray) -> dict[int, tuple[int, ...]]:
        """The shapes the call's kernels wrote of their outputs of symbolic shape, by kernel
        row (0-based): read before the buffer goes back to its pool."""
        _, dynamic = self.tracer._static(fid)
        out = {}
        for i in np.flatnonzero(dynamic).tolist():
            row = array[i + 1]
            rank = int(row[_RANK_COLUMN])
            out[i] = tuple(int(d) for d in row[_RANK_COLUMN + 1 : _RANK_COLUMN + 1 + rank])
        return out

    def learn(self, call: Any, fid: int, inputs: tuple, outputs: Any, dims: dict[int, tuple[int, ...]]) -> bool:
        """A plan for calls like this one, taught to native_call; False when none can be."""
        key = (fid, len(inputs))
        self._attempts[key] = self._attempts.get(key, 0) + 1
        plan = _Builder(self.tracer, call, compiled.FUNCTIONS[fid], dims).build(inputs, outputs)
        if plan is None:
            return False
        native = self.tracer._native
        if native.learn(fid, len(inputs), plan):
            return True
        native.forget(fid, len(inputs))  # full: start again from this one
        return native.learn(fid, len(inputs), plan)


class _Builder:
    """One learned plan: the call's constant bytes, and the guard under which they hold."""

    def __init__(self, tracer: Any, call: Any, function: compiled.CompiledFunction, dims: dict):
        self.tracer, self.call, self.function, self.dims = tracer, call, function, dims
        self.mode = tracer.mode
        self.constant = not spec(self.mode).tensor_data  # NO_TENSOR: every summary is constant
        self.guard: list[tuple] = []
        session = tracer.session
        self.weights = call.function.weights if session.weight_cache is not None else ()
        self.cache = session.weight_cache

    def build(self, inputs: tuple, outputs: Any) -> NativePlan | None:
        """The plan native_call.Tracer.learn takes (and fast_tracer._one_pass reads back)."""
        tracer, function = self.tracer, self.function
        parts = [self._input(k, value) for k, value in enumerate(inputs)]
        leaves = flatten_with_paths(outputs) if outputs is not None else []
        parts += [self._output(j, path, value) for j, (path, value) in enumerate(leaves)]
        if any(part is None for part in parts) or len(leaves) != len(flatten(outputs)):
            return None
        self._row_checks()
        plan = tracer._parts_plan(function.fid, self.dims)
        if plan is None:
            return None
        header = pb.Execution(
            function_name=function.name,
            graph_id=self.call.function.graph_id,
            tensor_debug_mode=self.mode,
            executable_id=tracer.program.executable_id,
            vm=tracer.vm_number,
        )
        summaries = static = None
        if self.constant:  # every summary constant: the Execution's bytes
            static = header.SerializeToString() + b"".join(tag + varint(len(body)) + body for tag, _, _, body in parts)
        else:
            if all(row is None for _, row, _, _ in parts):
                return None
            template = execution_template.ExecutionTemplate(self.mode, header.SerializeToString(), parts)
            summaries = (*template.native, compiled.ROW_WIDTH)
        return native_plan(plan, function, tracer._rate, summaries, static, tuple(self.guard))

    def _input(self, k: int, value: Any) -> tuple | None:
        """The part (execution_template's: tag, row or rows or None, dtype, bytes) of argument k."""
        function = self.function
        if k in self.weights:
            return self._weights(k, value)
        if is_tensor(value):
            if self.constant:
                return self._tensor(_INPUTS, value, function.param_specs[k], (_ARG_SHAPE, k))
            row = function.param_rows[k] if k < len(function.param_rows) else None
            return self._tensor(_INPUTS, value, function.param_specs[k], (_ARG_SHAPE, k), row)
        if flatten(value) == [value]:
            return self._object(_INPUTS, value, (_ARG_TYPE, k))
        leaf_specs = function.param_leaf_specs[k] if k < len(function.param_leaf_specs or ()) else None
        return self._tuple(k, value, leaf_specs)

    def _output(self, j: int, path: tuple[int, ...], value: Any) -> tuple | None:
        function = self.function
        spec = function.output_specs[j] if j < len(function.output_specs) else None
        if is_tensor(value):
            if self.constant:
                return self._tensor(_OUTPUTS, value, spec, (_OUT_SHAPE, path))
            row = function.output_rows[j] if j < len(function.output_rows) else None
            return self._tensor(_OUTPUTS, value, spec, (_OUT_SHAPE, path), row)
        return self._object(_OUTPUTS, value, (_OUT_TYPE, path))

    def _tensor(self, tag: bytes, value: Any, spec, where: tuple, row: int | None = None) -> tuple | None:
        """A tensor's part: constant in NO_TENSOR, else from its row (none: no plan). Its
        shape as this call's, checked when symbolic."""
        dtype, shape = str(value.dtype), tuple(int(d) for d in value.shape)
        if spec is None:
            self.guard.append((*where, shape))
        if self.constant:
            return tag, None, None, tensor_summary(self.mode, value).SerializeToString()
        if row is None or not self._counted(row):
            return None
        return tag, row, dtype, pb.TensorSummary(dtype=dtype, shape=shape).SerializeToString()

    def _counted(self, row: int) -> bool:
        """Whether a buffer row holds counts (a kernel row with health, or a parameter's)."""
        rows = self.function.rows
        return row > len(rows) or rows[row - 1].health

    def _tuple(self, k: int, value: Any, leaf_specs) -> tuple | None:
        """A tuple argument of static tensors: its tensors' rows (health modes), its type's
        length and no more in NO_TENSOR."""
        if leaf_specs is None:
            return None
        if self.constant:
            return _INPUTS, None, None, tensor_summary(self.mode, value).SerializeToString()
        rows = self.function.param_leaf_rows[k] if self.function.param_leaf_rows else None
        if not rows or not all(self._counted(r) for r in rows):
            return None
        items = [(d, pb.TensorSummary(dtype=d, shape=s).SerializeToString()) for d, s in leaf_specs]
        return _INPUTS, tuple(rows), items, pb.TensorSummary(dtype="tuple", shape=[len(leaf_specs)]).SerializeToString()

    def _weights(self, k: int, value: Any) -> tuple | None:
        """Weights summarised once per value: the summary this call repeated (none: no plan),
        valid while the same tensors come in and the cache's summaries hold."""
        cache, call = self.cache, self.call
        if cache is None or not param_cache.reuse_allowed(call.function):
            return None
        if is_tensor(value):
            entry = cache.lookup(value)
            summary = entry.summary if entry is not None else None
            same = value
        else:
            memo = cache.tuples.get(("in", call.function.name, k))
            leaves = flatten(value)
            current = memo is not None and len(memo[0]) == len(leaves)
            if not current or any(cache.lookup(leaf) is not entry for leaf, entry in zip(leaves, memo[0])):
                return None
            summary = memo[1]
            same = tuple(value) if isinstance(value, (list, tuple)) else value
        if summary is None or not summary.HasField("summarized_in_execution"):
            return None
        self.guard.append((_ARG_SAME, k, same, cache.generation_cell, cache.generation))
        return _INPUTS, None, None, summary.SerializeToString()

    def _object(self, tag: bytes, value: Any, where: tuple) -> tuple | None:
        """An object (a KV cache): its summary names its type, which the guard checks."""
        if is_opaque(value) or isinstance(value, np.ndarray):
            return None  # a shape's summary holds its length
        self.guard.append((*where, type(value)))
        return tag, None, None, tensor_summary(self.mode, value).SerializeToString()

    def _row_checks(self) -> None:
        """The dims the call's kernels wrote of their outputs of symbolic shape: the traces'
        shapes the plan holds (health modes)."""
        if not self.dims:
            return
        width, pairs = compiled.ROW_WIDTH, []
        for i, shape in sorted(self.dims.items()):
            base = (i + 1) * width + _RANK_COLUMN
            pairs.append((base, len(shape)))
            pairs += [(base + 1 + d, size) for d, size in enumerate(shape)]
        self.guard.append((_ROWS, struct.pack(f"<{2 * len(pairs)}q", *(v for pair in pairs for v in pair))))
