"""Error of one op between two runs, from full values or from FULL_STATS statistics.

Run B is the reference. The tolerance test is numpy's allclose: |a - b| <= atol + rtol * |b|
for every element, and NaN/Inf must sit at the same places (a NaN on one side only, or a
different count of NaN/Inf, is a divergence).

- From values (both sides FULL_TENSOR): max abs error, max rel error (|a-b| / |b| over
  elements with b != 0; inf when a differs where b == 0), cosine similarity of the finite
  elements, and the exact allclose verdict.
- From statistics (FULL_STATS, or stats computed from one side's values): min, max, mean,
  abs-max and L2 norm are each 1-Lipschitz in the max norm (|L2| after dividing by
  sqrt(n)), so max(|dmin|, |dmax|, |dmean|, |dabs_max|, |dL2|/sqrt(n)) is a LOWER bound of
  the max abs error, and that bound / abs_max(b) a lower bound of the max rel error. A bound
  above atol + rtol * abs_max(b) proves the op divergent; below it, the op is only
  consistent with the tolerance (two tensors with equal statistics can differ), which the
  record says (`basis: "stats"`), and a FULL_TENSOR re-dump decides. No cosine from stats.
"""

from __future__ import annotations

import math

import numpy as np

from tvmdbg_tb.events.modes import spec
from tvmdbg_tb.events.summaries import LAYOUTS, describe, finite_statistics
from tvmdbg_tb.proto import debug_event_pb2 as pb

STATS_FIELDS = ("min", "max", "mean", "l2_norm", "abs_max")
_FULL_HEALTH_FIELDS = LAYOUTS[pb.FULL_HEALTH]
Summary = tuple  # (FULL_STATS description or None, full values or None, why neither)


def summary(mode: int, recorded) -> Summary:
    """(FULL_STATS description, full values or None, why neither) of a trace or TensorSummary."""
    if spec(mode).values:
        value = recorded.tensor_value if recorded.HasField("tensor_value") else None
        if value is None or not value.content:
            return None, None, "no stored value"
        if value.truncated:
            return None, None, "stored value truncated"
        try:
            array = np.frombuffer(value.content, dtype=np.dtype(value.dtype).newbyteorder("<"))
            array = array.reshape(tuple(value.shape))
        except (TypeError, ValueError):
            return None, None, f"dtype {value.dtype!r} cannot be read"
        return array_summary(array)
    fields = describe(pb.FULL_STATS, list(recorded.debug_values))
    if not fields:
        return None, None, "no statistics (opaque value or unreadable dtype)"
    return fields, None, ""


def array_summary(array: np.ndarray) -> Summary:
    """The summary of full values (a FULL_TENSOR value, a replayed op's output)."""
    flat = array.reshape(-1)
    kind = flat.dtype.kind
    nan = int(np.isnan(flat).sum()) if kind == "f" else 0
    neg_inf = int(np.isneginf(flat).sum()) if kind == "f" else 0
    pos_inf = int(np.isposinf(flat).sum()) if kind == "f" else 0
    negative = int((flat < 0).sum()) - neg_inf
    zero = int((flat == 0).sum())
    positive = int(flat.size) - nan - neg_inf - pos_inf - negative - zero
    health = [0, 0, array.ndim, flat.size, neg_inf, pos_inf, nan, negative, zero, positive]
    fields = dict(zip(_FULL_HEALTH_FIELDS, health))
    fields.update(zip(STATS_FIELDS, finite_statistics(flat)))
    fields["dtype"] = str(array.dtype)
    return fields, array, ""


def verdict(a: Summary, b: Summary, rtol: float, atol: float) -> dict:
    """Compares two summaries: from values when both have them, else from statistics."""
    (sa, va, why_a), (sb, vb, why_b) = a, b
    if sa is None or sb is None:
        return {"status": "not_comparable", "reason": f"A: {why_a}" if sa is None else f"B: {why_b}"}
    if va is not None and vb is not None:
        return from_values(va, vb, rtol, atol)
    return from_stats(sa, sb, rtol, atol)


def _nonfinite(stats: dict) -> tuple[int, int, int]:
    return stats["nan"], stats["neg_inf"], stats["pos_inf"]


def from_stats(a: dict, b: dict, rtol: float, atol: float) -> dict:
    """Verdict from two FULL_STATS descriptions (summaries.describe of the debug values)."""
    if a["size"] != b["size"]:
        return {"status": "not_comparable", "reason": f"sizes differ ({a['size']} vs {b['size']})"}
    out = {"basis": "stats", "max_abs_error": None, "max_rel_error": None, "cosine_similarity": None}
    if _nonfinite(a) != _nonfinite(b):
        na, nb = _nonfinite(a), _nonfinite(b)
        reason = f"NaN/-Inf/+Inf counts differ: A {na[0]}/{na[1]}/{na[2]}, B {nb[0]}/{nb[1]}/{nb[2]}"
        return {**out, "status": "divergent", "reason": reason, "max_abs_error": math.inf, "max_rel_error": math.inf}
    finite = a["negative"] + a["zero"] + a["positive"]
    if finite == 0:
        return {**out, "status": "within", "reason": "no finite element on either side", "max_abs_error": 0.0}
    deltas = [abs(a[k] - b[k]) for k in ("min", "max", "mean", "abs_max")]
    deltas.append(abs(a["l2_norm"] - b["l2_norm"]) / math.sqrt(finite))
    bound = max(deltas)
    scale = abs(b["abs_max"])
    tolerance = atol + rtol * scale
    out.update(max_abs_error=bound, max_rel_error=(bound / scale if scale else (math.inf if bound else 0.0)))
    out["tolerance"] = tolerance
    if bound > tolerance:
        return {**out, "status": "divergent", "reason": "statistics differ beyond tolerance (lower bound of the error)"}
    return {**out, "status": "within", "reason": "statistics agree (a lower bound only: values not compared)"}


def from_values(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> dict:
    """Verdict from two full tensors (any float/int dtype)."""
    if a.shape != b.shape:
        return {"status": "not_comparable", "reason": f"shapes differ ({list(a.shape)} vs {list(b.shape)})"}
    a = a.astype(np.float64).reshape(-1)
    b = b.astype(np.float64).reshape(-1)
    out = {"basis": "values"}
    fa, fb = np.isfinite(a), np.isfinite(b)
    same_nonfinite = bool(np.array_equal(fa, fb) and np.array_equal(a[~fa], b[~fb], equal_nan=True))
    both = fa & fb
    diff = np.abs(a[both] - b[both])
    ref = np.abs(b[both])
    max_abs = float(diff.max()) if diff.size else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(ref > 0, diff / ref, np.where(diff > 0, np.inf, 0.0))
    max_rel = float(rel.max()) if rel.size else 0.0
    norm = float(np.linalg.norm(a[both]) * np.linalg.norm(b[both]))
    cosine = float(np.dot(a[both], b[both]) / norm) if norm else (1.0 if max_abs == 0 else 0.0)
    out.update(max_abs_error=max_abs, max_rel_error=max_rel, cosine_similarity=cosine)
    out["tolerance"] = atol + rtol * (float(ref.max()) if ref.size else 0.0)
    if not same_nonfinite:
        out.update(max_abs_error=math.inf, max_rel_error=math.inf)
        return {**out, "status": "divergent", "reason": "NaN/Inf at different elements"}
    if bool((diff <= atol + rtol * ref).all()):
        return {**out, "status": "within", "reason": ""}
    return {**out, "status": "divergent", "reason": "values differ beyond tolerance"}
