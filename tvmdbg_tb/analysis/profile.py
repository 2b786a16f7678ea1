"""The per-op time table TVM's old debug executor printed: op, kernel, calls, total and mean
time, % of total, shape. Computed from the trace digest columns with numpy (no record parsed
except one per op whose compiled shape is symbolic), and cached until new traces arrive; while
a live run grows, a table at most REUSE_SECONDS old (longer when it took long to compute) is
answered, and one request computes while the others answer the previous table: a pass over
every digest is not repeated per request."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np

from tvmdbg_tb.events.reader import RunReader

_cache: OrderedDict[tuple, tuple[tuple, float, dict]] = OrderedDict()  # query -> (state, reusable until, table)
_cache_lock = threading.Lock()
_computing = threading.Lock()  # held by the request that computes a table
_CACHE_SIZE = 16
REUSE_SECONDS = 2.0


def profile(run: RunReader, graph_id: int | None = None, execution_index: int | None = None) -> dict:
    """{"total_us", "num_executions", "num_traces", "rows": [...]}, rows by total time, descending.

    Each kernel call counts once (its output slot 0 trace); traces without a measured time are
    left out of the times but still counted as calls.
    """
    digests = run.trace_digests()
    n = len(digests)
    query = (id(run), graph_id, execution_index)
    state = (n, int(digests["index"][0]) if n else -1, len(run.ops()))
    with _cache_lock:
        cached = _cache.get(query)
    if cached is not None and (cached[0] == state or time.monotonic() < cached[1]):
        return cached[2]
    if not _computing.acquire(blocking=False):
        if cached is not None:
            return cached[2]  # another request computes the new table: this one is moments old
        return _compute(run, digests, graph_id, execution_index)
    started = time.monotonic()
    try:
        result = _compute(run, digests, graph_id, execution_index)
    finally:
        _computing.release()
    now = time.monotonic()
    with _cache_lock:  # a table that took long is reused for longer: at most a tenth of a core
        _cache[query] = (state, now + max(REUSE_SECONDS, 10 * (now - started)), result)
        _cache.move_to_end(query)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return result


_BLOCK_ROWS = 1 << 18  # digests counted at once: bounds the transient memory of a table


def _compute(run: RunReader, digests: np.ndarray, graph_id: int | None, execution_index: int | None) -> dict:
    graph_ops = None if graph_id is None else np.array(run.op_ids_of(graph_id), dtype=np.int64)
    counted = _counted_by_blocks(digests, graph_ops, execution_index)
    if counted is None:  # op ids too large to count directly: one pass over every digest
        counted = _counted(digests, graph_ops, execution_index)
    op_ids, calls, totals, timed_calls, executions, num_traces = counted
    total_us = float(totals.sum())
    table = []
    for k in np.argsort(-totals, kind="stable"):
        op_id = int(op_ids[k])
        try:
            op = run.op(op_id)
        except KeyError:
            op = None
        dtype, shape = _output_shape(run, op, op_id)
        table.append(
            {
                "op_id": op_id,
                "op_name": op.op_name if op else None,
                "kernel": op.kernel if op else None,
                "graph_id": int(op.graph_id) if op else None,
                "calls": int(calls[k]),
                "total_us": float(totals[k]),
                "mean_us": float(totals[k] / timed_calls[k]) if timed_calls[k] else None,
                "percent": float(100.0 * totals[k] / total_us) if total_us > 0 else 0.0,
                "dtype": dtype,
                "shape": shape,
            }
        )
    return {"total_us": total_us, "num_executions": executions, "num_traces": num_traces, "rows": table}


def _selected(digests: np.ndarray, graph_ops: np.ndarray | None, execution_index: int | None) -> np.ndarray:
    """Which digests count: each kernel call once (its output slot 0), of the graph and call asked."""
    mask = digests["output_slot"] == 0
    if execution_index is not None:
        mask &= digests["execution_index"] == execution_index
    if graph_ops is not None:
        mask &= np.isin(digests["op_id"], graph_ops)
    return mask


def _counted_by_blocks(digests: np.ndarray, graph_ops: np.ndarray | None, execution_index: int | None):
    """(op ids, calls, total us, timed calls, executions, traces), counted block by block (a
    live run's table is computed again every few seconds: a pass over 2M digests at once held
    ~70 MB); None when an op id is too large to count directly."""
    size = 0
    calls, totals, timed = np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)
    executions: list[np.ndarray] = []
    num_traces = 0
    for start in range(0, len(digests), _BLOCK_ROWS):
        block = digests[start : start + _BLOCK_ROWS]
        mask = _selected(block, graph_ops, execution_index)
        ids = block["op_id"][mask]
        if not len(ids):
            continue
        if ids.min() < 0 or ids.max() >= 1 << 22:
            return None
        size = max(size, int(ids.max()) + 1)
        durations = block["duration_us"][mask].astype(np.float64)
        measured = ~np.isnan(durations)
        calls = _padded(calls, size) + np.bincount(ids, minlength=size)
        totals = _padded(totals, size) + np.bincount(ids[measured], weights=durations[measured], minlength=size)
        timed = _padded(timed, size) + np.bincount(ids[measured], minlength=size)
        executions.append(np.unique(block["execution_index"][mask]))
        num_traces += len(ids)
    op_ids = np.flatnonzero(calls)
    distinct = len(np.unique(np.concatenate(executions))) if executions else 0
    return op_ids, calls[op_ids], totals[op_ids], timed[op_ids], distinct, num_traces


def _padded(values: np.ndarray, size: int) -> np.ndarray:
    return np.concatenate([values, np.zeros(size - len(values), values.dtype)]) if len(values) < size else values


def _counted(digests: np.ndarray, graph_ops: np.ndarray | None, execution_index: int | None):
    """As _counted_by_blocks, for any op ids, in one pass."""
    mask = _selected(digests, graph_ops, execution_index)
    ids = digests["op_id"][mask]
    durations = digests["duration_us"][mask].astype(np.float64)
    op_ids, inverse, calls = np.unique(ids, return_inverse=True, return_counts=True)
    measured = ~np.isnan(durations)
    totals = np.bincount(inverse[measured], weights=durations[measured], minlength=len(op_ids))
    timed = np.bincount(inverse[measured], minlength=len(op_ids))
    return op_ids, calls, totals, timed, _distinct(digests["execution_index"][mask]), int(len(ids))


def _distinct(values: np.ndarray) -> int:
    """How many different values (execution indices: a narrow range, counted without a sort)."""
    if not len(values):
        return 0
    low, high = int(values.min()), int(values.max())
    if high - low <= 4 * len(values):
        return int(np.count_nonzero(np.bincount(values - low)))
    return len(np.unique(values))


def _output_shape(run: RunReader, op, op_id: int) -> tuple[str, list[int]]:
    """Output 0's dtype and shape as compiled; a symbolic shape is taken from the latest trace."""
    if op is not None and op.outputs:
        spec = op.outputs[0]
        shape = [int(d) for d in spec.shape]
        if all(d >= 0 for d in shape):
            return spec.dtype, shape
    positions = run.op_trace_indices(op_id, 0)
    if len(positions):
        trace = run.trace(int(positions[-1]))
        return trace.dtype, [int(d) for d in trace.shape]
    return (op.outputs[0].dtype if op is not None and op.outputs else ""), []
