"""enable_check_numerics: stop at the first kernel whose output holds NaN or Inf.

Like tf.debugging.enable_check_numerics, without writing a dump: the error names the kernel,
the original Relax ops fused into it, its inputs' health and the user's source line.
"""

from __future__ import annotations

import numpy as np

from tvmdbg_tb.events.summaries import describe
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing.session import KernelCall
from tvmdbg_tb.tracing.summary import as_numpy, debug_values, is_tensor


class CheckNumericsError(FloatingPointError):
    """A kernel produced NaN or Inf. Attributes say where (see the message for a summary)."""

    def __init__(self, message: str, *, function: str, op_name: str, kernel: str, original_ops, source, inner_op=None):
        super().__init__(message)
        # (op_type, var_name) of the Relax op inside a fused kernel that made the value, found
        # by replaying the kernel op by op; None when not replayed (single-op kernel, ...).
        self.inner_op: tuple[str, str] | None = inner_op
        self.function = function
        self.op_name = op_name
        self.kernel = kernel
        self.original_ops: list[tuple[str, str]] = original_ops  # (op_type, var_name)
        self.source: tuple[str, int] | None = source  # the user's (file, line)


def _health_text(value) -> str:
    if not is_tensor(value):
        return type(value).__name__
    dtype, shape = str(value.dtype), tuple(int(d) for d in value.shape)
    fields = describe(pb.FULL_HEALTH, debug_values(pb.FULL_HEALTH, value, dtype, shape))
    if not fields:
        return f"{dtype}{list(shape)} (health unknown)"
    return (
        f"{dtype}{list(shape)} nan={fields['nan']} -inf={fields['neg_inf']} +inf={fields['pos_inf']} "
        f"negative={fields['negative']} zero={fields['zero']} positive={fields['positive']}"
    )


def _user_line(frames, user_index) -> tuple[str, int] | None:
    if 0 <= user_index < len(frames):
        path, line, _ = frames[user_index]
        return path, line
    return None


class CheckNumerics:
    """A session sink that turns the first non-finite kernel output into CheckNumericsError."""

    wants_nonfinite = True

    def __init__(self, trace_fused_ops: bool = False, inner_origin=None):
        self.trace_fused_ops = trace_fused_ops
        # inner_origin(site_info, inputs, kernel_bad) -> (InnerOp, record) | None: the replay
        # (tvmdbg_tb.replay.replayer.inner_origin, wired by the API).
        self.inner_origin = inner_origin

    def on_graph(self, graph, ops) -> None:
        return None

    def on_execution(self, execution, traces) -> None:
        return None

    def close(self) -> None:
        return None

    def _inner(self, call: KernelCall, bad: bool):
        """Replays a fused kernel while its inputs are alive: the inner op that made it."""
        info = call.site.info
        if self.inner_origin is None or info is None or len(info.member_origins) < 2:
            return None
        if not bad and not self.trace_fused_ops:
            return None
        views = [as_numpy(v) for v in call.inputs()]
        if any(v is None for v in views):
            return None
        try:
            return self.inner_origin(info, views, bad)
        except Exception:
            return None

    def on_kernel(self, call: KernelCall) -> CheckNumericsError | None:
        bad = any(call.nonfinite)
        inner = self._inner(call, bad)
        if not bad and inner is None:
            return None
        site = call.site
        if bad:
            slot = call.nonfinite.index(True)
            array = as_numpy(call.outputs[slot])
            counts = ""
            if array is not None:
                counts = (
                    f": {int(np.count_nonzero(np.isnan(array)))} NaN, "
                    f"{int(np.count_nonzero(array == -np.inf))} -Inf, {int(np.count_nonzero(array == np.inf))} +Inf"
                )
            lines = [
                f"kernel `{site.kernel}` (op `{site.name}` in function `{call.function_name}`) produced "
                f"non-finite values in output {slot} ({_health_text(call.outputs[slot])}){counts}."
            ]
        else:
            lines = [
                f"kernel `{site.kernel}` (op `{site.name}` in function `{call.function_name}`) made "
                "non-finite values inside it that its output hides (found by trace_fused_ops)."
            ]
        original_ops, source, inner_op = [], None, None
        if inner is not None:
            op, _ = inner
            origin = op.origin
            where = _user_line(origin.frames, origin.user_index) if origin is not None else None
            inner_op = (op.op_type, op.var_name)
            at = f" at {where[0]}:{where[1]}" if where else ""
            lines.append(
                f"Replayed op by op: `{op.op_type}` -> {op.var_name} (op {op.index} of the fused kernel) made "
                f"the first NaN/Inf from finite operands{at}."
            )
            source = where
        info = site.info
        if info is not None and info.origins:
            lines.append("Original Relax ops in this kernel:")
            for origin in info.origins:
                where = _user_line(origin.frames, origin.user_index)
                original_ops.append((origin.op_type, origin.var_name))
                at = f" at {where[0]}:{where[1]}" if where else ""
                lines.append(f"  {origin.op_type} -> {origin.var_name}{at}")
                if source is None and where is not None:
                    source = where
        inputs = call.inputs()
        if inputs:
            lines.append("Inputs:")
            names = [i.name for i in info.inputs] if info is not None else []
            for k, value in enumerate(inputs):
                name = names[k] if k < len(names) else f"arg{k}"
                lines.append(f"  {k} `{name}`: {_health_text(value)}")
        if source is not None:
            lines.append(f"Created at {source[0]}:{source[1]}")
        return CheckNumericsError(
            "\n".join(lines),
            function=call.function_name,
            op_name=site.name,
            kernel=site.kernel,
            original_ops=original_ops,
            source=source,
            inner_op=inner_op,
        )
