"""Opening a dump for the CLI: the logdir, which run, and names for ops that people can type."""

from __future__ import annotations

import json
import re
from collections import Counter

from tvmdbg_tb import storage
from tvmdbg_tb.events import layout
from tvmdbg_tb.events.reader import DebugDataReader, RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb


class CliError(Exception):
    """A problem to tell the user in one line (no traceback)."""


def open_logdir(logdir: str) -> DebugDataReader:
    problem = storage.location_problem(logdir)
    if problem == "not a directory":
        raise CliError(f"{logdir}: not a directory (give the logdir passed to enable_dump_debug_info)")
    if problem is not None:
        raise CliError(f"{logdir}: {problem}")
    reader = DebugDataReader(logdir)
    reader.update()
    if not reader.runs():
        raise CliError(
            f"{logdir} holds no tvmdbg dump: no {layout.file_name(layout.METADATA)} file (or segments) at or below it "
            "(was tvmdbg.enable_dump_debug_info called with this logdir?)"
        )
    return reader


def run_label(run: RunReader) -> str:
    """The run's name in the logdir, followed by the name the user gave it (run_name), when it
    has one: runs of one script are told apart by what they were for."""
    given = run.metadata.run_name if run.metadata is not None else ""
    label = f"{run.name} {json.dumps(given, ensure_ascii=False)}" if given else run.name
    if run.disco is not None:
        label += f" (rank {run.disco.rank} of {run.disco.world_size}, disco job {run.disco.job_id})"
    return label


def _labels(reader: DebugDataReader, names: list[str]) -> str:
    return ", ".join(run_label(reader.run(name)) for name in names)


def pick_run(reader: DebugDataReader, name: str | None, notes=None) -> RunReader:
    """The named run (or the one run under the named directory); without a name, the one
    DebugDataReader.choose() picks (the only run, or of several the one whose first NaN/Inf
    came first, else the newest), naming the runs found and the choice on notes."""
    runs = reader.runs()
    if name is not None:
        under = [r for r in runs if r.startswith(name.rstrip("/") + "/")]  # a directory holding one run
        if name not in runs and len(under) != 1:
            raise CliError(f"no run {name!r} in {reader.logdir}; runs: {_labels(reader, runs)}")
        run = reader.run(name if name in runs else under[0])
    else:
        run, why = reader.choose()
        if len(runs) > 1 and notes is not None:
            print(
                f"{reader.logdir} holds {len(runs)} runs ({_labels(reader, runs)}); showing {run_label(run)}, {why} "
                "(choose with --run).",
                file=notes,
            )
    if notes is not None:
        warn_damage(run, notes, "tvmdbg")
        state = run.completeness()
        if state.problems:
            print(f"tvmdbg: warning: run {run.name} is {state.state}: {state.summary().split(': ', 1)[1]}", file=notes)
    return run


def warn_damage(run: RunReader, out, who: str, limit: int = 10) -> None:
    """One line per damaged record (file and byte offset), the first `limit` of them."""
    corruptions = list(run.corruptions)
    if corruptions:
        print(f"{who}: warning: {len(corruptions)} damaged records in {run.name} were skipped:", file=out)
    for corruption in corruptions[:limit]:
        print(f"  {corruption}", file=out)
    if len(corruptions) > limit:
        print(f"  ... and {len(corruptions) - limit} more", file=out)


class OpNames:
    """Short, unique, typeable names for a run's ops, and the reverse lookup.

    An op is named by its op_name ("lv3") when that is unique in the run, else by
    "graph/op_name" ("main/lv3"), else "graph#id/op_name". "#12" always names op 12.
    """

    def __init__(self, run: RunReader):
        self.run = run
        self._count = -1
        self._names: dict[int, str] = {}
        self._lookup: dict[str, int] = {}

    def refresh(self) -> None:
        ops = self.run.ops()
        if len(ops) == self._count:
            return
        self._count = len(ops)
        graphs = {g.graph_id: g for g in self.run.graphs()}
        plain = Counter(op.op_name for op in ops)
        qualified = Counter((self._graph_name(graphs, op.graph_id), op.op_name) for op in ops)
        self._names.clear()
        self._lookup.clear()
        for op in ops:
            graph = self._graph_name(graphs, op.graph_id)
            if plain[op.op_name] == 1:
                name = op.op_name
            elif qualified[(graph, op.op_name)] == 1:
                name = f"{graph}/{op.op_name}"
            else:
                name = f"{graph}#{op.graph_id}/{op.op_name}"
            self._names[op.op_id] = name
            self._lookup[name] = op.op_id
            self._lookup.setdefault(f"{graph}/{op.op_name}", op.op_id)
            self._lookup.setdefault(f"{graph}#{op.graph_id}/{op.op_name}", op.op_id)

    @staticmethod
    def _graph_name(graphs: dict[int, pb.DebuggedGraph], graph_id: int) -> str:
        graph = graphs.get(graph_id)
        return graph.name if graph is not None and graph.name else f"graph{graph_id}"

    def name(self, op_id: int) -> str:
        self.refresh()
        return self._names.get(op_id, f"#{op_id}")

    def names(self) -> list[str]:
        self.refresh()
        return sorted(self._names.values())

    def resolve(self, text: str) -> pb.GraphOpCreation:
        """The op a user typed: a name as above, "#id", or a kernel or original op that
        identifies one op only."""
        self.refresh()
        text = text.strip()
        if re.fullmatch(r"#\d+", text):
            try:
                return self.run.op(int(text[1:]))
            except KeyError:
                raise CliError(f"no op {text} in this run") from None
        if text in self._lookup:
            return self.run.op(self._lookup[text])
        matches = self.run.find_ops(text)
        if len(matches) == 1:
            return matches[0]
        if not matches:
            hint = self.suggest(text)
            raise CliError(f"no op named {text!r}" + (f"; did you mean {', '.join(hint)}?" if hint else " (see `lt`)"))
        listed = ", ".join(sorted(self.name(op.op_id) for op in matches)[:12])
        raise CliError(f"{text!r} names {len(matches)} ops ({listed}); name one of them")

    def suggest(self, text: str) -> list[str]:
        low = text.lower()
        return [n for n in self.names() if low in n.lower()][:6]
