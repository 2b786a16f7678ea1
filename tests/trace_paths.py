"""The kernel tracing paths, for tests that run once per path:

@pytest.fixture(scope="module", params=trace_paths.PATHS)
def trace_path(request):
    with trace_paths.using(request.param):
        yield request.param

"compiled": summary kernels compiled into the module, each steady-state VM call traced by
native_call (built and loaded before the test, so the path does not depend on timing);
"python_call": the same kernels, every call traced by CompiledTracer's Python path (the
reference native_call must match); "vm_instrument": the VM instrument, per kernel.
"""

import glob
import os
from contextlib import contextmanager

PATHS = ["compiled", "python_call", "vm_instrument"]
STREAMS = ("execution", "graph_execution_traces", "stack_frames", "source_files", "graphs")


@contextmanager
def using(path: str):
    """Trace the test's VM calls by path (see the module docstring)."""
    from tvmdbg_tb.events import native_records
    from tvmdbg_tb.tracing import native_call, native_rows
    from tvmdbg_tb.tracing.state import Paths, TracingState, activated

    if path == "compiled":
        for library in (native_call.LIBRARY, native_rows.LIBRARY, native_records.LIBRARY):
            assert library.load() is not None, library.failure()
    paths = Paths(compiled=path != "vm_instrument", native_calls=path == "compiled")
    with activated(TracingState(paths=paths)):
        yield


def records(logdir) -> dict[str, list[bytes]]:
    """Every record of the run in logdir by stream, with the fields that differ between two
    runs of the same program cleared: the wall times, the durations and the executable's id
    (two paths' records compare equal)."""
    from tvmdbg_tb.events import records as record_io
    from tvmdbg_tb.proto import debug_event_pb2 as pb

    [run] = glob.glob(os.path.join(str(logdir), "*"))
    out = {}
    for stream in STREAMS:
        path = os.path.join(run, "tvmdbg." + stream)
        if not os.path.exists(path):
            continue
        data = open(path, "rb").read()
        events = []
        for item in record_io.scan(data, 0, path, final=True):
            assert not isinstance(item, record_io.Corruption), item
            _, start, length = item
            event = pb.DebugEvent.FromString(data[start : start + length])
            event.ClearField("wall_time")
            event.ClearField("run_key")  # each run draws its own
            for field in ("execution", "graph_execution_trace", "debugged_graph", "graph_op_creation"):
                if event.HasField(field):
                    message = getattr(event, field)
                    for name in ("duration_us", "executable_id"):
                        if name in message.DESCRIPTOR.fields_by_name:
                            message.ClearField(name)
            events.append(event.SerializeToString(deterministic=True))
        out[stream] = events
    return out
