"""Typed answers: what analysis builds for a route, once, as a frozen dataclass whose fields
are the JSON object's (the dashboard declares the same shapes in
tvmdbg_tb_frontend/src/api.ts; tests/test_route_schema.py checks every route against them).

The plugin and the CLI only serialise them (to_json); nothing builds an answer's dict apart.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# A field with this metadata is left out of the JSON object while it is None (TypeScript's
# `name?: T`: older servers did not send it, or the route was asked without it).
OPTIONAL = {"optional": True}


def to_json(value: Any) -> Any:
    """value with every Answer in it as its JSON object."""
    if isinstance(value, Answer):
        return value.to_json()
    if isinstance(value, list):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    return value


class Answer:
    """A route's answer: to_json() is the object the route sends (fields in their order)."""

    def to_json(self) -> dict:
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.metadata.get("optional"):
                continue
            out[field.name] = to_json(value)
        return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlertCounts:
    """Alerts per kind over all the run's alerts (an alert counts for each kind its output holds)."""

    nan: int = 0
    neg_inf: int = 0
    pos_inf: int = 0
    origin: int = 0

    def plus(self, other: AlertCounts) -> AlertCounts:
        return AlertCounts(
            nan=self.nan + other.nan,
            neg_inf=self.neg_inf + other.neg_inf,
            pos_inf=self.pos_inf + other.pos_inf,
            origin=self.origin + other.origin,
        )


@dataclasses.dataclass(kw_only=True)
class Alert(Answer):
    """One alert (api.ts Alert): a kernel output holding NaN or an infinity, or a NaN/Inf made
    and hidden inside a fused kernel ("masked"), with where its op was made. Built by
    alerts.alert_rows, confirmed by inner_ops.confirm_alert (which op inside made it)."""

    alert_type: str
    op_id: int
    op_name: str
    kernel: str
    graph_id: int
    output_slot: int
    nan_count: int
    neg_inf_count: int
    pos_inf_count: int
    size: int | None
    dtype: str | None  # the output's dtype and shape as compiled (-1: a symbolic dimension)
    shape: list[int] | None
    wall_time: float | None
    execution_index: int
    # The call's function, which call of it in the run it is (1-based: a generation loop's
    # step; None where dropped executions leave it uncounted) and how many the dump holds.
    function_name: str = ""
    call: int | None = None
    function_calls: int = 0
    # The VM that made the call (1, 2, ... in the order the run traced them; 0: not recorded)
    # and how many VMs called the function in the dump (the call number counts per VM).
    vm: int = 0
    function_vms: int = 1
    trace_index: int
    execution_position: int | None
    trace_position: int | None
    origin: bool
    origin_uncertain: bool  # an origin next to damaged or missing records
    location: dict | None
    original_ops: list[dict]
    # What the op read of its function's parameters: the non-finite ones ({name, param_index,
    # tuple_item, weight}) and the objects (state earlier calls may have written: a KV cache).
    bad_parameters: list[dict] = dataclasses.field(default_factory=list)
    state: list[str] = dataclasses.field(default_factory=list)
    # How the inner op that made the value is known ("replay", "deep", "inner_check",
    # "heuristic"), and that op (None: none known).
    confirmed: str = ""
    inner_op: dict | None = None
    # Every fused op's count, when the kernel's inner-op check saw some.
    inner_nonfinite: list[dict] | None = dataclasses.field(default=None, metadata=OPTIONAL)
    masked: bool | None = dataclasses.field(default=None, metadata=OPTIONAL)  # its output hides the value


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlertsPage(Answer):
    """The `alerts` route's answer (api.ts AlertsPage): a page of alerts in execution order,
    kernel outputs and NaN/Inf made and hidden inside fused kernels alike, with counts over
    all of them."""

    begin: int
    end: int
    num_alerts: int
    alerts_breakdown: dict[str, int]
    alert_type: str | None
    nan_alerts: int
    neg_inf_alerts: int
    pos_inf_alerts: int
    origin_alerts: int
    start_dropped: bool
    first_origin_index: int | None
    alerts: list[Alert]
    range_alerts: dict | None = dataclasses.field(default=None, metadata=OPTIONAL)
    benign: dict | None = dataclasses.field(default=None, metadata=OPTIONAL)
    # api.ts UnfinishedAlert objects: NaN/Inf of calls that never returned (analysis/unfinished.py)
    unfinished: list[dict] | None = dataclasses.field(default=None, metadata=OPTIONAL)
