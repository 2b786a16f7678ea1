"""A dump whose whole records are valid but wrong is never called clean: every record names
its run and its place (events/integrity.py), so records spliced from another run,
duplicated, swapped, moved or dropped are damage with their file and offset, an origin next
to them is uncertain, and `check` never says "complete and all finite".

Real dumps of real TVM programs; the targeted cases are the issue's, then a seeded fuzz of
byte-level and whole-record mutations."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("tvm")

import dump_records  # noqa: E402

from tvmdbg_tb import analysis  # noqa: E402
from tvmdbg_tb.cli import reports  # noqa: E402
from tvmdbg_tb.cli.session import OpNames  # noqa: E402
from tvmdbg_tb.events import layout  # noqa: E402
from tvmdbg_tb.events.reader import DebugDataReader  # noqa: E402

TESTS = Path(__file__).resolve().parent
TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]
TRACES, EXECUTIONS, GRAPHS = (
    layout.file_name(s) for s in (layout.GRAPH_EXECUTION_TRACES, layout.EXECUTION, layout.GRAPHS)
)

# Three runs of one program (the planted model of tests/models.py, compiled once): "nan" makes
# NaN in calls 4 and 9 (log in lv1 is the origin), "other" in call 2 (a run to splice from),
# "finite" never; each through a ring of 40 records, so the files hold drops and kept calls.
PROGRAM = textwrap.dedent(
    """\
    import sys
    sys.path.insert(0, {tests!r})
    import tvm
    from tvm import relax
    import tvmdbg
    from models import blockbuilder_planted, X, Y, W
    for name, nan_calls in (("nan", (4, 9)), ("other", (2,)), ("finite", ())):
        tvmdbg.enable_dump_debug_info(sys.argv[1] + "/" + name, tensor_debug_mode="FULL_HEALTH",
                                      circular_buffer_size=40)
        model = blockbuilder_planted("log", fuse=False)
        main = relax.VirtualMachine(model.executable, tvm.cpu())["main"]
        x, w = tvm.runtime.tensor(X), tvm.runtime.tensor(W)
        finite, planted = tvm.runtime.tensor(X - 0.5), tvm.runtime.tensor(Y)
        for call in range(30):
            main(x, planted if call in nan_calls else finite, w)
        tvmdbg.disable_dump_debug_info()
    """
)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, Path]:
    """{"nan" | "other" | "finite": its run directory}."""
    root = tmp_path_factory.mktemp("dumps")
    script = root / "program.py"
    script.write_text(PROGRAM.format(tests=str(TESTS)))
    done = subprocess.run([sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return {name: next(p for p in (root / name).iterdir() if p.is_dir()) for name in ("nan", "other", "finite")}


def copy_of(run_dir: Path, tmp_path: Path, name: str = "copy") -> Path:
    logdir = tmp_path / name
    shutil.copytree(run_dir, logdir / run_dir.name)
    return logdir / run_dir.name


class Verdict:
    """What the reader, the alerts and check make of one dump (in this process)."""

    def __init__(self, run_dir: Path):
        reader = DebugDataReader(run_dir.parent)
        reader.update()
        self.run = run = reader.run()
        self.completeness = run.completeness()
        self.code, self.text = reports.check(run, OpNames(run), str(run_dir.parent))
        alerts = analysis.alerts(run)
        first = alerts["first_origin_index"]
        self.origin = alerts["alerts"][first] if first is not None else None
        reader.close()

    @property
    def clean(self) -> bool:
        """ "complete and all finite": exit 0."""
        return self.code == reports.CLEAN

    def certain_origin(self) -> tuple | None:
        if self.origin is None or self.origin["origin_uncertain"]:
            return None
        return self.origin["op_name"], self.origin["execution_index"], self.origin["output_slot"]


def test_the_undamaged_dumps_are_complete(dumps):
    nan, finite = Verdict(dumps["nan"]), Verdict(dumps["finite"])
    assert nan.completeness.complete and finite.completeness.complete
    assert not nan.run.corruptions and not finite.run.corruptions and nan.run.keyed
    assert nan.code == reports.NONFINITE_FOUND and nan.certain_origin() == ("lv1", 4, 0)
    assert finite.clean and "none of which held NaN or Inf" in finite.text
    assert nan.completeness.dropped and finite.completeness.dropped  # the ring dropped records in both


def test_a_nan_trace_of_another_run_appended_is_foreign_damage(dumps, tmp_path):
    """The issue: it gave exit 1 "complete" naming the wrong op. Now it is a record of
    another run (file, offset), skipped: the origin stays lv1 of call 4."""
    run_dir = copy_of(dumps["nan"], tmp_path)
    other = dump_records.read(dumps["other"] / TRACES)
    spliced = next(r for r in other if dump_records.event(r).graph_execution_trace.execution_index == 2)
    records = dump_records.read(run_dir / TRACES)
    dump_records.write(run_dir / TRACES, [*records, spliced])
    verdict = Verdict(run_dir)
    (damage,) = verdict.run.corruptions
    assert damage.offset == sum(map(len, records)) and "a record of another run" in damage.reason
    assert not verdict.completeness.complete
    assert verdict.certain_origin() == ("lv1", 4, 0)
    result = subprocess.run([*TVMDBG, "check", str(run_dir.parent)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "misplaced record" in result.stdout and "another run" in result.stdout


def test_the_origin_trace_moved_to_the_end_makes_the_origin_uncertain(dumps, tmp_path):
    """The issue: the first origin changed from lv6 to lv7 with no uncertainty."""
    run_dir = copy_of(dumps["nan"], tmp_path)
    records = dump_records.read(run_dir / TRACES)
    k = next(
        i
        for i, r in enumerate(records)
        if dump_records.event(r).graph_execution_trace.execution_index == 4
        and dump_records.event(r).graph_execution_trace.op_name == "lv1"
    )
    dump_records.write(run_dir / TRACES, [*records[:k], *records[k + 1 :], records[k]])
    verdict = Verdict(run_dir)
    reasons = [c.reason for c in verdict.run.corruptions]
    assert any("records missing before it" in r for r in reasons) and any("out of order" in r for r in reasons)
    assert not verdict.completeness.complete
    assert verdict.origin["origin_uncertain"] or verdict.certain_origin() == ("lv1", 4, 0)
    alerts = json.loads(
        subprocess.run([*TVMDBG, "alerts", str(run_dir.parent), "--json"], capture_output=True, timeout=120).stdout
    )
    assert all(a["origin_uncertain"] for a in alerts["alerts"] if a["origin"] and a["execution_index"] == 4)


def test_dropping_the_only_graph_record_is_never_clean(dumps, tmp_path):
    """The issue: exit 0. The graphs file of the finite run loses its DebuggedGraph record."""
    run_dir = copy_of(dumps["finite"], tmp_path)
    records = dump_records.read(run_dir / GRAPHS)
    graph = [i for i, r in enumerate(records) if dump_records.event(r).HasField("debugged_graph")]
    assert len(graph) == 1
    dump_records.write(run_dir / GRAPHS, records[: graph[0]] + records[graph[0] + 1 :])
    verdict = Verdict(run_dir)
    assert verdict.code == reports.CANNOT_TELL and not verdict.completeness.complete
    assert "records missing before it: place 0" in verdict.text, verdict.text


@pytest.mark.parametrize("file", [TRACES, EXECUTIONS, GRAPHS, layout.file_name(layout.STACK_FRAMES)])
@pytest.mark.parametrize("how", ["duplicate", "swap", "drop_last"])
def test_duplicated_swapped_and_dropped_records_are_damage(dumps, tmp_path, file, how):
    run_dir = copy_of(dumps["finite"], tmp_path)
    records = dump_records.read(run_dir / file)
    k = len(records) // 2
    if how == "duplicate":
        records.insert(k, records[k])
    elif how == "swap":
        records[k], records[k + 1] = records[k + 1], records[k]
    else:
        records.pop()
    dump_records.write(run_dir / file, records)
    verdict = Verdict(run_dir)
    assert not verdict.completeness.complete and not verdict.clean, verdict.text
    assert verdict.run.corruptions or how == "drop_last"  # the end: found by the RunEnd's count
    assert str(run_dir / file) in verdict.text


# -- the fuzz -------------------------------------------------------------------------------


MUTATIONS = 360
SEED = 20241125
BUDGET_SECONDS = 20.0  # per mutated dump: a hang fails the test instead of stalling it


def _mutate(rng: random.Random, run_dir: Path, other: Path) -> str:
    """One random mutation of a run directory, in place; returns its description."""
    file = rng.choice(dump_records.FILES)
    path = run_dir / file
    data = bytearray(path.read_bytes())
    kind = rng.choice(
        ["flip", "zero", "insert", "truncate", "drop", "duplicate", "swap", "move_to_end", "splice", "splice_append"]
        + ["drop", "duplicate", "swap", "splice"]  # whole records, twice as often
    )
    if kind in ("flip", "zero", "insert", "truncate"):
        if not data:
            return "nothing (empty file)"
        at = rng.randrange(len(data))
        if kind == "flip":
            data[at] ^= 1 << rng.randrange(8)
        elif kind == "zero":
            data[at : at + rng.randint(1, 64)] = bytes(min(rng.randint(1, 64), len(data) - at))
        elif kind == "insert":
            data[at:at] = rng.randbytes(rng.randint(1, 32))
        else:
            del data[at:]
        path.write_bytes(bytes(data))
        return f"{kind} at byte {at} of {file}"
    records = dump_records.read(path)
    if not records:
        return "nothing (no record)"
    k = rng.randrange(len(records))
    if kind == "drop":
        del records[k]
    elif kind == "duplicate":
        records.insert(rng.randrange(len(records) + 1), records[k])
    elif kind == "swap":
        j = rng.randrange(len(records))
        records[k], records[j] = records[j], records[k]
    elif kind == "move_to_end":
        records.append(records.pop(k))
    else:
        foreign = dump_records.read(other / file)
        if not foreign:
            return "nothing (no record to splice)"
        piece = rng.choice(foreign)
        if kind == "splice":
            records[k] = piece
        else:
            records.append(piece)
    dump_records.write(path, records)
    return f"{kind} record {k} of {file}"


def _on_alarm(signum, frame):
    raise TimeoutError("reading the mutated dump took too long")


def test_a_seeded_fuzz_of_real_dumps_never_calls_damage_clean(dumps, tmp_path):
    """MUTATIONS mutations (byte-level, and whole records: drops, duplicates, swaps, moves,
    splices from another run, truncation) of the NaN run and the finite run: no traceback,
    no hang, no "complete and all finite" verdict on a damaged dump, and no certain first
    origin other than the undamaged dump's."""
    rng = random.Random(SEED)
    truth = {name: Verdict(dumps[name]) for name in ("nan", "finite")}
    expected_origin = truth["nan"].certain_origin()
    assert expected_origin == ("lv1", 4, 0)
    failures, kinds, unchanged = [], {}, 0
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    started = time.monotonic()
    try:
        for case in range(MUTATIONS):
            name = "nan" if case % 3 else "finite"
            run_dir = copy_of(dumps[name], tmp_path, f"case{case}")
            what = _mutate(rng, run_dir, dumps["other"])
            kinds[what.split()[0]] = kinds.get(what.split()[0], 0) + 1
            if all((run_dir / f).read_bytes() == (dumps[name] / f).read_bytes() for f in dump_records.FILES):
                unchanged += 1  # e.g. a record swapped with itself: not damage
                shutil.rmtree(run_dir.parent)
                continue
            signal.setitimer(signal.ITIMER_REAL, BUDGET_SECONDS)
            try:
                verdict = Verdict(run_dir)
            except Exception as error:  # a traceback, or a hang
                failures.append(f"{case} {name} {what}: {type(error).__name__}: {error}")
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if verdict.clean or verdict.completeness.complete:
                failures.append(f"{case} {name} {what}: called {verdict.completeness.state}, exit {verdict.code}")
            origin = verdict.certain_origin()
            if name == "nan" and origin is not None and origin != expected_origin:
                failures.append(f"{case} {name} {what}: certain origin {origin}")
            shutil.rmtree(run_dir.parent)
    finally:
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.monotonic() - started
    assert not failures, "\n".join(failures)
    assert MUTATIONS - unchanged >= 300, (unchanged, kinds)
    assert all(kinds.get(k, 0) >= 10 for k in ("drop", "duplicate", "swap", "splice", "flip", "truncate")), kinds
    print(f"{MUTATIONS} mutations ({unchanged} left the dump unchanged) in {elapsed:.1f} s: {kinds}")
