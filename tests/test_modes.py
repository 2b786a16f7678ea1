"""The mode table (tvmdbg_tb/events/modes.py) covers every TensorDebugMode of the proto, and
each row's properties agree with its layout and with what a real dump records."""

from __future__ import annotations

import pytest

from tvmdbg_tb.events import modes
from tvmdbg_tb.events.summaries import describe
from tvmdbg_tb.proto import debug_event_pb2 as pb


def test_the_table_covers_every_proto_mode():
    proto = {v.number for v in pb.TensorDebugMode.DESCRIPTOR.values} - {pb.TENSOR_DEBUG_MODE_UNSPECIFIED}
    assert set(modes.MODES) == proto
    assert set(modes.MODE_NAMES) == {pb.TensorDebugMode.Name(v) for v in proto}
    assert len(modes.TABLE) == len(proto)  # one row each


def test_unspecified_and_unknown_numbers_claim_nothing():
    for number in (pb.TENSOR_DEBUG_MODE_UNSPECIFIED, 99):
        m = modes.spec(number)
        assert m is modes.UNKNOWN
        assert not (m.knows_finite or m.comparable or m.compiled or m.summarised or m.tensor_data)
        with pytest.raises(ValueError, match="unknown tensor_debug_mode"):
            modes.mode_value(number)
    assert modes.mode_name(99) == "TENSOR_DEBUG_MODE_UNSPECIFIED"


@pytest.mark.parametrize("m", modes.TABLE, ids=lambda m: m.name)
def test_each_row_agrees_with_its_layout(m):
    layout = set(m.layout)
    if m.counts is modes.Counts.ANY:
        assert layout == {"has_inf_or_nan"}
    elif m.counts is not None:
        assert {"size", "nan", "neg_inf", "pos_inf"} <= layout
    if m.statistics:
        assert set(modes.STATS_FIELDS) <= layout
    if m.dims:
        assert {"dtype", "rank", "size"} <= layout
    assert m.knows_finite == (m.counts is not None or m.values)
    assert m.comparable == (m.statistics or m.values)
    assert m.shows  # the words the CLI and the tab say of it
    assert modes.mode_value(m.name.lower()) == m.value
    # A summary in the layout decodes to every named field.
    values = [1.0] * len(m.layout)
    if m.dims:
        values[1] = 0.0  # rank 0: no dims
    assert layout <= set(describe(m.value, values))


def test_the_health_modes_are_the_ones_the_summary_kernels_count():
    assert [m.name for m in modes.TABLE if m.health] == ["CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH"]
    assert [m.name for m in modes.TABLE if not m.compiled] == ["FULL_TENSOR"]
    assert [m.name for m in modes.TABLE if not m.tensor_data] == ["NO_TENSOR"]
