"""DebugEventsWriter: one run's six record files, written safely from a live program.

Design choices, each for a failure tfdbg2 has:
- Records go to disk on a timed flush (about once a second) rather than at exit, so a live
  viewer sees progress and a crash loses at most the last second.
- The circular buffer lives on disk, not in memory: execution and trace files are appended
  to and, once they hold twice the bound, compacted (the last records copied to a new file
  that atomically replaces the old). Memory stays small whatever the mode, disk holds at
  most twice the bound, and `close()` leaves exactly the last `circular_buffer_size` events
  (and at most `circular_buffer_bytes`), after the records of the first
  layout.KEPT_NONFINITE_CALLS calls that held a NaN or an Inf: those survive the ring whatever
  follows, so the origin of a NaN is never the part that was dropped.
- Every record carries the run's key and its place in its file (DebugEvent.run_key and
  sequence; a trace's index), and the compaction leaves a RecordsDropped record where it
  dropped some: a reader tells a duplicated, reordered, missing or foreign record from the
  rest. The closing RunEnd counts the records of each file, the calls that went
  non-finite and those whose health was not recorded, and what the ring dropped.
- An I/O error (disk full, permission) warns once and turns the writer off; nothing here
  ever raises into the user's program.
"""

from __future__ import annotations

import atexit
import linecache
import os
import secrets
import socket
import struct
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from importlib import metadata as _metadata
from typing import NamedTuple

import tvmdbg_tb
from tvmdbg_tb import storage
from tvmdbg_tb.events import health, layout, native_records, records
from tvmdbg_tb.events.modes import spec
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.record_file import RecordFile as _RecordFile
from tvmdbg_tb.events.segmented_file import SegmentedRecordFile, SegmentedRun
from tvmdbg_tb.events.trace_parts import TraceParts
from tvmdbg_tb.events.wire import varint
from tvmdbg_tb.proto import debug_event_pb2 as pb

DEFAULT_RING_BYTES = 256 << 20
# Pending bytes that wake the flushing thread before its timer fires, and that the caller's
# thread writes itself (when the flushing thread falls behind: bounds memory between flushes).
_EAGER_WRITE_BYTES = 8 << 20
_CALLER_WRITE_BYTES = 4 * _EAGER_WRITE_BYTES
# Source files larger than this are not copied into the dump.
_MAX_SOURCE_BYTES = 8 << 20


# Raw protobuf pieces of the trace fast path (see write_graph_execution_trace_payloads).
_WALL_TIME = struct.Struct("<Bd")  # DebugEvent.wall_time: field 1, fixed64
_TRACE_TAG = bytes([9 << 3 | 2])  # DebugEvent.graph_execution_trace: field 9, length-delimited
_EXECUTION_TAG = bytes([8 << 3 | 2])  # DebugEvent.execution: field 8, length-delimited
_INDEX_FIELD = struct.Struct("<Bq")  # GraphExecutionTrace.index: field 13, sfixed64
_INDEX_TAG = 13 << 3 | 1
_RUN_KEY = struct.Struct("<BQ")  # DebugEvent.run_key: field 12, fixed64
_SEQUENCE_TAG = bytes([13 << 3])  # DebugEvent.sequence: field 13, varint


_SMALL_VARINTS = [varint(n) for n in range(16384)]  # a list lookup instead of a call per record


def _envelope_prefix(wall_time: float, step: int, run_key: bytes = b"") -> bytes:
    """The leading fields of a serialized DebugEvent: wall_time, step if set, then run_key
    (the writer's run_key field, bytes)."""
    prefix = _WALL_TIME.pack(1 << 3 | 1, wall_time)
    if step:
        prefix += bytes([2 << 3]) + varint(step & 0xFFFFFFFFFFFFFFFF)
    return prefix + run_key


def package_version(name: str) -> str:
    """The installed distribution's version ("unknown" when not installed); tvmdbg's own is
    the one its package read at import (the same lookup: each costs ~0.5 ms of an enable)."""
    if name == "tvmdbg":
        return tvmdbg_tb.__version__
    try:
        return _metadata.version(name)
    except _metadata.PackageNotFoundError:
        return "unknown"


def _frame_traces(prefix: bytes, payloads: Sequence[bytes], first: int) -> list[bytes]:
    """Each payload as a framed DebugEvent record, its index first + k (the Python path of
    native_records.frame, byte for byte)."""
    index_field, small, extra = _INDEX_FIELD.pack, _SMALL_VARINTS, _INDEX_FIELD.size
    return records.encode_all(
        [
            b"".join((prefix, small[len(p) + extra] if len(p) < 16000 else varint(len(p) + extra), p,
                      index_field(_INDEX_TAG, first + i)))
            for i, p in enumerate(payloads)
        ]
    )  # fmt: skip


class _Framed(NamedTuple):
    """Records framed natively: their bytes end to end, and each one's size (any tuple chunk
    is such a run; native_records.queue_call queues a call's records into a Spool instead)."""

    blob: bytes
    sizes: tuple[int, ...]


def _add_range(ranges: list[tuple[int, int]], first: int, last: int) -> None:
    """Appends [first, last] to ascending ranges, merged with the last one when they touch."""
    if ranges and ranges[-1][1] + 1 >= first:
        ranges[-1] = (ranges[-1][0], max(ranges[-1][1], last))
    else:
        ranges.append((first, last))


DEFAULT_OPTIONS = DumpOptions()  # frozen: one instance serves every writer given none


class DebugEventsWriter:
    """Writes the events of one run to `<logdir>/<run_id>/tvmdbg.*`. Thread-safe."""

    def __init__(
        self,
        logdir: str | os.PathLike,
        options: DumpOptions = DEFAULT_OPTIONS,
        *,
        run_id: str | None = None,
        flush_interval: float = 1.0,
    ):
        """Creates the run directory and its files and writes the metadata record.

        options: what the dump records (DumpOptions: the mode, the ring's bounds, the user's
            run_name and expected_nonfinite pattern kept in the metadata record).
        run_id: the run's directory in logdir (DebugMetadata.run_id), made unique with a
            suffix when taken; default a new time-stamped name. Not the user's run_name,
            which front ends show next to it.
        Never raises for the file system: if the directory or its files cannot be created
        (a regular file in the way, permissions, read-only, path too long), it warns once and
        `failed` says why; every later write is dropped.
        """
        self.options = options
        self.tensor_debug_mode = options.tensor_debug_mode
        self.circular_buffer_size = options.circular_buffer_size
        circular_buffer_bytes = options.circular_buffer_bytes
        if circular_buffer_bytes is None:
            circular_buffer_bytes = DEFAULT_RING_BYTES if self.circular_buffer_size > 0 else 0
        self.circular_buffer_bytes = circular_buffer_bytes
        self._ring_on = self.circular_buffer_size > 0 or self.circular_buffer_bytes > 0
        base = run_id or layout.new_run_id()
        self.logdir = os.fspath(logdir)
        self._lock = threading.Lock()  # guards pending buffers and counters
        self._io_lock = threading.Lock()  # serialises file writes and compaction
        self._pending: dict[str, list[bytes]] = {s: [] for s in layout.STREAMS}
        self._eager_bytes = _EAGER_WRITE_BYTES  # pending bytes that wake the flushing thread
        self._failed: str | None = None
        self._ended = False  # the RunEnd record is written
        # (executions, traces) allocated when the last successful write took its batch: the
        # records of executions before the last of them and of those traces are on disk.
        self._durable = (0, 0)
        self._files: dict[str, _RecordFile | SegmentedRecordFile] = {}
        self._segments: SegmentedRun | None = None  # the run's uploads, on an object store
        try:
            self._open_files(base)
        except (OSError, ValueError) as error:  # a file in the way, permissions, read-only, name too long, no s3fs
            self.run_id, self.run_dir = base, storage.join(self.logdir, base)
            for record_file in self._files.values():
                record_file.close()
            self._files = {}
            self._fail(f"could not create the dump directory under {self.logdir!r}: {error!r}")
        self._closed = False
        self._files_closed = False
        self._start_accounting()
        self.host_name = socket.gethostname()
        self._write_metadata()
        self.flush()
        native_records.LIBRARY.start_loading()  # in the background: no traced call waits for a build
        self._start_flusher(flush_interval)

    def _start_accounting(self) -> None:
        """Ids, sequences, the accounting of calls by health and what the ring keeps whole."""
        self._next_execution = 0
        # The counters each call advances: the next trace's index (a trace's index is its
        # sequence), the execution file's next sequence, the bytes pending (native_records).
        self._tally = native_records.tally()
        # The run's key in every record, and each other file's next sequence (see debug_event.proto).
        self.run_key = secrets.randbits(64) or 1
        self._run_key_field = _RUN_KEY.pack(12 << 3 | 1, self.run_key)
        self._sequences = {s: 0 for s in layout.STREAMS if s != layout.EXECUTION}
        # The accounting of calls by health, and the ring's records kept whole (sequence ranges).
        self._nonfinite_calls = 0
        self._unchecked_calls = 0
        self._unrecorded_calls = 0
        self._first_unrecorded = ""
        self._kept_calls = 0
        self._kept: dict[str, list[tuple[int, int]]] = {s: [] for s in layout.RING_STREAMS}
        self._kept_executions: set[int] = set()  # execution indices of calls kept whole
        self._nonfinite_traces_of: dict[int, bool] = {}  # executions whose traces came first, non-finite
        self._counts_health = spec(self.tensor_debug_mode).knows_finite
        # What native_records.queue_call reads on every call, kept with the counters.
        tally = self._tally
        tally.lock, tally.run_key_field = self._lock, self._run_key_field
        tally.eager_bytes, tally.counts_health = self._eager_bytes, self._counts_health
        self._source_files: dict[str, int] = {}
        self._frames: dict[tuple[str, int, str], int] = {}

    def _write_metadata(self) -> None:
        """The run's first record: who wrote it, how, and the options front ends show."""
        options = self.options
        metadata = pb.DebugMetadata(
            tvmdbg_version=package_version("tvmdbg"),
            tvm_version=package_version("apache-tvm"),
            run_id=self.run_id,
            host_name=self.host_name,
            pid=os.getpid(),
            file_version=layout.FILE_VERSION,
            tensor_debug_mode=self.tensor_debug_mode,
            circular_buffer_size=self.circular_buffer_size,
            circular_buffer_bytes=self.circular_buffer_bytes,
            argv=list(sys.argv),
            run_name=options.run_name or "",
            expected_nonfinite=options.expected_nonfinite or "",
        )
        self.write_event(layout.METADATA, pb.DebugEvent(wall_time=time.time(), debug_metadata=metadata))

    def _start_flusher(self, flush_interval: float) -> None:
        """The thread that writes what is pending every flush_interval seconds (or sooner,
        past _EAGER_WRITE_BYTES), and the close at exit."""
        self._stop = threading.Event()
        self._wake = threading.Event()  # set with _EAGER_WRITE_BYTES pending, or to stop
        self._flusher = threading.Thread(
            target=self._flush_periodically, args=(flush_interval,), name="tvmdbg-flush", daemon=True
        )
        self._flusher.start()
        atexit.register(self.close)

    def _open_files(self, base: str) -> None:
        """Claims the run's directory and opens its streams: files on a local disk, sealed
        segments uploaded in the background on an object store (events/segmented_file.py)."""
        ring = {s for s in layout.RING_STREAMS if self._ring_on}
        store = storage.open_store(self.logdir)
        if store.remote:
            self._segments = SegmentedRun(store, base, tuple(ring))
            self.run_id, self.run_dir = self._segments.run_id, self._segments.run_dir
            self._files = dict(self._segments.files)
            return
        self.logdir = store.root
        self.run_id, self.run_dir = self._make_run_dir(base)
        for s in layout.STREAMS:
            self._files[s] = _RecordFile(os.path.join(self.run_dir, layout.file_name(s)), s in ring)

    def _make_run_dir(self, base: str) -> tuple[str, str]:
        """Creates a fresh run directory named base (or base-1, base-2, ... if taken)."""
        os.makedirs(self.logdir, exist_ok=True)
        for attempt in range(1000):
            name = base if attempt == 0 else f"{base}-{attempt}"
            path = os.path.join(self.logdir, name)
            try:
                os.mkdir(path)
            except FileExistsError:
                continue
            return name, path
        raise FileExistsError(f"no free run directory name under {self.logdir} for {base!r}")

    # -- writing ---------------------------------------------------------------------------

    @property
    def failed(self) -> str | None:
        """Why writing stopped, or None while it works."""
        return self._failed

    @property
    def closed(self) -> bool:
        return self._closed

    def allocate_execution_index(self) -> int:
        """The index for the next Execution; its traces refer to it before it is written."""
        with self._lock:
            index = self._next_execution
            self._next_execution += 1
            return index

    def write_event(self, stream: str, event: pb.DebugEvent) -> None:
        """Queues one event for the given stream (a layout.STREAMS name), with the run's key
        and its sequence (a trace: its index)."""
        if self._failed or self._closed:
            return
        try:
            event.run_key = self.run_key
            event.ClearField("sequence")
            if event.HasField("graph_execution_trace"):
                trace = event.graph_execution_trace
                nonfinite = health.trace_nonfinite(trace) if self._counts_health else None

                def numbered() -> list[bytes]:  # under the lock: a trace is never counted and dropped
                    trace.index = self._tally.next_trace
                    self._tally.next_trace += 1
                    if self._counts_health:
                        self._count_locked(None, trace.index, 1, nonfinite, trace.execution_index)
                    return [records.encode(event.SerializeToString())]

                self._queue(stream, numbered)
                return
            data = event.SerializeToString()
            execution = event.execution if event.HasField("execution") else None
            nonfinite = health.execution_nonfinite(execution) if execution and self._counts_health else None

            def sequenced() -> list[bytes]:  # under the lock: sequences in queue order
                sequence = self._take_sequence(stream)
                if execution is not None and self._counts_health:
                    self._count_locked(sequence, 0, 0, nonfinite, execution.index)
                return [records.encode(data + _SEQUENCE_TAG + varint(sequence))]

            self._queue(stream, sequenced)
        except Exception as error:  # never raise into the user's program
            self._fail(f"could not encode a {stream} event: {error!r}")

    def _count_locked(
        self, execution: int | None, first_trace: int, num_traces: int, nonfinite: bool | None,
        execution_index: int | None = None,
    ) -> None:  # fmt: skip
        """Under _lock: the health of one call queued (its Execution's sequence, or None for
        traces whose Execution comes later, execution_index saying which; its traces'
        indices), counted; its records kept whole by the ring when it is among the first
        layout.KEPT_NONFINITE_CALLS calls that held a NaN or an Inf. nonfinite None: not recorded.
        (native_records.queue_call calls it for a call that is not known finite.)"""
        if execution_index is not None:
            if execution is None:
                if nonfinite:
                    self._nonfinite_traces_of[execution_index] = True
                    while len(self._nonfinite_traces_of) > 64:  # Executions that never came
                        del self._nonfinite_traces_of[next(iter(self._nonfinite_traces_of))]
            elif self._nonfinite_traces_of.pop(execution_index, False):
                nonfinite = True
        if execution is not None:
            if nonfinite:
                self._nonfinite_calls += 1
            elif nonfinite is None:
                self._unchecked_calls += 1
        keep = execution_index is not None and execution_index in self._kept_executions
        if nonfinite and not keep and self._kept_calls < layout.KEPT_NONFINITE_CALLS:
            self._kept_calls += 1
            keep = True
            if execution_index is not None:
                self._kept_executions.add(execution_index)
        if keep:
            if execution is not None:
                _add_range(self._kept[layout.EXECUTION], execution, execution)
            if num_traces:
                _add_range(self._kept[layout.GRAPH_EXECUTION_TRACES], first_trace, first_trace + num_traces - 1)

    def count_unrecorded(self, description: str) -> None:
        """One call tvmdbg could not record whole (description: which, and why): RunEnd says
        how many, and the first, so that no reader calls the dump complete."""
        with self._lock:
            self._unrecorded_calls += 1
            if not self._first_unrecorded:
                self._first_unrecorded = description[:1000]

    def write_disco_worker(self, job_id: str, rank: int, world_size: int) -> None:
        """Records that this run is rank `rank` of `world_size` of disco job job_id (tvmdbg_tb.disco)."""
        worker = pb.DiscoWorker(job_id=job_id, rank=rank, world_size=world_size)
        self.write_event(layout.METADATA, pb.DebugEvent(wall_time=time.time(), disco_worker=worker))
        self.flush()

    def write_graph(self, graph: pb.DebuggedGraph) -> None:
        self.write_event(layout.GRAPHS, pb.DebugEvent(wall_time=time.time(), debugged_graph=graph))

    def write_graph_op_creation(self, op: pb.GraphOpCreation) -> None:
        self.write_event(layout.GRAPHS, pb.DebugEvent(wall_time=time.time(), graph_op_creation=op))

    def write_execution(self, execution: pb.Execution, wall_time: float | None = None, step: int = 0) -> None:
        event = pb.DebugEvent(wall_time=wall_time or time.time(), step=step, execution=execution)
        self.write_event(layout.EXECUTION, event)

    def write_graph_execution_traces(
        self, traces: Sequence[pb.GraphExecutionTrace], wall_time: float | None = None, step: int = 0
    ) -> None:
        """Queues a batch of traces (their `index` is assigned here)."""
        nonfinite = any(map(health.trace_nonfinite, traces)) if self._counts_health else None
        index = traces[0].execution_index if traces else None
        self.write_call(None, [t.SerializeToString() for t in traces], wall_time, step, nonfinite, index)

    def write_graph_execution_trace_payloads(
        self, payloads: Sequence[bytes], wall_time: float | None = None, step: int = 0
    ) -> None:
        """Queues a batch of serialized GraphExecutionTrace messages (without `index`), a
        list or TraceParts.

        The hot path of the instrumentation: a call site's static fields can be serialized
        once and reused; the envelope and the index are appended here as raw protobuf fields
        (a later field wins, and concatenated messages merge), with one lock round trip per
        batch. Indices are allocated and the batch queued under that one lock, so the file is
        in index order whichever threads write.
        """
        self.write_call(None, payloads, wall_time, step)

    def write_call(
        self, execution: bytes | None, payloads: Sequence[bytes], wall_time: float | None = None, step: int = 0,
        nonfinite: bool | None = None, execution_index: int | None = None,
    ) -> None:  # fmt: skip
        """Queues one VM call's records: its Execution given serialized (or None) and its
        traces as write_graph_execution_trace_payloads takes them, with one envelope and
        one lock round trip for both.

        nonfinite: whether the records hold a NaN or an Inf, when the caller knows (the
        compiled path, from the counts it computed); None: found here from the records
        (parsed) in a mode that records health. execution_index: the call's, for traces
        whose Execution comes in a later write (write_graph_execution_traces)."""
        if self._failed or self._closed:
            return
        if nonfinite is None and self._counts_health:
            try:
                nonfinite = health.call_nonfinite(self.tensor_debug_mode, execution, payloads)
            except Exception:  # a payload protobuf rejects: its health is not known
                nonfinite = None
        wall_time = wall_time or time.time()
        native = native_records.LIBRARY.loaded()
        if native is not None and execution is not None and type(payloads) is TraceParts:
            # The compiled path's call: framed and queued under the lock by one C++ call (the
            # one native_call makes itself).
            parts = payloads
            native.queue_call(
                self, wall_time, step, execution, parts.statics, parts.which, parts.middle, parts.tails, parts.width,
                nonfinite,
            )  # fmt: skip
            return
        try:
            prefix = _envelope_prefix(wall_time, step, self._run_key_field)
            head = None
            if execution is not None:
                head = prefix + _EXECUTION_TAG + varint(len(execution)) + execution
            with self._lock:
                if self._closed:  # close() took the last batch after the first check
                    return
                tally = self._tally
                first = tally.next_trace
                if payloads:
                    chunks, size = self._framed_traces(prefix + _TRACE_TAG, payloads, first)
                    count = len(payloads)
                else:
                    chunks, size, count = [], 0, 0
                tally.next_trace += count
                self._enqueue(layout.GRAPH_EXECUTION_TRACES, chunks)
                sequence = None
                if head is not None:
                    sequence = tally.execution_sequence
                    tally.execution_sequence += 1
                    record = records.encode(head + _SEQUENCE_TAG + varint(sequence))
                    self._enqueue(layout.EXECUTION, [record])
                    size += len(record)
                if self._counts_health and nonfinite is not False and (sequence is not None or count):
                    self._count_locked(sequence, first, count, nonfinite, execution_index)
                tally.pending_bytes += size
                pending = tally.pending_bytes
            if pending >= self._eager_bytes:
                self._eager_write(pending)
        except Exception as error:
            self._fail(f"could not encode a call's records: {error!r}")

    @staticmethod
    def _framed_traces(prefix: bytes, payloads: Sequence[bytes], first: int) -> tuple[list, int]:
        """Trace records framed natively (a list, or TraceParts without an Execution) or in
        Python, and their total size."""
        framed = native_records.frame(prefix, payloads, first)
        if framed is not None:
            # sizes as a tuple: untracked by the collector once it has looked (see queue_call).
            return [_Framed(framed[0], tuple(framed[1]))], len(framed[0])
        chunks = _frame_traces(prefix, payloads, first)
        return chunks, sum(map(len, chunks))

    def code_location(
        self,
        frames: Sequence[tuple[str, int, str]],
        user_frame_index: int = -1,
        called_from_frame_index: int | None = None,
        model_node: pb.ModelNode | None = None,
    ) -> pb.CodeLocation:
        """A CodeLocation for frames (file, line, function), outermost first; writes each new
        source file and stack frame once."""
        ids = [self._frame_id(path, line, function) for path, line, function in frames]
        location = pb.CodeLocation(stack_frame_ids=ids, user_frame_index=user_frame_index)
        if called_from_frame_index is not None:
            location.called_from_frame_index = called_from_frame_index
        if model_node is not None:
            location.model_node.CopyFrom(model_node)
        return location

    def _frame_id(self, path: str, line: int, function: str) -> int:
        key = (path, int(line), function)
        with self._lock:
            frame_id = self._frames.get(key)
            if frame_id is not None:
                return frame_id
            file_index = self._source_file_index(path)
            frame_id = len(self._frames)
            self._frames[key] = frame_id
        frame = pb.StackFrame(id=frame_id, file_index=file_index, line=int(line), function=function, file_path=path)
        self.write_event(layout.STACK_FRAMES, pb.DebugEvent(wall_time=time.time(), stack_frame=frame))
        return frame_id

    def _source_file_index(self, path: str) -> int:
        """Index of path's SourceFile, writing it on first sight; -1 if unreadable. Caller holds _lock."""
        if path in self._source_files:
            return self._source_files[path]
        lines = linecache.getlines(path)
        if not lines or sum(map(len, lines)) > _MAX_SOURCE_BYTES:
            self._source_files[path] = -1
            return -1
        index = sum(1 for i in self._source_files.values() if i >= 0)
        self._source_files[path] = index
        source = pb.SourceFile(host_name=self.host_name, file_path=path, lines=[ln.rstrip("\r\n") for ln in lines])
        # Queued under _lock, so file indices match the order of records in the file.
        sequence = self._take_sequence(layout.SOURCE_FILES)
        event = pb.DebugEvent(wall_time=time.time(), run_key=self.run_key, sequence=sequence, source_file=source)
        self._pending[layout.SOURCE_FILES].append(records.encode(event.SerializeToString()))
        return index

    def _queue(self, stream: str, chunks: list[bytes] | Callable[[], list[bytes]]) -> None:
        """Queues chunks (or what chunks() returns, called under the lock) unless the writer
        closed meanwhile: close() may take the last batch after the caller's first check."""
        with self._lock:
            if self._closed:
                return
            if callable(chunks):
                chunks = chunks()
            self._enqueue(stream, chunks)
            self._tally.pending_bytes += sum(map(len, chunks))
            pending = self._tally.pending_bytes
        if pending >= self._eager_bytes:
            self._eager_write(pending)

    def _take_sequence(self, stream: str) -> int:
        """Under _lock: the stream's next sequence, taken."""
        if stream == layout.EXECUTION:
            sequence = self._tally.execution_sequence
            self._tally.execution_sequence += 1
        else:
            sequence = self._sequences[stream]
            self._sequences[stream] += 1
        return sequence

    def _enqueue(self, stream: str, chunks: list) -> None:
        """Under _lock: chunks at the end of the stream's queue, copied into the spool at its
        end when there is one (native_records.queue_call's: the stream's records stay in their
        order, and in one buffer outside the allocator's heap)."""
        queue = self._pending[stream]
        spool = queue[-1] if queue else None
        if type(spool) is native_records.spool_type():
            spool.extend(chunks)
        else:
            queue.extend(chunks)

    def _eager_write(self, pending: int) -> None:
        """Many bytes pending: the flushing thread writes them (a training loop queues
        megabytes per second in FULL_HEALTH: written by the caller, they cost it time); the
        caller writes only when 4x as many are pending (a disk slower than the program)."""
        if pending >= _CALLER_WRITE_BYTES:
            self.flush()
        else:
            self._wake.set()

    # -- flushing --------------------------------------------------------------------------

    def flush(self, fsync: bool = False) -> None:
        """Writes everything queued so far (and fsyncs if asked). Never raises."""
        with self._io_lock:
            if not self._files_closed:
                self._write_pending(fsync)

    def _write_pending(self, fsync: bool) -> None:
        """Moves queued records to the files, compacting ring files past twice their bound.
        Caller holds _io_lock."""
        with self._lock:
            pending = {s: chunks for s, chunks in self._pending.items() if chunks}
            self._pending = {s: [] for s in layout.STREAMS}
            self._tally = native_records.tally(self._tally)  # native from the first flush after the library loads
            self._tally.pending_bytes = 0
            taken = (self._next_execution, self._tally.next_trace)
        if self._failed:
            return
        try:
            # File by file in layout.WRITE_ORDER, each flushed before the next is written: a
            # record never reaches its file before what it refers to (a reader taking the
            # files' sizes in the reverse order sees whole calls).
            for stream in layout.WRITE_ORDER:
                record_file = self._files[stream]
                if stream in pending:
                    record_file.append(pending[stream])
                record_file.flush(fsync)
                if record_file.ring and self._over_twice_the_bound(record_file):
                    self._compact(stream)
            if self._segments is not None:
                self._segments.after_write()
            self._durable = taken
        except Exception as error:
            self._fail(f"writing to {self.run_dir} failed: {error!r}")
            self._write_run_end()

    def _compact(self, stream: str) -> None:
        """Compacts a ring file to its bounds, keeping the calls kept whole. Caller holds _io_lock."""
        with self._lock:
            kept = list(self._kept[stream])
        self._files[stream].compact(self.circular_buffer_size, self._byte_bound(), kept, self._drop_record)

    def _drop_record(self, first: int, count: int) -> bytes:
        """The RecordsDropped record standing for sequences [first, first + count)."""
        event = pb.DebugEvent(
            run_key=self.run_key, records_dropped=pb.RecordsDropped(first_sequence=first, count=count)
        )
        return records.encode(event.SerializeToString())

    def _write_run_end(self) -> None:
        """Appends the RunEnd record to the metadata file, once: CLOSED, or ABORTED with
        where data starts to be missing. Best effort (the disk may be full). Caller holds
        _io_lock."""
        record_file = self._files.get(layout.METADATA)
        if self._ended or record_file is None:
            return
        self._ended = True
        with self._lock:
            written = dict(self._sequences)
            written[layout.EXECUTION] = self._tally.execution_sequence
            written[layout.GRAPH_EXECUTION_TRACES] = self._tally.next_trace
            sequence = written[layout.METADATA]
            written[layout.METADATA] += 1  # this record
            executions = written[layout.EXECUTION]
            end = pb.RunEnd(
                how=pb.RunEnd.ABORTED if self._failed else pb.RunEnd.CLOSED,
                reason=self._failed or "",
                num_executions=self._next_execution,
                num_traces=self._tally.next_trace,
                num_stack_frames=len(self._frames),
                num_source_files=sum(1 for i in self._source_files.values() if i >= 0),
                nonfinite_executions=self._nonfinite_calls,
                # In a mode without counts no call's health is recorded.
                unchecked_executions=self._unchecked_calls if self._counts_health else executions,
                dropped_executions=self._files[layout.EXECUTION].dropped if self._files else 0,
                dropped_traces=self._files[layout.GRAPH_EXECUTION_TRACES].dropped if self._files else 0,
                records=written,
                unrecorded_executions=self._unrecorded_calls,
                first_unrecorded=self._first_unrecorded,
            )
        if self._failed:
            end.first_missing_execution = max(0, self._durable[0] - 1)
            end.first_missing_trace = self._durable[1]
        event = pb.DebugEvent(wall_time=time.time(), run_key=self.run_key, sequence=sequence, run_end=end)
        try:
            record_file.append([records.encode(event.SerializeToString())])
            record_file.flush()
        except Exception:  # no room or no file left for it: the reader then calls the dump
            pass  # aborted, which is what it is (the failure itself was said when it happened)

    def _byte_bound(self) -> int:
        return self.circular_buffer_bytes if self.circular_buffer_bytes > 0 else sys.maxsize

    def _over_twice_the_bound(self, record_file: _RecordFile) -> bool:
        n = self.circular_buffer_size
        records_after_head, bytes_after_head = record_file.newest()
        return (n > 0 and records_after_head >= 2 * n) or bytes_after_head >= 2 * self._byte_bound()

    def _flush_periodically(self, interval: float) -> None:
        while True:
            self._wake.wait(interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.flush()

    def close(self) -> None:
        """Flushes, trims ring files to exactly their bounds, fsyncs and closes. Idempotent."""
        if self._closed:
            return
        self._closed = True  # later writes are dropped; what was queued is written below
        self._stop.set()
        self._wake.set()
        if self._flusher is not threading.current_thread():
            self._flusher.join(timeout=10)
        with self._io_lock:
            self._write_pending(fsync=False)
            try:
                for stream, record_file in self._files.items():
                    if record_file.ring and not self._failed:
                        self._compact(stream)
                self._finish_uploads()
                self._write_run_end()
                if self._segments is not None:
                    self._segments.finish()  # the RunEnd's segment, uploaded after every other one
                for record_file in self._files.values():
                    if not self._failed:
                        record_file.flush(fsync=True)
            except Exception as error:
                self._fail(f"closing {self.run_dir} failed: {error!r}")
                self._write_run_end()
            finally:
                self._files_closed = True
                for record_file in self._files.values():
                    try:
                        record_file.close()
                    except OSError:
                        pass
                if self._segments is not None:
                    self._segments.close()
        atexit.unregister(self.close)

    def _finish_uploads(self) -> None:
        """On an object store: every segment sealed and uploaded before the RunEnd is written.
        Segments lost make the RunEnd ABORTED; uploads still running after the timeout leave
        the dump without a RunEnd: incomplete either way, never read as clean."""
        if self._segments is None:
            return
        done, problem = self._segments.finish()
        if not done:
            self._ended = True  # no RunEnd: the segments still queued may yet arrive
            warnings.warn(f"tvmdbg: {problem}; the dump in the store is incomplete", RuntimeWarning, stacklevel=3)
        elif problem and not self._failed:
            self._failed = problem

    @property
    def uploaded_bytes(self) -> int:
        """Bytes put into the object store so far (0 for a local logdir)."""
        return self._segments.uploader.uploaded_bytes if self._segments is not None else 0

    def _fail(self, message: str) -> None:
        if self._failed is None:
            self._failed = message
            warnings.warn(f"tvmdbg: {message}; debug dumping is disabled from here on.", RuntimeWarning, stacklevel=3)
