"""The interactive analyzer: tfdbg's CLI commands over one run of a tvmdbg dump.

Each command parses its arguments with argparse (so `help CMD` and errors read like the
one-shot subcommands) and returns its output as lines; the Shell around it (shell.py) adds
history, completion and `> file`. The dump is re-read before every command, so a live
program's new records show up.
"""

from __future__ import annotations

import json
import math
import os
import re
import time

import numpy as np

from tvmdbg_tb.analysis.tensor_value import SliceError, parse_slice
from tvmdbg_tb.cli import filters, render
from tvmdbg_tb.cli.render import Style
from tvmdbg_tb.cli.session import CliError, OpNames
from tvmdbg_tb.cli.shell import Shell, Stop
from tvmdbg_tb.events import modes
from tvmdbg_tb.events.modes import mode_name
from tvmdbg_tb.events.reader import HAS_ERROR, HEALTH_KNOWN, NONFINITE, RunReader, StaleRecordError
from tvmdbg_tb.proto import debug_event_pb2 as pb

_KINDS = {v: k.lower().replace("_", " ") for k, v in pb.OpInput.Kind.items()}


class Analyzer(Shell):
    """`tvmdbg analyze`: tfdbg's commands over one run."""

    user_errors = (*Shell.user_errors, SliceError, StaleRecordError, re.error)
    help_notes = ("Ops are named as `lt` shows them (lv3, main/lv3) or by id (#12).",)

    def __init__(self, run: RunReader, stdin=None, stdout=None, controller=None):
        super().__init__(stdin=stdin, stdout=stdout)
        self.run = run
        self.names = OpNames(run)
        self.controller = controller  # set by `tvmdbg run`: adds the `run` command
        self._build_commands()

    def before_command(self) -> None:
        self.run.update()  # a live program's new records show up in the next command

    def on_quit(self) -> None:
        if self.controller is not None:
            self.controller.on_quit()

    def complete_argument(self, command: str, text: str) -> list[str]:
        if command == "ps":
            files = [f.file_path for f in self.run.source_files()]
            files += [os.path.basename(f) for f in files]
            return sorted({f for f in files if f.startswith(text)})
        if command in ("lt", "le", "profile", "alerts", "ri", "ls", "run") or text.startswith("-") or ":" in text:
            return []
        return [n for n in self.names.names() if n.startswith(text)]

    # -- commands --------------------------------------------------------------------------

    def _build_commands(self) -> None:
        self._add_trace_commands()
        self._add_op_commands()
        self._add_run_commands()

    def _add_trace_commands(self) -> None:
        """lt and pt: the kernel outputs."""
        p = self.add(
            "lt",
            "List the kernel outputs recorded (graph execution traces).",
            "One row per traced kernel output: its trace index, the execution (top-level VM call)\n"
            "it ran in, its time since the first trace, op:slot, kernel, dtype, shape, health\n"
            "and kernel time.",
            "examples:\n  lt\n  lt -f has_inf_or_nan\n  lt -n '^lv1' -t matmul -s duration -r\n  lt -e 3 > exec3.txt",
            self.cmd_lt,
        )
        p.add_argument("-n", "--op_name_filter", metavar="REGEX", help="only ops whose name matches REGEX")
        p.add_argument("-t", "--kernel_filter", metavar="REGEX", help="only kernels whose name matches REGEX")
        p.add_argument("-e", "--execution", type=int, metavar="INDEX", help="only traces of this execution")
        p.add_argument(
            "-f", "--tensor_filter", metavar="FILTER", help="only outputs passing a tensor filter (has_inf_or_nan, ...)"
        )
        p.add_argument(
            "-s",
            "--sort_by",
            choices=("time", "size", "name", "duration"),
            default="time",
            help="order of rows (default: time)",
        )
        p.add_argument("-r", "--reverse", action="store_true", help="reverse the order")
        p.add_argument("-l", "--limit", type=int, default=200, help="rows to show, 0 for all (default: 200)")

        p = self.add(
            "pt",
            "Print one kernel output: its summary, or its values in FULL_TENSOR mode.",
            "TENSOR is OP[:SLOT][SLICE], e.g. lv3, lv3:1, lv3[0, :4] or '#12:0[..., -1]'. The\n"
            "latest execution of the op is shown unless -e or -i picks another.",
            "examples:\n  pt lv3\n  pt lv3[:2, 0:8] -e 2\n  pt lv3 -r '[-inf,-1],[1,inf]'\n  pt lv3 -a > values.txt\n"
            "  pt lv3 -w lv3.npy",
            self.cmd_pt,
        )
        p.add_argument("tensor", nargs="?", metavar="TENSOR", help="OP[:SLOT][SLICE]")
        p.add_argument("-e", "--execution", type=int, metavar="INDEX", help="the output in this execution")
        p.add_argument("-i", "--trace", type=int, metavar="INDEX", help="the trace with this index (see lt)")
        p.add_argument("-r", "--ranges", metavar="RANGES", help="highlight values in ranges, e.g. [-inf,-1],[1,inf]")
        p.add_argument("-a", "--all", action="store_true", help="print every value, however large")
        p.add_argument("-w", "--write", metavar="FILE.npy", help="save the values (after slicing) with numpy.save")

    def _add_op_commands(self) -> None:
        """ni, li, lo, ps, ls: the ops, their neighbours and their source."""
        p = self.add(
            "ni",
            "Show one op: its kernel, the Relax ops fused into it, inputs, outputs, where it was created.",
            "",
            "examples:\n  ni lv3\n  ni -t fused_matmul_add_relu",
            self.cmd_ni,
        )
        p.add_argument("op", metavar="OP")
        p.add_argument("-t", "--traceback", action="store_true", help="print the whole creation stack")
        p.add_argument(
            "-e", "--execution", type=int, metavar="INDEX", help="show health in this execution (default: the latest)"
        )

        for name, what in (("li", "inputs"), ("lo", "consumers")):
            p = self.add(
                name,
                f"List the {what} of an op{' (which ops or parameters feed it)' if name == 'li' else ' (ops using its outputs)'}.",
                "",
                f"examples:\n  {name} lv3\n  {name} -r lv3\n  {name} -r -d 2 lv3",
                self.cmd_li if name == "li" else self.cmd_lo,
            )
            p.add_argument("op", metavar="OP")
            p.add_argument("-r", "--recursive", action="store_true", help=f"follow {what} of {what}")
            p.add_argument("-d", "--depth", type=int, default=20, help="how deep to recurse with -r (default: 20)")

        p = self.add(
            "ps",
            "Print a source file with the ops created on each line.",
            "FILE is the index shown by `ls`, a path, or the end of a path (e.g. model.py).",
            "examples:\n  ps model.py\n  ps 0 -b 40",
            self.cmd_ps,
        )
        p.add_argument("file", metavar="FILE")
        p.add_argument("-b", "--begin", type=int, default=1, help="first line to print (default: 1)")

        self.add("ls", "List the source files recorded in the dump.", "", None, self.cmd_ls)

    def _add_run_commands(self) -> None:
        """le, alerts, profile, ri, help and quit, and run when a program is stopped."""
        p = self.add(
            "le",
            "List executions: the top-level VM function calls.",
            "",
            "examples:\n  le\n  le -f backbone",
            self.cmd_le,
        )
        p.add_argument("-f", "--function", metavar="REGEX", help="only functions matching REGEX")
        p.add_argument("-l", "--limit", type=int, default=200, help="rows to show, 0 for all (default: 200)")

        p = self.add(
            "alerts",
            "List NaN/Inf alerts, the first op that produced a non-finite value first.",
            "An origin alert is one whose op had finite inputs: it made the bad value rather than\npassing one on.",
            "examples:\n  alerts\n  alerts -a",
            self.cmd_alerts,
        )
        p.add_argument("-a", "--all", action="store_true", help="list every alert, not only the first 50")

        p = self.add(
            "profile",
            "Per-op time table, as TVM's old debug executor printed it.",
            "",
            "examples:\n  profile\n  profile -l 10",
            self.cmd_profile,
        )
        p.add_argument("-l", "--limit", type=int, default=0, help="rows to show, 0 for all (default: 0)")

        self.add("ri", "Show run information: who wrote the dump, how, and what it holds.", "", None, self.cmd_ri)

        self.add_help_and_quit("Leave the analyzer." if self.controller is None else "End the program and leave.")

        if self.controller is not None:
            p = self.add(
                "run",
                "Continue the program.",
                "Without options, runs until the end of the next top-level VM call and stops again.",
                "examples:\n  run\n  run -t 10\n  run -f has_inf_or_nan",
                self.cmd_run,
                aliases=("r",),
            )
            group = p.add_mutually_exclusive_group()
            group.add_argument("-t", "--times", type=int, metavar="N", help="stop after N more VM calls")
            group.add_argument(
                "-f", "--tensor_filter", metavar="FILTER", help="stop after the next call with an output passing FILTER"
            )
            group.add_argument("--no_break", action="store_true", help="run to the end without stopping")

    # -- lt --------------------------------------------------------------------------------

    def cmd_lt(self, args, style: Style) -> list[str]:
        digests = self.run.trace_digests()
        total = len(digests)
        cache: dict[int, pb.GraphExecutionTrace] = {}
        positions, described = self._lt_positions(args, digests, cache)
        positions = self._lt_sorted(args, digests, positions, cache)
        shown = positions if args.limit <= 0 else positions[: args.limit]
        where = f" ({'; '.join(described)})" if described else ""
        head = (
            f"{len(positions)} of {total} kernel outputs{where}, by {args.sort_by}{' reversed' if args.reverse else ''}"
        )
        if len(positions) == 0:
            return [head + "."]
        lines = [head + ":"]
        lines += self._lt_table(digests, shown, cache, style)
        if len(shown) < len(positions):
            lines.append(f"... {len(positions) - len(shown)} more (use -l 0 to list all)")
        return lines

    def _lt_positions(self, args, digests, cache: dict) -> tuple[np.ndarray, list[str]]:
        """The trace positions lt's filters keep, and how they are described."""
        run = self.run
        mask = np.ones(len(digests), dtype=bool)
        described = []
        if args.op_name_filter or args.kernel_filter:
            name_re = re.compile(args.op_name_filter) if args.op_name_filter else None
            kernel_re = re.compile(args.kernel_filter) if args.kernel_filter else None
            keep = [
                op.op_id
                for op in run.ops()
                if (name_re is None or name_re.search(self.names.name(op.op_id)) or name_re.search(op.op_name))
                and (kernel_re is None or kernel_re.search(op.kernel))
            ]
            mask &= np.isin(digests["op_id"], np.array(keep, dtype=np.int64))
            if args.op_name_filter:
                described.append(f"op name ~ {args.op_name_filter}")
            if args.kernel_filter:
                described.append(f"kernel ~ {args.kernel_filter}")
        if args.execution is not None:
            mask &= digests["execution_index"] == args.execution
            described.append(f"execution {args.execution}")
        positions = np.flatnonzero(mask)
        if args.tensor_filter:
            fn = _filter(args.tensor_filter)
            if fn is filters.has_inf_or_nan:
                positions = positions[(digests["flags"][positions] & NONFINITE) != 0]
            else:
                kept = []
                for p in positions.tolist():
                    trace = cache[p] = run.trace(p)
                    if _apply(fn, trace):
                        kept.append(p)
                positions = np.array(kept, dtype=np.int64)
            described.append(f"filter {args.tensor_filter}")
        return positions, described

    def _lt_sorted(self, args, digests, positions: np.ndarray, cache: dict) -> np.ndarray:
        if args.sort_by == "duration":
            positions = positions[np.argsort(-np.nan_to_num(digests["duration_us"][positions], nan=-1), kind="stable")]
        elif args.sort_by == "name":
            # Rank the few distinct ops by name, then sort the rows by rank (stable: by time within).
            op_ids, inverse = np.unique(digests["op_id"][positions], return_inverse=True)
            names = [self.names.name(int(i)) for i in op_ids.tolist()]
            rank = np.empty(len(names), dtype=np.int64)
            rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
            positions = positions[np.argsort(rank[inverse], kind="stable")]
        elif args.sort_by == "size":
            positions = positions[np.argsort(-self._sizes(positions, cache), kind="stable")]
        return positions[::-1] if args.reverse else positions

    def _lt_table(self, digests, shown: np.ndarray, cache: dict, style: Style) -> list[str]:
        t0 = float(digests["wall_time"][0]) if len(digests) else 0.0
        rows = []
        for p in shown.tolist():
            trace = cache.get(p) or self.run.trace(p)
            d = digests[p]
            rows.append(
                [
                    int(d["index"]),
                    int(d["execution_index"]),
                    f"{(float(d['wall_time']) - t0) * 1e3:,.3f}",
                    f"{self.names.name(trace.op_id)}:{trace.output_slot}",
                    trace.kernel,
                    trace.dtype or "-",
                    render.shape_text(trace.shape) if trace.dtype else "-",
                    self._trace_health(d, style),
                    render.micros(trace.duration_us),
                ]
            )
        return render.table(
            ["#", "exec", "t (ms)", "tensor", "kernel", "dtype", "shape", "health", "time (us)"],
            rows,
            right=(0, 1, 2, 8),
            style=style,
        )

    def _sizes(self, positions: np.ndarray, cache: dict) -> np.ndarray:
        """Element counts of the traces at positions: from the op's compiled shape when it is
        concrete, else from the trace itself (symbolic shapes)."""
        digests = self.run.trace_digests()
        op_ids, slots = digests["op_id"][positions], digests["output_slot"][positions]
        static = {}
        for op in self.run.ops():
            for slot, spec in enumerate(op.outputs):
                if spec.dtype and all(d >= 0 for d in spec.shape):
                    static[(op.op_id, slot)] = math.prod(spec.shape)
        keys, inverse = np.unique(op_ids * (1 << 20) + slots, return_inverse=True)  # slots are small
        per_key = np.array([static.get((k >> 20, k & 0xFFFFF), -1) for k in keys.tolist()], dtype=np.int64)
        sizes = per_key[inverse]
        for i in np.flatnonzero(sizes < 0).tolist():
            p = int(positions[i])
            trace = cache[p] = cache.get(p) or self.run.trace(p)
            sizes[i] = math.prod(trace.shape) if trace.dtype else 0
        return sizes

    @staticmethod
    def _trace_health(digest, style: Style) -> str:
        """Health of a trace from its digest row (which also covers FULL_TENSOR values)."""
        flags = int(digest["flags"])
        if flags & HAS_ERROR:
            return style("error", "red")
        if not flags & HEALTH_KNOWN:
            return "-"
        return render.counts_text((int(digest["nan"]), int(digest["neg_inf"]), int(digest["pos_inf"])), style)

    # -- pt --------------------------------------------------------------------------------

    _TENSOR = re.compile(r"^(?P<op>[^\[]+?)(?::(?P<slot>\d+))?(?P<slice>\[.*\])?$")

    def cmd_pt(self, args, style: Style) -> list[str]:
        trace, index = self._pt_trace(args)
        lines = self._pt_summary(trace, style)
        mode = trace.tensor_debug_mode
        if not modes.spec(mode).values or not trace.HasField("tensor_value"):
            if index is not None or args.write or args.ranges or args.all:
                lines.append(
                    f"  values were not recorded (mode {mode_name(mode)}); "
                    "record them with tensor_debug_mode='FULL_TENSOR'"
                )
            return lines
        return lines + self._pt_values(args, trace, index, style)

    def _pt_trace(self, args) -> tuple[pb.GraphExecutionTrace, tuple | None]:
        """The trace pt shows (by index, or an op's latest or given execution) and the slice."""
        run = self.run
        if args.trace is not None:
            trace = run.trace(self._trace_position(args.trace))
            match = self._TENSOR.match(args.tensor.strip()) if args.tensor else None
            return trace, parse_slice(match.group("slice")) if match and match.group("slice") else None
        if not args.tensor:
            raise CliError("pt: name a tensor (OP[:SLOT][SLICE]) or a trace (-i INDEX)")
        match = self._TENSOR.match(args.tensor.strip())
        if match is None:
            raise CliError(f"pt: cannot read {args.tensor!r}; write OP[:SLOT][SLICE], e.g. lv3:0[0, :4]")
        op = self.names.resolve(match.group("op"))
        slot = int(match.group("slot") or 0)
        index = parse_slice(match.group("slice")) if match.group("slice") else None
        positions = run.op_trace_indices(op.op_id, slot)
        if args.execution is not None:
            executions = run.trace_digests()["execution_index"][positions]
            positions = positions[executions == args.execution]
        if len(positions) == 0:
            kept = len(run.op_trace_indices(op.op_id))
            where = f" in execution {args.execution}" if args.execution is not None else ""
            if kept and args.execution is None:
                raise CliError(f"op {self.names.name(op.op_id)} has no output slot {slot}")
            raise CliError(f"no trace of {self.names.name(op.op_id)}:{slot}{where} in the dump")
        return run.trace(int(positions[-1])), index

    def _pt_summary(self, trace: pb.GraphExecutionTrace, style: Style) -> list[str]:
        name = f"{self.names.name(trace.op_id)}:{trace.output_slot}"
        mode = trace.tensor_debug_mode
        lines = [
            style(f"Tensor {name}", "bold")
            + f"  (kernel {trace.kernel}, execution {trace.execution_index}, trace {trace.index})",
        ]
        facts = [
            ("dtype", trace.dtype or "-"),
            ("shape", render.shape_text(trace.shape) if trace.dtype else "-"),
            ("mode", mode_name(mode)),
            ("kernel time (us)", render.micros(trace.duration_us)),
        ]
        if trace.device:
            facts.append(("device", trace.device))
        lines.append("  " + "  ".join(f"{k}: {v}" for k, v in facts))
        if trace.error:
            lines.append(style(f"  the kernel raised: {trace.error}", "red"))
        fields = render.summary_fields(mode, trace.debug_values)
        if fields:
            lines.append("  summary: " + "  ".join(f"{k}={v}" for k, v in fields))
            health = render.health_text(mode, trace.debug_values, style)
            if health not in ("-", "finite"):
                lines.append(f"  non-finite: {health}")
        kept = len(self.run.op_trace_indices(trace.op_id, trace.output_slot))
        if kept > 1:
            lines.append(f"  ({kept} executions of this output in the dump; pick another with -e EXECUTION)")
        return lines

    def _pt_values(self, args, trace: pb.GraphExecutionTrace, index, style: Style) -> list[str]:
        """A FULL_TENSOR output's values: sliced, summarised, highlighted, saved."""
        lines = []
        array = render.decode_tensor(trace.tensor_value)
        if trace.tensor_value.truncated:
            lines.append(f"  only the first {array.size} values were kept (the dump truncates large tensors)")
        if index is not None:
            try:
                array = np.asarray(array[index])
            except (IndexError, TypeError, ValueError) as error:
                raise CliError(f"pt: {error} (shape {render.shape_text(array.shape)})") from None
            lines.append(f"  slice {args.tensor[args.tensor.index('[') :]} -> shape {render.shape_text(array.shape)}")
        stats = render.numeric_summary(array)
        lines.append("  values: " + "  ".join(f"{k}={v}" for k, v in stats))
        ranges = render.parse_ranges(args.ranges) if args.ranges else ()
        if ranges:
            hits = int(render.in_ranges(array, ranges).sum())
            spans = ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in ranges)
            marker = "highlighted" if style.color else "marked *"
            lines.append(f"  {hits} of {array.size} values in {spans} ({marker})")
        lines += render.format_array(array, full=args.all, ranges=ranges, style=style).split("\n")
        if args.write:
            path = os.path.expanduser(args.write)
            try:
                np.save(path, array)
            except OSError as error:
                raise CliError(f"pt: cannot write {path}: {error.strerror}") from None
            lines.append(f"saved {render.shape_text(array.shape)} {array.dtype} to {path}")
        return lines

    def _trace_position(self, index: int) -> int:
        indices = self.run.trace_digests()["index"]
        pos = int(np.searchsorted(indices, index))
        if pos < len(indices) and indices[pos] == index:
            return pos
        hits = np.flatnonzero(indices == index)
        if len(hits):
            return int(hits[0])
        if len(indices) and index < indices[0]:
            raise CliError(f"trace {index} is no longer in the dump (the circular buffer dropped it)")
        raise CliError(f"no trace {index} in the dump")

    # -- ni --------------------------------------------------------------------------------

    def cmd_ni(self, args, style: Style) -> list[str]:
        run = self.run
        op = self.names.resolve(args.op)
        try:
            graph = run.graph(op.graph_id)
        except KeyError:
            graph = None
        graph_name = graph.name if graph is not None else f"graph{op.graph_id}"
        count = len(run.ops(op.graph_id))
        lines = [style(f"Op {self.names.name(op.op_id)}", "bold") + f"  (op #{op.op_id} in function {graph_name})"]
        facts = [
            ("kernel", op.kernel),
            ("call", op.call_type or "-"),
            ("device", op.device or "-"),
            ("position", f"{op.position + 1} of {count} kernel calls in {graph_name}"),
            ("created at", render.location_text(run.user_frame(op.code_location))),
        ]
        if graph is not None:
            facts.append(("instrumented", graph.instrumentation or "-"))
            if not graph.source_mapped:
                facts.append(("source map", "none" + (f" ({graph.note})" if graph.note else "")))
        width = max(len(k) for k, _ in facts)
        lines += [f"  {k.ljust(width)}  {v}" for k, v in facts]
        if op.original_ops:
            lines.append(f"Relax ops fused into it ({len(op.original_ops)}):")
            rows = [
                [o.var_name or "-", o.op_type, render.location_text(run.user_frame(o.code_location))]
                for o in op.original_ops
            ]
            lines += ["  " + r for r in render.table(["var", "op", "created at"], rows, style=style)]
        from tvmdbg_tb.cli import reports

        digests = run.trace_digests()
        traced = run.op_trace_indices(op.op_id)
        execution = args.execution
        if execution is None and len(traced):
            execution = int(digests["execution_index"][traced[-1]])
        elif execution is not None and not np.any(digests["execution_index"][traced] == execution):
            raise CliError(f"op {self.names.name(op.op_id)} has no trace in execution {execution}")
        when = f"in execution {execution}" if execution is not None else "(never traced)"
        from tvmdbg_tb.cli import inner

        lines += inner.ni_lines(run, op, execution, style)
        lines.append(f"Inputs ({len(op.inputs)}), health {when}:")
        if op.inputs:
            healths = (
                reports.input_health(run, op, execution, style) if execution is not None else ["-"] * len(op.inputs)
            )
            rows = [
                [i, *self._input_source(inp), render.spec_text(inp.spec), health]
                for i, (inp, health) in enumerate(zip(op.inputs, healths))
            ]
            lines += ["  " + r for r in render.table(["slot", "name", "from", "spec", "health"], rows, style=style)]
        lines.append(f"Outputs ({len(op.outputs)}), health {when}:")
        rows = []
        for slot, spec in enumerate(op.outputs):
            positions = run.op_trace_indices(op.op_id, slot)
            health = "-"
            here = positions[digests["execution_index"][positions] == execution] if execution is not None else []
            if len(here):
                health = self._trace_health(digests[here[-1]], style)
            name = op.output_names[slot] if slot < len(op.output_names) else ""
            rows.append([slot, name or "-", render.spec_text(spec), len(positions), health])
        if rows:
            lines += [
                "  " + r
                for r in render.table(["slot", "name", "spec", "traces", "health"], rows, right=(0, 3), style=style)
            ]
        consumers = run.consumers(op.op_id)
        if consumers:
            used = ", ".join(f"{self.names.name(c)} (input {s})" for c, s, _ in consumers)
            lines.append(f"Consumers: {used}")
        if args.traceback:
            lines.append("Creation stack (outermost first, > marks the user's frame):")
            lines += self._stack_lines(op.code_location) or ["  (no stack recorded)"]
            for o in op.original_ops:
                if list(o.code_location.stack_frame_ids) not in ([], list(op.code_location.stack_frame_ids)):
                    lines.append(f"Creation stack of {o.var_name or o.op_type} ({o.op_type}):")
                    lines += self._stack_lines(o.code_location)
        return lines

    def _input_source(self, inp: pb.OpInput) -> list[str]:
        if inp.kind == pb.OpInput.OP_OUTPUT:
            return [inp.name or "-", f"{self.names.name(inp.producer_op_id)}:{inp.producer_output_slot}"]
        if inp.kind == pb.OpInput.PARAM:
            return [inp.name or "-", f"parameter {inp.param_index}"]
        return [inp.name or "-", _KINDS.get(inp.kind, "other")]

    def _stack_lines(self, location: pb.CodeLocation) -> list[str]:
        lines = []
        ids = list(location.stack_frame_ids)
        # The frames of `tvmdbg run` starting the script (up to runpy) are not the user's story.
        frames = [self._frame_or_none(i) for i in ids]
        in_runner = [i for i, f in enumerate(frames) if f is not None and f.file_path.endswith(_RUNNER_FILE)]
        runner = in_runner[-1] if in_runner else None  # the runner's innermost frame, which calls runpy
        launcher = 0
        if runner is not None:
            launcher = runner + 1
            while launcher < len(frames) and _is_launcher(frames[launcher]):
                launcher += 1
        if launcher:
            lines.append(f"    ({launcher} frames of the tvmdbg launcher hidden)")
        for i, frame_id in enumerate(ids):
            if i < launcher:
                continue
            try:
                frame = self.run.stack_frame(frame_id)
            except KeyError:
                lines.append(f"    (frame {frame_id} missing)")
                continue
            mark = ">" if i == location.user_frame_index else " "
            lines.append(f"  {mark} {frame.file_path}:{frame.line} in {frame.function}")
            text = self._source_line(frame)
            if text is not None:
                lines.append(f"      {text.strip()}")
        return lines

    def _frame_or_none(self, frame_id: int) -> pb.StackFrame | None:
        try:
            return self.run.stack_frame(frame_id)
        except KeyError:
            return None

    def _source_line(self, frame: pb.StackFrame) -> str | None:
        if frame.file_index < 0:
            return None
        try:
            source = self.run.source_file(frame.file_index)
        except KeyError:
            return None
        if 1 <= frame.line <= len(source.lines):
            return source.lines[frame.line - 1]
        return None

    # -- li / lo ---------------------------------------------------------------------------

    def cmd_li(self, args, style: Style) -> list[str]:
        op = self.names.resolve(args.op)
        depth = args.depth if args.recursive else 1
        lines = [f"Inputs of {self.names.name(op.op_id)} ({op.kernel}):"]
        self._tree(op, depth, 1, lines, set(), inputs=True)
        from tvmdbg_tb.cli import inner

        return (lines if len(lines) > 1 else lines + ["  (none)"]) + inner.li_lines(self.run, op, None)

    def cmd_lo(self, args, style: Style) -> list[str]:
        op = self.names.resolve(args.op)
        depth = args.depth if args.recursive else 1
        lines = [f"Consumers of {self.names.name(op.op_id)} ({op.kernel}):"]
        self._tree(op, depth, 1, lines, set(), inputs=False)
        return lines if len(lines) > 1 else lines + ["  (none: its outputs leave the function)"]

    def _tree(self, op: pb.GraphOpCreation, max_depth: int, level: int, lines: list[str], seen: set, inputs: bool):
        indent = "  " + "|  " * (level - 1) + "|- "
        if inputs:
            edges = []
            for slot, inp in enumerate(op.inputs):
                if inp.kind == pb.OpInput.OP_OUTPUT:
                    try:
                        child = self.run.op(inp.producer_op_id)
                    except KeyError:
                        child = None
                    label = f"{self.names.name(inp.producer_op_id)}:{inp.producer_output_slot}"
                    extra = f" [{child.kernel}]" if child is not None else ""
                    edges.append((f"(input {slot}) {label}{extra}", child))
                else:
                    source = self._input_source(inp)[1]
                    spec = render.spec_text(inp.spec)
                    label = f"(input {slot}) {inp.name or '-'}: {source}" + (f" {spec}" if spec != "-" else "")
                    edges.append((label, None))
        else:
            edges = []
            for consumer, slot, out_slot in self.run.consumers(op.op_id):
                try:
                    child = self.run.op(consumer)
                except KeyError:
                    child = None
                extra = f" [{child.kernel}]" if child is not None else ""
                edges.append((f"(output {out_slot} -> input {slot}) {self.names.name(consumer)}{extra}", child))
        for label, child in edges:
            lines.append(f"{indent}({level}) {label}")
            if child is None or level >= max_depth:
                continue
            if child.op_id in seen:
                lines.append("  " + "|  " * level + "|- (already shown above)")
                continue
            seen.add(child.op_id)
            self._tree(child, max_depth, level + 1, lines, seen, inputs)

    # -- ps / ls ---------------------------------------------------------------------------

    def _ops_by_line(self) -> dict[int, dict[int, list[str]]]:
        """{file_index: {line: [annotations]}} of the ops (and Relax ops) created there."""
        out: dict[int, dict[int, list[str]]] = {}

        def add(location: pb.CodeLocation, text: str) -> None:
            for frame in self.run.frames(location):
                if frame.file_index >= 0:
                    notes = out.setdefault(frame.file_index, {}).setdefault(frame.line, [])
                    if text not in notes:
                        notes.append(text)

        for op in self.run.ops():
            name = self.names.name(op.op_id)
            if op.original_ops:
                for o in op.original_ops:
                    add(o.code_location, f"{name} [{op.kernel}] {o.op_type}" + (f" {o.var_name}" if o.var_name else ""))
            else:
                add(op.code_location, f"{name} [{op.kernel}]")
        return out

    def cmd_ps(self, args, style: Style) -> list[str]:
        files = self.run.source_files()
        index = self._find_file(args.file, files)
        source = files[index]
        annotations = self._ops_by_line().get(index, {})
        lines = [
            style(f"Source {source.file_path}", "bold")
            + f"  ({len(source.lines)} lines, {len(annotations)} with ops; * marks them)"
        ]
        width = len(str(len(source.lines)))
        begin = max(1, args.begin)
        for number in range(begin, len(source.lines) + 1):
            text = source.lines[number - 1]
            notes = annotations.get(number)
            mark = "*" if notes else " "
            lines.append(f"{mark} {str(number).rjust(width)}  {text}")
            if notes:
                pad = " " * (width + 4)
                lines += [f"{pad}{style('^ ' + n, 'cyan')}" for n in notes]
        return lines

    def _find_file(self, text: str, files: list[pb.SourceFile]) -> int:
        if not files:
            raise CliError("no source files in this dump")
        if text.isdigit():
            index = int(text)
            if index < len(files):
                return index
            raise CliError(f"no source file {index}; `ls` lists {len(files)}")
        exact = [i for i, f in enumerate(files) if f.file_path == text or f.file_path == os.path.abspath(text)]
        if exact:
            return exact[0]
        tail = [i for i, f in enumerate(files) if f.file_path.endswith(os.sep + text) or f.file_path.endswith(text)]
        if len(tail) == 1:
            return tail[0]
        if tail:
            listed = ", ".join(f"{i}: {files[i].file_path}" for i in tail[:8])
            raise CliError(f"{text!r} matches {len(tail)} files ({listed}); give the index")
        raise CliError(f"no source file {text!r} in the dump; `ls` lists them")

    def cmd_ls(self, args, style: Style) -> list[str]:
        files = self.run.source_files()
        if not files:
            return ["No source files in this dump."]
        by_line = self._ops_by_line()
        rows = []
        for i, f in enumerate(files):
            ops = {n.split(" ")[0] for notes in by_line.get(i, {}).values() for n in notes}
            rows.append([i, f.file_path, len(f.lines), len(ops)])
        return [f"{len(files)} source files:"] + render.table(
            ["#", "file", "lines", "ops created"], rows, right=(0, 2, 3), style=style
        )

    # -- le --------------------------------------------------------------------------------

    def cmd_le(self, args, style: Style) -> list[str]:
        run = self.run
        digests = run.execution_digests()
        names = run.function_names
        positions = list(range(len(digests)))
        if args.function:
            pattern = re.compile(args.function)
            positions = [p for p in positions if pattern.search(names[int(digests["function"][p])])]
        shown = positions if args.limit <= 0 else positions[: args.limit]
        head = f"{len(positions)} of {len(digests)} executions (top-level VM calls)"
        if not positions:
            return [head + "."]
        t0 = float(digests["wall_time"][0])
        traces = run.trace_digests()
        bad_exec, bad_count = np.unique(
            traces["execution_index"][(traces["flags"] & NONFINITE) != 0], return_counts=True
        )
        bad_by_exec = dict(zip(bad_exec.tolist(), bad_count.tolist()))
        rows = []
        for p in shown:
            d = digests[p]
            flags = int(d["flags"])
            if flags & HAS_ERROR:
                health = style("error", "red")
            elif flags & NONFINITE:
                health = style("inf/nan out", "red")
            else:
                health = "finite out" if flags & 2 else "-"
            bad = bad_by_exec.get(int(d["index"]), 0)
            rows.append(
                [
                    int(d["index"]),
                    f"{(float(d['wall_time']) - t0) * 1e3:,.3f}",
                    names[int(d["function"])],
                    int(d["num_traces"]),
                    bad,
                    health,
                    render.micros(float(d["duration_us"])),
                ]
            )
        lines = [head + ":"]
        lines += render.table(
            ["exec", "t (ms)", "function", "traces", "inf/nan traces", "outputs", "time (us)"],
            rows,
            right=(0, 1, 3, 4, 6),
            style=style,
        )
        if len(shown) < len(positions):
            lines.append(f"... {len(positions) - len(shown)} more (use -l 0 to list all)")
        return lines

    # -- alerts / profile ------------------------------------------------------------------

    def cmd_alerts(self, args, style: Style) -> list[str]:
        from tvmdbg_tb.cli import reports

        return reports.alert_lines(self.run, self.names, limit=0 if args.all else 50, style=style)

    def cmd_profile(self, args, style: Style) -> list[str]:
        from tvmdbg_tb.cli import reports

        return reports.profile_lines(self.run, self.names, limit=args.limit, style=style)

    # -- ri --------------------------------------------------------------------------------

    def cmd_ri(self, args, style: Style) -> list[str]:
        run = self.run
        meta = run.metadata
        lines = [style(f"Run {run.name}", "bold"), f"  directory      {run.path}"]
        if meta is not None and meta.run_name:
            lines.append(f"  name           {meta.run_name}")
        if meta is not None:
            if run.metadata_wall_time:
                started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.metadata_wall_time))
                lines.append(f"  started        {started}")
            lines += [
                f"  written by     tvmdbg {meta.tvmdbg_version}, TVM {meta.tvm_version}, on {meta.host_name} (pid {meta.pid})",
                f"  command        {' '.join(meta.argv) or '-'}",
                f"  tensor mode    {mode_name(meta.tensor_debug_mode)}",
                "  ring buffer    "
                + (
                    f"keeps the last {meta.circular_buffer_size} executions and traces"
                    if meta.circular_buffer_size > 0
                    else "keeps everything"
                ),
            ]
        ex = run.execution_digests()
        tr = run.trace_digests()
        if len(ex):
            counts: dict[str, int] = {}
            for f in ex["function"].tolist():
                counts[run.function_names[f]] = counts.get(run.function_names[f], 0) + 1
            calls = ", ".join(f"{n} x{c}" for n, c in counts.items())
            span = float(ex["wall_time"][-1] - ex["wall_time"][0])
            first = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(ex["wall_time"][0])))
            lines.append(f"  executions     {len(ex)} ({calls}); first at {first}, span {span:.3f} s")
        else:
            lines.append("  executions     0")
        bad = int(np.count_nonzero(tr["flags"] & NONFINITE)) if len(tr) else 0
        errors = int(np.count_nonzero(tr["flags"] & HAS_ERROR)) if len(tr) else 0
        lines.append(f"  traces         {len(tr)} kernel outputs, {bad} with NaN/Inf, {errors} kernel errors")
        if len(tr) and len(ex) and tr["execution_index"][0] > ex["index"][0]:
            lines.append("                 (older traces were dropped by the circular buffer)")
        graphs = run.graphs()
        lines.append(f"  functions      {len(graphs)} compiled")
        for g in graphs:
            n = len(run.ops(g.graph_id))
            mapped = "source-mapped" if g.source_mapped else "no source map"
            loc = render.location_text(run.user_frame(g.code_location))
            lines.append(
                f"    #{g.graph_id} {g.name}: {n} kernel calls, {g.instrumentation or '-'}, {mapped}, {_target_text(g.target)}; compiled at {loc}"
            )
        lines.append(f"  source files   {len(run.source_files())}")
        if run.corruptions:
            lines.append(style(f"  corruptions    {len(run.corruptions)} damaged records skipped:", "red"))
            lines += [f"    {c.path}@{c.offset}: {c.reason}" for c in run.corruptions[:10]]
        else:
            lines.append("  corruptions    none")
        return lines

    # -- help / quit / run -----------------------------------------------------------------

    def cmd_run(self, args, style: Style):
        if args.tensor_filter:
            _filter(args.tensor_filter)
        message = self.controller.resume(times=args.times, tensor_filter=args.tensor_filter, no_break=args.no_break)
        return Stop([message])


def _filter(name: str) -> filters.TensorFilter:
    try:
        return filters.get_tensor_filter(name)
    except KeyError as error:
        raise CliError(error.args[0]) from None


def _apply(fn: filters.TensorFilter, trace: pb.GraphExecutionTrace) -> bool:
    try:
        return filters.passes(fn, trace)
    except Exception as error:  # a user's filter must not end the session
        raise CliError(f"tensor filter raised {error!r} on trace {trace.index}") from None


# Where `tvmdbg run` calls the script (the path's tail, so dumps from other installs match too).
_RUNNER_FILE = os.path.join("tvmdbg_tb", "cli", "runner.py")


def _is_launcher(frame: pb.StackFrame | None) -> bool:
    """A frame between `tvmdbg run` and the script: runpy's."""
    return frame is not None and (frame.file_path.startswith("<frozen runpy") or frame.file_path.endswith("runpy.py"))


def _target_text(target: str) -> str:
    """A compile target for reading: TVM's JSON form shortened to kind and triple."""
    if not target.startswith("{"):
        return target or "-"
    try:
        fields = json.loads(target)
    except ValueError:
        return target
    extra = fields.get("mtriple") or fields.get("arch") or ""
    return f"{fields.get('kind', '?')}" + (f" ({extra})" if extra else "")
