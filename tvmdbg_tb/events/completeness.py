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
    metadata, end = run.metadata, run.run_end
    executions = run.execution_digests()
    traces = run.trace_digests()
    tally = run.trace_tally()
    op_ids = np.array(sorted(run.op_ids()), dtype=np.int64)
    corruptions = list(run.corruptions)
    tails = run.tails()
    stream_errors = dict(run.stream_errors)
    frames = run.frame_ids()
    referenced = run.referenced_frame_ids()
    num_source_files = len(run.source_files())
    referenced_files = run.referenced_source_files()
    keyed = run.keyed
    places = run.places_read()
    drops = {s: run.ring_drops(s) for s in layout.RING_STREAMS}
    alive = writer_alive(metadata, run.metadata_wall_time)
    paths = [storage.join(run.path, layout.file_name(s)) for s in layout.STREAMS]
    if end is not None:
        gone = True
    elif alive is not None:
        # A writer that just closed its dump and exited: its last records (the RunEnd) are
        # not read yet, so it is not known to have ended without one.
        gone = not alive and not run.grown_since_read()
    else:
        gone = now - run.last_growth() > STALE_AFTER_SECONDS
    problems: list[Problem] = []
    meta_path = paths[layout.STREAMS.index(layout.METADATA)]

    if metadata is None:
        damaged = [c for c in corruptions if c.path == meta_path]
        if damaged:
            problems.append(
                Problem(
                    "metadata_damaged",
                    f"the metadata record is damaged ({damaged[0].reason} at byte {damaged[0].offset} of "
                    f"{meta_path}): the run's mode, writer and settings are unknown",
                    meta_path,
                    damaged[0].offset,
                )
            )
        elif gone or executions.size or traces.size or _tried(meta_path, layout.METADATA, tails, stream_errors):
            problems.append(
                Problem(
                    "metadata_missing",
                    f"the metadata record is missing ({meta_path} is empty or absent): the run's mode, "
                    "writer and settings are unknown",
                    meta_path,
                    0,
                )
            )
    ring = metadata is not None and (metadata.circular_buffer_size > 0 or metadata.circular_buffer_bytes > 0)

    if end is not None and end.how == pb.RunEnd.ABORTED:
        problems.append(
            Problem(
                "aborted",
                f"dumping was aborted ({end.reason}): records from execution {end.first_missing_execution} on "
                "may be missing",
                meta_path,
                None,
                [int(end.first_missing_execution), None],
            )
        )
    elif end is None and gone:
        who = f"pid {metadata.pid} on {metadata.host_name}" if metadata is not None else "the writer"
        why = "is no longer running" if alive is False else f"has not written for over {STALE_AFTER_SECONDS:.0f} s"
        problems.append(
            Problem(
                "not_closed",
                f"the dump was never closed: {who} {why} (killed, crashed, or out of disk space), so the "
                "last records may be missing",
                meta_path,
            )
        )

    if end is not None and end.unrecorded_executions:
        count = int(end.unrecorded_executions)
        problems.append(
            Problem(
                "unrecorded",
                f"tvmdbg could not record {count} call{'s' if count > 1 else ''} whole (the first: "
                f"{end.first_unrecorded}): what {'they' if count > 1 else 'it'} did is not in the dump",
                meta_path,
            )
        )

    for stream, message in stream_errors.items():
        problems.append(
            Problem("unreadable", f"{stream} stream unreadable: {message}", paths[layout.STREAMS.index(stream)])
        )

    trace_path = paths[layout.STREAMS.index(layout.GRAPH_EXECUTION_TRACES)]
    exec_path = paths[layout.STREAMS.index(layout.EXECUTION)]
    for c in corruptions:
        span = _executions_near(c.path, c.offset, trace_path, exec_path, executions, traces)
        if c.executions is not None:  # the record's own
            span = _widened(span, c.executions)
        where = f" (executions {span[0]}-{'end' if span[1] is None else span[1]})" if span else ""
        what = "misplaced record" if c.misplaced else "damaged record"
        problems.append(Problem("damaged", f"{what}{where}: {c}", c.path, c.offset, span))

    dropped = {s: sum(count for _, _, count in drops[s]) for s in layout.RING_STREAMS}
    notes = [UNKEYED_NOTE] if keyed is False else []
    if keyed and end is not None and end.how == pb.RunEnd.CLOSED:
        # Records the writer wrote that no record took the place of, at the end of a file.
        for stream, path in zip(layout.STREAMS, paths):
            written = int(end.records.get(stream, 0))
            if written > places.get(stream, 0):
                first = places.get(stream, 0)
                span = _executions_near(path, 1 << 62, trace_path, exec_path, executions, traces)
                problems.append(
                    Problem(
                        "damaged",
                        f"{path} misses its last records: places {first}-{written - 1} of the {written} its writer "
                        "wrote are not in it",
                        path,
                        None,
                        span,
                    )
                )
        for stream, said in (
            (layout.EXECUTION, end.dropped_executions),
            (layout.GRAPH_EXECUTION_TRACES, end.dropped_traces),
        ):
            if int(said) != dropped[stream]:
                path = paths[layout.STREAMS.index(stream)]
                problems.append(
                    Problem(
                        "damaged",
                        f"{path}: its circular buffer's drop records add up to {dropped[stream]} records, its writer "
                        f"dropped {int(said)}",
                        path,
                        None,
                        [0, None],
                    )
                )

    if gone:
        for path, offset, size in tails:
            if size > offset:
                span = _executions_near(path, offset, trace_path, exec_path, executions, traces)
                where = f", executions from {span[0]} on" if span else ""
                problems.append(
                    Problem(
                        "truncated",
                        f"{path} ends in {size - offset} bytes that are not a whole record (cut at byte {offset}{where})",
                        path,
                        offset,
                        span,
                    )
                )

    # Dangling references between executions and traces. The circular buffer drops the oldest
    # records of each file (but those of the calls it keeps whole): what precedes the newest
    # stretch of a file (after its last drop) may refer to what it dropped.
    exec_index = np.sort(executions["index"]) if executions.size else np.zeros(0, dtype=np.int64)
    trace_exec, trace_counts = tally.execution_ids, tally.trace_counts  # unique, ascending
    exec_tail = executions["index"][_newest_stretch(drops[layout.EXECUTION]) :]
    trace_tail_min = tally.newest_min(traces, _newest_stretch(drops[layout.GRAPH_EXECUTION_TRACES]))
    if trace_exec.size:
        orphan = trace_exec[~np.isin(trace_exec, exec_index)]
        if ring and exec_tail.size:
            orphan = orphan[orphan >= exec_tail.min()]  # older executions were dropped by the ring
        if not gone:
            last = exec_index[-1] if exec_index.size else -1
            orphan = orphan[orphan <= last]  # later ones are still running
        if orphan.size:
            ranges = _ranges(orphan)
            problems.append(
                Problem(
                    "traces_without_execution",
                    f"kernel traces of executions {_ranges_text(ranges)} have no execution record",
                    exec_path,
                    None,
                    [ranges[0][0], ranges[-1][1]],
                )
            )
    if executions.size:
        claimed = executions["num_traces"]
        ids, counts = trace_exec, trace_counts
        have = np.zeros(len(executions), dtype=np.int64)
        pos = np.searchsorted(ids, executions["index"])
        found = (
            (pos < len(ids)) & (ids[np.minimum(pos, max(len(ids) - 1, 0))] == executions["index"]) if len(ids) else None
        )
        if found is not None:
            have[found] = counts[pos[found]]
        short = claimed > have
        if ring:  # the ring keeps the newest traces: only executions after the oldest of them count
            short &= executions["index"] > (trace_tail_min if trace_tail_min is not None else np.iinfo(np.int64).max)
        if short.any():
            idx = np.sort(executions["index"][short])
            ranges = _ranges(idx)
            missing = int((claimed - have)[short].sum())
            problems.append(
                Problem(
                    "executions_missing_traces",
                    f"executions {_ranges_text(ranges)} miss {missing} of the kernel traces they recorded",
                    trace_path,
                    None,
                    [ranges[0][0], ranges[-1][1]],
                )
            )

    if tally.op_ids.size:
        unknown = tally.op_ids[~np.isin(tally.op_ids, op_ids)]
        if unknown.size:
            graphs_path = paths[layout.STREAMS.index(layout.GRAPHS)]
            problems.append(
                Problem(
                    "traces_without_op",
                    f"kernel traces refer to {unknown.size} op(s) missing from {graphs_path} (e.g. op {int(unknown[0])})",
                    graphs_path,
                )
            )

    frames_path = paths[layout.STREAMS.index(layout.STACK_FRAMES)]
    expected_frames = int(end.num_stack_frames) if end is not None else 0
    missing_frames = sorted(referenced - frames)
    if missing_frames or len(frames) < expected_frames:
        count = max(len(missing_frames), expected_frames - len(frames))
        problems.append(
            Problem(
                "missing_stack_frames",
                f"{count} stack frame(s) are missing from {frames_path}: some source locations are lost",
                frames_path,
            )
        )
    sources_path = paths[layout.STREAMS.index(layout.SOURCE_FILES)]
    expected_files = max(int(end.num_source_files) if end is not None else 0, max(referenced_files, default=-1) + 1)
    if num_source_files < expected_files:
        problems.append(
            Problem(
                "missing_source_files",
                f"{expected_files - num_source_files} source file(s) are missing from {sources_path}",
                sources_path,
            )
        )

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
    return Completeness(state, ended, alive, problems, {s: n for s, n in dropped.items() if n}, notes)


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
