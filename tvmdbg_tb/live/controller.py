"""The live controller: a session sink that checks watchpoints and pauses the program.

It runs inside the VM instrument's callback after each kernel (tracing/vm_tracer.py), while
the kernel's inputs and outputs are valid, so the granularity is one kernel: a pause holds
the program after a kernel ran and before the next one starts. Pausing blocks the program's
thread on a condition variable until a command (continue, step, run to an op, run to the
next hit) arrives through the control channel (server.py), or until no dashboard has sent
a command or kept the pause alive (`keepalive`, an explicit POST: reading the state is not
contact) for `timeout` seconds: then it resumes with a warning, so a program never hangs
because its dashboard went away.
"""

from __future__ import annotations

import contextlib
import linecache
import threading
import time
import warnings
from collections import deque
from typing import Any

import numpy as np

from tvmdbg_tb.live import channel, paused_call
from tvmdbg_tb.live.watchpoints import (
    NAME_MATCH_SECONDS,
    SET_MATCH_SECONDS,
    ByteBudget,
    Watchpoint,
    WatchpointError,
    make_watchpoint,
)
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing.session import KernelCall
from tvmdbg_tb.tracing.summary import as_numpy, is_tensor

MAX_VALUES = 256  # values shown per tensor while paused (first elements, flattened)
MAX_WATCHPOINTS = 100  # per program
CHANGED_BUDGET_BYTES = 128 << 20  # previous values kept by all "changed" watchpoints together
MAX_KEPT_HITS = 10_000  # hits kept in memory (the first ones; the dump has every hit)

# Run modes between pauses.
RUN = "run"  # pause only on an explicit "pause" request (hits are recorded)
NEXT_HIT = "next_hit"  # pause at the next watchpoint hit
STEP = "step"  # pause after the next kernel
RUN_TO = "run_to"  # pause after the named op runs


class CommandError(Exception):
    """A command that cannot be applied now; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 409):
        super().__init__(message)
        self.status = status


def _values(array: np.ndarray) -> list:
    flat = array.reshape(-1)[:MAX_VALUES]
    if flat.dtype.kind == "b":
        return [bool(v) for v in flat]
    if flat.dtype.kind in "iu":
        return [int(v) for v in flat]
    return [float(v) for v in flat.astype(np.float64)]


def tensor_view(name: str, value: Any) -> dict:
    """A JSON-ready view of one tensor: dtype, shape, health and its first values."""
    if not is_tensor(value) and not isinstance(value, np.ndarray):
        return {"name": name, "kind": type(value).__name__}
    dtype, shape = str(value.dtype), [int(d) for d in value.shape]
    view: dict[str, Any] = {"name": name, "dtype": dtype, "shape": shape, "size": int(np.prod(shape or [1]))}
    array = as_numpy(value)
    if array is None:
        view["note"] = "values not viewable from numpy (dtype or device)"
        return view
    view["values"] = _values(array)
    view["truncated"] = array.size > MAX_VALUES
    if array.size and array.dtype.kind in "fiub":
        values = array.astype(np.float64)
        finite = values[np.isfinite(values)]
        view["health"] = {
            "nan": int(np.count_nonzero(np.isnan(values))),
            "neg_inf": int(np.count_nonzero(values == -np.inf)),
            "pos_inf": int(np.count_nonzero(values == np.inf)),
            "zero": int(np.count_nonzero(values == 0)),
            "min": float(finite.min()) if finite.size else None,
            "max": float(finite.max()) if finite.size else None,
            "mean": float(finite.mean()) if finite.size else None,
        }
    return view


def _source(site) -> dict | None:
    """The user's line that created the kernel's first original op that has one."""
    info = site.info
    for origin in info.origins if info is not None else ():
        if 0 <= origin.user_index < len(origin.frames):
            path, line, function = origin.frames[origin.user_index]
            return {
                "file_path": path,
                "line": int(line),
                "function": function,
                "text": linecache.getline(path, int(line)).rstrip("\n"),
                "op_type": origin.op_type,
                "var_name": origin.var_name,
            }
    return None


class LiveController:
    """Watchpoints, hits and the pause state of one program (one per process)."""

    wants_nonfinite = True  # forces the per-kernel VM instrument, which sees each kernel's tensors

    def __init__(self, writer=None, timeout: float = 60.0):
        self.writer = writer
        self.timeout = float(timeout)
        self.watchpoints: dict[int, Watchpoint] = {}
        self._next_id = 1
        self._lock = threading.Condition()
        self.mode = NEXT_HIT
        self.run_to: str | None = None
        self.pause_requested = False
        self.paused: dict | None = None  # the paused state, None while running
        self.pause_id = 0
        self.last_contact = time.monotonic()
        self.hits: list[dict] = []  # the first MAX_KEPT_HITS hits of this process, oldest first
        self.num_hits = 0
        self.recent_hits: deque[dict] = deque(maxlen=50)
        self.known_ops: dict[str, str] = {}  # op name -> kernel, from graphs seen
        self._names: dict[tuple[str, str], None] = {}  # (op name, kernel) of graphs and kernels seen
        self._covering: dict[tuple[str, str], tuple[Watchpoint, ...]] = {}  # name -> its watchpoints
        self.budget = ByteBudget(CHANGED_BUDGET_BYTES)
        self.events: deque[str] = deque(maxlen=100)  # resumes by timeout etc., for the state
        self.applied: deque[dict] = deque(maxlen=20)  # the last requests that changed the program
        self.serving = False  # a channel is open: pausing makes sense
        self._command: tuple[str, str | None] | None = None
        self._pause_gate = threading.Lock()  # one pause at a time when several threads run the VM
        self.finished = False
        self._call_so_far = paused_call.CallSoFar()  # each thread's running call, kernel by kernel
        self._paused_traces: list[pb.GraphExecutionTrace] = []  # the paused call's, while paused

    # -- watchpoints -----------------------------------------------------------------------

    def add_watchpoint(self, condition: str, *, strict_scope: bool = False, **options) -> Watchpoint:
        """Adds a watchpoint. strict_scope: refuse an op_name no graph of the program has
        (the dashboard's request; Python may add watchpoints before compiling). An op_regex is
        matched here against every op name seen so far, in SET_MATCH_SECONDS at most."""
        with self._lock:
            if len(self.watchpoints) >= MAX_WATCHPOINTS:
                raise WatchpointError(
                    f"this program has {len(self.watchpoints)} watchpoints, the most it keeps; delete some first",
                    status=409,
                )
            wp = make_watchpoint(self._next_id, condition, **options)
            if strict_scope and wp.op_name is not None and wp.op_name not in self.known_ops:
                known = ", ".join(sorted(self.known_ops)[:20]) or "none yet"
                raise WatchpointError(f"no op named {wp.op_name!r} in this program's graphs (known: {known})")
            full = self.budget.used >= self.budget.limit or any(w._unwatched for w in self.watchpoints.values())
            if wp.condition == "changed" and full:
                limit = self.budget.limit
                size = f"{limit >> 20} MB" if limit >= 1 << 20 else f"{limit >> 10} KB"
                raise WatchpointError(
                    f"the values kept by 'changed' watchpoints reached their budget of {size}; delete one first",
                    status=409,
                )
            try:
                wp.match(self._names, SET_MATCH_SECONDS)
            except TimeoutError:
                raise WatchpointError(
                    f"op_regex {wp.op_regex!r} takes longer than {SET_MATCH_SECONDS:g} s to match this program's "
                    f"{len(self._names)} op names (catastrophic backtracking?); simplify it"
                ) from None
            wp._budget = self.budget
            self._next_id += 1
            self.watchpoints[wp.id] = wp
            self._covering = {}
            return wp

    def delete_watchpoint(self, watchpoint_id: int) -> None:
        with self._lock:
            if watchpoint_id not in self.watchpoints:
                raise KeyError(f"no watchpoint #{watchpoint_id}")
            wp = self.watchpoints.pop(watchpoint_id)
            self._covering = {}
            wp.disabled = "deleted"
            wp.release()

    def list_watchpoints(self) -> list[dict]:
        with self._lock:
            return [wp.to_json() for wp in self.watchpoints.values()]

    def _see(self, names: list[tuple[str, str]]) -> None:
        """Matches the op_regex watchpoints against op names met for the first time (a compile,
        or a kernel of an executable compiled earlier); a pattern that takes longer than allowed
        is disabled, with an event saying so. Under the lock."""
        fresh = [key for key in names if key not in self._names]
        if not fresh:
            return
        self._names.update(dict.fromkeys(fresh))
        seconds = max(NAME_MATCH_SECONDS, min(SET_MATCH_SECONDS, NAME_MATCH_SECONDS * len(fresh)))
        for wp in list(self.watchpoints.values()):
            if wp.op_regex is None or wp.disabled is not None:
                continue
            try:
                wp.match(fresh, seconds)
            except TimeoutError:
                wp.disabled = f"its op_regex took longer than {seconds:g} s to match new op names"
                message = f"tvmdbg live: watchpoint #{wp.id} disabled: {wp.disabled}"
                warnings.warn(message, RuntimeWarning, stacklevel=3)
                self.events.append(message)
        self._covering = {}

    def _watchpoints_of(self, key: tuple[str, str]) -> tuple[Watchpoint, ...]:
        """The watchpoints that check the op (op name, kernel): computed once per name."""
        covering = self._covering
        found = covering.get(key)
        if found is None:
            with self._lock:
                self._see([key])
                found = tuple(wp for wp in self.watchpoints.values() if wp.covers(key))
                self._covering[key] = found
        return found

    # -- session sink ----------------------------------------------------------------------

    def on_graph(self, graph, ops) -> None:
        with self._lock:
            for op in ops:
                self.known_ops[op.op_name] = op.kernel
            self._see([(op.op_name, op.kernel) for op in ops])

    def on_execution(self, execution, traces) -> None:
        self._call_so_far.end()
        return None

    def close(self) -> None:
        with self._lock:
            self.finished = True
            self._command = ("continue", None)
            self._lock.notify_all()

    def on_kernel(self, call: KernelCall) -> None:
        try:
            self._on_kernel(call)
        except Exception as error:  # a debugger bug must not change the user's program
            warnings.warn(f"tvmdbg live: checking a kernel failed: {error!r}", RuntimeWarning, stacklevel=2)
        return None

    def _on_kernel(self, call: KernelCall) -> None:
        site = call.site
        hits = []
        for wp in self._watchpoints_of((site.name, site.kernel)):
            for slot, value in enumerate(call.outputs):
                array = as_numpy(value) if is_tensor(value) else None
                if array is None:
                    continue
                detail = wp.check((site.op_id, slot), array)
                if detail is not None:
                    hits.append((wp, slot, detail))
        execution_index = call.traces[0].execution_index if call.traces else -1
        if call.traces:
            self._call_so_far.add(execution_index, call.traces)
        reason = None
        if self.pause_requested:
            reason = "pause requested"
        elif self.mode == STEP:
            reason = "step"
        elif self.mode == RUN_TO and site.name == self.run_to:
            reason = f"reached {site.name}"
        will_pause = self.serving and (
            reason is not None or (self.mode == NEXT_HIT and any(wp.pause for wp, _, _ in hits))
        )
        recorded = []
        for wp, slot, detail in hits:
            wp.hits += 1
            hit = pb.WatchpointHit(
                watchpoint_id=wp.id,
                condition=wp.condition,
                description=wp.describe(),
                op_id=site.op_id,
                graph_id=site.graph_id,
                op_name=site.name,
                kernel=site.kernel,
                output_slot=slot,
                execution_index=execution_index,
                detail=detail,
                paused=will_pause,
            )
            _attach_trace(hit, call.traces, slot)
            recorded.append(hit)
            if self.writer is not None:
                self.writer.write_event("graphs", pb.DebugEvent(wall_time=time.time(), watchpoint_hit=hit))
        for hit in recorded:
            row = _hit_json(hit)
            self.num_hits += 1
            self.recent_hits.append(row)
            if len(self.hits) < MAX_KEPT_HITS:
                self.hits.append(row)
        if not will_pause:
            return
        if reason is None:
            first = recorded[0]
            reason = f"watchpoint #{first.watchpoint_id}: {first.detail}"
        self._pause(call, reason, recorded, execution_index)

    def hits_since(self, seen: int) -> tuple[int, dict | None]:
        """The number of hits so far and the first one after the first `seen` of them (None when
        there is none). Past the kept hits, the oldest of the recent ones stands in for a first
        hit that is no longer in memory (the dump has every hit)."""
        with self._lock:
            total = self.num_hits
            if total <= seen:
                return total, None
            if seen < len(self.hits):
                return total, self.hits[seen]
            back = min(total - seen, len(self.recent_hits))
            return total, self.recent_hits[-back] if back else None

    # -- pausing ---------------------------------------------------------------------------

    def _pause(self, call: KernelCall, reason: str, hits: list[pb.WatchpointHit], execution_index: int) -> None:
        site = call.site
        info = site.info
        names = [i.name for i in info.inputs] if info is not None else []
        inputs = call.inputs()
        out_names = list(info.output_names) if info is not None else []
        state = {
            "op_name": site.name,
            "op_id": site.op_id,
            "graph_id": site.graph_id,
            "kernel": site.kernel,
            "function": call.function_name,
            "execution_index": execution_index,
            "reason": reason,
            "hits": [_hit_json(h) for h in hits],
            "inputs": [tensor_view(names[k] if k < len(names) else f"arg{k}", v) for k, v in enumerate(inputs)],
            "outputs": [
                tensor_view(out_names[k] if k < len(out_names) else f"output{k}", v) for k, v in enumerate(call.outputs)
            ],
            "source": _source(site),
            "original_ops": [{"op_type": o.op_type, "var_name": o.var_name} for o in info.origins] if info else [],
            "since": time.time(),
        }
        # The call's kernel traces so far (the dump gets them when the call returns):
        # live/paused_call lists them; call_row is the paused kernel's first (None: untraced).
        traces = self._call_so_far.current()
        state["call_traces"] = len(traces)
        state["call_row"] = len(traces) - len(call.traces) if call.traces else None
        if self.writer is not None:
            self.writer.flush()  # the dump shows everything up to the pause
        with self._pause_gate, self._lock:
            self.pause_id += 1
            state["pause_id"] = self.pause_id
            self.paused = state
            self._paused_traces = traces
            self.pause_requested = False
            self._command = None
            self.last_contact = time.monotonic()  # the timeout counts from the pause
            self._lock.notify_all()
            while self._command is None:
                idle = time.monotonic() - self.last_contact
                if idle >= self.timeout:
                    message = (
                        f"tvmdbg live: paused at {site.name} with no dashboard contact for {self.timeout:g} s; "
                        "resuming (watchpoints still record hits; pause again from the dashboard)"
                    )
                    warnings.warn(message, RuntimeWarning, stacklevel=2)
                    self.events.append(message)
                    self._command = ("continue", None)
                    break
                self._lock.wait(min(0.25, self.timeout - idle))
            action, target = self._command
            self._command = None
            self.paused = None
            self._paused_traces = []
            self.mode = {"continue": RUN, "next_hit": NEXT_HIT, "step": STEP, "run_to": RUN_TO}[action]
            self.run_to = target
            self._lock.notify_all()

    # -- commands (from the channel) -------------------------------------------------------

    def touch(self) -> None:
        self.last_contact = time.monotonic()

    @contextlib.contextmanager
    def applying(self, deadline: float | None, request_id: str, route: str, action: str | None = None):
        """Holds the lock while a request is applied, if it is still in time: its deadline
        (channel.clock()) is when the plugin stops waiting for the answer, so a request read
        later (the program was frozen, SIGSTOP) is refused, never applied behind the back of
        a dashboard told it failed. The requests applied are listed in the state (`applied`),
        so one applied just before a freeze is still seen to have happened."""
        with self._lock:
            if deadline is not None and channel.clock() > deadline:
                late = channel.clock() - deadline
                raise CommandError(
                    f"this request arrived {late:.1f} s after the dashboard stopped waiting for it (the program "
                    "was frozen or busy): it was not applied; send it again",
                    status=408,
                )
            yield
            if route != "/keepalive":
                entry = {"request_id": request_id or None, "route": route, "action": action, "time": time.time()}
                self.applied.append(entry)

    def keepalive(self, pause_id: int) -> dict:
        """The dashboard still shows the pause `pause_id`: its timeout starts again.

        A pause that is over is an answer, not an error: it can end (time out, be resumed by a
        command or another dashboard) between the dashboard's state read and its keepalive,
        and no dashboard can rule that out. Nothing changes then; `now` is the current pause."""
        with self._lock:
            if not 0 < pause_id <= self.pause_id:
                so_far = f"its last pause is #{self.pause_id}" if self.pause_id else "it has not paused yet"
                raise CommandError(f"no pause #{pause_id} in this program (pauses count from 1; {so_far})", status=400)
            now = None if self.paused is None else self.paused["pause_id"]
            if pause_id != now:
                return {"ok": False, "pause_id": pause_id, "over": True, "now": now}
            self.touch()
            return {"ok": True, "pause_id": pause_id, "timeout": self.timeout}

    def state(self) -> dict:
        """What the dashboard shows; reading it changes nothing (not even the pause's timeout)."""
        with self._lock:
            return {
                "paused": self.paused is not None,
                "pause": self.paused,
                "mode": self.mode,
                "run_to": self.run_to,
                "pause_requested": self.pause_requested,
                "watchpoints": [wp.to_json() for wp in self.watchpoints.values()],
                "num_hits": self.num_hits,
                "recent_hits": list(self.recent_hits),
                "timeout": self.timeout,
                "events": list(self.events)[-10:],
                "applied": list(self.applied),
                "finished": self.finished,
            }

    def paused_call(self, begin: int = 0, end: int = -1) -> dict:
        """The paused call's kernel traces so far, rows [begin, end) (see paused_call.page)."""
        with self._lock:
            if self.paused is None:
                raise CommandError("the program is not paused; the paused call's kernels exist only during a pause")
            pause, traces = self.paused, self._paused_traces
        begin, end, rows = paused_call.page(traces, begin, end)
        return {
            "pause_id": pause["pause_id"],
            "execution_index": pause["execution_index"],
            "num_traces": len(traces),
            "begin": begin,
            "end": end,
            "rows": rows,
        }

    def command(self, action: str, pause_id: int | None = None, op_name: str | None = None) -> dict:
        """Applies a dashboard command; CommandError says why not (409 for a state conflict)."""
        with self._lock:
            self.touch()
            if action == "pause":
                if self.paused is not None:
                    return {"ok": True, "note": f"already paused at {self.paused['op_name']}"}
                self.pause_requested = True
                return {"ok": True, "note": "the program pauses after its next kernel"}
            if action not in ("continue", "step", "next_hit", "run_to"):
                raise CommandError(
                    f"unknown action {action!r}; one of pause, continue, step, next_hit, run_to", status=400
                )
            if action == "run_to":
                if not op_name:
                    raise CommandError("run_to needs op_name", status=400)
                if op_name not in self.known_ops:
                    raise CommandError(f"no op named {op_name!r} in this program's graphs", status=400)
            if self.paused is None:
                raise CommandError(f"the program is not paused; {action!r} applies to a paused program")
            if pause_id is None:
                raise CommandError(f"{action!r} needs pause_id (the pause it answers)", status=400)
            if pause_id != self.paused["pause_id"]:
                raise CommandError(
                    f"pause #{pause_id} is over (another dashboard resumed it); the program is now at "
                    f"pause #{self.paused['pause_id']}"
                )
            if self._command is not None:
                raise CommandError(f"pause #{pause_id} was already answered by another dashboard")
            self._command = (action, op_name if action == "run_to" else None)
            self._lock.notify_all()
            return {"ok": True, "resumed": pause_id, "action": action}


HIT_VALUE_BYTES = 1 << 20  # a FULL_TENSOR value kept in a hit's trace up to this size


def _attach_trace(hit: pb.WatchpointHit, traces: list[pb.GraphExecutionTrace], slot: int) -> None:
    """The hit keeps the output's trace: the call's traces reach the dump when it returns, and
    a program killed while paused at the hit must not take the NaN it saw with it."""
    for trace in traces:
        if trace.output_slot == slot:
            hit.trace.CopyFrom(trace)
            if len(trace.tensor_value.content) > HIT_VALUE_BYTES:
                hit.trace.ClearField("tensor_value")
            return


def _hit_json(hit: pb.WatchpointHit) -> dict:
    return {
        "watchpoint_id": hit.watchpoint_id,
        "condition": hit.condition,
        "description": hit.description,
        "op_id": hit.op_id,
        "op_name": hit.op_name,
        "kernel": hit.kernel,
        "output_slot": hit.output_slot,
        "execution_index": hit.execution_index,
        "detail": hit.detail,
        "paused": hit.paused,
    }
