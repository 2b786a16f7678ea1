"""An index of a run's ops, built once per state of its graphs: each graph's ops in call order
with their producer/consumer adjacency, what search matches against, and which ops each source
line created. The routes that page, summarise and search big graphs (hundreds of thousands of
kernels) read it instead of walking every op record per request. It is compact (numpy arrays,
shared strings: tens of bytes per op) and rebuilt when the run gains ops; the plugin builds it
in its reader thread, so no request waits for it."""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb


@dataclass
class GraphOrder:
    """One graph's ops in call order and their op-to-op edges, as positions in that order
    (edge k runs from op_ids[src[k]] to op_ids[dst[k]]), with both adjacencies as CSR."""

    op_ids: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    up_ptr: np.ndarray = field(init=False)  # producers of position p: up_idx[up_ptr[p]:up_ptr[p + 1]]
    up_idx: np.ndarray = field(init=False)
    down_ptr: np.ndarray = field(init=False)
    down_idx: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.up_ptr, self.up_idx = _csr(self.dst, self.src, len(self.op_ids))
        self.down_ptr, self.down_idx = _csr(self.src, self.dst, len(self.op_ids))

    def neighbours(self, position: int) -> list[int]:
        """Positions of the op's producers, then its consumers."""
        up = self.up_idx[self.up_ptr[position] : self.up_ptr[position + 1]]
        down = self.down_idx[self.down_ptr[position] : self.down_ptr[position + 1]]
        return [*up.tolist(), *down.tolist()]


def _csr(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, values[order]


@dataclass
class OpIndex:
    """Per run. Ops by id: `ids` sorted, with each one's graph and position in its graph at the
    same place in `graph_of` and `position_of`. Search fields per op in the order of `search_ids`."""

    num_ops: int
    graphs: dict[int, GraphOrder] = field(default_factory=dict)
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    graph_of: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    position_of: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    search_ids: list[int] = field(default_factory=list)  # each graph's ops in call order, graph after graph
    first: dict[int, int] = field(default_factory=dict)  # graph id -> its first op's place in search_ids
    names: list[str] = field(default_factory=list)  # lower case
    kernels: list[str] = field(default_factory=list)  # lower case
    op_types: list[tuple[str, ...]] = field(default_factory=list)  # as recorded (relax.log)
    nodes: list[tuple[str, ...]] = field(default_factory=list)  # model node names
    lines: list[tuple[tuple[str, int], ...]] = field(default_factory=list)  # (file, line) of op and its Relax ops
    by_file: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # file -> (lines, op ids) by line

    def place(self, op_id: int) -> tuple[int, int]:
        """(graph id, position in the graph) of an op (KeyError when unknown)."""
        k = int(np.searchsorted(self.ids, op_id))
        if k >= len(self.ids) or self.ids[k] != op_id:
            raise KeyError(f"no op {op_id}")
        return int(self.graph_of[k]), int(self.position_of[k])

    def ops_at(self, path: str, first: int, last: int) -> list[tuple[int, list[int]]]:
        """(line, op ids in call order) for the lines first..last of a file that created ops."""
        lines, op_ids = self.by_file.get(path, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        lo, hi = np.searchsorted(lines, [first, last + 1])
        out: dict[int, list[int]] = {}
        for line, op_id in zip(lines[lo:hi].tolist(), op_ids[lo:hi].tolist()):
            out.setdefault(line, []).append(op_id)
        return list(out.items())


_indexes: weakref.WeakKeyDictionary[RunReader, OpIndex] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def op_index(run: RunReader) -> OpIndex:
    """The run's index for its ops as read now (built on first use, again when ops were added)."""
    num_ops = run.num_ops()
    with _lock:
        found = _indexes.get(run)
        if found is not None and found.num_ops == num_ops:
            return found
        built = _Builder(run).build(num_ops)
        _indexes[run] = built
        return built


class _Builder:
    """One pass over the ops' records (the cost: ~15 µs an op, protobuf field access)."""

    def __init__(self, run: RunReader):
        self.run = run
        self.shared: dict = {}  # equal strings and tuples stored once
        self.file_lines: dict[str, list[tuple[int, int]]] = {}

    def intern(self, value):
        return self.shared.setdefault(value, value)

    def build(self, num_ops: int) -> OpIndex:
        index = OpIndex(num_ops=num_ops)
        ids, graphs, positions = [], [], []
        for graph in self.run.graphs():
            graph_id = int(graph.graph_id)
            index.first[graph_id] = len(index.search_ids)
            order = self._graph(index, graph_id)
            index.graphs[graph_id] = order
            ids.append(order.op_ids)
            graphs.append(np.full(len(order.op_ids), graph_id, dtype=np.int64))
            positions.append(np.arange(len(order.op_ids), dtype=np.int64))
        if ids:
            all_ids = np.concatenate(ids)
            by_id = np.argsort(all_ids, kind="stable")
            index.ids = all_ids[by_id]
            index.graph_of = np.concatenate(graphs)[by_id]
            index.position_of = np.concatenate(positions)[by_id]
        for path, pairs in self.file_lines.items():
            arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
            arr = arr[np.argsort(arr[:, 0], kind="stable")]
            index.by_file[path] = (arr[:, 0].copy(), arr[:, 1].copy())
        return index

    def _graph(self, index: OpIndex, graph_id: int) -> GraphOrder:
        ops = self.run.ops(graph_id)  # parsed as the loop below reads them (events/compact.py)
        op_ids = np.array(self.run.op_ids_of(graph_id), dtype=np.int64)
        position = {op_id: k for k, op_id in enumerate(op_ids.tolist())}
        src: list[int] = []
        dst: list[int] = []
        for k, op in enumerate(ops):
            seen: set[int] = set()
            for inp in op.inputs:
                if inp.kind == pb.OpInput.OP_OUTPUT:
                    p = position.get(inp.producer_op_id)
                    if p is not None and p not in seen:
                        seen.add(p)
                        src.append(p)
                        dst.append(k)
            self._search_fields(index, op)
        return GraphOrder(op_ids, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64))

    def _search_fields(self, index: OpIndex, op: pb.GraphOpCreation) -> None:
        originals = op.original_ops
        lines: list[tuple[str, int]] = []
        nodes: list[str] = []
        for loc in (op.code_location, *(o.code_location for o in originals)):
            frame = self.run.user_frame(loc)
            if frame is not None and frame.file_path:
                at = (self.intern(frame.file_path), int(frame.line))
                if at not in lines:
                    lines.append(at)
            if loc.HasField("model_node") and loc.model_node.name:
                nodes.append(loc.model_node.name)
        op_id = int(op.op_id)
        index.search_ids.append(op_id)
        index.names.append(op.op_name.lower())
        index.kernels.append(self.intern(op.kernel.lower()))
        index.op_types.append(self.intern(tuple(o.op_type for o in originals)))
        index.nodes.append(self.intern(tuple(nodes)))
        index.lines.append(self.intern(tuple(lines)) if lines else ())
        for path, line in lines:
            self.file_lines.setdefault(path, []).append((line, op_id))


def base_name(path: str) -> str:
    """A path's last part, for '/' and '\\' alike (a dump may come from another system)."""
    return os.path.basename(path.replace("\\", "/"))
