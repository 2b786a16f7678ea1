"""The Relax ops inside a fused kernel in the terminal: `ni`/`li` sections and `tvmdbg replay`.

Reads FusedOpReplay records (tvmdbg_tb.replay wrote them while the program ran) through the
reader; nothing here imports TVM.
"""

from __future__ import annotations

import sys

from tvmdbg_tb.analysis.inner_ops import replay_json
from tvmdbg_tb.cli import render
from tvmdbg_tb.cli.render import Style
from tvmdbg_tb.cli.session import CliError
from tvmdbg_tb.events.modes import mode_name, spec
from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb


def _record(run: RunReader, op_id: int, execution: int | None) -> pb.FusedOpReplay | None:
    if execution is not None:
        return run.replay_of(execution, op_id)
    found = run.replays(op_id)
    return found[-1] if found else None


def _health(output: dict) -> str:
    s = output["summary"]
    if not s:
        return "?"
    bad = [
        f"{name}:{int(s[key])}" for name, key in (("nan", "nan"), ("-inf", "neg_inf"), ("+inf", "pos_inf")) if s[key]
    ]
    return " ".join(bad) if bad else "finite"


def replay_lines(run: RunReader, data: dict, style: Style) -> list[str]:
    """A replay as a table: each inner op, its output health, the one that made the value."""
    head = f"Inner ops of {data['kernel']} replayed op by op in execution {data['execution_index']} ({data['trigger']})"
    lines = [head + (f": {data['note']}" if data["note"] else ":")]
    if data["error"]:
        lines.append(f"  not replayed: {data['error']}")
    rows = []
    for op in data["ops"]:
        refs = ", ".join(
            f"op {r}" if r >= 0 else ("const" if r <= -1_000_000 else f"input {-1 - r}") for r in op["input_refs"]
        )
        health = ", ".join(_health(o) for o in op["outputs"]) or "-"
        mark = "<- made it" if op["origin"] else ""
        rows.append(
            [
                op["index"],
                op["var_name"],
                op["op_type"],
                refs,
                health,
                mark,
                render.where(op["location"], called_from=False),
            ]
        )
    lines += [
        "  " + r
        for r in render.table(["#", "var", "op", "reads", "output health", "", "created at"], rows, style=style)
    ]
    if data["ops"] and not data["error"] and not data["matches_kernel"]:
        lines.append("  note: the replayed output's health differs from the kernel's (inputs updated in place?)")
    return lines


def ni_lines(run: RunReader, op: pb.GraphOpCreation, execution: int | None, style: Style) -> list[str]:
    """The `ni` section: the op's replay in that execution (or its latest), if any."""
    record = _record(run, op.op_id, execution) or _record(run, op.op_id, None)
    if record is None:
        if len(op.original_ops) > 1:
            return [
                "Inner ops: not replayed (only the first NaN/Inf origin of a run is; trace_fused_ops=True replays all)"
            ]
        return []
    return replay_lines(run, replay_json(run, record), style)


def li_lines(run: RunReader, op: pb.GraphOpCreation, execution: int | None) -> list[str]:
    """The `li` section: how the inner ops read the kernel's inputs and each other."""
    record = _record(run, op.op_id, execution) or _record(run, op.op_id, None)
    if record is None:
        return []
    names = [inp.name or f"input {k}" for k, inp in enumerate(op.inputs)]
    lines = [f"Inner ops (replay of execution {record.execution_index}):"]
    for inner in record.ops:
        reads = []
        for r in inner.input_refs:
            if r >= 0:
                reads.append(record.ops[r].var_name if r < len(record.ops) else f"op {r}")
            elif r <= -1_000_000:
                reads.append("const")
            else:
                reads.append(f"{names[-1 - r]}" if -1 - r < len(names) else f"input {-1 - r}")
        lines.append(f"  {inner.var_name} = {inner.op_type}({', '.join(reads)})")
    return lines


def replay_command(run: RunReader, names, execution: int, op_name: str, out=sys.stdout) -> int:
    """`tvmdbg replay`: the replay of one kernel call, or why there is none."""
    op = names.resolve(op_name)
    style = Style.for_stream(out)
    record = run.replay_of(execution, op.op_id)
    if record is not None:
        print("\n".join(replay_lines(run, replay_json(run, record), style)), file=out)
        return 0 if not record.error else 1
    name = names.name(op.op_id)
    if len(op.original_ops) < 2:
        raise CliError(
            f"op {name} (kernel {op.kernel}) holds {len(op.original_ops)} Relax op(s): there is nothing to replay, "
            "its location is already the op's own line"
        )
    executions = set(run.trace_digests()["execution_index"][run.op_trace_indices(op.op_id)].tolist())
    if execution not in executions:
        raise CliError(f"op {name} has no trace in execution {execution} (executions: {_span(executions)})")
    mode = run.metadata.tensor_debug_mode if run.metadata else pb.TENSOR_DEBUG_MODE_UNSPECIFIED
    replayed = sorted({int(r.execution_index) for r in run.replays(op.op_id)})
    known = f"; replays of {name} exist for executions {replayed}" if replayed else ""
    if not spec(mode).values:
        raise CliError(
            f"the inputs of {name} (kernel {op.kernel}) in execution {execution} were not captured: the dump was "
            f"written in mode {mode_name(mode)}, which keeps no tensor values{known}. Replays are made while the "
            "program runs: automatically for a run's first NaN/Inf origin, for every fused call with "
            "enable_dump_debug_info(..., trace_fused_ops=True), or at the error with "
            "enable_check_numerics(trace_fused_ops=True)"
        )
    from tvmdbg_tb.replay.group import ReplayError
    from tvmdbg_tb.replay.offline import replay_recorded

    try:
        record = replay_recorded(run, op, execution)
    except ReplayError as error:
        raise CliError(f"cannot replay {name} in execution {execution}: {error}") from None
    print("\n".join(replay_lines(run, replay_json(run, record), style)), file=out)
    return 0


def _span(values: set[int]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    return f"{ordered[0]}..{ordered[-1]}" if len(ordered) > 3 else ", ".join(map(str, ordered))
