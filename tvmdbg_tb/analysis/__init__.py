"""What the plugin routes and the CLI show, computed from a RunReader: one implementation so
`tvmdbg alerts --json` and the `alerts` route print the same objects.

Pure functions of a RunReader (no HTTP, no TVM). They return typed answers (answers.py:
AlertsPage, ...; to_json() is the route's object) or plain JSON-ready Python (dicts, lists,
str, int, float, None); floats may be NaN/Inf, which `dumps` encodes as the strings
"NaN"/"Infinity"/"-Infinity" as TensorBoard does.
"""

from tvmdbg_tb.analysis.alerts import AlertMonitor, alerts, alerts_page, monitor, num_alerts, start_dropped
from tvmdbg_tb.analysis.answers import AlertsPage, Answer
from tvmdbg_tb.analysis.graph_views import graph_page, neighborhood, op_lines, overview, search
from tvmdbg_tb.analysis.inner_ops import replays
from tvmdbg_tb.analysis.jsonable import dumps
from tvmdbg_tb.analysis.op_stats import op_stats
from tvmdbg_tb.analysis.profile import profile
from tvmdbg_tb.analysis.ranges import num_range_alerts, range_alerts
from tvmdbg_tb.analysis.tensor_value import SliceError, tensor_histogram, tensor_value
from tvmdbg_tb.analysis.views import (
    calls_of,
    execution_data,
    execution_digests,
    execution_rows,
    graphs_list,
    op_info,
    op_json,
    resolve_op,
    run_info,
    source_file,
    source_files_list,
    stack_frames,
    trace_data,
    trace_digests,
)
from tvmdbg_tb.compare import CompareError, compare
from tvmdbg_tb.events.locations import location

__all__ = [
    "AlertMonitor",
    "AlertsPage",
    "Answer",
    "CompareError",
    "SliceError",
    "alerts",
    "alerts_page",
    "calls_of",
    "compare",
    "dumps",
    "execution_data",
    "execution_digests",
    "execution_rows",
    "graph_page",
    "graphs_list",
    "location",
    "monitor",
    "neighborhood",
    "num_alerts",
    "num_range_alerts",
    "op_info",
    "op_lines",
    "op_json",
    "op_stats",
    "overview",
    "profile",
    "range_alerts",
    "replays",
    "resolve_op",
    "run_info",
    "search",
    "source_file",
    "source_files_list",
    "stack_frames",
    "start_dropped",
    "tensor_histogram",
    "tensor_value",
    "trace_data",
    "trace_digests",
]
