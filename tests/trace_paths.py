"""The two kernel tracing paths, for tests that run once per path:

@pytest.fixture(scope="module", params=trace_paths.PATHS)
def trace_path(request):
    with trace_paths.using(request.param):
        yield request.param
"""

from contextlib import contextmanager

PATHS = ["compiled", "vm_instrument"]


@contextmanager
def using(path: str):
    """Kernels traced by summary kernels compiled into the module, or by the VM instrument."""
    from tvmdbg_tb.instrument import fast_tracer

    saved = fast_tracer.ENABLED
    fast_tracer.ENABLED = path == "compiled"
    try:
        yield
    finally:
        fast_tracer.ENABLED = saved
