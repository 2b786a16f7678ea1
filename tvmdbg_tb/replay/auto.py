"""Automatic replay of the first origin kernel of a run (trigger "auto").

A session hunts for the first kernel output of the run that holds NaN/Inf while all the
kernel's inputs are finite (the origin the alert points at). When that kernel is a fused
group of more than one Relax op, its inputs are replayed op by op and the result is written
to the dump (FusedOpReplay), once per run.

Inputs are valid only during the VM call, so how they are kept depends on the tracer:

- VM instrument (fallback path): the tracer sees the kernel's arguments right after it ran;
  while hunting, each traced output's health is checked and the inputs of the first bad one
  are copied there (cost while hunting: one health test per trace; none once found).
- Compiled (fast path): Python sees the stats buffer only after the call. While hunting, the
  buffer's health columns are scanned once per call (one .tolist() and a Python loop over its rows).
  When a row shows the first non-finite output, the same VM function is called once more
  with the same argument objects under a VM instrument that copies that kernel's inputs,
  then the group is replayed. Cost: one more run of that one call, once per run. Soundness:
  the re-run sees the same inputs only if the call has no side effects; executables with
  call_tir_inplace sites, packed calls or impure Relax functions (KV caches, ...) are not
  re-run (the record says so, without ops). The record carries `matches_kernel` (does the
  replayed output's health agree with the kernel's?) against anything else that differs.
"""

from __future__ import annotations

import warnings
from typing import Any

from tvmdbg_tb.events import layout
from tvmdbg_tb.events.modes import spec
from tvmdbg_tb.events.summaries import nonfinite_counts
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.replay.group import ReplayError
from tvmdbg_tb.replay.replayer import group_source, is_replayable, replay, snapshot_inputs

_VECTOR_ROWS = 64  # above this many rows numpy's fixed cost (cold after kernels ran) pays off
# Deep-mode records per kernel site: the graphs file is kept whole (no circular buffer), so a
# NaN made inside a kernel on every call must not grow it without bound.
MAX_DEEP_RECORDS_PER_SITE = 100
MAX_RERUNS = 3  # re-runs of bad calls whose first bad kernel had bad inputs (no origin)


class AutoReplay:
    """Per session: finds the run's first origin kernel and replays it (see module doc)."""

    def __init__(self, session):
        self.session = session
        self.hunting = session.writer is not None and (spec(session.mode).health or spec(session.mode).values)
        self._pending: tuple | None = None  # (execution index, runtime site, program, inputs, note)
        self._reruns = 0
        self._deep_errors: set[str] = set()
        self._deep_written: dict[int, int] = {}  # op id -> deep records written
        # FULL_TENSOR dumps keep every kernel's inputs: record each fused site's ops once, so
        # `tvmdbg replay` can replay any call offline (FusedGroupSource).
        self._sources = session.writer is not None and spec(session.mode).values
        self._sourced: set[int] = set()

    @property
    def watching(self) -> bool:
        """Whether the VM-instrument tracer must call on_traces."""
        return self.hunting or self.deep or self._sources

    @property
    def watching_all(self) -> bool:
        """Whether on_traces must see every kernel, not only those with a non-finite output."""
        return self.deep or bool(self._sources)

    @property
    def deep(self) -> bool:
        """Deep mode (trace_fused_ops=True): every fused kernel call is replayed op by op."""
        return self.session.writer is not None and self.session.trace_fused_ops

    # -- the VM-instrument path ------------------------------------------------------------

    def on_traces(self, program, execution_index: int, site, args: tuple, outputs: list, traces) -> None:
        """Called by the VM-instrument tracer after a kernel ran, while its args are valid."""
        if self._sources and site.op_id not in self._sourced and is_replayable(site.info):
            self._sourced.add(site.op_id)
            self._write_source(site, args)
        if self.deep and is_replayable(site.info) and self._deep(execution_index, site, args, outputs, traces):
            self.hunting = False  # deep mode recorded the origin inside this kernel
            return
        if not self.hunting or not traces:
            return
        literal = site.info is not None and site.info.writes_literal
        # A mask's -inf is the program's: what the hunt looks for comes from a computation
        # (a NaN a mask's kernel makes is one: 0 x -inf).
        if not any(_trace_bad(t, outputs, nan_only=literal) for t in traces):
            return
        from tvmdbg_tb.tracing.summary import as_numpy

        inputs = _inputs(site, args)
        if _came_in(site.info, [as_numpy(v) for v in inputs]):
            return  # the bad value came in: not an origin, keep looking
        self.hunting = False
        if site.info is not None and is_replayable(site.info):
            self._pending = (execution_index, site, program, snapshot_inputs(inputs), "")

    def on_call_done(self) -> None:
        """Called by the tracer after the VM call's records were handed to the sinks."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._write(*pending)

    def _deep(self, execution_index: int, site, args: tuple, outputs: list, traces) -> bool:
        """Replays a fused kernel call on its live inputs; records it when an inner op made a
        NaN/Inf (even if the kernel's output is finite: masked). True when recorded."""
        from tvmdbg_tb.tracing.summary import as_numpy

        views = [as_numpy(v) for v in _inputs(site, args)]
        if any(v is None for v in views):
            return False
        from tvmdbg_tb.tracing.summary import has_nonfinite

        kernel_bad = any(has_nonfinite(a) for a in (as_numpy(o) for o in outputs) if a is not None)
        record = replay(
            None,
            site.info,
            views,
            execution_index=execution_index,
            op_id=site.op_id,
            graph_id=site.graph_id,
            trigger="deep",
            location_of=self.session.code_location,
            kernel_output_bad=kernel_bad,
        )
        if record.error:
            if site.kernel not in self._deep_errors:
                self._deep_errors.add(site.kernel)
                warnings.warn(f"tvmdbg: trace_fused_ops: {record.error}", RuntimeWarning, stacklevel=3)
            return False
        if record.first_nonfinite_op < 0:
            return False
        written = self._deep_written.get(site.op_id, 0)
        if written >= MAX_DEEP_RECORDS_PER_SITE:
            return True
        self._deep_written[site.op_id] = written + 1
        if self.session.writer is not None:
            self.session.writer.write_event(layout.GRAPHS, pb.DebugEvent(fused_op_replay=record))
        return True

    def _write_source(self, site, args: tuple) -> None:
        try:
            record = group_source(site.info, _inputs(site, args), self.session.code_location)
            record.op_id = site.op_id
            self.session.writer.write_event(layout.GRAPHS, pb.DebugEvent(fused_group_source=record))
        except ReplayError:
            pass  # a group that cannot be replayed: `tvmdbg replay` says why when asked
        except Exception as error:
            warnings.warn(
                f"tvmdbg: could not record the ops of `{site.kernel}`: {error!r}", RuntimeWarning, stacklevel=3
            )

    # -- the compiled path -----------------------------------------------------------------

    def scan_buffers(self, buffers) -> tuple[int, int, bool] | None:
        """(fid, row, whether its output holds them) of the earliest kernel in a call's stats buffers whose output is not
        finite or whose fused ops made a NaN or an infinity inside it (the inner-op check).

        Per row, -inf + +inf + NaN = neg_inf + pos_inf + size - lt0 - gt0 - eq0 (columns
        1..6): in C++ (native_rows.first_nonfinite) when loaded, else plain Python on one
        .tolist(), the cheapest for the few rows of a call."""
        from tvmdbg_tb.capture import compiled
        from tvmdbg_tb.tracing import native_rows

        best = None
        native = native_rows.LIBRARY.loaded()
        for fid, _, array in buffers:
            function = compiled.FUNCTIONS.get(fid)
            if function is None or not function.health:
                continue
            infos = function.rows
            if native is not None:
                i = native.first_nonfinite(array, len(infos) + 1, compiled.ROW_WIDTH, function.hunt_mask)
                if i >= 0 and (best is None or array[i + 1, 0] < best[0]):
                    best = (array[i + 1, 0], fid, i, compiled.output_nonfinite(function, array, i))
                continue
            inner = compiled.inner_flagged(array)
            rows = array[1 : len(infos) + 1, :7]
            if len(infos) > _VECTOR_ROWS and not inner:  # many rows: one vectorised test first
                r = rows
                if not ((r[:, 5] + r[:, 6] + (r[:, 1] - r[:, 2] - r[:, 3] - r[:, 4])) > 0).any():
                    continue
            hunted = function.hunt_mask
            made = array[1 : len(infos) + 1, compiled.INNER_COLUMN].tolist() if inner else [0.0] * len(infos)
            for i, (cycles, size, lt, gt, eq, neg_inf, pos_inf) in enumerate(rows.tolist()):
                nan = size != lt + gt + eq
                bad = ((neg_inf or pos_inf or nan) and hunted[i] & compiled.HUNT_COUNTS) or (
                    nan and hunted[i] & compiled.HUNT_NAN
                )
                if (bad or (made[i] > 0 and hunted[i] & compiled.HUNT_INNER)) and cycles:
                    if best is None or cycles < best[0]:
                        best = (cycles, fid, i, bool(bad))
                    break
        return None if best is None else best[1:]

    def rerun(self, tracer, vm, invoke, args: tuple, top_name: str, execution_index: int, hit: tuple) -> None:
        """Re-runs the VM call to capture the first bad kernel's inputs, then replays it; hit:
        (fid, row, whether the kernel's output held the NaN/Inf or only its fused ops)."""
        from tvmdbg_tb.capture import compiled

        fid, row, output_bad = hit
        function = compiled.FUNCTIONS[fid]
        site_info = function.rows[row].site
        runtime = self.session.function(tracer.program, function.name).sites[site_info.position]
        program = tracer.program
        if not is_replayable(site_info):
            self.hunting = False  # the origin is a single-op kernel: its location is exact
            return
        if self._reruns >= MAX_RERUNS:
            self.hunting = False
            return
        self._reruns += 1
        info = program.info
        if not all(f.pure for f in info.functions.values()) or any(
            s.inplace_indices or s.call_type in ("call_packed", "call_dps_packed")
            for f in info.functions.values()
            for s in f.sites
        ):
            self.hunting = False
            note = (
                "not re-run: the executable updates tensors in place or has side effects (impure functions, "
                "packed calls), so a second run would see other inputs"
            )
            self._write(execution_index, runtime, program, None, note)
            return
        try:
            captured = _capture_inputs(vm, invoke, args, top_name, function.name, site_info, set(info.functions))
        except Exception as error:
            self.hunting = False
            self._write(execution_index, runtime, program, None, f"the re-run of the VM call raised: {error}")
            return
        if captured is None:
            self.hunting = False
            self._write(execution_index, runtime, program, None, "the re-run of the VM call did not reach the kernel")
            return
        if _came_in(site_info, captured):
            return  # the bad value came in through the function's inputs: keep looking
        self.hunting = False
        note = "inputs captured by re-running the VM call"
        self._write(execution_index, runtime, program, captured, note, output_bad)

    # -- writing ---------------------------------------------------------------------------

    def _write(self, execution_index: int, site, program, inputs, note: str, output_bad: bool = True) -> None:
        session = self.session
        try:
            record = replay(
                program.info,
                site.info,
                inputs,
                execution_index=execution_index,
                op_id=site.op_id,
                graph_id=site.graph_id,
                trigger="auto",
                location_of=session.code_location,
                kernel_output_bad=output_bad,
                note=note,
            )
            if inputs is None and not record.error:
                record.error = note
            if session.writer is not None:
                session.writer.write_event(layout.GRAPHS, pb.DebugEvent(fused_op_replay=record))
        except Exception as error:  # never hurt the user's program
            warnings.warn(f"tvmdbg: could not replay `{site.kernel}`: {error!r}", RuntimeWarning, stacklevel=2)


def _came_in(site_info, inputs: list) -> bool:
    """Whether a non-finite value came into the kernel through an input that is neither a
    constant (a non-finite weight enters the computation at the kernel that reads it: that
    kernel is the origin, and its replay names the op) nor made by a kernel writing a
    non-finite literal (a mask's -inf, which the kernel may absorb before an op of its own
    makes the value: its replay tells)."""
    from tvmdbg_tb.tracing.summary import has_nonfinite

    sources = site_info.inputs if site_info is not None else []
    looked_past = {k for k, i in enumerate(sources) if i.kind == pb.OpInput.CONSTANT or i.literal_producer}
    return any(has_nonfinite(a) for k, a in enumerate(inputs) if a is not None and k not in looked_past)


def _inputs(site, args: tuple) -> list:
    if site.out_positions is None:
        return list(args)
    outs = set(site.out_positions)
    return [a for i, a in enumerate(args) if i not in outs]


def _trace_bad(trace: pb.GraphExecutionTrace, outputs: list, nan_only: bool = False) -> bool:
    """Whether a kernel output holds NaN or Inf (nan_only: a NaN)."""
    if spec(trace.tensor_debug_mode).values:
        import numpy as np

        from tvmdbg_tb.tracing.summary import as_numpy, has_nonfinite

        slot = trace.output_slot
        array = as_numpy(outputs[slot]) if slot < len(outputs) else None
        if array is None:
            return False
        return bool(np.isnan(array).any()) if nan_only and array.dtype.kind == "f" else has_nonfinite(array)
    counts = nonfinite_counts(trace.tensor_debug_mode, trace.debug_values)
    if counts is None:
        return False
    return counts[0] > 0 if nan_only else any(counts)


def _capture_inputs(vm, invoke, args: tuple, top_name: str, function_name: str, site_info, function_names):
    """Calls invoke(*args) once more with a VM instrument that copies the inputs of the
    site's kernel (its k-th call in function_name); None when it was not reached."""
    kernel = site_info.kernel
    sites = [s for s in _sites_of(vm, function_name) if s.kernel == kernel]
    wanted = next((k for k, s in enumerate(sites) if s is site_info), 0)
    stack: list[list[Any]] = [[top_name, 0]]  # the top-level function is no VM call
    found: list = []

    def instrument(func, symbol, before, ret, *call_args):
        try:
            symbol = str(symbol)
            if symbol in function_names:
                if before:
                    stack.append([symbol, 0])
                elif len(stack) > 1:
                    stack.pop()
            elif before and symbol == kernel and stack[-1][0] == function_name and not found:
                if stack[-1][1] == wanted:
                    found.append(snapshot_inputs(call_args[: site_info.num_inputs]))
                stack[-1][1] += 1
        except Exception:  # inside the VM's call: the capture must never break it; no inputs
            pass  # captured means no replay, which rerun() records with its reason
        return 0

    vm._set_instrument(instrument)
    try:
        invoke(*args)
    finally:
        vm._set_instrument(None)
    return found[0] if found else None


def _sites_of(vm, function_name: str) -> list:
    info = getattr(vm, "_tvmdbg_info", None)
    function = info.functions.get(function_name) if info is not None else None
    return function.sites if function is not None else []
