"""A live run never flickers to "incomplete": a real TVM program writes while the reader
follows it and completeness is assessed over and over, in every gap of the reading.

The reader takes the files' sizes in the reverse of the order the writer fills them, reads
them in that order and publishes a RunEnd last (events/reader.py): whatever it shows, the
records it refers to (a call's traces, a trace's op) are shown too. Assessed between the
publication of a call and of its traces, a live run was "incomplete: executions ... miss ...
of the kernel traces they recorded" in most assessments under load.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from tvmdbg_tb.events import completeness, layout  # noqa: E402
from tvmdbg_tb.events import reader as reader_module  # noqa: E402
from tvmdbg_tb.events.reader import DebugDataReader  # noqa: E402

TESTS = Path(__file__).resolve().parent

PROGRAM = textwrap.dedent(
    """\
    import sys, threading
    sys.path.insert(0, {tests!r})
    import tvmdbg
    model, ring, flush = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "flush"
    if model == "gpt2":
        import real_models
        built = real_models.build("gpt2", fuse=True)
        run = lambda: built.run(1)
    else:
        import tvm
        from tvm import relax
        from models import chain
        executable, inputs = chain(20)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        x = tvm.runtime.tensor(inputs[0])
        run = lambda: vm["main"](x)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    writer = tvmdbg.enable_dump_debug_info(sys.argv[1], tensor_debug_mode="FULL_HEALTH", circular_buffer_size=ring)
    print("READY", flush=True)
    while not stop.is_set():
        run()
        if flush:
            writer.flush()
    tvmdbg.disable_dump_debug_info()
    """
)


def follow(
    logdir: Path, model: str, ring: int, tmp_path: Path, updates: int = 25, flush: bool = False, replaced: int = 0
):
    """Runs the program live; one thread updates the reader in a loop, this one assesses the
    run's completeness in a loop, until `updates` updates read records and the ring replaced
    the trace file `replaced` times, then on while the program closes its dump and exits,
    until the reader has read its end. Returns (verdicts, updates that read records,
    assessments made while an update was reading, trace files replaced, the last verdict)."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM.format(tests=str(TESTS)))
    program = subprocess.Popen(
        [sys.executable, str(script), str(logdir), model, str(ring), "flush" if flush else "timed"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reader = DebugDataReader(logdir)
    verdicts: collections.Counter = collections.Counter()
    stop = threading.Event()
    grew = [0]
    resets: collections.Counter = collections.Counter()

    def update() -> None:
        while not stop.is_set():
            if any(any(counts.values()) for counts in reader.update().values()):
                grew[0] += 1

    def enough() -> bool:
        return grew[0] >= updates and resets[layout.GRAPH_EXECUTION_TRACES] >= replaced

    updater = threading.Thread(target=update, daemon=True)
    try:
        assert program.stdout.readline().strip() == "READY", program.stderr.read()
        while not reader.runs():
            reader.discover()
            time.sleep(0.05)
        run = reader.run()
        run.add_observer(lambda run, stream, start, reset: resets.update([stream] if reset else []))
        updater.start()
        during = 0
        deadline = time.monotonic() + 240
        while run.run_end is None and time.monotonic() < deadline:
            if enough() and not program.stdin.closed:
                program.stdin.close()  # the program closes its dump and exits
            reading = run.updating
            verdict = completeness.assess(run)
            during += reading and run.updating
            verdicts[(verdict.state, "; ".join(p.message for p in verdict.problems))] += 1
    finally:
        stop.set()
        if not program.stdin.closed:
            program.stdin.close()
        program.wait(timeout=120)
        updater.join(timeout=60)
    assert program.returncode == 0, program.stderr.read()
    return verdicts, grew[0], during, resets[layout.GRAPH_EXECUTION_TRACES], completeness.assess(run)


def _slow_to_open(monkeypatch, name: str, delay: float = 0.05) -> None:
    """The reader descheduled between its stat of a file the ring replaced and its open (as
    on a busy machine): the writer replaces the file again meanwhile, and the file stat'ed,
    gone, frees its inode number for a later replacement. The reader took that number for
    the file it opened and read a dead file as current: its calls' traces stopped while the
    calls went on ("incomplete: executions ... miss ... kernel traces", in most runs with
    this delay, on CI under load without it)."""
    real_open = os.open

    def slow_open(path, *args, **kwargs):
        if os.path.basename(path) == name:
            time.sleep(delay)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(reader_module.os, "open", slow_open)


@pytest.mark.parametrize(
    "ring, chunk",
    [(-1, None), (1000, None), (1000, 4096)],
    ids=["everything kept", "default ring", "default ring read in small chunks"],
)
def test_a_live_run_reads_live_in_every_gap_of_the_reading(tmp_path, monkeypatch, ring, chunk):
    """With small read chunks, each trace file the ring replaces is read again in many chunks
    while the calls before are still shown (the program flushes after every call, so the
    ring's newest traces are of calls already read): no call is shown while its traces are
    being read again. The reader is slow to open the trace file each time the ring replaced
    it (see _slow_to_open)."""
    if chunk is not None:
        monkeypatch.setattr(reader_module, "_READ_CHUNK", chunk)
        _slow_to_open(monkeypatch, layout.file_name(layout.GRAPH_EXECUTION_TRACES))
    replaced = 0 if chunk is None else 40
    verdicts, grew, during, reread, final = follow(
        tmp_path / "logdir", "chain", ring, tmp_path, flush=chunk is not None, replaced=replaced
    )
    print(f"{grew} updates read records, {reread} trace files read again; {sum(verdicts.values())} assessments, "
          f"{during} while reading: {verdicts}")  # fmt: skip
    assert grew >= 25 and reread >= replaced, "the program did not write long enough to test anything"
    assert during >= 10, "no assessment fell inside an update: nothing was tested"
    assert set(verdicts) <= {(completeness.LIVE, ""), (completeness.COMPLETE, "")}, verdicts
    assert final.state == completeness.COMPLETE, final.summary()


@pytest.mark.slow
def test_a_live_transformers_model_reads_live_in_every_gap_of_the_reading(tmp_path):
    """GPT-2 (transformers, from its config) written live: its calls' many traces too."""
    pytest.importorskip("transformers")
    verdicts, grew, during, _, final = follow(tmp_path / "logdir", "gpt2", -1, tmp_path, updates=15)
    print(f"{grew} updates read records; {sum(verdicts.values())} assessments, {during} while reading: {verdicts}")
    assert grew >= 15 and during >= 5
    assert set(verdicts) <= {(completeness.LIVE, ""), (completeness.COMPLETE, "")}, verdicts
    assert final.state == completeness.COMPLETE, final.summary()


def test_a_program_that_just_closed_its_dump_is_not_called_cut_short(tmp_path):
    """The program closes its dump and exits before the reader reads its last records (the
    RunEnd among them): until it does, the dump is not 'never closed', then it is complete."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM.format(tests=str(TESTS)))
    logdir = tmp_path / "logdir"
    program = subprocess.Popen(
        [sys.executable, str(script), str(logdir), "chain", "-1", "flush"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert program.stdout.readline().strip() == "READY", program.stderr.read()
        reader = DebugDataReader(logdir)
        deadline = time.monotonic() + 120
        while not reader.runs() or reader.run().num_executions() < 10:
            assert time.monotonic() < deadline, "the program wrote no call"
            reader.update()
            time.sleep(0.05)
    finally:
        program.stdin.close()
        program.wait(timeout=120)
    assert program.returncode == 0, program.stderr.read()
    run = reader.run()
    before = completeness.assess(run)
    assert before.problems == [] and before.writer_alive is False, before.summary()
    reader.update()
    after = completeness.assess(run)
    assert after.state == completeness.COMPLETE and after.ended == "closed", after.summary()


class _LoggedFile:
    """A record file's handle that logs its writes and flushes: (stream, what)."""

    def __init__(self, handle, stream: str, log: list):
        self._handle, self._stream, self._log = handle, stream, log

    def write(self, data):
        self._log.append((self._stream, "write"))
        return self._handle.write(data)

    def flush(self):
        self._log.append((self._stream, "flush"))
        return self._handle.flush()

    def __getattr__(self, name):
        return getattr(self._handle, name)


def test_the_writer_moves_a_calls_traces_to_disk_before_its_execution(tmp_path):
    """What the reader's order rests on: in each flush, the traces are written and flushed
    before the Execution that counts them is written (and an op before its traces)."""
    import tvm
    from tvm import relax

    import tvmdbg

    sys.path.insert(0, str(TESTS))
    from models import chain

    executable, inputs = chain(5)
    writer = tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    log: list[tuple[str, str]] = []
    try:
        for stream, record_file in writer._files.items():
            record_file.handle = _LoggedFile(record_file.handle, stream, log)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        x = tvm.runtime.tensor(inputs[0])
        for _ in range(3):
            vm["main"](x)
            writer.flush()
    finally:
        tvmdbg.disable_dump_debug_info()
    writes = [i for i, (stream, what) in enumerate(log) if stream == layout.EXECUTION and what == "write"]
    assert len(writes) >= 3, log
    for i in writes:  # the call's traces written and flushed before it (a flush per call)
        traces = [k for k, entry in enumerate(log[:i]) if entry == (layout.GRAPH_EXECUTION_TRACES, "write")]
        assert traces and (layout.GRAPH_EXECUTION_TRACES, "flush") in log[traces[-1] : i], log
    first_trace_write = log.index((layout.GRAPH_EXECUTION_TRACES, "write"))
    assert (layout.GRAPHS, "flush") in log[:first_trace_write], log
