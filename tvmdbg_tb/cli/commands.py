"""The subcommands that read a dump: analyze, alerts, check, profile, replay."""

from __future__ import annotations

import sys

from tvmdbg_tb.cli import reports
from tvmdbg_tb.cli.analyzer import Analyzer
from tvmdbg_tb.cli.render import Style
from tvmdbg_tb.cli.session import OpNames, open_logdir, pick_run, warn_damage
from tvmdbg_tb.cli.shell import run_commands


def analyze(args) -> int:
    reader = open_logdir(args.logdir)
    run = pick_run(reader, args.run, notes=sys.stderr)
    analyzer = Analyzer(run)
    if args.execute:
        run_commands(analyzer, args.execute)
        return 0
    intro = f"tvmdbg analyzer: run {run.name}, {run.num_executions()} executions, {run.num_traces()} kernel outputs"
    alerts, first, total = reports.ordered_alerts(run, limit=1)
    if total:
        where = f"; the first origin is {analyzer.names.name(alerts[0]['op_id'])}" if first is not None else ""
        intro += f", {total} NaN/Inf alerts{where} (type alerts)"
    intro += ". Type help for commands, quit to leave."
    analyzer.cmdloop(intro)
    return 0


def alerts(args) -> int:
    reader = open_logdir(args.logdir)
    run = pick_run(reader, args.run, notes=sys.stderr)
    expected = args.expected_nonfinite
    if args.json:
        reports.write_alerts_json(run, sys.stdout, limit=args.limit, expected_nonfinite=expected)
        return 0
    style = Style.for_stream(sys.stdout)
    lines = reports.alert_lines(
        run, OpNames(run), limit=args.limit, style=style, more="-l 0 lists all", expected_nonfinite=expected
    )
    print("\n".join(lines))
    return 0


def profile(args) -> int:
    reader = open_logdir(args.logdir)
    run = pick_run(reader, args.run, notes=sys.stderr)
    if args.json:
        print(reports.profile_json(run))
        return 0
    print("\n".join(reports.profile_lines(run, OpNames(run), limit=args.limit, style=Style.for_stream(sys.stdout))))
    return 0


def check(args) -> int:
    """0 when every run is complete and finite, 1 when one holds NaN/Inf, 2 when one cannot
    be told (no health recorded, or incomplete with nothing found: see reports.check)."""
    with open_logdir(args.logdir) as reader:  # its files closed when called in-process (main([...]))
        return _check_runs(reader, args)


def _check_runs(reader, args) -> int:
    # Without --run, every run, in the order every command shows them (the first NaN/Inf first).
    names = [pick_run(reader, args.run).name] if args.run else reader.ordered_runs()
    status = reports.CLEAN
    for name in names:
        run = reader.run(name)
        code, text = reports.check(run, OpNames(run), args.logdir, args.expected_nonfinite)
        warn_damage(run, sys.stderr, "tvmdbg check")
        if code == reports.CANNOT_TELL:
            print(text, file=sys.stderr)
            status = max(status, code) if status != reports.NONFINITE_FOUND else status
        elif code == reports.CLEAN:
            if not args.quiet:
                print(text)
        else:
            print(text)
            status = reports.NONFINITE_FOUND
    return status


def replay(args) -> int:
    from tvmdbg_tb.cli.inner import replay_command

    reader = open_logdir(args.logdir)
    run = pick_run(reader, args.run, notes=sys.stderr)
    return replay_command(run, OpNames(run), args.execution, args.op)
