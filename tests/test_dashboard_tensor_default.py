"""The Tensor tab opens any FULL_TENSOR value without a typed slice: the `tensor/value` route
picks a default view that fits max_elements (a 1437x10 activation: its first 1000 rows), a
1-D tensor wraps into rows, and non-finite values are highlighted. Real writer, real plugin,
real `tensorboard`, real Chromium."""

from __future__ import annotations

import numpy as np
import pytest
from plugin_dumps import float32_tensor, write_graph, write_tensor_call
from test_dashboard_e2e import Browser, TensorBoardProcess
from test_plugin import Server

from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.writer import DebugEventsWriter


def _write(logdir) -> tuple[np.ndarray, np.ndarray]:
    """One call whose two kernels output a 1437x10 matrix (NaN at [2, 3]) and a 1437 vector."""
    matrix = np.arange(14370, dtype=np.float32).reshape(1437, 10)
    matrix[2, 3] = np.nan
    vector = np.linspace(0, 1, 1437, dtype=np.float32)
    vector[15] = np.inf
    w = DebugEventsWriter(logdir, DumpOptions(tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1), run_id="full")
    write_graph(w)
    write_tensor_call(w, [float32_tensor(0, "lv0", "k", matrix), float32_tensor(1, "lv1", "k", vector)])
    w.close()
    return matrix, vector


def test_route_default_view_fits(tmp_path):
    matrix, vector = _write(tmp_path)
    server = Server(tmp_path)
    try:
        v = server.json("tensor/value", run="full", trace=0)
        assert v["default_slice"] is True and v["slice"] == "0:1000,0:10" and v["sliced_shape"] == [1000, 10]
        got = np.array([[np.nan if x == "NaN" else x for x in row] for row in v["values"]], dtype=np.float32)
        np.testing.assert_array_equal(got, matrix[:1000])
        v = server.json("tensor/value", run="full", trace=0, max_elements=100)
        assert v["slice"] == "0:10,0:10"
        v = server.json("tensor/value", run="full", trace=1)
        assert v["default_slice"] is False and v["sliced_shape"] == [1437]
        err = server.get("tensor/value", expect=400, run="full", trace=0, slice=":,:").get_data(as_text=True)
        assert "max_elements" in err  # an explicit slice that is too big stays an error
    finally:
        server.plugin.stop()


@pytest.mark.browser
def test_tensor_tab_opens_big_matrix_and_wraps_vector(tmp_path):
    _write(tmp_path / "logdir")
    tb = TensorBoardProcess(tmp_path / "logdir", tmp_path / "tensorboard.log")
    b = Browser()
    try:
        frame = b.open_dashboard(tb)
        rows = frame.locator(".executions-panel .vlist-row[data-position]")
        rows.first.wait_for()
        rows.first.click()
        frame.locator(".details-panel [data-tab=tensor]").click()
        table = frame.locator(".details-panel .tensor-table")
        table.wait_for()
        assert table.locator("tbody tr").count() == 1000
        assert frame.locator(".details-panel .slice-input").input_value() == "0:1000,0:10"
        bad = table.locator("td.nonfinite-value")
        assert bad.count() == 1 and bad.inner_text() == "NaN"
        assert frame.locator(".details-panel .error-box").count() == 0

        rows.nth(1).click()  # the 1-D tensor: wrapped into rows of 10
        # The matrix's table stays until the vector's value arrives: wait for the vector's.
        frame.locator(".details-panel .tensor-out", has_text="of (1437,)").wait_for()
        frame.locator(".details-panel .tensor-table tbody tr").nth(143).wait_for()
        table = frame.locator(".details-panel .tensor-table")
        assert table.locator("tbody tr").count() == 144
        assert table.locator("tbody tr").nth(1).locator("th").inner_text() == "10"
        assert table.locator("td.nonfinite-value").count() == 1
        assert b.errors == []
    finally:
        b.close()
        tb.close()
