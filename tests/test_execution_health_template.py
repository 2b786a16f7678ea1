"""Execution input/output summaries in health modes (the pre-serialised template on the
compiled path, messages on the VM-instrument path) match numpy on every output dtype,
on the first call and on repeated calls."""

from __future__ import annotations

import numpy as np
import pytest
import trace_paths
import tvm
from models import chain, mixed_dtypes
from test_instrument_modes import _expected
from tvm import relax

import tvmdbg


@pytest.fixture(params=trace_paths.PATHS)
def trace_path(request):
    with trace_paths.using(request.param):
        yield request.param


@pytest.mark.parametrize("mode", ["CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH"])
def test_execution_summaries_match_numpy(tmp_path, trace_path, mode):
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        executable, inputs = mixed_dtypes()
        vm = relax.VirtualMachine(executable, tvm.cpu())
        calls = [inputs[0], np.array([[1.0, np.nan, 0.0, -3.0], [2.0, 2.0, -np.inf, 0.5]], "float32")]
        results = []
        for data in [calls[0], calls[1], calls[0]]:
            out = vm["main"](tvm.runtime.tensor(data))
            results.append((data, [o.numpy() for o in out]))
    finally:
        tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    run = reader.run()
    assert run.num_executions() == 3
    assert run.num_traces() == 3 * 5
    for i, (data, outs) in enumerate(results):
        execution = run.execution(i)
        assert execution.index == i and execution.function_name == "main"
        assert len(execution.inputs) == 1 and len(execution.outputs) == 5
        for summary, array in zip([*execution.inputs, *execution.outputs], [data, *outs]):
            assert summary.dtype == str(array.dtype)
            assert tuple(summary.shape) == array.shape
            assert list(summary.debug_values) == _expected(mode, array), (i, summary.dtype)


@pytest.mark.parametrize("mode", ["CONCISE_HEALTH", "FULL_HEALTH"])
def test_static_function_summaries_match_numpy(tmp_path, trace_path, mode):
    """A fully static function (the compiled path's pre-serialised template applies): every
    call's summaries, index, kernel count, duration and the user's frame."""
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        executable, inputs = chain(4, 7)
        vm = relax.VirtualMachine(executable, tvm.cpu())
        planted = inputs[0].copy()
        planted[[1, 4, 5]] = [np.nan, -np.inf, np.inf]
        datas = [inputs[0], planted, inputs[0], np.zeros(7, "float32"), -np.ones(7, "float32")]
        results = []
        for data in datas:
            results.append((data, vm["main"](tvm.runtime.tensor(data)).numpy()))
    finally:
        tvmdbg.disable_dump_debug_info()
    reader = tvmdbg.DebugDataReader(str(tmp_path))
    reader.update()
    run = reader.run()
    assert run.num_executions() == len(datas) and run.num_traces() == 4 * len(datas)
    for i, (data, out) in enumerate(results):
        execution = run.execution(i)
        assert execution.index == i and execution.num_traces == 4 and execution.duration_us > 0
        assert run.user_frame(execution.code_location).function == "test_static_function_summaries_match_numpy"
        assert [s.dtype for s in (*execution.inputs, *execution.outputs)] == ["float32", "float32"]
        assert list(execution.inputs[0].shape) == [7] and list(execution.outputs[0].shape) == [7]
        assert list(execution.inputs[0].debug_values) == _expected(mode, data)
        assert list(execution.outputs[0].debug_values) == _expected(mode, out)
