"""Shared fixtures: `trace_path` runs a test module once per tracing path."""

import pytest


@pytest.fixture(scope="module", params=["compiled", "vm_instrument"])
def trace_path(request):
    """Kernel tracing by summary kernels compiled into the module, or by the VM instrument."""
    from tvmdbg_tb.instrument import fast_tracer

    saved = fast_tracer.ENABLED
    fast_tracer.ENABLED = request.param == "compiled"
    yield request.param
    fast_tracer.ENABLED = saved
