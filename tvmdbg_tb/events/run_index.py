"""A run's index: what its records say, held for queries (the layer between the record files
and the analysis).

RunReader (reader.py) reads the files and decodes their records; it hands the graph streams'
events to ingest() and appends the executions' and traces' digest rows (numpy structured
arrays, about 80 bytes per trace), telling the observers (alerts, positions, tallies) of each
new stretch. The analysis and the front ends ask this index: ops, graphs, stack frames,
source files, replays, digests, and the records behind them by index (through the reader).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from tvmdbg_tb.events import layout
from tvmdbg_tb.events.compact import CompactStore, LazyList, Uses
from tvmdbg_tb.events.digests import EXECUTION_DIGEST, INNER_NONFINITE, NONFINITE, TRACE_DIGEST
from tvmdbg_tb.events.earliest import EarliestNonfinite
from tvmdbg_tb.events.positions import TracePositions
from tvmdbg_tb.events.tally import TraceTally
from tvmdbg_tb.proto import debug_event_pb2 as pb

Observer = Callable[["RunIndex", str, int, bool], None]
"""Called as observer(run, stream, start, reset) after new digests [start:] were indexed
(stream is layout.EXECUTION or layout.GRAPH_EXECUTION_TRACES); reset means earlier rows
were dropped and the index rebuilt from start 0."""


class GrowingArray:
    """A numpy array (structured or not) that grows by appended blocks, amortised O(1)."""

    def __init__(self, dtype: np.dtype):
        self._data = np.zeros(1024, dtype=dtype)
        self.size = 0

    def extend(self, rows: list[tuple]) -> None:
        if rows:
            self.append_array(np.array(rows, dtype=self._data.dtype))

    def append_array(self, rows: np.ndarray, expected: int = 0) -> None:
        """Appends rows; when growing, to room for twice `expected` rows or twice the rows so
        far. Room costs address space, not memory: a large zeroed array's pages are mapped,
        not resident, until rows are written. A growth copies the rows (old and new resident
        at once: +146 MB at 2M traces), so a live run growing by a call at a time must not
        grow it by a few rows each time."""
        need = self.size + len(rows)
        if need > len(self._data):
            try:
                grown = np.zeros(max(need, 2 * expected, 2 * len(self._data)), dtype=self._data.dtype)
            except MemoryError:  # no address space to spare (a limit, strict overcommit): what is needed
                grown = np.zeros(max(need, expected), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : need] = rows
        self.size = need

    def clear(self) -> None:
        self.size = 0

    def view(self) -> np.ndarray:
        return self._data[: self.size]


class RunIndex:
    """One run's records indexed (see the module doc); RunReader fills it."""

    def __init__(self, name: str):
        self.name = name
        self._lock = threading.RLock()  # guards the indexes; held per chunk while updating
        self._positions = TracePositions()  # op and execution queries, kept and extended
        self._tally = TraceTally()  # what completeness needs of the traces, kept and extended
        self._earliest_nonfinite = EarliestNonfinite()
        self._observers: list[Observer] = [self._positions, self._tally, self._earliest_nonfinite]
        self.metadata: pb.DebugMetadata | None = None
        self.metadata_wall_time: float | None = None
        # How the writer ended the dump (None while it runs, or if it never could say); the
        # RunEnd read is shown at the end of the update that read it.
        self.run_end: pb.RunEnd | None = None
        self._run_end_read: pb.RunEnd | None = None
        # The disco job and rank the run belongs to (tvmdbg_tb.disco), None for a lone process.
        self.disco: pb.DiscoWorker | None = None
        # Kept compact (events/compact.py): ops and frames as their bytes, source files as their
        # place in the dump (up to 8 MiB of text each, ~9 times that once parsed), read again
        # when asked for, with (host, path, lines) of each at hand.
        self._source_files: CompactStore[pb.SourceFile] = CompactStore(self._load_source_file, cached=2)
        self._source_heads: list[tuple[str, str, int]] = []
        self._frames: CompactStore[pb.StackFrame] = CompactStore(pb.StackFrame.FromString)
        self._graphs: dict[int, pb.DebuggedGraph] = {}
        self._ops: CompactStore[pb.GraphOpCreation] = CompactStore(pb.GraphOpCreation.FromString)
        self._graph_ops: dict[int, list[int]] = defaultdict(list)
        self._consumers = Uses()  # producer op -> (consumer, input slot, output slot)
        self._referenced_frames: set[int] = set()  # stack frame ids the graphs and ops refer to
        self._referenced_files: set[int] = set()  # source file indices the frames refer to
        self.watchpoint_hits: list[tuple[float, pb.WatchpointHit]] = []  # (wall time, hit); tvmdbg_tb.live
        self.function_names: list[str] = []
        self._function_ids: dict[str, int] = {}
        self._function_ids_raw: dict[bytes, int] = {}  # the same, by the name's UTF-8 bytes
        # FusedOpReplay records by (execution index, op id), in file order.
        self._replays: dict[tuple[int, int], list[pb.FusedOpReplay]] = {}
        self._nonfinite_replays: set[int] = set()  # execution indices of replays that found a NaN/Inf
        self._group_sources: dict[int, pb.FusedGroupSource] = {}
        self._executions = GrowingArray(EXECUTION_DIGEST)
        self._traces = GrowingArray(TRACE_DIGEST)

    # -- filling it -------------------------------------------------------------------------

    def ingest(self, stream: str, items: list[tuple[int, pb.DebugEvent]], reset: bool) -> None:
        """Indexes decoded events of a graph-side stream ((file offset, event) in file order)."""
        ingest = {
            layout.METADATA: self._ingest_metadata,
            layout.SOURCE_FILES: self._ingest_source_files,
            layout.STACK_FRAMES: self._ingest_stack_frames,
            layout.GRAPHS: self._ingest_graphs,
        }[stream]
        ingest(items, reset)

    def add_observer(self, observer: Observer) -> None:
        """Registers observer and replays what is already indexed to it."""
        with self._lock:
            self._observers.append(observer)
            for stream, rows in ((layout.EXECUTION, self._executions), (layout.GRAPH_EXECUTION_TRACES, self._traces)):
                if rows.size:
                    observer(self, stream, 0, True)

    def _function_id(self, name: str) -> int:
        fid = self._function_ids.get(name)
        if fid is None:
            fid = self._function_ids[name] = len(self.function_names)
            self.function_names.append(name)
        return fid

    def _ingest_metadata(self, items, reset) -> None:
        for _, event in items:
            if event.HasField("debug_metadata") and self.metadata is None:
                self.metadata = event.debug_metadata
                self.metadata_wall_time = event.wall_time
            elif event.HasField("run_end"):
                self._run_end_read = event.run_end  # shown at the end of the update
            elif event.HasField("disco_worker"):
                self.disco = event.disco_worker

    def _ingest_source_files(self, items, reset) -> None:
        for offset, event in items:
            f = event.source_file
            self._source_files.put(len(self._source_heads), offset)
            self._source_heads.append((f.host_name, f.file_path, len(f.lines)))

    def _load_source_file(self, offset: int) -> pb.SourceFile:
        """The SourceFile record at offset of the source files stream (the reader reads it)."""
        raise LookupError(f"run {self.name!r} keeps no record files")

    def _ingest_stack_frames(self, items, reset) -> None:
        for _, event in items:
            frame = event.stack_frame
            self._frames.put(frame.id, frame.SerializeToString())
            if frame.file_index >= 0:
                self._referenced_files.add(frame.file_index)

    def _ingest_graphs(self, items, reset) -> None:
        uses: list[tuple[int, int, int, int]] = []
        for _, event in items:
            if event.HasField("debugged_graph"):
                self._graphs[event.debugged_graph.graph_id] = event.debugged_graph
                self._referenced_frames.update(event.debugged_graph.code_location.stack_frame_ids)
            elif event.HasField("graph_op_creation"):
                op = event.graph_op_creation
                self._ops.put(op.op_id, op.SerializeToString())
                self._graph_ops[op.graph_id].append(op.op_id)
                self._referenced_frames.update(op.code_location.stack_frame_ids)
                for original in op.original_ops:
                    self._referenced_frames.update(original.code_location.stack_frame_ids)
                uses.extend(
                    (inp.producer_op_id, op.op_id, slot, inp.producer_output_slot)
                    for slot, inp in enumerate(op.inputs)
                    if inp.kind == pb.OpInput.OP_OUTPUT
                )
            elif event.HasField("fused_op_replay"):
                replay = event.fused_op_replay
                self._replays.setdefault((replay.execution_index, replay.op_id), []).append(replay)
                if replay.first_nonfinite_op >= 0:
                    self._nonfinite_replays.add(replay.execution_index)
            elif event.HasField("fused_group_source"):
                self._group_sources[event.fused_group_source.op_id] = event.fused_group_source
            elif event.HasField("watchpoint_hit"):
                self.watchpoint_hits.append((event.wall_time, event.watchpoint_hit))
        self._consumers.add(uses)

    def _notify(self, stream: str, start: int, reset: bool) -> None:
        rows = self._executions if stream == layout.EXECUTION else self._traces
        if rows.size > start or reset:
            for observer in self._observers:
                observer(self, stream, start, reset)

    # -- queries ---------------------------------------------------------------------------
    # The digest queries take the lock: a reader sees a state in which observers (alerts) have
    # already seen the same rows, never rows still being indexed.

    @property
    def lock(self) -> threading.RLock:
        """Hold it to see one state across several queries (updates wait meanwhile)."""
        return self._lock

    def source_files(self) -> Sequence[pb.SourceFile]:
        """The recorded source files, read from the dump as they are used (source_file_heads
        says what they are without reading them)."""
        return LazyList(self._source_files, list(range(len(self._source_heads))))

    def source_file_heads(self) -> list[tuple[str, str, int]]:
        """(host name, file path, number of lines) of each recorded source file."""
        return list(self._source_heads)

    def source_file(self, index: int) -> pb.SourceFile:
        if not 0 <= index < len(self._source_heads):
            raise KeyError(f"no source file {index} in run {self.name!r}")
        return self._source_files[index]

    def stack_frame(self, frame_id: int) -> pb.StackFrame:
        try:
            return self._frames[frame_id]
        except KeyError:
            raise KeyError(f"no stack frame {frame_id} in run {self.name!r}") from None

    def frames(self, location: pb.CodeLocation) -> list[pb.StackFrame]:
        """The frames of a code location, outermost first (unknown ids skipped)."""
        return [self._frames[i] for i in location.stack_frame_ids if i in self._frames]

    def user_frame(self, location: pb.CodeLocation) -> pb.StackFrame | None:
        """The frame to show for a location (the innermost of the model's code), if any."""
        ids = location.stack_frame_ids
        if 0 <= location.user_frame_index < len(ids):
            return self._frames.get(ids[location.user_frame_index])
        return None

    def called_from_frame(self, location: pb.CodeLocation) -> pb.StackFrame | None:
        """The user's own call site when the frame shown is a library's model code, if any."""
        ids = location.stack_frame_ids
        if location.HasField("called_from_frame_index") and 0 <= location.called_from_frame_index < len(ids):
            return self._frames.get(ids[location.called_from_frame_index])
        return None

    def graphs(self) -> list[pb.DebuggedGraph]:
        return list(self._graphs.values())

    def op_ids(self) -> set[int]:
        return set(self._ops)

    def frame_ids(self) -> set[int]:
        return set(self._frames)

    def referenced_frame_ids(self) -> set[int]:
        """Stack frame ids the graphs and ops refer to."""
        return set(self._referenced_frames)

    def referenced_source_files(self) -> set[int]:
        return set(self._referenced_files)

    def graph(self, graph_id: int) -> pb.DebuggedGraph:
        try:
            return self._graphs[graph_id]
        except KeyError:
            raise KeyError(f"no graph {graph_id} in run {self.name!r}") from None

    def ops(self, graph_id: int | None = None) -> Sequence[pb.GraphOpCreation]:
        """Ops of one graph (in call order) or of all graphs, parsed as they are read
        (events/compact.py: len() and slices cost what they return)."""
        return LazyList(self._ops, self.op_ids_of(graph_id))

    def op_ids_of(self, graph_id: int | None = None) -> list[int]:
        """The op ids of one graph (in call order) or of all graphs."""
        return list(self._ops) if graph_id is None else list(self._graph_ops.get(graph_id, ()))

    def num_ops(self) -> int:
        return len(self._ops)

    def op(self, op_id: int) -> pb.GraphOpCreation:
        try:
            return self._ops[op_id]
        except KeyError:
            raise KeyError(f"no op {op_id} in run {self.name!r}") from None

    def find_ops(self, name: str) -> list[pb.GraphOpCreation]:
        """Ops whose op_name or kernel equals name, or that fuse an original op of that type
        (e.g. "relax.log") or var name."""
        return [
            op
            for op in self._ops.values()  # parsed one at a time
            if name in (op.op_name, op.kernel) or any(name in (o.op_type, o.var_name) for o in op.original_ops)
        ]

    def consumers(self, op_id: int) -> list[tuple[int, int, int]]:
        """(consumer op_id, its input slot, producer output slot) for each use of op's outputs."""
        return self._consumers.of(op_id)

    def replays(self, op_id: int | None = None) -> list[pb.FusedOpReplay]:
        """Op-by-op replays of fused kernel calls (all, or of one kernel site), in order."""
        with self._lock:
            return [r for (_, o), found in self._replays.items() if op_id is None or o == op_id for r in found]

    def replay_of(self, execution_index: int, op_id: int) -> pb.FusedOpReplay | None:
        """The latest replay of the kernel op_id in that execution (linked to its traces)."""
        with self._lock:
            found = self._replays.get((int(execution_index), int(op_id)))
            return found[-1] if found else None

    def fused_group_source(self, op_id: int) -> pb.FusedGroupSource | None:
        """What an offline replay of a fused kernel site needs (FULL_TENSOR dumps), or None."""
        with self._lock:
            return self._group_sources.get(int(op_id))

    def num_executions(self) -> int:
        with self._lock:
            return self._executions.size

    def execution_digests(self) -> np.ndarray:
        """One EXECUTION_DIGEST row per execution in the dump, oldest first (a view)."""
        with self._lock:
            return self._executions.view()

    def trace_tally(self) -> TraceTally:
        """Per execution, the traces read; the op ids they name (see events/tally.py). Call
        with the lock held, and read it before releasing it."""
        with self._lock:
            self._tally.extend(self._traces.view())
            return self._tally

    def num_traces(self) -> int:
        with self._lock:
            return self._traces.size

    def trace_digests(self) -> np.ndarray:
        """One TRACE_DIGEST row per graph execution trace, oldest first (a view)."""
        with self._lock:
            return self._traces.view()

    def op_trace_indices(self, op_id: int, output_slot: int | None = None) -> np.ndarray:
        """Positions of the traces of one op (optionally one output), oldest first (read-only)."""
        key = (
            (("op_id", int(op_id)),)
            if output_slot is None
            else (("op_id", int(op_id)), ("output_slot", int(output_slot)))
        )
        with self._lock:
            return self._positions.select(self._traces.view(), key)

    def first_nonfinite_time(self) -> float | None:
        """Wall time of the first NaN/Inf recorded in this run: a kernel output, a function's
        result or an inner op of a fused kernel (its inner-op check, deep mode, replays);
        None when none is."""
        with self._lock:
            executions = self._executions.view()
            times = [
                self._earliest_nonfinite.earliest(
                    layout.GRAPH_EXECUTION_TRACES, self._traces.view(), NONFINITE | INNER_NONFINITE
                ),
                self._earliest_nonfinite.earliest(layout.EXECUTION, executions, NONFINITE),
            ]
            replayed = list(self._nonfinite_replays)
            if replayed:
                found = executions["wall_time"][np.isin(executions["index"], replayed)]
                times.append(float(found.min()) if len(found) else None)
        known = [t for t in times if t is not None]
        return min(known) if known else None

    def execution_trace_indices(self, execution_index: int) -> np.ndarray:
        """Positions of the traces recorded during one execution (by Execution.index; read-only)."""
        with self._lock:
            return self._positions.select(self._traces.view(), (("execution_index", int(execution_index)),))

    def _row(self, rows: GrowingArray, i: int, what: str):
        with self._lock:
            if not 0 <= i < rows.size:
                raise IndexError(f"{what} {i} out of range [0, {rows.size}) in run {self.name!r}")
            return rows.view()[i].copy()
