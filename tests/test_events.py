"""Round trips through the writer and reader on real files."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from eventgen import chain_ops, execution, trace

from tvmdbg_tb.events import layout, records
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.reader import NONFINITE, DebugDataReader
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent


def write_small_run(logdir, n_exec=3, traces_per_exec=4, **kwargs):
    w = DebugEventsWriter(logdir, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1), **kwargs)
    loc = w.code_location([(__file__, 10, "outer"), (__file__, 20, "inner")], user_frame_index=1)
    w.write_graph(pb.DebuggedGraph(graph_id=0, name="main", source_mapped=True, code_location=loc))
    for op in chain_ops(traces_per_exec, location=lambda op_id: loc, op_code_location=False):
        w.write_graph_op_creation(op)
    for e in range(n_exec):
        index = w.allocate_execution_index()
        w.write_graph_execution_traces([trace(op, index, nan=int(e == 1 and op == 2)) for op in range(traces_per_exec)])
        w.write_execution(execution(index, traces_per_exec))
    return w


def test_round_trip_every_record_kind(tmp_path):
    w = write_small_run(tmp_path)
    w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    assert reader.runs() == [w.run_id]
    run = reader.run()
    assert run.metadata.run_id == w.run_id and run.metadata.pid == os.getpid()
    assert run.metadata.file_version == layout.FILE_VERSION
    assert run.metadata.tensor_debug_mode == pb.FULL_HEALTH
    # One source file (this one), two frames, each written once although used 5 times.
    assert [f.file_path for f in run.source_files()] == [__file__]
    assert run.source_file(0).lines[0].startswith('"""Round trips')
    graph = run.graph(0)
    frames = run.frames(graph.code_location)
    assert [(f.line, f.function) for f in frames] == [(10, "outer"), (20, "inner")]
    assert run.user_frame(graph.code_location).function == "inner"
    assert [op.op_name for op in run.ops(0)] == ["lv0", "lv1", "lv2", "lv3"]
    assert run.consumers(1) == [(2, 0, 0)]
    assert [op.op_id for op in run.find_ops("relax.add")] == [0, 1, 2, 3]
    assert run.num_executions() == 3 and run.num_traces() == 12
    digests = run.trace_digests()
    assert list(digests["index"]) == list(range(12))
    assert list(digests["execution_index"]) == [0] * 4 + [1] * 4 + [2] * 4
    bad = np.flatnonzero(digests["flags"] & NONFINITE)
    assert list(bad) == [6] and digests["nan"][6] == 1
    full = run.trace(6)
    assert full.op_name == "lv2" and full.kernel == "kernel2" and list(full.shape) == [100]
    assert list(run.op_trace_indices(2)) == [2, 6, 10]
    assert list(run.execution_trace_indices(1)) == [4, 5, 6, 7]
    assert run.execution(2).index == 2 and run.execution(2).num_traces == 4
    with pytest.raises(IndexError):
        run.trace(12)
    with pytest.raises(KeyError):
        run.op(99)
    assert reader.corruptions == []


def test_files_are_standard_tfrecords(tmp_path):
    """TensorBoard's own record reader reads our framing (it is TFRecord, with a C CRC)."""
    from tensorboard.backend.event_processing import event_file_loader

    w = write_small_run(tmp_path)
    w.close()
    path = os.path.join(w.run_dir, layout.file_name(layout.GRAPH_EXECUTION_TRACES))
    raw = list(event_file_loader.RawEventFileLoader(path).Load())
    assert len(raw) == 12
    assert pb.DebugEvent.FromString(raw[6]).graph_execution_trace.debug_values[6] == 1


def _trace_file(run_dir):
    return os.path.join(run_dir, layout.file_name(layout.GRAPH_EXECUTION_TRACES))


def _record_offsets(data: bytes) -> list[int]:
    return [item[0] for item in records.scan(bytes(data), 0, "x")]


def test_truncated_tail_is_read_once_complete(tmp_path):
    w = write_small_run(tmp_path)
    w.close()
    path = _trace_file(w.run_dir)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:-7])  # the last record lacks 7 bytes
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run()
    assert run.num_traces() == 11 and reader.corruptions == []
    with open(path, "ab") as f:
        f.write(data[-7:])
    counts = reader.update()[w.run_id]
    assert counts[layout.GRAPH_EXECUTION_TRACES] == 1
    assert run.num_traces() == 12 and run.trace(11).op_id == 3
    assert reader.corruptions == []


def test_flipped_byte_is_reported_and_reading_goes_on(tmp_path):
    w = write_small_run(tmp_path)
    w.close()
    path = _trace_file(w.run_dir)
    data = bytearray(Path(path).read_bytes())
    offset_of_fifth = _record_offsets(data)[4]
    data[offset_of_fifth + records.HEADER_SIZE + 3] ^= 0xFF  # inside the 5th record's data
    Path(path).write_bytes(bytes(data))
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run()
    assert run.num_traces() == 11
    assert 4 not in run.trace_digests()["index"]
    [bad] = reader.corruptions
    assert bad.path == path and bad.offset == offset_of_fifth and "CRC" in bad.reason
    assert path in str(bad) and str(offset_of_fifth) in str(bad)
    reader.update()  # reported once, not again and again
    assert len(reader.corruptions) == 1


def test_damaged_length_resynchronises(tmp_path):
    w = write_small_run(tmp_path)
    w.close()
    path = _trace_file(w.run_dir)
    data = bytearray(Path(path).read_bytes())
    offsets = _record_offsets(data)
    data[offsets[2] + 1] ^= 0x40  # the length field of the 3rd record
    Path(path).write_bytes(bytes(data))
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run()
    assert list(run.trace_digests()["index"]) == [0, 1, *range(3, 12)]
    [bad] = reader.corruptions
    assert bad.offset == offsets[2] and bad.length == offsets[3] - offsets[2]


@pytest.mark.parametrize("n", [1, 7, 50])
def test_circular_buffer_keeps_exactly_the_last_n(tmp_path, n):
    w = DebugEventsWriter(
        tmp_path, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=n), flush_interval=0.05
    )
    total = 0
    for e in range(40):
        index = w.allocate_execution_index()
        w.write_graph_execution_traces([trace(op, index) for op in range(5)])
        w.write_execution(execution(index, 5))
        total += 5
        if e % 3 == 0:
            w.flush()  # several compactions happen along the way
    w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run()
    assert list(run.trace_digests()["index"]) == list(range(total - n, total))
    assert list(run.execution_digests()["index"]) == list(range(40 - min(n, 40), 40))
    assert run.trace(0).index == total - n


def _ring_of_traces(logdir, limit: int | None) -> tuple[list[int], int]:
    """100 equal traces written under circular_buffer_bytes=limit: (the trace indices read
    back, the traces file's size)."""
    w = DebugEventsWriter(logdir, DumpOptions(circular_buffer_size=1000, circular_buffer_bytes=limit))
    index = w.allocate_execution_index()
    w.write_graph_execution_traces([trace(1, index) for _ in range(100)])
    w.close()
    reader = DebugDataReader(logdir)
    reader.update()
    (traces,) = logdir.glob("*/tvmdbg.graph_execution_traces")
    return list(reader.run().trace_digests()["index"]), traces.stat().st_size


def test_circular_buffer_byte_bound(tmp_path):
    """The bound holds the newest records and the RecordsDropped record standing for the
    others: the file never grows past it, and keeps as many records as fit beside that one."""
    _, whole = _ring_of_traces(tmp_path / "whole", None)
    size = whole // 100  # every record has the same size (fixed-width index)
    for limit in (10 * size + size // 2, 10 * size + 2 * size // 3, 12 * size):
        kept, file_size = _ring_of_traces(tmp_path / str(limit), limit)
        marker = file_size - len(kept) * size
        assert 0 < marker < size and file_size <= limit
        assert len(kept) == (limit - marker) // size and kept == list(range(100 - len(kept), 100))


def test_keep_all_never_compacts(tmp_path):
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=0))
    index = w.allocate_execution_index()
    for _ in range(30):
        w.write_graph_execution_traces([trace(op, index) for op in range(100)])
        w.flush()
    w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    assert reader.run().num_traces() == 3000


def test_reader_sees_compaction_as_reset(tmp_path):
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=10))
    seen = []
    reader = DebugDataReader(tmp_path)
    reader.update()
    reader.run().add_observer(lambda run, stream, start, reset: seen.append((stream, start, reset)))
    index = w.allocate_execution_index()
    w.write_graph_execution_traces([trace(op, index) for op in range(15)])
    w.flush()
    reader.update()
    assert reader.run().num_traces() == 15
    w.write_graph_execution_traces([trace(op, index) for op in range(10)])
    w.flush()  # 25 >= 2 * 10: compacted to the last 10
    reader.update()
    assert list(reader.run().trace_digests()["index"]) == list(range(15, 25))
    assert (layout.GRAPH_EXECUTION_TRACES, 0, True) in seen
    w.close()


def test_reader_follows_the_file_it_opened_when_replaced_while_opening(tmp_path, monkeypatch):
    """The writer compacts the trace file again between the reader's stat of it and its open.
    The reader knows the file by what it opened: the next update finds nothing new and no
    replacement. Known by the file stat'ed (gone, its inode number free for the writer's next
    file to reuse), it read the file opened a second time, or, with the number reused, read a
    dead file as current while the calls went on (their traces missing)."""
    from tvmdbg_tb.events import reader as reader_module

    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=10))
    index = w.allocate_execution_index()
    w.write_graph_execution_traces([trace(op, index) for op in range(15)])
    w.flush()
    reader = DebugDataReader(tmp_path)
    reader.update()
    seen = []
    reader.run().add_observer(lambda run, stream, start, reset: seen.append((stream, reset)) if reset else None)
    seen.clear()
    trace_file = os.path.join(reader.run().path, layout.file_name(layout.GRAPH_EXECUTION_TRACES))
    real_open, replaced = os.open, []

    def open_after_a_compaction(path, *args, **kwargs):
        if path == trace_file and not replaced:  # stat'ed, not yet opened: compacted again
            w.write_graph_execution_traces([trace(op, index) for op in range(10)])
            w.flush()  # 20 >= 2 * 10: compacted to traces 25-34
            replaced.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(reader_module.os, "open", open_after_a_compaction)
    w.write_graph_execution_traces([trace(op, index) for op in range(10)])
    w.flush()  # 25 >= 2 * 10: compacted to traces 15-24
    reader.update()
    assert replaced and list(reader.run().trace_digests()["index"]) == list(range(25, 35))
    assert seen == [(layout.GRAPH_EXECUTION_TRACES, True)]
    assert reader.update()[reader.runs()[0]][layout.GRAPH_EXECUTION_TRACES] == 0
    assert seen == [(layout.GRAPH_EXECUTION_TRACES, True)], "the file opened was taken for another"
    w.write_graph_execution_traces([trace(op, index) for op in range(3)])
    w.flush()
    reader.update()
    assert list(reader.run().trace_digests()["index"]) == list(range(25, 38))
    w.close()


def test_concurrent_writer_and_polling_reader_lose_nothing(tmp_path):
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1), flush_interval=0.01)
    total, per_batch = 20000, 50

    def produce():
        for b in range(total // per_batch):
            index = w.allocate_execution_index()
            w.write_graph_execution_traces([trace(b % 7, index) for _ in range(per_batch)])
            w.write_execution(execution(index, per_batch))
            time.sleep(0.001)  # a program doing other work between calls

    thread = threading.Thread(target=produce)
    reader = DebugDataReader(tmp_path)
    thread.start()
    polls = 0
    while thread.is_alive():
        reader.update()
        polls += 1
    thread.join()
    w.close()
    reader.update()
    run = reader.run()
    assert polls > 1
    assert list(run.trace_digests()["index"]) == list(range(total))
    assert list(run.execution_digests()["index"]) == list(range(total // per_batch))
    assert reader.corruptions == []


def test_traces_from_several_threads_are_in_index_order_on_disk(tmp_path):
    """Indices are handed out and batches queued in one step: the file is in index order."""
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1), flush_interval=0.005)
    threads, batches, per_batch = 4, 300, 7

    def produce(op):
        for _ in range(batches):
            w.write_graph_execution_traces([trace(op, 0) for _ in range(per_batch)])

    workers = [threading.Thread(target=produce, args=(op,)) for op in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    digests = reader.run().trace_digests()
    assert list(digests["index"]) == list(range(threads * batches * per_batch))
    ops = list(digests["op_id"])  # each batch stays whole
    assert all(len(set(ops[k : k + per_batch])) == 1 for k in range(0, len(ops), per_batch))


@pytest.mark.parametrize("caller_bound", [None, 8 << 20], ids=["flushing_thread", "caller_past_its_bound"])
def test_a_large_queue_is_written_before_the_timer_fires(tmp_path, monkeypatch, caller_bound):
    """Past the eager bound queued records are written without waiting for the flush timer:
    by the flushing thread, and by the caller's thread only past the caller's bound."""
    from tvmdbg_tb.events import writer as writer_module

    if caller_bound is not None:
        monkeypatch.setattr(writer_module, "_CALLER_WRITE_BYTES", caller_bound)
    writers = []
    write_pending = DebugEventsWriter._write_pending

    def spied(self, fsync):
        writers.append(threading.current_thread().name)
        return write_pending(self, fsync)

    monkeypatch.setattr(DebugEventsWriter, "_write_pending", spied)
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1), flush_interval=3600)
    path = tmp_path / w.run_id / layout.file_name(layout.GRAPH_EXECUTION_TRACES)
    payload = trace(0, 0).SerializeToString()
    count = (9 << 20) // len(payload)
    for _ in range(0, count, 1000):
        w.write_graph_execution_trace_payloads([payload] * 1000)
    deadline = time.monotonic() + 30
    while path.stat().st_size < 8 << 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.stat().st_size >= 8 << 20
    main = threading.current_thread().name
    assert writers[0] == main  # the metadata written when the writer starts
    eager = writers[1:]
    if caller_bound is None:
        assert eager and set(eager) == {"tvmdbg-flush"}
    else:
        assert main in eager
    w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    assert reader.run().num_traces() == (count + 999) // 1000 * 1000
    assert reader.corruptions == []


def test_several_runs_and_nested_directories(tmp_path):
    a = write_small_run(tmp_path, run_id="a")
    b = write_small_run(tmp_path / "exp2", run_id="b")
    c = write_small_run(tmp_path, run_id="a")  # same name: gets its own directory
    for w in (a, b, c):
        w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    assert reader.runs() == ["a", "a-1", os.path.join("exp2", "b")]
    # Without a name: the rule every front end uses. Each run holds a NaN (execution 1): the
    # one written first is chosen.
    assert reader.choose() == (reader.run("a"), "the run whose first NaN/Inf was recorded first")
    assert reader.run() is reader.run("a")
    with pytest.raises(LookupError, match="holds no tvmdbg run"):
        DebugDataReader(tmp_path / "empty").run()
    assert reader.run("a-1").num_traces() == 12
    with pytest.raises(KeyError):
        reader.run("nope")
    # A run directory given directly is a logdir with one run named ".".
    single = DebugDataReader(b.run_dir)
    single.update()
    assert single.runs() == ["."] and single.run().num_executions() == 3


def test_new_runs_and_records_appear_on_update(tmp_path):
    reader = DebugDataReader(tmp_path)
    reader.update()
    assert reader.runs() == []
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1), run_id="live", flush_interval=3600)
    reader.update()
    assert reader.runs() == ["live"] and reader.run().num_traces() == 0
    index = w.allocate_execution_index()
    w.write_graph_execution_traces([trace(0, index)])
    w.flush()
    reader.update()
    assert reader.run().num_traces() == 1
    w.close()


CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path[:0] = [{root!r}, {tests!r}]
    from eventgen import trace, execution
    from tvmdbg_tb.events.options import DumpOptions
    from tvmdbg_tb.events.writer import DebugEventsWriter
    w = DebugEventsWriter({logdir!r}, DumpOptions(circular_buffer_size=-1), run_id="killed", flush_interval=0.2)
    i = 0
    while True:
        index = w.allocate_execution_index()
        w.write_graph_execution_traces([trace(0, index)])
        print(i, time.monotonic(), flush=True)
        i += 1
        time.sleep(0.002)
    """
)


def test_sigkill_keeps_everything_up_to_the_last_timed_flush(tmp_path):
    code = CHILD.format(root=str(ROOT), tests=str(ROOT / "tests"), logdir=str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    lines = []
    started = None
    for line in child.stdout:
        lines.append(line.split())
        started = started or time.monotonic()
        if time.monotonic() - started > 2.0:
            break
    child.send_signal(signal.SIGKILL)
    child.wait()
    killed_at = float(lines[-1][1])
    # Everything written more than two flush intervals before the kill was flushed.
    must_have = max(int(i) for i, t in lines if float(t) < killed_at - 0.5)
    reader = DebugDataReader(tmp_path)
    reader.update()
    got = reader.run("killed").trace_digests()["index"]
    assert len(got) > must_have
    assert list(got) == list(range(len(got)))  # a prefix, no gaps
    assert reader.corruptions == []


def test_disk_full_warns_once_and_never_raises(tmp_path):
    """With a 64 KiB file size limit, writes fail (EFBIG); the program goes on."""
    code = textwrap.dedent(
        f"""
        import resource, signal, sys, warnings
        sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "tests")!r}]
        from eventgen import trace
        from tvmdbg_tb.events.options import DumpOptions
        from tvmdbg_tb.events.writer import DebugEventsWriter
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            w = DebugEventsWriter({str(tmp_path)!r}, DumpOptions(circular_buffer_size=-1), flush_interval=0.01)
            for i in range(3000):
                w.write_graph_execution_traces([trace(0, i)])
                if i % 100 == 0:
                    w.flush()
            w.close()
        msgs = [str(c.message) for c in caught]
        assert len(msgs) == 1, msgs
        assert "debug dumping is disabled" in msgs[0] and w.failed
        print("user program finished")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "user program finished" in result.stdout
    reader = DebugDataReader(tmp_path)
    reader.update()
    got = reader.run().trace_digests()["index"]
    assert len(got) > 0 and list(got) == list(range(len(got)))


def test_records_larger_than_a_read_chunk(tmp_path, monkeypatch):
    from tvmdbg_tb.events import reader as reader_module

    monkeypatch.setattr(reader_module, "_READ_CHUNK", 256)
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1))
    big = trace(0, 0)
    big.tensor_value.dtype = "float32"
    big.tensor_value.shape.append(1000)
    big.tensor_value.content = np.arange(1000, dtype="float32").tobytes()
    w.write_graph_execution_traces([trace(1, 0), big, trace(2, 0)])
    w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run()
    assert list(run.trace_digests()["op_id"]) == [1, 0, 2]
    value = run.trace(1).tensor_value
    assert np.frombuffer(value.content, dtype="float32")[999] == 999


def test_varints_are_protobufs_at_every_size_boundary():
    """wire.varint (the fast path's raw fields) against protobuf's own encoding (0 is not
    serialized in proto3, so it is left out)."""
    from tvmdbg_tb.events.wire import varint

    values = {1, 127, 128, 16383, 16384, 16385, (1 << 21) - 1, 1 << 21, (1 << 28) + 5, (1 << 63) + 7}
    values |= {v + d for v in (1 << 7, 1 << 14, 1 << 21) for d in range(-3, 4)}
    for value in sorted(values):
        message = pb.GraphExecutionTrace(execution_index=value if value < 1 << 63 else value - (1 << 64))
        assert b"\x18" + varint(value) == message.SerializeToString(), value


@pytest.mark.parametrize("path", ["write_event", "payloads", "queue_call"])
def test_records_written_while_the_writer_closes_are_counted_only_if_on_disk(tmp_path, path):
    """A thread keeps writing traces while another closes the writer: each trace is either
    queued before the last batch is taken (and on disk) or dropped; the RunEnd's count of
    traces is the number of trace records in the file, never more."""
    from tvmdbg_tb.events import native_records
    from tvmdbg_tb.events.trace_parts import TraceParts

    native = native_records.LIBRARY.load()
    assert native is not None, native_records.LIBRARY.failure()
    payload = trace(0, 0).SerializeToString()
    serialized = pb.Execution(function_name="f").SerializeToString()
    for attempt in range(5):
        w = DebugEventsWriter(tmp_path / str(attempt), DumpOptions(circular_buffer_size=-1), flush_interval=3600)
        started = threading.Event()

        def keep_writing(w=w, started=started):
            while not w.closed:
                if path == "write_event":
                    w.write_event(layout.GRAPH_EXECUTION_TRACES, pb.DebugEvent(graph_execution_trace=trace(0, 0)))
                elif path == "payloads":
                    w.write_graph_execution_trace_payloads([payload] * 3)
                else:
                    w.write_call(serialized, TraceParts([payload], bytes(8), b"\x18\x00", b"", 0))
                started.set()

        writer_thread = threading.Thread(target=keep_writing)
        writer_thread.start()
        started.wait(10)
        w.close()
        writer_thread.join(10)
        run_dir = tmp_path / str(attempt) / w.run_id
        data = (run_dir / layout.file_name(layout.GRAPH_EXECUTION_TRACES)).read_bytes()
        on_disk = sum(
            1 for item in records.scan(data, 0, "traces", final=True) if not isinstance(item, records.Corruption)
        )
        reader = DebugDataReader(tmp_path / str(attempt))
        reader.update()
        run_end = reader.run().run_end
        reader.close()
        assert run_end is not None and run_end.num_traces == on_disk > 0


def test_a_digest_table_grows_within_an_address_space_limit():
    """A table reserves room for twice the rows expected (address space, not memory); where
    the process may not map that much (a ulimit -v), it grows to what is needed instead."""
    script = textwrap.dedent(
        """\
        import resource
        import numpy as np
        from tvmdbg_tb.events.digests import TRACE_DIGEST
        from tvmdbg_tb.events.run_index import GrowingArray
        rows = 3_000_000  # 219 MB of digests
        with open("/proc/self/status") as f:
            mapped = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        limit = mapped + int(1.6 * rows * TRACE_DIGEST.itemsize) + (64 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        table = GrowingArray(TRACE_DIGEST)
        block = np.zeros(100_000, TRACE_DIGEST)
        for start in range(0, rows, len(block)):
            block["index"] = np.arange(start, start + len(block))
            table.append_array(block, expected=rows)
        assert table.size == rows and (table.view()["index"] == np.arange(rows)).all()
        print("grown to", len(table._data))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "grown to 3000000"
