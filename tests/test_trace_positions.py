"""The reader's kept op/execution trace positions (events/positions.py), the alert counts kept
as alerts arrive and the completeness tally (events/tally.py): on a dump that grows while it
is read, and on one whose circular buffer compacts, every answer equals a fresh pass over
the digests."""

from __future__ import annotations

import numpy as np
from eventgen import execution, trace

from tvmdbg_tb import analysis
from tvmdbg_tb.events import layout
from tvmdbg_tb.events import positions as positions_module
from tvmdbg_tb.events import tally as tally_module
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.reader import DebugDataReader
from tvmdbg_tb.events.writer import DebugEventsWriter


def _expected(digests: np.ndarray, **columns) -> list[int]:
    mask = np.ones(len(digests), dtype=bool)
    for name, value in columns.items():
        mask &= digests[name] == value
    return np.flatnonzero(mask).tolist()


def _write_calls(w: DebugEventsWriter, calls: int, nan_from_call: int | None = None) -> None:
    for _ in range(calls):
        index = w.allocate_execution_index()
        bad = nan_from_call is not None and index >= nan_from_call
        rows = [trace(op, index, nan=(5 if bad and op >= 2 else 0), slot=op % 2) for op in range(6)]
        w.write_graph_execution_traces(rows)
        w.write_execution(execution(index, len(rows)))


def _check(run) -> None:
    digests = run.trace_digests()
    for op in range(6):
        assert run.op_trace_indices(op).tolist() == _expected(digests, op_id=op)
        for slot in (0, 1):
            assert run.op_trace_indices(op, slot).tolist() == _expected(digests, op_id=op, output_slot=slot)
    for e in np.unique(digests["execution_index"]).tolist()[-3:] + [10**9]:
        assert run.execution_trace_indices(e).tolist() == _expected(digests, execution_index=e)
    with run.lock:  # the completeness tally: traces per execution, op ids, the newest stretch
        tally = run.trace_tally()
        ids, first, counts = np.unique(digests["execution_index"], return_index=True, return_counts=True)
        assert tally.execution_ids.tolist() == ids.tolist() and tally.trace_counts.tolist() == counts.tolist()
        assert tally.first_positions.tolist() == first.tolist()
        asked = np.array([ids[0] - 1, *ids[-3:], 10**9]) if len(ids) else np.array([0])
        expected = [first[ids.tolist().index(e)] if e in ids else -1 for e in asked.tolist()]
        assert tally.first_trace_positions(asked).tolist() == expected
        assert tally.op_ids.tolist() == np.unique(digests["op_id"]).tolist()
        drops = run.ring_drops(layout.GRAPH_EXECUTION_TRACES)
        newest = digests["execution_index"][drops[-1][0] if drops else 0 :]
        expected = int(newest.min()) if len(newest) else None
        assert tally.newest_min(digests, drops[-1][0] if drops else 0) == expected


def test_positions_follow_a_growing_dump(tmp_path):
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1))
    reader = DebugDataReader(tmp_path)
    for step in range(6):  # read, ask, write more, read again: kept answers are extended
        _write_calls(w, 7, nan_from_call=20)
        w.flush()
        reader.update()
        run = reader.run()
        _check(run)
        monitor = analysis.monitor(run)
        counts = monitor.counts(run)
        positions = monitor.page(0, monitor.num_alerts())[0]
        nan = int(np.count_nonzero(run.trace_digests()[positions]["nan"] > 0))
        assert counts["nan"] == nan and counts["neg_inf"] == counts["pos_inf"] == 0
        assert (nan > 0) == (step >= 2), (step, counts)  # call 20 is written in step 2
    answer = run.op_trace_indices(2)
    assert not answer.flags.writeable  # shared with later queries
    w.close()
    reader.close()


def test_positions_after_the_ring_compacts(tmp_path, monkeypatch):
    monkeypatch.setattr(tally_module, "_BLOCK_ROWS", 7)  # the tally's first pass in blocks too
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=40))
    reader = DebugDataReader(tmp_path)
    for _ in range(8):  # each round outgrows the ring: files compacted, the index reset
        _write_calls(w, 9, nan_from_call=30)
        w.flush()
        reader.update()
        run = reader.run()
        _check(run)
        digests = run.trace_digests()
        monitor = analysis.monitor(run)
        alerts = monitor.page(0, monitor.num_alerts())[0]
        assert monitor.counts(run)["nan"] == int(np.count_nonzero(digests[alerts]["nan"] > 0))
    assert run.trace_digests()["index"][0] > 0  # the ring did drop the oldest
    w.close()
    reader.close()


def test_kept_positions_stay_within_their_byte_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(positions_module, "MAX_BYTES", 4096)
    w = DebugEventsWriter(tmp_path, DumpOptions(circular_buffer_size=-1))
    _write_calls(w, 200)
    w.close()
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run()
    for e in range(200):  # 200 answers of 6 positions (+ overhead) each: older ones dropped
        assert len(run.execution_trace_indices(e)) == 6
    kept = run._positions
    assert kept._bytes <= 4096 and 0 < len(kept._entries) < 200
    _check(run)
    reader.close()


def test_tally_tables_merge_in_any_order():
    """Traces of an execution read before later ones (a call kept whole ahead of the ring's
    newest records, several writing threads) are added to its count."""
    table = (np.array([1, 5]), np.array([2, 3]), np.array([0, 2]))
    merged = tally_module._merged(table, (np.array([0, 5, 9]), np.array([1, 1, 1]), np.array([7, 8, 9])))
    assert [a.tolist() for a in merged] == [[0, 1, 5, 9], [1, 2, 4, 1], [7, 0, 2, 9]]
    merged = tally_module._merged(table, (np.array([5, 9]), np.array([1, 1]), np.array([5, 6])))
    assert [a.tolist() for a in merged] == [[1, 5, 9], [2, 4, 1], [0, 2, 6]]
