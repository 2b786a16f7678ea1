"""Is a run's dump complete? Derived from the data, never assumed.

A dump is complete only when its writer closed it (a RunEnd CLOSED record) and nothing is
missing: no damaged record, no record out of its run's order (foreign, duplicated,
reordered, missing: events/integrity.py), no file short of the records the RunEnd counts,
no cut tail, no trace whose execution is gone, no execution short of the traces it claims,
no stack frame or source file referred to but absent. What the circular buffer dropped is
not missing: its RecordsDropped records say where and how much (`dropped`).

Whether the writer is gone (so that an incomplete last record is a cut tail, not a record
being written) is decided by, in order: a RunEnd record; the writing process (host_name,
pid in DebugMetadata) no longer alive on this host, once the reader has read what it wrote
(it may have closed the dump just before it exited); or, for a run written on another host,
no file of the run grown for STALE_AFTER_SECONDS.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from tvmdbg_tb import storage
from tvmdbg_tb.events import layout
from tvmdbg_tb.proto import debug_event_pb2 as pb

# A run written on another host whose files have not grown for this long is taken as ended.
STALE_AFTER_SECONDS = 600.0

COMPLETE = "complete"  # closed by its writer, nothing missing
LIVE = "live"  # the writer is still running: what is there so far reads fine
INCOMPLETE = "incomplete"  # something is missing or damaged (see problems)


@dataclass
class Problem:
    """One reason a dump is not complete: what, where (file, byte offset) and which executions."""

    kind: str  # metadata_missing, metadata_damaged, aborted, not_closed, unrecorded, damaged,
    # truncated, unreadable, traces_without_execution, executions_missing_traces,
    # missing_stack_frames, missing_source_files
    message: str
    file: str | None = None
    offset: int | None = None
    # Execution indices concerned: [first, last]; last None means "to the end".
    executions: list[int | None] | None = None

    def __str__(self) -> str:
        return self.message


UNKEYED_NOTE = (
    "this dump's records carry no run key or place (written by an older tvmdbg), so a "
    "duplicated, reordered or foreign whole record cannot be told from the others"
)


@dataclass
class Completeness:
    state: str  # COMPLETE, LIVE or INCOMPLETE
    ended: str  # "closed", "aborted", "not closed" (writer gone without a RunEnd), "running"
    writer_alive: bool | None  # None: written on another host and still growing recently
    problems: list[Problem] = field(default_factory=list)
    # Records the circular buffer dropped, by stream (executions, traces): not problems.
    dropped: dict[str, int] = field(default_factory=dict)
    # What the reader could not check (an older dump's records), said once.
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    def summary(self) -> str:
        """One line for a human: the state and the problems."""
        if self.state == COMPLETE:
            return "complete"
        if not self.problems:
            return "live: the writer is still running"
        return f"{self.state}: " + "; ".join(p.message for p in self.problems)

    def to_json(self) -> dict:
        return {
            "complete": self.complete,
            "state": self.state,
            "ended": self.ended,
            "writer_alive": self.writer_alive,
            "problems": [asdict(p) for p in self.problems],
            "dropped": dict(self.dropped),
            "notes": list(self.notes),
        }


def _process_alive(pid: int, since: float | None) -> bool:
    """Whether pid runs on this host and was started before `since` (not a reused pid)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    except OSError:
        return False
    started = _process_start_time(pid)
    # Started after the metadata was written: a later process reusing the pid.
    return since is None or started is None or started <= since + 5.0


def _process_start_time(pid: int) -> float | None:
    """When pid started (s since the epoch), from /proc on Linux; None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith(b"btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def writer_alive(metadata: pb.DebugMetadata | None, metadata_wall_time: float | None) -> bool | None:
    """True/False for a writer on this host; None when it ran elsewhere (or is unknown)."""
    if metadata is None or not metadata.host_name or metadata.host_name != socket.gethostname():
        return None
    return _process_alive(int(metadata.pid), metadata_wall_time)


def _ranges(values: np.ndarray) -> list[tuple[int, int]]:
    """Sorted unique ints as [first, last] runs of consecutive values."""
    if not len(values):
        return []
    breaks = np.flatnonzero(np.diff(values) != 1)
    firsts = np.concatenate([values[:1], values[breaks + 1]])
    lasts = np.concatenate([values[breaks], values[-1:]])
    return [(int(a), int(b)) for a, b in zip(firsts.tolist(), lasts.tolist())]


def _ranges_text(ranges: list[tuple[int, int]], limit: int = 4) -> str:
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in ranges[:limit]]
    if len(ranges) > limit:
        parts.append(f"... ({len(ranges) - limit} more ranges)")
    return ", ".join(parts)


def assess(run, now: float | None = None) -> Completeness:
    """The completeness of a RunReader's dump as read so far (call run.update() first).

    Under the run's lock, one state throughout: the trace digests are looked at through the
    reader's running tally of them (events/tally.py), extended with the rows read since the
    last assessment, and row by row only near damage."""
    with run.lock:
        return _assess(run, time.time() if now is None else now)


def _assess(run, now: float) -> Completeness:
    a = _Assessment(run, now)
    problems = [
        *a.metadata_problems(),
        *a.end_problems(),
        *a.unrecorded_problems(),
        *a.unreadable_problems(),
        *a.damage_problems(),
        *a.closed_end_problems(),
        *a.truncation_problems(),
        *a.orphan_trace_problems(),
        *a.missing_trace_problems(),
        *a.unknown_op_problems(),
        *a.reference_problems(),
    ]
    end, gone = a.end, a.gone
    if problems:
        state = INCOMPLETE
    elif not gone:
        state = LIVE
    else:
        state = COMPLETE if end is not None and end.how == pb.RunEnd.CLOSED else INCOMPLETE
    if end is not None:
        ended = "closed" if end.how == pb.RunEnd.CLOSED else "aborted"
    else:
        ended = "not closed" if gone else "running"
    notes = [UNKEYED_NOTE] if a.keyed is False else []
    return Completeness(state, ended, a.alive, problems, {s: n for s, n in a.dropped.items() if n}, notes)


class _Assessment:
    """One reading of a run's state (its indexes, damage, end record, writer), and each check
    of completeness on it: a list of Problems per kind."""

    def __init__(self, run, now: float):
        self.metadata, self.end = run.metadata, run.run_end
        self.executions = run.execution_digests()
        self.traces = run.trace_digests()
        self.tally = run.trace_tally()
        self.op_ids = np.array(sorted(run.op_ids()), dtype=np.int64)
        self.corruptions = list(run.corruptions)
        self.tails = run.tails()
        self.stream_errors = dict(run.stream_errors)
        self.frames = run.frame_ids()
        self.referenced = run.referenced_frame_ids()
        self.num_source_files = len(run.source_files())
        self.referenced_files = run.referenced_source_files()
        self.keyed = run.keyed
        self.places = run.places_read()
        self.drops = {s: run.ring_drops(s) for s in layout.RING_STREAMS}
        self.dropped = {s: sum(count for _, _, count in self.drops[s]) for s in layout.RING_STREAMS}
        self.alive = writer_alive(self.metadata, run.metadata_wall_time)
        self.paths = [storage.join(run.path, layout.file_name(s)) for s in layout.STREAMS]
        if self.end is not None:
            self.gone = True
        elif self.alive is not None:
            # A writer that just closed its dump and exited: its last records (the RunEnd) are
            # not read yet, so it is not known to have ended without one.
            self.gone = not self.alive and not run.grown_since_read()
        else:
            self.gone = now - run.last_growth() > STALE_AFTER_SECONDS
        metadata = self.metadata
        self.ring = metadata is not None and (metadata.circular_buffer_size > 0 or metadata.circular_buffer_bytes > 0)

    def path(self, stream: str) -> str:
        return self.paths[layout.STREAMS.index(stream)]

    def near(self, path: str, offset: int) -> list | None:
        """The executions a place in a file concerns (_executions_near)."""
        trace_path, exec_path = self.path(layout.GRAPH_EXECUTION_TRACES), self.path(layout.EXECUTION)
        return _executions_near(path, offset, trace_path, exec_path, self.executions, self.traces)

    def metadata_problems(self) -> list[Problem]:
        if self.metadata is not None:
            return []
        meta_path = self.path(layout.METADATA)
        damaged = [c for c in self.corruptions if c.path == meta_path]
        if damaged:
            message = (
                f"the metadata record is damaged ({damaged[0].reason} at byte {damaged[0].offset} of "
                f"{meta_path}): the run's mode, writer and settings are unknown"
            )
            return [Problem("metadata_damaged", message, meta_path, damaged[0].offset)]
        tried = _tried(meta_path, layout.METADATA, self.tails, self.stream_errors)
        if self.gone or self.executions.size or self.traces.size or tried:
            message = (
                f"the metadata record is missing ({meta_path} is empty or absent): the run's mode, "
                "writer and settings are unknown"
            )
            return [Problem("metadata_missing", message, meta_path, 0)]
        return []

    def end_problems(self) -> list[Problem]:
        """An aborted dump, or one never closed by a writer that is gone."""
        end, meta_path, metadata = self.end, self.path(layout.METADATA), self.metadata
        if end is not None and end.how == pb.RunEnd.ABORTED:
            message = (
                f"dumping was aborted ({end.reason}): records from execution {end.first_missing_execution} on "
                "may be missing"
            )
            return [Problem("aborted", message, meta_path, None, [int(end.first_missing_execution), None])]
        if end is None and self.gone:
            who = f"pid {metadata.pid} on {metadata.host_name}" if metadata is not None else "the writer"
            why = (
                "is no longer running"
                if self.alive is False
                else f"has not written for over {STALE_AFTER_SECONDS:.0f} s"
            )
            message = (
                f"the dump was never closed: {who} {why} (killed, crashed, or out of disk space), so the "
                "last records may be missing"
            )
            return [Problem("not_closed", message, meta_path)]
        return []

    def unrecorded_problems(self) -> list[Problem]:
        """Calls tvmdbg could not record whole (RunEnd.unrecorded_executions)."""
        end = self.end
        if end is None or not end.unrecorded_executions:
            return []
        count = int(end.unrecorded_executions)
        message = (
            f"tvmdbg could not record {count} call{'s' if count > 1 else ''} whole (the first: "
            f"{end.first_unrecorded}): what {'they' if count > 1 else 'it'} did is not in the dump"
        )
        return [Problem("unrecorded", message, self.path(layout.METADATA))]

    def unreadable_problems(self) -> list[Problem]:
        return [
            Problem("unreadable", f"{stream} stream unreadable: {message}", self.path(stream))
            for stream, message in self.stream_errors.items()
        ]

    def damage_problems(self) -> list[Problem]:
        problems = []
        for c in self.corruptions:
            span = self.near(c.path, c.offset)
            if c.executions is not None:  # the record's own
                span = _widened(span, c.executions)
            where = f" (executions {span[0]}-{'end' if span[1] is None else span[1]})" if span else ""
            what = "misplaced record" if c.misplaced else "damaged record"
            problems.append(Problem("damaged", f"{what}{where}: {c}", c.path, c.offset, span))
        return problems

    def closed_end_problems(self) -> list[Problem]:
        """What a closed dump's RunEnd says was written and is not there: records at the end
        of a file, and drops that do not add up."""
        end = self.end
        if not (self.keyed and end is not None and end.how == pb.RunEnd.CLOSED):
            return []
        problems = []
        for stream, path in zip(layout.STREAMS, self.paths):
            written = int(end.records.get(stream, 0))
            first = self.places.get(stream, 0)
            if written > first:
                message = (
                    f"{path} misses its last records: places {first}-{written - 1} of the {written} its writer "
                    "wrote are not in it"
                )
                problems.append(Problem("damaged", message, path, None, self.near(path, 1 << 62)))
        for stream, said in (
            (layout.EXECUTION, end.dropped_executions),
            (layout.GRAPH_EXECUTION_TRACES, end.dropped_traces),
        ):
            if int(said) != self.dropped[stream]:
                path = self.path(stream)
                message = (
                    f"{path}: its circular buffer's drop records add up to {self.dropped[stream]} records, its "
                    f"writer dropped {int(said)}"
                )
                problems.append(Problem("damaged", message, path, None, [0, None]))
        return problems

    def truncation_problems(self) -> list[Problem]:
        if not self.gone:
            return []
        problems = []
        for path, offset, size in self.tails:
            if size > offset:
                span = self.near(path, offset)
                where = f", executions from {span[0]} on" if span else ""
                message = (
                    f"{path} ends in {size - offset} bytes that are not a whole record (cut at byte {offset}{where})"
                )
                problems.append(Problem("truncated", message, path, offset, span))
        return problems

    # Dangling references between executions and traces. The circular buffer drops the oldest
    # records of each file (but those of the calls it keeps whole): what precedes the newest
    # stretch of a file (after its last drop) may refer to what it dropped.

    def _execution_index(self) -> np.ndarray:
        executions = self.executions
        return np.sort(executions["index"]) if executions.size else np.zeros(0, dtype=np.int64)

    def orphan_trace_problems(self) -> list[Problem]:
        trace_exec = self.tally.execution_ids  # unique, ascending
        if not trace_exec.size:
            return []
        exec_index = self._execution_index()
        exec_tail = self.executions["index"][_newest_stretch(self.drops[layout.EXECUTION]) :]
        orphan = trace_exec[~np.isin(trace_exec, exec_index)]
        if self.ring and exec_tail.size:
            orphan = orphan[orphan >= exec_tail.min()]  # older executions were dropped by the ring
        if not self.gone:
            last = exec_index[-1] if exec_index.size else -1
            orphan = orphan[orphan <= last]  # later ones are still running
        if not orphan.size:
            return []
        ranges = _ranges(orphan)
        message = f"kernel traces of executions {_ranges_text(ranges)} have no execution record"
        return [
            Problem(
                "traces_without_execution", message, self.path(layout.EXECUTION), None, [ranges[0][0], ranges[-1][1]]
            )
        ]

    def missing_trace_problems(self) -> list[Problem]:
        executions, tally = self.executions, self.tally
        if not executions.size:
            return []
        claimed = executions["num_traces"]
        ids, counts = tally.execution_ids, tally.trace_counts
        have = np.zeros(len(executions), dtype=np.int64)
        pos = np.searchsorted(ids, executions["index"])
        if len(ids):
            found = (pos < len(ids)) & (ids[np.minimum(pos, max(len(ids) - 1, 0))] == executions["index"])
            have[found] = counts[pos[found]]
        short = claimed > have
        if self.ring:  # the ring keeps the newest traces: only executions after the oldest of them count
            trace_tail_min = tally.newest_min(self.traces, _newest_stretch(self.drops[layout.GRAPH_EXECUTION_TRACES]))
            short &= executions["index"] > (trace_tail_min if trace_tail_min is not None else np.iinfo(np.int64).max)
        if not short.any():
            return []
        ranges = _ranges(np.sort(executions["index"][short]))
        missing = int((claimed - have)[short].sum())
        message = f"executions {_ranges_text(ranges)} miss {missing} of the kernel traces they recorded"
        path = self.path(layout.GRAPH_EXECUTION_TRACES)
        return [Problem("executions_missing_traces", message, path, None, [ranges[0][0], ranges[-1][1]])]

    def unknown_op_problems(self) -> list[Problem]:
        op_ids = self.tally.op_ids
        unknown = op_ids[~np.isin(op_ids, self.op_ids)] if op_ids.size else op_ids
        if not unknown.size:
            return []
        graphs_path = self.path(layout.GRAPHS)
        message = f"kernel traces refer to {unknown.size} op(s) missing from {graphs_path} (e.g. op {int(unknown[0])})"
        return [Problem("traces_without_op", message, graphs_path)]

    def reference_problems(self) -> list[Problem]:
        """Stack frames and source files referred to, or counted by the RunEnd, but absent."""
        end, problems = self.end, []
        frames_path = self.path(layout.STACK_FRAMES)
        expected_frames = int(end.num_stack_frames) if end is not None else 0
        missing_frames = sorted(self.referenced - self.frames)
        if missing_frames or len(self.frames) < expected_frames:
            count = max(len(missing_frames), expected_frames - len(self.frames))
            message = f"{count} stack frame(s) are missing from {frames_path}: some source locations are lost"
            problems.append(Problem("missing_stack_frames", message, frames_path))
        sources_path = self.path(layout.SOURCE_FILES)
        said = int(end.num_source_files) if end is not None else 0
        expected_files = max(said, max(self.referenced_files, default=-1) + 1)
        if self.num_source_files < expected_files:
            message = f"{expected_files - self.num_source_files} source file(s) are missing from {sources_path}"
            problems.append(Problem("missing_source_files", message, sources_path))
        return problems


def _tried(path: str, stream: str, tails, stream_errors) -> bool:
    """Whether the reader has looked at a file yet (opened it, or failed to): one it has not
    looked at is not known to lack its records."""
    return stream in stream_errors or any(tail[0] == path for tail in tails)


def _newest_stretch(drops: list[tuple[int, int, int]]) -> int:
    """The first digest row after a file's last circular-buffer drop (0: none)."""
    return drops[-1][0] if drops else 0


def _widened(span: list[int | None] | None, executions: tuple[int, int]) -> list[int | None]:
    if span is None:
        return [executions[0], executions[1]]
    last = None if span[1] is None else max(span[1], executions[1])
    return [min(span[0], executions[0]), last]


def _executions_near(path, offset, trace_path, exec_path, executions, traces) -> list[int | None] | None:
    """The executions a damaged or cut stretch at path:offset may hold: from the last whole
    record before it to the first after it (None: to the end)."""
    if path == trace_path:
        rows, key = traces, "execution_index"
    elif path == exec_path:
        rows, key = executions, "index"
    else:
        return None
    if not rows.size:
        return [0, None]
    offsets = rows["offset"]
    before = np.flatnonzero(offsets < offset)
    after = np.flatnonzero(offsets > offset)
    first = int(rows[key][before[-1]]) + (1 if path == exec_path else 0) if before.size else 0
    last = int(rows[key][after[0]]) - (1 if path == exec_path else 0) if after.size else None
    return [first, last]
