"""Text views of the shared analysis (tvmdbg_tb.analysis): alerts, the profile table and the
`check` diagnosis. The numbers come from the same functions the plugin's routes call; this
module only lays them out for a terminal."""

from __future__ import annotations

import numpy as np

from tvmdbg_tb import analysis
from tvmdbg_tb.cli import render
from tvmdbg_tb.cli.render import Style
from tvmdbg_tb.cli.session import OpNames, run_label
from tvmdbg_tb.events import layout
from tvmdbg_tb.events.modes import mode_name, spec
from tvmdbg_tb.events.reader import HAS_ERROR, HEALTH_KNOWN, INNER_NONFINITE, NONFINITE, RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb


def _counts(alert: dict) -> str:
    parts = []
    for key, label in (("nan_count", "NaN"), ("neg_inf_count", "-Inf"), ("pos_inf_count", "+Inf")):
        if alert[key] > 0:
            parts.append(f"{alert[key]} {label}")
    if not parts:
        return "NaN or Inf"  # CURT_HEALTH knows only "some"
    return ", ".join(parts) + (f" of {alert['size']}" if alert.get("size") else "")


def ordered_alerts(
    run: RunReader, limit: int = 0, expected_nonfinite: str | None = None
) -> tuple[list[dict], int | None, int]:
    """(alerts, index of the first origin alert in execution order, number of alerts): the
    first origin alert, then the first `limit` others in execution order (0: all). Only the
    alerts returned are read from the dump."""
    head = analysis.alerts(run, 0, 0, range_end=0, expected_nonfinite=expected_nonfinite)
    total, first = head["num_alerts"], head["first_origin_index"]
    end = total if limit <= 0 else min(limit, total)
    page = analysis.alerts(run, 0, end, range_end=0, expected_nonfinite=expected_nonfinite)["alerts"]
    if first is None:
        return page, None, total
    if first < end:
        origin = page[first]
    else:
        origin = analysis.alerts(run, first, first + 1, range_end=0, expected_nonfinite=expected_nonfinite)["alerts"][0]
    return [origin] + [a for i, a in enumerate(page) if i != first], first, total


def _short_op(op_type: str) -> str:
    """ "relax.nn.softmax" -> "softmax"."""
    return op_type.rsplit(".", 1)[-1]


def benign_lines(benign: dict) -> list[str]:
    """The non-finite outputs that are no alerts, as the `benign` part of the alerts route
    says: absorbed (intended masking) and expected ones, one line per op."""
    lines = []
    for kind, title in (("absorbed", "Intended masking"), ("expected", "Expected non-finite")):
        ops = [o for o in benign["ops"] if o["kind"] == kind]
        if not ops:
            continue
        readers = sorted({_short_op(t) for o in ops for t in o["absorbed_by"]})
        by = f", absorbed by {', '.join(readers)}" if readers and kind == "absorbed" else ""
        pattern = f" (--expected-nonfinite {benign['expected_nonfinite']!r})" if kind == "expected" else ""
        lines.append(f"{title}{pattern}: {benign[kind]} non-finite outputs, no alerts{by}:")
        for o in ops:
            values = ", ".join(
                f"{o[key]} with {label}"
                for key, label in (("neg_inf", "-Inf"), ("pos_inf", "+Inf"), ("nan", "NaN"))
                if o[key]
            )
            made = "/".join(_short_op(t) for t in o["original_ops"]) or o["kernel"]
            lines.append(f"  {o['op_name']} ({made}): {o['count']} outputs{', ' + values if values else ''}")
    return lines


def _how(alert: dict) -> str:
    """How an alert's inner op is known (its "confirmed")."""
    if alert["confirmed"] == "inner_check":
        return "counted inside the kernel by its inner-op check"
    return f"confirmed by {alert['confirmed']}"


def alert_lines(
    run: RunReader,
    names: OpNames,
    limit: int = 0,
    style: Style | None = None,
    more: str = "alerts -a lists all",
    expected_nonfinite: str | None = None,
) -> list[str]:
    """The NaN/Inf alerts (and the non-finite outputs that are no alerts), then the range
    alerts (FULL_STATS runs)."""
    return _nonfinite_alert_lines(run, names, limit, style or Style(), more, expected_nonfinite) + range_alert_lines(
        run, names, limit, style
    )


def _nonfinite_alert_lines(
    run: RunReader, names: OpNames, limit: int, style: Style, more: str, expected_nonfinite: str | None
) -> list[str]:
    alerts, first, total = ordered_alerts(run, limit, expected_nonfinite)
    answer = analysis.alerts(run, 0, 0, range_end=0, expected_nonfinite=expected_nonfinite)
    benign = benign_lines(answer["benign"])
    lines = unfinished_lines(run, answer["unfinished"], names, style)
    if not alerts:
        mode = run.metadata.tensor_debug_mode if run.metadata else pb.TENSOR_DEBUG_MODE_UNSPECIFIED
        if not spec(mode).knows_finite:
            return [f"No alerts: mode {mode_name(mode)} records no NaN/Inf counts (use FULL_HEALTH)."]
        none = f"No {'other ' if lines else ''}NaN/Inf alerts in {run.num_traces()} kernel outputs."
        return [*lines, none, *benign]
    head = alerts[0]
    name = f"{names.name(head['op_id'])}:{head['output_slot']}"
    if first is not None:
        lines.append(
            style(f"{total} NaN/Inf alerts.", "red")
            + f" The first origin ({_origin_kind(head)}) is {name}, kernel {head['kernel']}, "
            f"in execution {head['execution_index']}{call_text(head)}:"
        )
        lines.append(f"  {_counts(head)}; created at {_where_created(run, head)}")
        if head.get("inner_op"):
            inner = head["inner_op"]
            lines.append(
                f"  made by inner op {inner['op_type']} {inner['var_name']} at {render.where(inner['location'])} "
                f"({_how(head)})"
            )
        if head.get("origin_uncertain"):
            lines.append("  " + style(UNCERTAIN, "red"))
        for o in head["original_ops"]:
            lines.append(f"  fused Relax op {o['op_type']} {o['var_name']} at {render.where(o['location'])}")
        lines.append(f"  next: ni {name.split(':')[0]}   li {name.split(':')[0]}   pt {name} -i {head['trace_index']}")
    else:
        lines.append(
            style(f"{total} NaN/Inf alerts", "red")
            + f" and no origin among them: every one had a non-finite input{_bad_input_kind(alerts)}."
        )
    rows = []
    for a in alerts:
        rows.append(
            [
                ("yes?" if a.get("origin_uncertain") else "yes") if a["origin"] else "",
                a["execution_index"],
                a["trace_index"],
                f"{names.name(a['op_id'])}:{a['output_slot']}",
                a["kernel"],
                _counts(a),
                render.where(a["location"], called_from=False),
            ]
        )
    lines.append("Alerts (first origin first, then in execution order):")
    lines += [
        "  " + r
        for r in render.table(
            ["origin", "exec", "trace", "tensor", "kernel", "non-finite", "created at"], rows, right=(1, 2), style=style
        )
    ]
    if len(alerts) < total:
        lines.append(f"  ... {total - len(alerts)} more ({more})")
    return lines + benign


def write_alerts_json(
    run: RunReader, out, limit: int = 0, page: int = 1000, expected_nonfinite: str | None = None
) -> None:
    """Writes the plugin `alerts` route's answer for alerts [0:limit] and range alerts
    [0:limit] (0: all) as the route encodes it, a page of alerts at a time so memory stays
    flat when a run has many."""
    head = analysis.alerts(run, 0, 0, range_end=-1 if limit <= 0 else limit, expected_nonfinite=expected_nonfinite)
    end = head["num_alerts"] if limit <= 0 else min(limit, head["num_alerts"])
    fields = {k: v for k, v in head.items() if k != "alerts"}
    fields = analysis.dumps({**fields, "end": end, "alerts": []})  # the alerts last, streamed
    out.write(fields[: -len("[]}")] + "[")
    for begin in range(0, end, page):
        objects = analysis.alerts(
            run, begin, min(begin + page, end), range_end=0, expected_nonfinite=expected_nonfinite
        )["alerts"]
        out.write((", " if begin else "") + ", ".join(analysis.dumps(a) for a in objects))
    out.write("]}\n")


def range_alert_lines(run: RunReader, names: OpNames, limit: int = 0, style: Style | None = None) -> list[str]:
    """The range alerts as a table (nothing for runs whose mode records no abs-max)."""
    style = style or Style()
    answer = analysis.range_alerts(run, 0, -1 if limit <= 0 else limit)
    if not answer["available"]:
        return []
    total = answer["num_alerts"]
    rule = (
        f"abs-max within {answer['headroom']:g}x of the dtype's largest value, or growing more than "
        f"{answer['growth_factor']:g}x per call toward it"
    )
    if not total:
        return [f"No range alerts ({rule})."]
    lines = [style(f"{total} range alert{'s' if total > 1 else ''}", "yellow") + f" ({rule}), the first first:"]
    rows = [
        [
            "near max" if a["kind"] == "near_max" else "growth",
            a["execution_index"],
            a["trace_index"],
            f"{names.name(a['op_id'])}:{a['output_slot']}",
            a["kernel"],
            a["dtype"],
            range_text(a),
            a["num_calls"],
            render.where(a["location"], called_from=False),
        ]
        for a in answer["alerts"]
    ]
    lines += [
        "  " + r
        for r in render.table(
            ["kind", "exec", "trace", "tensor", "kernel", "dtype", "abs-max", "calls", "created at"],
            rows,
            right=(1, 2, 7),
            style=style,
        )
    ]
    if len(rows) < total:
        lines.append(f"  ... {total - len(rows)} more range alerts (-l 0 lists all)")
    return lines


def range_text(alert: dict) -> str:
    """A range alert's abs-max and what makes it one, e.g. "4720 (7.2% of 65504)"."""
    if alert["kind"] == "growth":
        return (
            f"{alert['previous_abs_max']:.4g} -> {alert['abs_max']:.4g} ({alert['growth']:.3g}x per call; "
            f"{alert['dtype_max']:.5g} in {alert['calls_to_overflow']} more at this rate)"
        )
    return f"{alert['abs_max']:.4g} ({100 * alert['fraction_of_max']:.2g}% of {alert['dtype_max']:.5g})"


# -- profile -------------------------------------------------------------------------------


def profile_lines(run: RunReader, names: OpNames, limit: int = 0, style: Style | None = None) -> list[str]:
    style = style or Style()
    table = analysis.profile(run)
    rows_in = table["rows"]
    if not rows_in:
        return ["No kernel executions recorded: nothing to profile."]
    timed = any(r["mean_us"] is not None for r in rows_in)
    shown = rows_in if limit <= 0 else rows_in[:limit]
    rows = []
    for r in shown:
        try:
            op = run.op(r["op_id"])
            n_in, n_out = len(op.inputs), len(op.outputs)
        except KeyError:
            n_in = n_out = "-"
        shape = render.shape_text(r["shape"]) if r["dtype"] else "-"
        rows.append(
            [
                names.name(r["op_id"]),
                r["kernel"] or "-",
                r["calls"],
                f"{r['total_us']:,.1f}",
                render.micros(r["mean_us"]) if r["mean_us"] is not None else "-",
                f"{r['percent']:.2f}",
                f"{r['dtype']} {shape}" if r["dtype"] else "-",
                n_in,
                n_out,
            ]
        )
    lines = [
        f"{len(rows_in)} ops, {table['num_traces']} kernel calls in {table['num_executions']} executions, "
        f"{table['total_us']:,.1f} us of kernel time"
    ]
    if not timed:
        lines.append("(kernel times were not measured in this dump)")
    lines += render.table(
        ["node", "kernel", "calls", "time (us)", "mean (us)", "time (%)", "shape", "inputs", "outputs"],
        rows,
        right=(2, 3, 4, 5, 7, 8),
        style=style,
    )
    if len(shown) < len(rows_in):
        lines.append(f"... {len(rows_in) - len(shown)} more ops (-l 0 lists all)")
    lines.append(f"total: {table['total_us']:,.1f} us")
    return lines


def profile_json(run: RunReader) -> str:
    return analysis.dumps(analysis.profile(run), indent=2)


# -- check ---------------------------------------------------------------------------------


CLEAN, NONFINITE_FOUND, CANNOT_TELL = 0, 1, 2  # `tvmdbg check` exit codes
UNCERTAIN = (
    "This origin is uncertain: records of executions around it are damaged or missing, and the op "
    "that really made the bad value may be among them."
)


def completeness_text(completeness) -> str:
    """What is missing from an incomplete dump, where and why, as sentences."""
    return " ".join(f"{p.message}." for p in completeness.problems) or "the writer is still running."


def _dropped_text(dropped: dict[str, int]) -> str:
    """What the circular buffer dropped, as a phrase ("" when nothing)."""
    parts = []
    if dropped.get(layout.EXECUTION):
        parts.append(f"{dropped[layout.EXECUTION]} calls")
    if dropped.get(layout.GRAPH_EXECUTION_TRACES):
        parts.append(f"{dropped[layout.GRAPH_EXECUTION_TRACES]} kernel outputs")
    return " and ".join(parts)


def check(run: RunReader, names: OpNames, logdir: str, expected_nonfinite: str | None = None) -> tuple[int, str]:
    """(exit code, one paragraph): CLEAN only when the dump is complete and holds no NaN/Inf
    alert (absorbed and expected non-finite outputs are no alerts: analysis.absorption), and,
    where the circular buffer dropped records, its writer counted no call with a NaN/Inf and
    none whose health it did not know; NONFINITE_FOUND when an alert was recorded or a function
    returned NaN/Inf (saying so if the dump is also incomplete); CANNOT_TELL when no NaN/Inf is in what remains but the
    dump is damaged, cut, aborted, incomplete or still being written, records no health or no
    VM call at all, or the ring dropped calls nobody can vouch for."""
    c = _Check(run, names, logdir, expected_nonfinite)
    if run.metadata is None and not c.bad_traces and not c.bad_executions:
        return CANNOT_TELL, f"{c.where}: cannot check, {completeness_text(c.completeness)}"
    if run.metadata is not None and not spec(c.mode).knows_finite:
        return CANNOT_TELL, (
            f"{c.where}: cannot check, the dump was written in mode {mode_name(c.mode)}, which records no "
            "NaN/Inf counts; record it with tensor_debug_mode='FULL_HEALTH' (or CURT_HEALTH, the cheapest)."
        )
    if c.unfinished and not c.bad_traces and not c.bad_executions and not c.masked:
        return NONFINITE_FOUND, f"{c.where}: {_unfinished_text(run, c.unfinished, names)}.{c.incomplete}"
    if not c.bad_traces and not c.bad_executions and not c.masked:
        return c.without_nonfinite()
    return NONFINITE_FOUND, c.with_nonfinite()


class _Check:
    """What `tvmdbg check` weighs about one run, read once, and its two verdicts' texts."""

    def __init__(self, run: RunReader, names: OpNames, logdir: str, expected_nonfinite: str | None):
        self.run, self.names, self.logdir, self.expected_nonfinite = run, names, logdir, expected_nonfinite
        self.completeness = completeness = run.completeness()
        self.traces = traces = run.trace_digests()
        self.executions = run.execution_digests()
        head = analysis.alerts(run, 0, 0, range_end=0, expected_nonfinite=expected_nonfinite)
        monitor = analysis.monitor(run, expected_nonfinite)
        self.bad_traces = monitor.num_alerts() - monitor.num_inner_alerts(run)  # outputs holding NaN/Inf
        # Outputs with NaN/Inf, alerts or not.
        self.nonfinite_traces = int(np.count_nonzero(traces["flags"] & (NONFINITE | INNER_NONFINITE)))
        self.bad_executions = int(np.count_nonzero(self.executions["flags"] & NONFINITE))
        self.not_alerts = _benign_text(head["benign"])
        self.where = f"run {run_label(run)}" if run.name != "." else logdir
        self.incomplete = (
            "" if completeness.complete else f" The dump is {completeness.state}: {completeness_text(completeness)}"
        )
        self.mode = run.metadata.tensor_debug_mode if run.metadata else pb.TENSOR_DEBUG_MODE_UNSPECIFIED
        errors = int(np.count_nonzero(traces["flags"] & HAS_ERROR))
        self.raised = f" {errors} kernel call{'s' if errors > 1 else ''} raised an error (see lt)." if errors else ""
        self.masked = head["num_alerts"] - self.bad_traces
        self.dropped = _dropped_text(completeness.dropped)
        self.counted = run.run_end if run.keyed and run.run_end is not None else None  # the writer's own count
        self.unfinished = head["unfinished"]  # NaN/Inf of calls that never returned

    def without_nonfinite(self) -> tuple[int, str]:
        """No NaN/Inf in what remains: clean, unless what is missing could hold one."""
        where, run, counted, dropped = self.where, self.run, self.counted, self.dropped
        recorded = f"{len(self.traces)} kernel outputs in {len(self.executions)} executions"
        if not self.completeness.complete:
            return CANNOT_TELL, (
                f"{where}: cannot tell, no NaN/Inf in what remains ({recorded}{self.not_alerts}) but the dump is "
                f"{self.completeness.state}: {completeness_text(self.completeness)}"
            )
        if counted is not None and counted.nonfinite_executions and not self.nonfinite_traces:
            return NONFINITE_FOUND, (
                f"{where}: its writer counted {counted.nonfinite_executions} calls with NaN or Inf, but none of "
                "their records is in the dump (they should have been kept whole): the dump is not what was written."
            )
        if not run.keyed and analysis.start_dropped(run):
            return CANNOT_TELL, (
                f"{where}: cannot tell, no NaN/Inf in what remains ({recorded}) but the circular buffer dropped "
                "the oldest calls, and this older dump does not say whether they held NaN or Inf."
            )
        if dropped and (counted is None or counted.unchecked_executions):
            unchecked = counted.unchecked_executions if counted is not None else "some"
            return CANNOT_TELL, (
                f"{where}: cannot tell, no NaN/Inf in what remains ({recorded}) but the circular buffer dropped "
                f"{dropped}, and {unchecked} calls were written with no health recorded."
            )
        if not len(self.traces) and not len(self.executions):
            return CANNOT_TELL, (
                f"{where}: cannot check, no VM call was recorded (did the program run a VM function after "
                "enable_dump_debug_info?)."
            )
        kept = f"; the circular buffer dropped {dropped}, none of which held NaN or Inf" if dropped else ""
        warning = _range_warning(run, self.names)
        if self.not_alerts:
            return CLEAN, (
                f"{where}: no NaN/Inf alert ({recorded}, mode {mode_name(self.mode)}{self.not_alerts}{kept}; "
                f"tvmdbg alerts lists them).{self.raised}{warning}"
            )
        return CLEAN, f"{where}: all finite ({recorded}, mode {mode_name(self.mode)}{kept}).{self.raised}{warning}"

    def with_nonfinite(self) -> str:
        """What holds NaN/Inf, the first origin and where to look closer."""
        run = self.run
        alerts, first, _ = ordered_alerts(run, limit=1, expected_nonfinite=self.expected_nonfinite)
        text = (
            f"{self.where}: {self.bad_traces} of {len(self.traces)} kernel outputs in {len(self.executions)} "
            "executions hold NaN or Inf"
            + (f" ({self.bad_executions} function calls returned non-finite values)" if self.bad_executions else "")
            + (f"; {self.masked} fused kernel calls made NaN/Inf inside that their outputs hide" if self.masked else "")
            + self.not_alerts
            + "."
        )
        closer = ""
        if alerts:
            text += self._first_alert(alerts[0], first)
            name = self.names.name(alerts[0]["op_id"])
            closer = f" Look closer with: tvmdbg analyze {self.logdir}" + (
                f" --run {run.name}" if run.name != "." else ""
            )
            closer += f" -x 'ni {name}' -x 'li {name}'"
        if self.unfinished:
            text += f" Besides, {_unfinished_text(run, self.unfinished, self.names)}."
        return text + _range_warning(run, self.names) + closer + self.raised + self.incomplete

    def _first_alert(self, a: dict, first) -> str:
        run = self.run
        name = self.names.name(a["op_id"])
        fused = ", ".join(
            f"{o['op_type']} {o['var_name']}".strip() + _at_line(o["location"]) for o in a["original_ops"]
        )
        text = (
            f" The first {'origin' if first is not None else 'alert'} is op {name} "
            f"(kernel {a['kernel']}{'; Relax ops ' + fused if fused else ''}) in execution {a['execution_index']}"
            f"{call_text(a)}: {_counts(a)}"
        )
        inputs = _input_health(run, self.names, a)
        if inputs:
            text += f", from inputs {inputs}"
        text += f"; it was created at {_where_created(run, a)}"
        if a.get("inner_op"):
            inner = a["inner_op"]
            text += f" (inside the fused kernel, {inner['op_type']} {inner['var_name']} made it: {_how(a)})"
        text += "."
        if a.get("origin_uncertain"):
            text += f" {UNCERTAIN}"
        if first is None:
            text += (
                " No op made the first bad value inside the traced kernels: it came in through the function's inputs."
            )
        if self.dropped:
            text += (
                f" The circular buffer dropped {self.dropped}; it keeps the records of the first "
                f"{layout.KEPT_NONFINITE_CALLS} calls with NaN or Inf whole, whatever follows."
            )
        return text


def _unfinished_text(run: RunReader, rows: list[dict], names: OpNames) -> str:
    """The NaN/Inf of calls that never returned (analysis/unfinished.py), the first named."""
    a = rows[0]
    more = f" (and {len(rows) - 1} more outputs)" if len(rows) > 1 else ""
    return (
        f"op {names.name(a['op_id'])}:{a['output_slot']} (kernel {a['kernel']}) made {_counts(a)} in execution "
        f"{a['execution_index']}, a call that never returned{more}: the program was killed, or is paused, inside "
        f"it, and the watchpoint hit that saw it is its only record; it was created at {_where_created(run, a)}"
    )


def unfinished_lines(run: RunReader, rows: list[dict], names: OpNames, style: Style) -> list[str]:
    """The NaN/Inf of calls that never returned, one line each, after a heading."""
    if not rows:
        return []
    lines = [
        style(f"{len(rows)} NaN/Inf in calls that never returned", "red")
        + " (the program was killed, or is paused, inside them; watchpoint hits kept them):"
    ]
    for a in rows:
        lines.append(
            f"  {names.name(a['op_id'])}:{a['output_slot']}, kernel {a['kernel']}, in execution "
            f"{a['execution_index']}: {_counts(a)}; created at {_where_created(run, a)}"
        )
    return lines


def _range_warning(run: RunReader, names: OpNames) -> str:
    """A sentence on the first range alert, or "": a warning only, never an exit status (the
    values are still finite, and float8 tensors scaled to their range sit near it by design)."""
    answer = analysis.range_alerts(run, 0, 1)
    if not answer["num_alerts"]:
        return ""
    a = answer["alerts"][0]
    n = answer["num_alerts"]
    return (
        f" Warning: {n} range alert{'s' if n > 1 else ''}; the first, {names.name(a['op_id'])}:{a['output_slot']} "
        f"({a['dtype']}, kernel {a['kernel']}) in execution {a['execution_index']} (trace {a['trace_index']}): "
        f"abs-max {range_text(a)}, created at {_where_created(run, a)}. See tvmdbg alerts."
    )


def _at_line(loc: dict | None) -> str:
    """ " at line 12" for a Python line, " at ONNX node ..." for a node only, "" for neither."""
    if not loc:
        return ""
    return f" at line {loc['line']}" if "file_path" in loc else f" at {render.where(loc, called_from=False)}"


def _benign_text(benign: dict) -> str:
    """ ", 48 non-finite outputs absorbed (intended masking: where, add, absorbed by softmax)"
    or ""."""
    parts = []
    if benign["absorbed"]:
        ops = [o for o in benign["ops"] if o["kind"] == "absorbed"]
        made = sorted({_short_op(o["original_ops"][0]) if o["original_ops"] else o["kernel"] for o in ops})
        readers = sorted({_short_op(t) for o in ops for t in o["absorbed_by"]})
        parts.append(
            f"{benign['absorbed']} non-finite outputs absorbed (intended masking: {', '.join(made)}"
            + (f", absorbed by {', '.join(readers)}" if readers else "")
            + ")"
        )
    if benign["expected"]:
        parts.append(f"{benign['expected']} expected by {benign['expected_nonfinite']!r}")
    return "".join(f"; {p}" for p in parts)


def _origin_kind(alert: dict) -> str:
    """What makes the alert an origin: its op made the value, or brought it in from a weight."""
    weights = [p["name"] for p in alert.get("bad_parameters", ()) if p["weight"]]
    if weights:
        return f"the first op to read the weight{'s' if len(weights) > 1 else ''} {', '.join(weights)}, holding NaN/Inf"
    return "an op whose inputs were finite"


def _bad_input_kind(alerts: list[dict]) -> str:
    """What the first alert read that held NaN/Inf: " (the weight w1)", " (the function's input
    x: the caller's data)", or " (state an earlier call wrote: ...)"; "" when unknown."""
    bad = alerts[0].get("bad_parameters") or []
    weights = [p["name"] for p in bad if p["weight"]]
    data = [p["name"] for p in bad if not p["weight"]]
    if weights:
        return f" (the weight{'s' if len(weights) > 1 else ''} {', '.join(weights)})"
    if data:
        return f" (the function's input{'s' if len(data) > 1 else ''} {', '.join(data)}: the caller's data)"
    if alerts[0].get("state"):
        return f" (state an earlier call wrote: {', '.join(alerts[0]['state'])})"
    return ""


def call_text(alert: dict) -> str:
    """ " (decode, call 5)": the alert's function and, when its VM made several calls of it,
    which one (the step of a generation loop), and " of VM 2" when several VMs called it (two
    models with the same function names, or threads: each VM counts its own calls); "" when
    unknown."""
    if not alert.get("function_name"):
        return ""
    number = alert.get("call")
    several = number is not None and (number > 1 or alert.get("function_calls", 0) > 1)
    call = f", call {number}" if several else ""
    vm = f" of VM {alert['vm']}" if alert.get("function_vms", 1) > 1 and alert.get("vm") else ""
    return f" ({alert['function_name']}{call}{vm})"


def _where_created(run: RunReader, alert: dict) -> str:
    """The alert's source line, or why there is none."""
    if alert.get("location"):
        return render.where(alert["location"])
    try:
        graph = run.graph(run.op(alert["op_id"]).graph_id)
    except KeyError:
        return "an unknown line (the op's graph is not in the dump)"
    if not graph.source_mapped:
        return (
            "an unknown line (the executable was compiled before tvmdbg was enabled or loaded from a library, "
            "so its kernels carry no source mapping)"
        )
    return "an unknown line (the frontend that built this op recorded no source location)"


def input_health(run: RunReader, op: pb.GraphOpCreation, execution_index: int, style: Style | None = None) -> list[str]:
    """The health of each input of op in one execution: "finite", "nan:3", "not recorded"
    (a producer's output was not traced), "-" (unknown: a constant or a builtin's result)."""
    style = style or Style()
    digests = run.trace_digests()
    same = run.execution_trace_indices(execution_index)
    execution = None
    out = []
    for inp in op.inputs:
        if inp.kind == pb.OpInput.OP_OUTPUT:
            hits = same[
                (digests["op_id"][same] == inp.producer_op_id)
                & (digests["output_slot"][same] == inp.producer_output_slot)
            ]
            if not len(hits):
                out.append("not recorded")
                continue
            row = digests[int(hits[-1])]
            if not row["flags"] & HEALTH_KNOWN:
                out.append("-")
            else:
                out.append(render.counts_text((int(row["nan"]), int(row["neg_inf"]), int(row["pos_inf"])), style))
        elif inp.kind == pb.OpInput.PARAM:
            if execution is None:
                hits = np.flatnonzero(run.execution_digests()["index"] == execution_index)
                execution = run.execution(int(hits[-1])) if len(hits) else pb.Execution()
            health = "-"
            if inp.param_index < len(execution.inputs):
                summary = execution.inputs[inp.param_index]
                if inp.HasField("tuple_item") and inp.tuple_item < len(summary.items):
                    summary = summary.items[inp.tuple_item]  # the item the op reads, not the tuple's total
                health = render.health_text(execution.tensor_debug_mode, summary.debug_values, style)
            out.append(health)
        else:
            out.append("-")
    return out


def _input_health(run: RunReader, names: OpNames, alert: dict) -> str:
    """The health of each input of the alert's op in the same execution, as one phrase."""
    try:
        op = run.op(alert["op_id"])
    except KeyError:
        return ""
    parts = []
    weights = {p["name"] for p in alert.get("bad_parameters", ()) if p["weight"]}
    state = set(alert.get("state", ()))
    for inp, health in zip(op.inputs, input_health(run, op, alert["execution_index"])):
        if inp.kind == pb.OpInput.OP_OUTPUT:
            parts.append(f"{names.name(inp.producer_op_id)}:{inp.producer_output_slot} {health}")
        elif inp.kind == pb.OpInput.PARAM:
            what = "weight" if inp.name in weights else f"parameter {inp.param_index}"
            if inp.name in state:
                what += ", an object whose state earlier calls wrote"
            parts.append(f"{inp.name or '?'} ({what}) {health}")
        elif inp.kind == pb.OpInput.CONSTANT:
            parts.append(f"{inp.name or '?'} (constant)")
    return ", ".join(parts)
