"""The vectorised trace indexing gives exactly the rows protobuf parsing gives."""

import numpy as np

from tvmdbg_tb.events import layout, vectorized
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.reader import EXECUTION_DIGEST, TRACE_DIGEST, DebugDataReader, RunReader
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb


def random_traces(rng, n):
    out = []
    for _ in range(n):
        mode = int(
            rng.choice([pb.NO_TENSOR, pb.CURT_HEALTH, pb.CONCISE_HEALTH, pb.FULL_HEALTH, pb.SHAPE, pb.FULL_TENSOR])
        )
        t = pb.GraphExecutionTrace(
            op_id=int(rng.integers(0, 1 << int(rng.integers(1, 40)))),
            output_slot=int(rng.choice([0, 1, 3, -1])),
            execution_index=int(rng.integers(0, 1 << int(rng.integers(1, 50)))),
            op_name="lv" * int(rng.integers(0, 80)),
            kernel="k",
            graph_id=int(rng.integers(0, 5)),
            tensor_debug_mode=mode,
            device="cpu:0",
            error="boom" if rng.random() < 0.1 else "",
            dtype="float32",
            shape=[int(d) for d in rng.integers(0, 300, size=int(rng.integers(0, 4)))],
        )
        if rng.random() < 0.8:
            t.duration_us = float(rng.random() * 1000) if rng.random() < 0.9 else float("nan")
        nvalues = {pb.CURT_HEALTH: 1, pb.CONCISE_HEALTH: 4, pb.FULL_HEALTH: 10, pb.SHAPE: 5}.get(mode, 0)
        if rng.random() < 0.1:
            nvalues = int(rng.integers(0, 12))  # a short or long list
        values = [float(v) for v in rng.integers(0, 3, size=nvalues) * rng.integers(0, 1 << 33)]
        if values and rng.random() < 0.05:
            values[-1] = float("nan")
        t.debug_values.extend(values)
        if mode == pb.FULL_TENSOR and rng.random() < 0.7:
            value = rng.standard_normal(6).astype("float32")
            value[int(rng.integers(0, 6))] = np.nan if rng.random() < 0.5 else 1.0
            t.tensor_value.dtype = "float32"
            t.tensor_value.shape.append(6)
            t.tensor_value.content = value.tobytes()
        out.append(t)
    return out


def test_vectorised_rows_equal_protobuf_rows(tmp_path):
    rng = np.random.default_rng(7)
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1), run_id="r")
    for _ in range(5):
        w.write_graph_execution_traces(random_traces(rng, 400), wall_time=float(rng.random() * 1e9))
    w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run("r")
    got = run.trace_digests()
    assert len(got) == 2000 and run.corruptions == []
    with open(tmp_path / "r" / layout.file_name(layout.GRAPH_EXECUTION_TRACES), "rb") as f:
        buf = f.read()
    offsets, starts, lengths, bad, consumed = vectorized.scan(buf, 0, "x")
    assert consumed == len(buf) and not bad
    expected = np.array(
        [
            RunReader._trace_row(int(o), pb.DebugEvent.FromString(buf[s : s + n]))
            for o, s, n in zip(offsets, starts, lengths)
        ],
        dtype=TRACE_DIGEST,
    )
    for name in TRACE_DIGEST.names:
        if name == "duration_us":
            np.testing.assert_array_equal(np.isnan(got[name]), np.isnan(expected[name]))
            np.testing.assert_array_equal(np.nan_to_num(got[name]), np.nan_to_num(expected[name]))
        else:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    columns = vectorized.trace_digests(vectorized.padded(buf), starts, lengths)
    assert columns["ok"].mean() > 0.7  # most records take the fast path


def _write(tmp_path, n):
    from eventgen import trace

    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1), run_id="r")
    w.write_graph_execution_traces([trace(i % 5, i // 5, nan=i % 3) for i in range(n)])
    w.close()
    return str(tmp_path / "r" / layout.file_name(layout.GRAPH_EXECUTION_TRACES))


def test_damaged_length_fields_across_small_chunks(tmp_path, monkeypatch):
    from tvmdbg_tb.events import reader as reader_module
    from tvmdbg_tb.events import records

    monkeypatch.setattr(reader_module, "_READ_CHUNK", 1000)  # many chunks, records cut at their ends
    path = _write(tmp_path, 300)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    items = list(records.scan(bytes(data), 0, path))
    damaged = {40, 41, 200}
    for i in damaged:
        data[items[i][0] + 3] ^= 0x55  # the length field (its CRC no longer matches)
    with open(path, "wb") as f:
        f.write(data)
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run("r")
    assert [int(i) for i in run.trace_digests()["index"]] == [i for i in range(300) if i not in damaged]
    assert sorted(c.offset for c in run.corruptions) == [items[40][0], items[200][0]]  # 40-41: one stretch
    assert all(c.reason == "bad length CRC" for c in run.corruptions)
    assert list(run.trace_digests()["nan"][:5]) == [0, 1, 2, 0, 1]


def test_live_growth_in_odd_pieces_loses_nothing(tmp_path):
    path = _write(tmp_path, 200)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:7])
    reader = DebugDataReader(tmp_path)
    reader.update()
    rng = np.random.default_rng(3)
    cut = 7
    while cut < len(data):
        step = int(rng.integers(1, 700))
        with open(path, "ab") as f:
            f.write(data[cut : cut + step])
        cut += step
        reader.update()
    run = reader.run("r")
    assert [int(i) for i in run.trace_digests()["index"]] == list(range(200)) and run.corruptions == []


def random_executions(rng, n):
    names = ["main", "backbone_loss_adjoint", "ünïcode_fn", ""]
    out = []
    for i in range(n):
        mode = int(rng.choice([pb.NO_TENSOR, pb.CURT_HEALTH, pb.CONCISE_HEALTH, pb.FULL_HEALTH, pb.SHAPE]))
        e = pb.Execution(
            index=i,
            function_name=str(rng.choice(names)),
            graph_id=int(rng.choice([-1, 0, 3, 1 << 40])),
            tensor_debug_mode=mode,
            num_traces=int(rng.integers(0, 1 << int(rng.integers(1, 30)))),
            error="boom" if rng.random() < 0.1 else "",
            executable_id="exe",
        )
        if rng.random() < 0.9:
            e.duration_us = float(rng.random() * 100)
        nvalues = {pb.CURT_HEALTH: 1, pb.CONCISE_HEALTH: 4, pb.FULL_HEALTH: 10, pb.SHAPE: 5}.get(mode, 0)
        for summaries in (e.inputs, e.outputs):
            for _ in range(int(rng.integers(0, 4))):
                k = nvalues if rng.random() < 0.9 else int(rng.integers(0, 12))
                values = [float(v) for v in rng.integers(0, 3, size=k) * rng.integers(0, 1000)]
                if values and rng.random() < 0.05:
                    values[int(rng.integers(0, len(values)))] = float("nan")
                summaries.add(debug_values=values, dtype="float32", shape=[2, 3])
        out.append(e)
    return out


def test_vectorised_execution_rows_equal_protobuf_rows(tmp_path):
    rng = np.random.default_rng(11)
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1), run_id="r")
    for e in random_executions(rng, 1500):
        w.write_execution(e, wall_time=float(rng.random() * 1e9))
    w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run("r")
    got = run.execution_digests()
    assert len(got) == 1500 and run.corruptions == []
    with open(tmp_path / "r" / layout.file_name(layout.EXECUTION), "rb") as f:
        buf = f.read()
    offsets, starts, lengths, _, _ = vectorized.scan(buf, 0, "x")
    expected_reader = RunReader("check", str(tmp_path / "r"))
    expected = [
        expected_reader._execution_row(int(o), pb.DebugEvent.FromString(buf[s : s + n]))
        for o, s, n in zip(offsets, starts, lengths)
    ]
    names = [expected_reader.function_names[row[6]] for row in expected]
    assert [run.function_names[f] for f in got["function"]] == names
    for k, name in enumerate(EXECUTION_DIGEST.names):
        if name == "function":
            continue
        column = np.array([row[k] for row in expected], dtype=EXECUTION_DIGEST[name])
        if name == "duration_us":
            np.testing.assert_array_equal(np.nan_to_num(got[name]), np.nan_to_num(column))
        else:
            np.testing.assert_array_equal(got[name], column, err_msg=name)
    columns = vectorized.execution_digests(vectorized.padded(buf), starts, lengths)
    assert columns["ok"].mean() > 0.8  # most records take the fast path
