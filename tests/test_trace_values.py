"""events/trace_values.py: the debug values of many traces read by their offsets give what
protobuf gives record by record, across chunk boundaries, for repeated and unordered offsets,
and leave out (never misread) damaged, cut and vanished records."""

from __future__ import annotations

import os

import numpy as np
import pytest
from eventgen import chain_ops

from tvmdbg_tb.events import layout, records, trace_values
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.reader import DebugDataReader
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb

WIDTH = 15
OPS, CALLS = 7, 60


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    """A FULL_STATS run of OPS ops called CALLS times, each trace's values distinct."""
    logdir = tmp_path_factory.mktemp("values")
    w = DebugEventsWriter(
        str(logdir), DumpOptions(tensor_debug_mode="FULL_STATS", circular_buffer_size=-1), run_id="run"
    )
    for op in chain_ops(OPS):
        w.write_graph_op_creation(op)
    w.write_graph(pb.DebuggedGraph(graph_id=0, name="main", source_mapped=True))
    for call in range(CALLS):
        index = w.allocate_execution_index()
        w.write_graph_execution_traces(
            [
                pb.GraphExecutionTrace(
                    op_id=op_id,
                    execution_index=index,
                    op_name=f"lv{op_id}",
                    kernel=f"kernel{op_id}",
                    tensor_debug_mode=pb.FULL_STATS,
                    # Records of different lengths (a longer op name every few ops).
                    debug_values=[0, pb.FLOAT32, 1, 8 + op_id, 0, 0, 0, 1, 2, 5 + op_id]
                    + [-call, op_id + call, 0.5 * call, 1.0 + op_id, 7.0 * call + op_id],
                )
                for op_id in range(OPS)
            ]
        )
        w.write_execution(pb.Execution(index=index, function_name="main", graph_id=0, num_traces=OPS))
    w.close()
    return w.run_dir


def _read(path: str, offsets: np.ndarray) -> np.ndarray:
    out = np.full((len(offsets), WIDTH), np.nan)
    seen = np.zeros(len(offsets), dtype=bool)
    for positions, values in trace_values.iter_debug_values(path, offsets, WIDTH):
        assert not seen[positions].any()  # each asked position yielded once
        seen[positions] = True
        out[positions] = values
    return out


def _expected(path: str):
    with DebugDataReader(path) as reader:
        reader.update()
        run = reader.run()
        offsets = run.trace_digests()["offset"].copy()
        values = np.array([list(run.trace(i).debug_values) for i in range(run.num_traces())])
    return offsets, values


@pytest.mark.parametrize("chunk", [trace_values.CHUNK, 97, 1000])
def test_values_equal_protobufs_across_chunks(dump, monkeypatch, chunk):
    monkeypatch.setattr(trace_values, "CHUNK", chunk)
    offsets, expected = _expected(dump)
    assert len(offsets) == OPS * CALLS
    np.testing.assert_array_equal(_read(dump, offsets), expected)
    # Unordered, repeated, a subset: rows follow the offsets asked for.
    rng = np.random.default_rng(0)
    pick = rng.choice(len(offsets), size=150, replace=True)
    np.testing.assert_array_equal(_read(dump, offsets[pick]), expected[pick])


def test_damaged_cut_and_vanished_records_are_left_out(dump, tmp_path, monkeypatch):
    monkeypatch.setattr(trace_values, "CHUNK", 500)
    offsets, expected = _expected(dump)
    path = tmp_path / "run"
    path.mkdir()
    data = bytearray(open(os.path.join(dump, layout.file_name(layout.GRAPH_EXECUTION_TRACES)), "rb").read())
    damaged = 10
    data[int(offsets[damaged]) + 9] ^= 0xFF  # the length field's CRC no longer holds
    cut = len(offsets) - 5
    traces = path / layout.file_name(layout.GRAPH_EXECUTION_TRACES)
    traces.write_bytes(bytes(data[: int(offsets[cut]) + records.HEADER_SIZE + 3]))  # cut inside a record
    got = _read(str(path), offsets)
    kept = np.ones(len(offsets), dtype=bool)
    kept[damaged] = False
    kept[cut:] = False
    np.testing.assert_array_equal(got[kept], expected[kept])
    assert np.isnan(got[~kept]).all()
    # Offsets past the end of a file that shrank: nothing read, no endless loop.
    traces.write_bytes(bytes(data[: int(offsets[3])]))
    got = _read(str(path), offsets)
    np.testing.assert_array_equal(got[:3], expected[:3])
    assert np.isnan(got[3:]).all()
