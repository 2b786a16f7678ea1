"""`tvmdbg run`: run a script with the dump on, and stop it after a chosen top-level VM call.

The instrumentation calls a listener after each top-level VM function call with the call's
Execution and its kernel traces. The BreakController decides there whether to stop (the
call's outputs pass a tensor filter, or N calls went by); stopping means flushing the dump and
opening the analyzer on it while the program waits inside the listener. `run` in the
analyzer returns from the listener and the program goes on.

This is the only part of the CLI that imports TVM (through the instrumentation).
"""

from __future__ import annotations

import os
import runpy
import sys
import tempfile
import threading
import traceback
from collections.abc import Sequence

from tvmdbg_tb.cli import filters
from tvmdbg_tb.cli.analyzer import Analyzer
from tvmdbg_tb.cli.session import CliError
from tvmdbg_tb.cli.shell import run_commands
from tvmdbg_tb.cli.terminal import guarded
from tvmdbg_tb.events.modes import mode_name, mode_value, spec
from tvmdbg_tb.events.reader import DebugDataReader
from tvmdbg_tb.proto import debug_event_pb2 as pb


class QuitProgram(SystemExit):
    """Raised from the listener when the user quits: ends the program like sys.exit(0)."""

    def __init__(self):
        super().__init__(0)


class BreakController:
    """Decides after each top-level VM call whether to stop, and runs the analyzer when so."""

    def __init__(
        self,
        logdir: str,
        run_name: str,
        flush=None,
        tensor_filter: str | None = None,
        commands: Sequence[str] = (),
        stdin=None,
        stdout=None,
        watch_hits=None,
    ):
        self.logdir = logdir
        self.run_name = run_name
        self.flush = flush or (lambda: None)
        self.commands = list(commands)
        self.stdin = stdin
        self.stdout = guarded(stdout or sys.stdout)  # the dump's names, shown as text
        self.calls = 0
        self.stops: list[int] = []  # Execution.index of each stop
        self._lock = threading.Lock()  # one thread at a time decides and stops
        self._reader: DebugDataReader | None = None
        # watchpoint hits (tvmdbg_tb.live) so far: a call that adds hits stops the program
        self.watch_hits = watch_hits
        self._seen_hits = 0
        stop_first = not tensor_filter and watch_hits is None
        self._set(times=1 if stop_first else None, tensor_filter=tensor_filter, no_break=False)
        self.quitting = False
        self._resumed = False

    def _set(self, times: int | None, tensor_filter: str | None, no_break: bool) -> None:
        self.remaining = times
        self.tensor_filter = tensor_filter
        self.no_break = no_break

    # -- the listener ----------------------------------------------------------------------

    def on_call(self, execution: pb.Execution, traces: Sequence[pb.GraphExecutionTrace]) -> None:
        """The instrumentation's listener: called after each top-level VM call."""
        with self._lock:
            if self.quitting:
                raise QuitProgram()
            self.calls += 1
            reason = self._reason(execution, traces)
            if reason is not None:
                self._stop(execution, reason)

    def _reason(self, execution: pb.Execution, traces: Sequence[pb.GraphExecutionTrace]) -> str | None:
        if self.no_break:
            return None
        if self.watch_hits is not None:
            total, first = self.watch_hits(self._seen_hits)
            new, self._seen_hits = total - self._seen_hits, total
            if first is not None:
                return (
                    f"{new} watchpoint hit{'s' if new > 1 else ''}, the first {first['description']} "
                    f"at {first['op_name']}:{first['output_slot']} (kernel {first['kernel']}): {first['detail']}"
                )
        if self.tensor_filter is not None:
            try:
                fn = filters.get_tensor_filter(self.tensor_filter)
            except KeyError as error:
                self.tensor_filter = None
                return f"{error.args[0]} (register it before the first VM call)"
            hits = [t for t in traces if _matches(fn, t)]
            if not hits:
                return None
            first = hits[0]
            return (
                f"{len(hits)} of its {len(traces)} kernel outputs pass filter {self.tensor_filter}, "
                f"the first {first.op_name}:{first.output_slot} (kernel {first.kernel})"
            )
        if self.remaining is not None:
            self.remaining -= 1
            if self.remaining <= 0:
                return f"{len(traces)} kernel outputs recorded"
        return None

    def _stop(self, execution: pb.Execution, reason: str) -> None:
        self.stops.append(int(execution.index))
        self.flush()
        if self._reader is None:
            self._reader = DebugDataReader(self.logdir)
        self._reader.update()
        try:
            run = self._reader.run(self.run_name)
        except KeyError:
            self.stdout.write(f"tvmdbg run: the dump {self.logdir}/{self.run_name} cannot be read; continuing\n")
            return
        self.stdout.write(
            f"\ntvmdbg run: stopped after VM call {self.calls} ({execution.function_name}, execution "
            f"{execution.index}): {reason}.\n"
            "Type `run` to continue (run -t N, run -f FILTER, run --no_break), `quit` to end the program, "
            "`help` for commands.\n"
        )
        self.stdout.flush()
        self._resumed = False  # leaving the analyzer without `run` ends the program
        analyzer = Analyzer(run, stdin=self.stdin, stdout=self.stdout, controller=self)
        if not (self.commands and run_commands(analyzer, self.commands)):
            analyzer.cmdloop()
        if not self._resumed:
            self.on_quit()
        if self.quitting:
            raise QuitProgram()

    # -- called by the analyzer's `run` and `quit` -----------------------------------------

    def resume(self, times: int | None = None, tensor_filter: str | None = None, no_break: bool = False) -> str:
        if times is not None and times < 1:
            raise CliError("run -t needs N >= 1")
        self._resumed = True
        if no_break:
            self._set(None, None, True)
            return "Continuing to the end of the program without stopping."
        if tensor_filter:
            self._set(None, tensor_filter, False)
            return f"Continuing until a VM call has an output passing {tensor_filter}."
        n = times or 1
        self._set(n, None, False)
        return f"Continuing for {n} VM call{'s' if n > 1 else ''}."

    def on_quit(self) -> None:
        self.quitting = True


def _matches(fn: filters.TensorFilter, trace: pb.GraphExecutionTrace) -> bool:
    try:
        return filters.passes(fn, trace)
    except Exception as error:  # a broken filter stops the program rather than hiding a hit
        print(
            f"tvmdbg run: tensor filter raised {error!r} on {trace.op_name}; counted as a match",
            file=guarded(sys.stderr),
        )
        return True


# -- the subcommand ------------------------------------------------------------------------


def _add_watchpoints(specs: Sequence[str], live: bool):
    """Adds --watch watchpoints (the live machinery's); returns the hit counter, or None."""
    if not specs:
        return None
    from tvmdbg_tb.live import api as live_api
    from tvmdbg_tb.live.watchpoints import WatchpointError, parse_watch_spec

    try:
        for spec in specs:
            condition, options = parse_watch_spec(spec)
            live_api.add_watchpoint(condition, pause=live, **options)
    except WatchpointError as error:
        from tvmdbg_tb import debugger

        debugger.disable_dump_debug_info()
        raise CliError(f"--watch: {error}") from None
    return live_api.watchpoint_hits_since


def main(args) -> int:
    script = args.script
    if not os.path.isfile(script):
        raise CliError(f"{script}: no such file")
    mode = _checked_mode(args)
    from tvmdbg_tb import debugger  # imports TVM: only this subcommand does

    writer = _start_dump(debugger, args, mode)
    watch_hits = _add_watchpoints(getattr(args, "watch", None) or [], getattr(args, "live", False))
    controller = BreakController(
        writer.logdir,
        writer.run_id,
        flush=writer.flush,
        tensor_filter=args.tensor_filter,
        commands=args.execute,
        watch_hits=watch_hits,
    )
    print(
        f"tvmdbg run: dumping {mode_name(mode)} to {writer.run_dir}; "
        + (
            f"stopping at the first VM call passing {args.tensor_filter}."
            if args.tensor_filter
            else "stopping after the first VM call."
        ),
        file=guarded(sys.stderr),
    )
    status, outcome = _run_script(debugger, script, args.args, writer, controller)
    print(
        f"tvmdbg run: {os.path.basename(script)} {outcome} after {controller.calls} VM calls "
        f"({len(controller.stops)} stops). Its dump: tvmdbg analyze {writer.logdir}",
        file=guarded(sys.stderr),
    )
    return status


def _checked_mode(args) -> int:
    """--tensor_debug_mode, and whether it records what --tensor_filter needs."""
    try:
        mode = mode_value(args.tensor_debug_mode)
    except ValueError as error:
        raise CliError(str(error)) from None
    if args.tensor_filter == "has_inf_or_nan" and not spec(mode).knows_finite:
        raise CliError(
            f"filter has_inf_or_nan needs NaN/Inf counts, which mode {mode_name(mode)} does not record; "
            "use --tensor_debug_mode FULL_HEALTH (the default) or CURT_HEALTH"
        )
    return mode


def _start_dump(debugger, args, mode: int):
    """The dump's writer (into --dump_dir, else a new temporary directory)."""
    dump_dir = args.dump_dir or tempfile.mkdtemp(prefix="tvmdbg_run_")
    try:
        writer = debugger.enable_dump_debug_info(
            dump_dir,
            tensor_debug_mode=mode_name(mode),
            circular_buffer_size=args.circular_buffer_size,
            circular_buffer_bytes=getattr(args, "circular_buffer_bytes", None),
            live=getattr(args, "live", False),
            model_code=getattr(args, "model_code", None),
        )
    except ValueError as error:  # --model_code names nothing that exists, --circular_buffer_bytes < 0
        raise CliError(str(error)) from None
    if writer.failed:  # it warned; stops read the dump, so there can be none
        debugger.disable_dump_debug_info()
        raise CliError(f"cannot dump to {dump_dir}: {writer.failed}")
    return writer


def _run_script(debugger, script: str, script_args: list[str], writer, controller) -> tuple[int, str]:
    """Runs the script as __main__ with the controller listening; (exit status, how it ended).
    The script's own enable_dump_debug_info call gets the dump already started."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    enable = debugger.enable_dump_debug_info
    debugger.add_execution_listener(controller.on_call)

    def enable_again(*unused, **unused_kw):
        """The script's own enable call: the dump `tvmdbg run` started already serves it."""
        print(
            "tvmdbg run: the script's enable_dump_debug_info call uses the dump tvmdbg run started.",
            file=guarded(sys.stderr),
        )
        return writer

    debugger.enable_dump_debug_info = enable_again
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    status = 0
    try:
        runpy.run_path(script, run_name="__main__")
        outcome = "finished"
    except QuitProgram:
        outcome = "was ended from the analyzer"
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        outcome = f"exited with status {status}"
    except KeyboardInterrupt:
        status, outcome = 130, "was interrupted"
    except BaseException:
        traceback.print_exc()
        status, outcome = 1, "raised an exception (above)"
    finally:
        debugger.enable_dump_debug_info = enable
        debugger.remove_execution_listener(controller.on_call)
        sys.argv[:], sys.path[:] = saved_argv, saved_path
        debugger.disable_dump_debug_info()
    return status, outcome
