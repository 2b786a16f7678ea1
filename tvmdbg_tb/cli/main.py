"""`tvmdbg`: the command line. Subcommands parse here and call the module that does the work.

Nothing imported at startup touches TVM: only `tvmdbg run` (which runs a TVM program) does.
"""

from __future__ import annotations

import argparse
import sys
import textwrap

from tvmdbg_tb.cli.session import CliError
from tvmdbg_tb.cli.terminal import guarded
from tvmdbg_tb.events.options import checked_regex

DESCRIPTION = """\
tvmdbg: a debugger for Apache TVM models, in the terminal.

A program records a dump with one line,
    tvmdbg.enable_dump_debug_info(LOGDIR, tensor_debug_mode="FULL_HEALTH")
and these commands read it: find the first kernel that produced a NaN or Inf, the
Relax ops fused into it, its inputs and the line of Python that created it."""

EPILOG = """\
examples:
  tvmdbg analyze /tmp/logdir                 interactive analyzer (lt, pt, ni, alerts, ...)
  tvmdbg alerts /tmp/logdir                  NaN/Inf alerts, the first origin first
  tvmdbg check /tmp/logdir && echo clean     exit status 1 when a NaN/Inf was recorded
  tvmdbg profile /tmp/logdir                 per-op kernel time table
  tvmdbg run -f has_inf_or_nan train.py      run a script, stop at the first VM call with NaN/Inf
  tvmdbg compare /tmp/fp16 /tmp/fp32         op-by-op errors against a reference run, first divergent op

`tvmdbg COMMAND --help` describes each command."""


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def _add_logdir(parser: argparse.ArgumentParser, all_runs: bool = False) -> None:
    parser.add_argument("logdir", metavar="LOGDIR", help="the directory given to enable_dump_debug_info")
    parser.add_argument(
        "--run",
        metavar="NAME",
        help="the run (one process's dump, a subdirectory) to read; default: "
        + (
            "every run"
            if all_runs
            else "the only run, or of several the one whose first NaN/Inf came first, else the newest"
        ),
    )


def _regex(text: str) -> str:
    try:
        return checked_regex("REGEX", text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _add_expected(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--expected-nonfinite",
        metavar="REGEX",
        type=_regex,
        default=None,
        help="ops whose non-finite outputs are intended (REGEX is searched in op names, kernels, Relax op "
        "types and vars): listed apart as expected, not alerts; default: the run's "
        "enable_dump_debug_info(expected_nonfinite=...). See docs/nonfinite.md",
    )


def build_parser() -> argparse.ArgumentParser:
    from tvmdbg_tb import __version__

    parser = argparse.ArgumentParser(prog="tvmdbg", description=DESCRIPTION, epilog=EPILOG, formatter_class=_formatter)
    parser.add_argument("--version", action="version", version=f"tvmdbg {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    for add in (_add_analyze, _add_alerts, _add_check, _add_profile, _add_replay, _add_compare, _add_run):
        add(sub)
    return parser


def _add_analyze(sub) -> None:
    p = sub.add_parser(
        "analyze",
        help="open the interactive analyzer on a dump",
        description=textwrap.dedent(
            """\
            Open an interactive prompt over one run of a dump, with tfdbg's commands:
              lt       list kernel outputs (traces); -n/-t filter by op/kernel, -f by tensor filter
              pt       print a kernel output: summary, or values (FULL_TENSOR) with numpy slicing
              ni       op info: kernel, Relax ops fused into it, inputs, outputs, source line
              li / lo  inputs / consumers of an op, -r recursively
              ps / ls  a source file annotated with its ops / the list of source files
              le       list executions (top-level VM calls)
              alerts   NaN/Inf alerts, the first origin first
              profile  per-op time table
              ri       run info
              help     help on any command
            History and tab completion (commands, op names) work in a terminal; `> FILE` saves
            a command's output. Standard input may also be a pipe of commands."""
        ),
        epilog=textwrap.dedent(
            """\
            examples:
              tvmdbg analyze /tmp/logdir
              tvmdbg analyze /tmp/logdir --run 20260101-120000_host_pid42
              tvmdbg analyze /tmp/logdir -x alerts -x 'ni lv3' -x 'pt lv3'
              echo 'lt -f has_inf_or_nan' | tvmdbg analyze /tmp/logdir"""
        ),
        formatter_class=_formatter,
    )
    _add_logdir(p)
    p.add_argument(
        "-x",
        "--execute",
        metavar="CMD",
        action="append",
        default=[],
        help="run CMD (an analyzer command) and exit instead of prompting; may repeat",
    )


def _add_alerts(sub) -> None:
    p = sub.add_parser(
        "alerts",
        help="list NaN/Inf alerts, the first origin first",
        description=textwrap.dedent(
            """\
            List the NaN/Inf alerts of a run: each kernel output holding a NaN, +Inf or -Inf,
            with its op, kernel, counts, execution and the user's source line. An origin alert
            is one whose op had finite inputs (it made the bad value); the first origin alert is
            listed first: it is where to look. In FULL_STATS runs, range alerts follow: float
            outputs whose abs-max comes within 16x of their dtype's largest value, or grows more
            than 2x per call toward it (docs/range_alerts.md): the overflow before the inf."""
        ),
        epilog=textwrap.dedent(
            """\
            examples:
              tvmdbg alerts /tmp/logdir
              tvmdbg alerts /tmp/logdir --json | python -m json.tool"""
        ),
        formatter_class=_formatter,
    )
    _add_logdir(p)
    _add_expected(p)
    p.add_argument("--json", action="store_true", help="print the alert objects of the plugin's `alerts` route")
    p.add_argument(
        "-l", "--limit", type=int, default=0, help="alerts to print (with --json: the first N), 0 for all (default: 0)"
    )


def _add_check(sub) -> None:
    p = sub.add_parser(
        "check",
        help="exit with status 1 if any NaN/Inf was recorded (a CI assertion)",
        description=textwrap.dedent(
            """\
            Check that no NaN or Inf was recorded. Exit status 0 when every recorded output is
            finite; 1, with a one-paragraph diagnosis naming the first kernel that produced a
            non-finite value, its Relax ops and source line, when one is not; 2 when the dump
            cannot be read. Needs a dump written in a health mode (CURT_HEALTH, CONCISE_HEALTH,
            FULL_HEALTH) or FULL_TENSOR. Range alerts (FULL_STATS) add a warning to the
            paragraph but never change the exit status: the values are still finite."""
        ),
        epilog=textwrap.dedent(
            """\
            examples:
              python train.py && tvmdbg check /tmp/logdir
              tvmdbg check /tmp/logdir --run 20260101-120000_host_pid42 --quiet"""
        ),
        formatter_class=_formatter,
    )
    _add_logdir(p, all_runs=True)
    _add_expected(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")


def _add_profile(sub) -> None:
    p = sub.add_parser(
        "profile",
        help="per-op kernel time table",
        description=textwrap.dedent(
            """\
            Print the per-op time table, as TVM's old debug executor did: for each kernel call
            site, its kernel, total time, share of the total, output shape, inputs and outputs,
            slowest first."""
        ),
        epilog="examples:\n  tvmdbg profile /tmp/logdir\n  tvmdbg profile /tmp/logdir -l 20",
        formatter_class=_formatter,
    )
    _add_logdir(p)
    p.add_argument("-l", "--limit", type=int, default=0, help="rows to print, 0 for all (default: 0)")
    p.add_argument("--json", action="store_true", help="print the table as the plugin's `profile` route does")


def _add_replay(sub) -> None:
    p = sub.add_parser(
        "replay",
        help="show a fused kernel call replayed op by op, or why it cannot be",
        description=textwrap.dedent(
            """\
            Show one fused kernel call re-run op by op (its Relax ops unfused, on the kernel's
            inputs of that execution): the health of every inner op's output and the op that
            made the first NaN/Inf, with its line. Replays are made while the program runs
            (the first NaN/Inf origin of a run automatically; every fused call with
            trace_fused_ops=True); for other calls this says why none exists. Exit status 0
            with a replay, 1 when it failed, 2 when there is none."""
        ),
        epilog="examples:\n  tvmdbg replay /tmp/logdir --execution 9 --op lv6",
        formatter_class=_formatter,
    )
    _add_logdir(p)
    p.add_argument("--execution", type=int, required=True, metavar="N", help="the execution index of the call")
    p.add_argument("--op", required=True, metavar="NAME", help="the kernel call site (op name, #id or kernel)")


def _add_compare(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="compare two runs op by op (a TVM build against another, or against PyTorch eager)",
        description=textwrap.dedent(
            """\
            Align two runs recorded in FULL_STATS (or FULL_TENSOR) by Relax op identity (op
            type, your source line, occurrence, the fused kernel's last op), print each op's
            error in A's execution order, and name the first divergent op: the first beyond
            tolerance whose inputs were within it. B is the reference (PyTorch eager, or the
            float32 build). Exit status: 0 within tolerance, 1 divergent, 2 cannot compare."""
        ),
        epilog=textwrap.dedent(
            """\
            examples:
              tvmdbg compare /tmp/run_fp16 /tmp/run_fp32 --rtol 1e-2 --atol 1e-2
              tvmdbg compare /tmp/tvm_logdir /tmp/torch_reference --json
              tvmdbg compare /tmp/a /tmp/b --all-calls --call 2   (call i of A against call i of B)"""
        ),
        formatter_class=_formatter,
    )
    p.add_argument("run_a", metavar="RUN_OR_LOGDIR_A", help="the run under test (a run directory or a logdir)")
    p.add_argument("run_b", metavar="RUN_OR_LOGDIR_B", help="the reference run")
    p.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance (default: 1e-4)")
    p.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (default: 1e-5)")
    p.add_argument("--json", action="store_true", help="print one JSON object (key first_divergence)")
    p.add_argument("--call", type=int, metavar="K", help="show the K-th call (from 0; default: the first divergent)")
    p.add_argument("--function", metavar="NAME", help="only this function's calls (default: all)")
    p.add_argument("--all-calls", action="store_true", help="also list every call pair's verdict")


def _add_run(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a Python script under tvmdbg and stop at a chosen VM call",
        description=textwrap.dedent(
            """\
            Run SCRIPT with tvmdbg's dump enabled. After each top-level VM function call
            (vm["main"](...), ...), its kernel outputs are checked against a tensor filter; at
            the first call with a match the program pauses and the analyzer opens on the live
            dump. There, `run` continues to the next call, `run -t N` for N calls, `run -f
            FILTER` until the next match, `run --no_break` to the end; `quit` ends the program.
            Without -f, the program stops after its first VM call.

            Filters: has_inf_or_nan (built in), or any fn(trace, value) -> bool the script
            registers with tvmdbg.register_tensor_filter(NAME, fn)."""
        ),
        epilog=textwrap.dedent(
            """\
            examples:
              tvmdbg run -f has_inf_or_nan train.py --lr 7
              tvmdbg run --dump_dir /tmp/logdir --tensor_debug_mode FULL_TENSOR model.py
              tvmdbg run -f too_large -x 'alerts' -x 'run -f too_large' script.py"""
        ),
        formatter_class=_formatter,
    )
    p.add_argument(
        "-f", "--tensor_filter", metavar="FILTER", help="stop at the first VM call with an output passing it"
    )
    p.add_argument(
        "--watch",
        metavar="SPEC",
        action="append",
        help="stop after a VM call in which a watchpoint hit: CONDITION[:key=value,...], e.g. nan_or_inf, "
        "abs_above:threshold=1e3,op_regex=matmul, value_range:min=-1,max=1, all_zero:op_name=lv3, changed:threshold=50",
    )
    p.add_argument(
        "--live", action="store_true", help="also let the TensorBoard tab pause and step the program (live=True)"
    )
    p.add_argument("--dump_dir", metavar="DIR", help="where the dump goes (default: a new temporary directory)")
    p.add_argument(
        "--model_code",
        metavar="PLACES",
        help="which files count as the model's code, where an op's line is shown: module names, files or "
        "directories, comma-separated ('' for your own files only; default: your files and installed packages "
        "other than TVM, PyTorch, NumPy; docs/source-lines.md)",
    )
    p.add_argument(
        "--tensor_debug_mode",
        metavar="MODE",
        default="FULL_HEALTH",
        help="NO_TENSOR, CURT_HEALTH, CONCISE_HEALTH, FULL_HEALTH (default), SHAPE, FULL_TENSOR or FULL_STATS",
    )
    p.add_argument(
        "--circular_buffer_size",
        type=int,
        default=-1,
        metavar="N",
        help="executions and traces kept, <= 0 for all (default: -1)",
    )
    p.add_argument(
        "--circular_buffer_bytes",
        type=int,
        metavar="BYTES",
        help="bytes kept in each ring file (executions, traces), the oldest records going first; 0: no byte bound "
        "(default: 256 MiB when --circular_buffer_size > 0, else no bound)",
    )
    p.add_argument(
        "-x",
        "--execute",
        metavar="CMD",
        action="append",
        default=[],
        help="at each stop, run these analyzer commands instead of prompting (the last should be run or quit)",
    )
    p.add_argument("script", metavar="SCRIPT", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the script")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "run":  # the user's script writes as it likes; the runner guards its own output
        from tvmdbg_tb.cli import runner

        return _dispatch(args, runner.main)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = guarded(sys.stdout), guarded(sys.stderr)  # a dump's text is shown, never obeyed
    try:
        if args.command == "compare":
            from tvmdbg_tb.cli import compare

            return _dispatch(args, compare.main)
        from tvmdbg_tb.cli import commands

        return _dispatch(args, getattr(commands, args.command))
    finally:
        sys.stdout, sys.stderr = saved


def _dispatch(args, command) -> int:
    try:
        return command(args)
    except CliError as error:
        print(f"tvmdbg {args.command}: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `tvmdbg ... | head`: the reader left; say nothing more.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
