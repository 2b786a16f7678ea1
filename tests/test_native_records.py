"""Trace records framed in C++ are the Python path's, byte for byte, on real files."""

from __future__ import annotations

import itertools
import os
import struct
import time

import numpy as np
import pytest

pytest.importorskip("tvm")

from eventgen import trace  # noqa: E402

from tvmdbg_tb.events import layout, native_records, record_file, writer  # noqa: E402
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.reader import DebugDataReader  # noqa: E402
from tvmdbg_tb.events.trace_parts import TraceParts  # noqa: E402
from tvmdbg_tb.proto import debug_event_pb2 as pb  # noqa: E402


@pytest.fixture(scope="module")
def native():
    module = native_records.LIBRARY.load()
    assert module is not None, native_records.LIBRARY.failure()
    return module


def _payloads() -> list[bytes]:
    """Traces of every size class: empty, one-byte lengths, two-byte and three-byte varints."""
    out = [b"", trace(0, 0).SerializeToString()]
    for size in (1, 100, 118, 119, 120, 127, 128, 500, 15990, 16000, 16500, 70000):
        t = trace(size % 7, size)
        t.op_name = "x" * size
        out.append(t.SerializeToString())
    return out * 3


@pytest.mark.parametrize("first", [0, 1, 1 << 40])
def test_the_same_bytes_as_the_python_path(native, first):
    prefix = writer._envelope_prefix(1234.5, 7) + writer._TRACE_TAG
    payloads = _payloads()
    blob, sizes = native_records.frame(prefix, payloads, first)
    expected = writer._frame_traces(prefix, payloads, first)
    assert bytes(blob) == b"".join(expected)
    assert sizes == [len(r) for r in expected]


def test_records_of_every_length_are_the_python_paths(native):
    """Every record length modulo 8 (the checksum's word loop and each of its tail steps)."""
    prefix = writer._envelope_prefix(5.0, 1) + writer._TRACE_TAG
    payloads = [bytes(range(n)) for n in range(40)]
    blob, sizes = native_records.frame(prefix, payloads, 3)
    expected = writer._frame_traces(prefix, payloads, 3)
    assert bytes(blob) == b"".join(expected) and sizes == [len(r) for r in expected]


@pytest.mark.parametrize("width", [0, 9, 91])
def test_parts_are_framed_as_the_payloads_they_stand_for(native, width):
    """TraceParts framed natively equal its payloads built and framed in Python."""
    statics = [p for p in _payloads() if len(p) < 20000][:14] + [b""]
    which = np.array([3, 0, 14, 7, 7, 1, 13, 2] * 5, np.uint32)
    tails = bytes(range(256)) * (len(which) * max(width, 1) // 256 + 1)
    parts = TraceParts(statics, which.tobytes(), b"\x18\x96\x01", tails[: len(which) * width], width)
    prefix = writer._envelope_prefix(99.0, 0) + writer._TRACE_TAG
    blob, sizes = native_records.frame(prefix, parts, 12)
    expected = writer._frame_traces(prefix, parts.payloads(), 12)
    assert bytes(blob) == b"".join(expected) and sizes == [len(r) for r in expected]
    assert parts.payloads()[2] == statics[14] + b"\x18\x96\x01" + tails[2 * width : 3 * width]


def test_parts_that_do_not_add_up_are_refused(native):
    statics = [b"ab", b"c"]
    with pytest.raises(ValueError, match="out of range"):
        native.frame_trace_parts(b"", statics, np.array([2], np.uint32).tobytes(), b"", b"", 0, 0)
    with pytest.raises(ValueError, match="tails do not match"):
        native.frame_trace_parts(b"", statics, np.array([1], np.uint32).tobytes(), b"", b"xy", 3, 0)
    with pytest.raises(TypeError, match="each static must be bytes"):
        native.frame_trace_parts(b"", ["ab"], np.array([0], np.uint32).tobytes(), b"", b"", 0, 0)


def _dump(tmp_path, name, monkeypatch, use_native: bool, ring: int) -> bytes:
    if not use_native:  # as if switched off
        monkeypatch.setattr(native_records.LIBRARY, "_state", {"error": RuntimeError("off in this test")})
    framed = []
    original = native_records.frame

    def counted(prefix, payloads, first):
        result = original(prefix, payloads, first)
        if len(payloads) >= native_records.MIN_BATCH:  # shorter lists are framed in Python either way
            framed.append(result is not None)
        return result

    monkeypatch.setattr(native_records, "frame", counted)
    monkeypatch.setattr(writer.secrets, "randbits", lambda bits: 0x5EED)  # both runs' records carry one key
    w = writer.DebugEventsWriter(
        tmp_path / name, DumpOptions(circular_buffer_size=ring), run_id="run", flush_interval=3600
    )
    payloads = _payloads()
    for k in range(40):
        batch = payloads[: 1 + k % len(payloads)]
        w.write_graph_execution_trace_payloads(batch, wall_time=100.0 + k)
        if k % 7 == 0:
            w.flush()
    w.close()
    assert any(framed) == use_native and all(framed) == use_native  # the path under test ran
    path = tmp_path / name / "run" / layout.file_name(layout.GRAPH_EXECUTION_TRACES)
    return path.read_bytes()


@pytest.mark.parametrize("ring", [-1, 50])
def test_dumps_are_identical_and_the_ring_keeps_exactly_the_last_records(native, tmp_path, monkeypatch, ring):
    """Whole writer runs, batches small and large, with compaction: the same files."""
    native_dump = _dump(tmp_path, "native", monkeypatch, True, ring)
    python_dump = _dump(tmp_path, "python", monkeypatch, False, ring)
    assert native_dump == python_dump
    reader = DebugDataReader(tmp_path / "native")
    reader.update()
    indices = list(reader.run("run").trace_digests()["index"])
    total = sum(1 + k % len(_payloads()) for k in range(40))
    assert indices == list(range(total - 50 if ring > 0 else 0, total))
    assert reader.corruptions == []


def test_disabled_by_the_environment(native, monkeypatch):
    """TVMDBG_NATIVE_RECORDS=0: nothing is built or loaded, and records are framed in Python."""
    library = native_records.LIBRARY
    monkeypatch.setattr(library, "_state", {})
    monkeypatch.setattr(library, "_build", lambda path: pytest.fail("built while switched off"))
    monkeypatch.setenv(native_records.ENV_SWITCH, "0")
    library.start_loading()
    assert library.load() is None and library.failure() is None
    assert native_records.frame(b"", [b"x"] * 20, 0) is None
    monkeypatch.setenv(native_records.ENV_SWITCH, "1")
    assert library.load() is native
    assert native_records.frame(b"", [b"x"] * 20, 0) is not None


def test_payloads_that_are_not_bytes_are_refused(native):
    with pytest.raises(TypeError, match="each payload must be bytes, not str"):
        native.frame_traces(b"", [b"abc", "def"], 0)
    with pytest.raises(TypeError, match="payloads must be a sequence"):
        native.frame_traces(b"", 5, 0)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        native.frame_traces(b"", [b"abc"])


def test_the_library_is_cached_per_version(native):
    path = native_records.LIBRARY.path()
    assert path.exists() and os.path.basename(path).startswith("native_records-")


def test_without_a_compiler_records_are_framed_in_python(tmp_path):
    """A fresh process with no usable compiler: the background build fails once, is said
    once in the log, and the dump is complete and readable."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    code = textwrap.dedent(
        f"""
        import logging, sys
        sys.path[:0] = [{str(root)!r}, {str(root / "tests")!r}]
        logging.basicConfig(level=logging.WARNING)
        import tvm
        from eventgen import trace
        from tvmdbg_tb.events import native_records
        from tvmdbg_tb.events.options import DumpOptions
        from tvmdbg_tb.events.writer import DebugEventsWriter
        w = DebugEventsWriter({str(tmp_path / "dump")!r}, DumpOptions(circular_buffer_size=-1))
        payload = trace(0, 0).SerializeToString()
        for _ in range(50):
            w.write_graph_execution_trace_payloads([payload] * 30)
        native_records.LIBRARY.load()  # the background build's outcome, waited for
        w.write_graph_execution_trace_payloads([payload] * 30)
        w.close()
        assert native_records.LIBRARY.loaded() is None and native_records.LIBRARY.failure() is not None
        print("done")
        """
    )
    env = dict(os.environ, TVMDBG_CACHE_DIR=str(tmp_path / "cache"), CXX="/bin/false")
    env.pop(native_records.ENV_SWITCH, None)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and "done" in result.stdout, result.stderr
    assert result.stderr.count("native record framing unavailable") == 1, result.stderr
    reader = DebugDataReader(tmp_path / "dump")
    reader.update()
    assert list(reader.run().trace_digests()["index"]) == list(range(51 * 30))
    assert reader.corruptions == []


def test_a_changed_shared_header_rebuilds(native, tmp_path, monkeypatch):
    """The extensions include tvmdbg_tb/native/python_buffer.h: it is part of the build's key."""
    library = native_records.LIBRARY
    assert any(h.name == "python_buffer.h" for h in library._headers())
    before = library.path()
    changed = tmp_path / "python_buffer.h"
    changed.write_bytes(library._headers()[0].read_bytes() + b"// changed\n")
    monkeypatch.setattr(library, "_headers", lambda: [changed])
    assert library.path() != before


def test_a_process_that_exits_during_a_build_leaves_no_file(tmp_path):
    """The build runs in a daemon thread: a short program exits while the compiler runs; the
    compiler is stopped and its temporary output removed, nothing half-built stays cached."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    code = (
        f"import sys, time; sys.path.insert(0, {str(root)!r})\n"
        "from tvmdbg_tb.events import native_records\n"
        "native_records.LIBRARY.start_loading(); time.sleep(0.05)\n"
    )
    env = dict(os.environ, TVMDBG_CACHE_DIR=str(tmp_path / "cache"))
    env.pop(native_records.ENV_SWITCH, None)
    for _ in range(2):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert result.returncode == 0, result.stderr
    assert not list((tmp_path / "cache").glob("*.tmp"))


def _call_dump(tmp_path, name, monkeypatch, native, use_native: bool, ring: int) -> tuple[bytes, bytes]:
    """A writer run of write_call (an Execution and its traces as TraceParts, some with no
    trace, steps 0 to 2): framed and queued by queue_call (frame_call's framing, native_call's
    writer call), or in Python when the library is off."""
    calls = []
    if use_native:
        original = native.queue_call
        monkeypatch.setattr(native, "queue_call", lambda *args: calls.append(1) or original(*args))
    else:
        monkeypatch.setattr(native_records.LIBRARY, "_state", {"error": RuntimeError("off in this test")})
    statics = [p for p in _payloads() if len(p) < 20000][:14]
    monkeypatch.setattr(writer.secrets, "randbits", lambda bits: 0x5EED)  # both runs' records carry one key
    w = writer.DebugEventsWriter(
        tmp_path / name, DumpOptions(circular_buffer_size=ring), run_id="run", flush_interval=3600
    )
    for k in range(40):
        which = np.array([(k * 5 + j) % len(statics) for j in range(k % 6)], np.uint32)
        tails = (b"\x59" + struct.pack("<d", k / 8)) * len(which)  # each trace's duration field
        parts = TraceParts(statics, which.tobytes(), b"\x18" + bytes([k]), tails, 9)
        function_name = "f" * (k * 300)  # sizes past one- and two-byte varints
        execution = pb.Execution(function_name=function_name, num_traces=len(which)).SerializeToString()
        w.write_call(execution, parts, wall_time=200.0 + k, step=k % 3)
        if k % 9 == 0:
            w.flush()
    w.close()
    assert bool(calls) == use_native  # the path under test ran
    folder = tmp_path / name / "run"
    return tuple(
        (folder / layout.file_name(stream)).read_bytes() for stream in (layout.EXECUTION, layout.GRAPH_EXECUTION_TRACES)
    )


@pytest.mark.parametrize("ring", [-1, 30])
def test_a_calls_records_framed_in_one_native_call_are_the_python_paths(native, tmp_path, monkeypatch, ring):
    """write_call's frame_call path (the compiled tracer's every call) writes the files the
    Python path writes, byte for byte, compaction included, and they read back whole."""
    native_files = _call_dump(tmp_path, "native", monkeypatch, native, True, ring)
    monkeypatch.undo()
    python_files = _call_dump(tmp_path, "python", monkeypatch, native, False, ring)
    assert native_files == python_files
    reader = DebugDataReader(tmp_path / "native")
    reader.update()
    assert reader.corruptions == []
    assert reader.run("run").num_executions() == (40 if ring < 0 else 30)


def test_queue_call_fails_the_writer_on_parts_it_cannot_frame_and_drops_calls_once_closed(tmp_path):
    """native_records.queue_call never raises what framing raises: the writer fails with
    the reason (as write_call does) and later calls are dropped; a closed writer takes
    nothing; the trace counter is left as it was."""
    native = native_records.LIBRARY.load()
    assert native is not None, native_records.LIBRARY.failure()
    statics = [b"\x08\x01"]
    execution = pb.Execution(function_name="f").SerializeToString()
    w = writer.DebugEventsWriter(
        tmp_path / "bad", DumpOptions(circular_buffer_size=-1), run_id="run", flush_interval=3600
    )
    native.queue_call(w, 1.0, 0, execution, statics, b"\x00\x00\x00\x00", b"\x18\x00", b"\x59" + bytes(8), 9, False)
    assert w._tally.next_trace == 1 and w.failed is None
    with pytest.warns(RuntimeWarning, match="could not encode a call's records"):
        native.queue_call(w, 2.0, 0, execution, statics, b"\x07\x00\x00\x00", b"\x18\x01", b"\x59" + bytes(8), 9, False)
    assert "could not encode a call's records" in w.failed and w._tally.next_trace == 1
    w.close()
    closed = writer.DebugEventsWriter(tmp_path / "closed", DumpOptions(circular_buffer_size=-1), run_id="run")
    closed.close()
    native.queue_call(
        closed, 3.0, 0, execution, statics, b"\x00\x00\x00\x00", b"\x18\x02", b"\x59" + bytes(8), 9, False
    )
    assert closed._tally.next_trace == 0 and closed.failed is None


def test_queued_calls_wait_for_the_flush_in_one_spool_per_stream(tmp_path, monkeypatch):
    """What queue_call leaves in the writer's queue until the flush is one spool per stream
    (each call's records appended to one buffer, not objects per call: those sat in the
    allocator's heap between the program's own allocations, and tracked by the collector they
    set off collections); records the Python paths queue meanwhile join that spool in their
    order; the flush writes a spool alone without a copy, and without the library too."""
    import gc

    native = native_records.LIBRARY.load()
    assert native is not None, native_records.LIBRARY.failure()
    statics = [b"\x08\x01"]
    execution = pb.Execution(function_name="f").SerializeToString()
    w = writer.DebugEventsWriter(
        tmp_path / "run", DumpOptions(circular_buffer_size=-1), run_id="run", flush_interval=3600
    )
    for k in range(3):
        which = np.zeros(k + 1, np.uint32).tobytes()
        tails = (b"\x59" + bytes(8)) * (k + 1)  # each trace's duration field
        native.queue_call(w, 1.0, 0, execution, statics, which, b"\x18\x00", tails, 9, False)
        w.write_graph_execution_trace_payloads([b"\x08\x02"] * 2)  # the Python path, between calls
    w.write_execution(pb.Execution(function_name="g"))
    queued = {stream: w._pending[stream] for stream in (layout.GRAPH_EXECUTION_TRACES, layout.EXECUTION)}
    assert all(len(queue) == 1 and type(queue[0]) is native.Spool for queue in queued.values())
    assert not any(gc.is_tracked(queue[0]) for queue in queued.values())
    assert len(queued[layout.GRAPH_EXECUTION_TRACES][0].sizes()) == 1 + 2 + 3 + 3 * 2
    assert len(queued[layout.EXECUTION][0].sizes()) == 4
    spool = queued[layout.GRAPH_EXECUTION_TRACES][0]
    data, ends = record_file.join_chunks([spool], 100, True)
    assert type(data) is memoryview and list(ends) == list(itertools.accumulate(spool.sizes(), initial=100))[1:]
    monkeypatch.setattr(native_records.LIBRARY, "_state", {"error": RuntimeError("off in this test")})
    python_data, python_ends = record_file.join_chunks([b"ab", spool], 0, True)
    assert python_data == b"ab" + bytes(spool) and list(python_ends) == list(itertools.accumulate([2, *spool.sizes()]))
    monkeypatch.undo()
    w.close()
    reader = DebugDataReader(tmp_path / "run")
    reader.update()
    run = reader.run("run")
    assert reader.corruptions == [] and run.num_executions() == 4
    assert list(run.trace_digests()["index"]) == list(range(12))


def test_the_writers_counters_move_into_a_native_tally_with_their_counts(tmp_path, monkeypatch):
    """Until the library is loaded a writer keeps the counters each call advances in Python
    (queue_call reads and advances them by attribute); its next flush moves them into a native
    Tally (read and advanced with no attribute round trip), counts and all: the records numbered
    before and after the move follow on."""
    native = native_records.LIBRARY.load()
    assert native is not None, native_records.LIBRARY.failure()
    statics = [b"\x08\x01"]
    execution = pb.Execution(function_name="f").SerializeToString()
    monkeypatch.setattr(native_records.LIBRARY, "_state", {"error": RuntimeError("not loaded yet")})
    w = writer.DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1), run_id="run", flush_interval=3600)
    assert type(w._tally) is native_records.PythonTally
    which, tails = np.zeros(2, np.uint32).tobytes(), (b"\x59" + bytes(8)) * 2
    native.queue_call(w, 1.0, 0, execution, statics, which, b"\x18\x00", tails, 9, False)
    w.write_graph_execution_trace_payloads([b"\x08\x02"] * 3)
    w.write_execution(pb.Execution(function_name="g"))
    monkeypatch.undo()
    w.flush()
    assert type(w._tally) is native.Tally
    assert (w._tally.next_trace, w._tally.execution_sequence, w._tally.pending_bytes) == (5, 2, 0)
    settings = (w._tally.lock, w._tally.run_key_field, w._tally.eager_bytes, w._tally.counts_health)
    assert settings == (w._lock, w._run_key_field, w._eager_bytes, w._counts_health)  # carried over
    native.queue_call(w, 2.0, 0, execution, statics, which, b"\x18\x02", tails, 9, False)
    w.write_execution(pb.Execution(function_name="h"))
    assert (w._tally.next_trace, w._tally.execution_sequence) == (7, 4) and w._tally.pending_bytes > 0
    # queue_call wakes the flushing thread at the tally's eager bound (the writer's own is 8 MiB).
    w._tally.eager_bytes = 1
    native.queue_call(w, 3.0, 0, execution, statics, which, b"\x18\x03", tails, 9, False)
    deadline = time.monotonic() + 30
    while w._tally.pending_bytes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert w._tally.pending_bytes == 0  # written by the flushing thread, its interval an hour
    w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run("run")
    assert reader.corruptions == [] and run.num_executions() == 5
    assert list(run.trace_digests()["index"]) == list(range(9))


@pytest.mark.parametrize("ring", [True, False])
def test_join_chunks_writes_what_the_python_append_writes(tmp_path, monkeypatch, ring):
    """A ring file's flush joined natively (one call per stream) holds the bytes and the
    record ends that _RecordFile.append's Python loop gives, for records and runs of records
    (tuples and _Framed) and spools (queue_call's: record ends read from the records'
    framing); a chunk that is neither, or a spool its records do not fill, is a clear error."""
    from tvmdbg_tb.events import records as record_codec

    native = native_records.LIBRARY.load()
    assert native is not None, native_records.LIBRARY.failure()
    records = [bytes([k]) * (k * 7 + 1) for k in range(12)]
    records += [record_codec.encode(bytes([k]) * (k * 300)) for k in range(12, 15)]  # framed, for a spool
    spool = native.Spool()
    spool.extend([records[12], (b"".join(records[13:15]), [len(r) for r in records[13:15]])])
    chunks = [
        records[0],
        (b"".join(records[1:4]), [len(r) for r in records[1:4]]),
        writer._Framed(b"".join(records[4:6]), [len(r) for r in records[4:6]]),
        records[6],
        (b"".join(records[7:10]), [len(r) for r in records[7:10]]),
        (b"".join(records[10:12]), tuple(len(r) for r in records[10:12])),  # sizes as a tuple
        (b"", []),
        spool,
    ]
    files = {}
    for name in ("native", "python"):
        if name == "python":
            monkeypatch.setattr(native_records.LIBRARY, "_state", {"error": RuntimeError("off in this test")})
        record_file = writer._RecordFile(str(tmp_path / name), ring)
        record_file.append(chunks[:3])
        record_file.append(chunks[3:])
        record_file.handle.close()
        files[name] = ((tmp_path / name).read_bytes(), list(record_file.ends), record_file.size)
    monkeypatch.undo()
    assert files["native"] == files["python"]
    data, ends, size = files["native"]
    assert data == b"".join(records) and size == len(data)
    assert ends == (list(itertools.accumulate(map(len, records))) if ring else [])
    with pytest.raises(TypeError, match="a chunk is bytes, a"):
        native.join_chunks([records[0], "text"], 0, True)
    with pytest.raises(ValueError, match="do not add up"):
        native.join_chunks([(b"abc", [2])], 0, True)
    torn = native.Spool()
    torn.extend([records[12][:-1]])
    with pytest.raises(ValueError, match="records do not fill it"):
        native.join_chunks([torn], 0, True)
