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

from contextlib import contextmanager

PATHS = ["compiled", "python_call", "vm_instrument"]


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
