"""One op's statistics call after call (FULL_STATS runs): min, max, mean and abs-max of its
output at every execution, so a value that drifts over training steps (an activation growing
towards overflow, a weight collapsing to zero) shows as a line long before it turns into
NaN. Read in bulk (compare.bulk) and reduced to at most `max_points` buckets that keep each
bucket's extremes, so a spike in a long run is never averaged away."""

from __future__ import annotations

import numpy as np

from tvmdbg_tb.compare.bulk import ABS_MAX, MAX, MEAN, MIN, NAN, NEG_INF, POS_INF, stats_matrix
from tvmdbg_tb.events.modes import mode_name, spec
from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb

DEFAULT_MAX_POINTS = 500
MAX_POINTS = 5000


def op_stats(
    run: RunReader, op: pb.GraphOpCreation, output_slot: int = 0, max_points: int = DEFAULT_MAX_POINTS
) -> dict:
    """The `graph_execution/op_stats` answer (docs/routes.md). Raises LookupError when the run
    was not recorded with FULL_STATS (other modes keep no min/max/mean)."""
    mode = run.metadata.tensor_debug_mode if run.metadata is not None else None
    if mode is None or not spec(mode).statistics:
        name = mode_name(mode) if mode is not None else "an unknown mode"
        raise LookupError(
            f"run {run.name!r} was recorded with {name}: per-call statistics need tensor_debug_mode='FULL_STATS'"
        )
    with run.lock:
        positions = run.op_trace_indices(op.op_id, output_slot)
        digests = run.trace_digests()[positions]
    executions = digests["execution_index"].astype(np.int64)
    stats = stats_matrix(run, digests["offset"].astype(np.int64))
    n = len(positions)
    buckets = max(1, min(max_points, n))
    # Bucket b holds traces [bounds[b], bounds[b + 1]): consecutive calls, at most max_points.
    bounds = np.linspace(0, n, buckets + 1).astype(np.int64) if n else np.zeros(1, np.int64)
    starts = bounds[:-1]
    points = []
    if n:
        with np.errstate(all="ignore"):
            lows = np.fmin.reduceat(stats[:, MIN], starts)
            highs = np.fmax.reduceat(stats[:, MAX], starts)
            peaks = np.fmax.reduceat(stats[:, ABS_MAX], starts)
            means = np.add.reduceat(np.nan_to_num(stats[:, MEAN]), starts) / np.add.reduceat(
                np.isfinite(stats[:, MEAN]).astype(np.float64), starts
            )
            bad = [np.add.reduceat(np.nan_to_num(stats[:, k]), starts) for k in (NAN, NEG_INF, POS_INF)]
        ends = bounds[1:] - 1
        for b in range(buckets):
            points.append(
                {
                    "execution_index": int(executions[starts[b]]),
                    "last_execution_index": int(executions[ends[b]]),
                    "num_traces": int(ends[b] - starts[b] + 1),
                    "min": _finite_or_none(lows[b]),
                    "max": _finite_or_none(highs[b]),
                    "mean": _finite_or_none(means[b]),
                    "abs_max": _finite_or_none(peaks[b]),
                    "nan": int(bad[0][b]),
                    "neg_inf": int(bad[1][b]),
                    "pos_inf": int(bad[2][b]),
                }
            )
    return {
        "op_id": int(op.op_id),
        "op_name": op.op_name,
        "output_slot": int(output_slot),
        "num_traces": int(n),
        "bucketed": n > buckets,
        "points": points,
    }


def _finite_or_none(value: float) -> float | None:
    """A statistic, or None where the bucket has no finite element (all NaN/Inf, or empty)."""
    return float(value) if np.isfinite(value) else None
