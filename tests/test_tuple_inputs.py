"""Tuple parameters (as tvm.relax.training passes parameters and gradients) carry the total
health of their tensors, so a NaN that comes in through one is not blamed on the first
kernel that reads it."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from models import compile_module
from tvm import relax
from tvm.script import relax as R

import tvmdbg
from tvmdbg_tb import analysis
from tvmdbg_tb.events.summaries import describe


def _tuple_model():
    bb = relax.BlockBuilder()
    pair = relax.Var("pair", R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32")))
    x = relax.Var("x", R.Tensor((4,), "float32"))
    with bb.function("main", [pair, x]):
        with bb.dataflow():
            a = bb.emit(relax.TupleGetItem(pair, 0))
            b = bb.emit(relax.TupleGetItem(pair, 1))
            s = bb.emit(relax.op.add(a, b))
            bad = bb.emit(relax.op.log(x))
            out = bb.emit_output(relax.op.add(s, bad))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("fuse", [False, True])
def test_nan_through_a_tuple_parameter_is_not_an_origin(tmp_path, fuse):
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        vm = relax.VirtualMachine(compile_module(_tuple_model(), fuse), tvm.cpu())
        ones = np.ones(4, "float32")
        nan_in = np.array([np.nan, 1, 1, 1], "float32")
        pair = lambda first: (tvm.runtime.tensor(first), tvm.runtime.tensor(ones))  # noqa: E731
        vm["main"](pair(ones), tvm.runtime.tensor(ones))  # clean
        vm["main"](pair(nan_in), tvm.runtime.tensor(ones))  # NaN comes in through the tuple
        vm["main"](pair(ones), tvm.runtime.tensor(-ones))  # NaN born in log
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        second = run.execution(1)
        assert second.inputs[0].dtype == "tuple" and list(second.inputs[0].shape) == [2]
        fields = describe(second.tensor_debug_mode, second.inputs[0].debug_values)
        assert fields["nan"] == 1 and fields["size"] == 8 and fields["positive"] == 7
        answer = analysis.alerts(run)
        by_execution = {}
        for alert in answer["alerts"]:
            by_execution.setdefault(alert["execution_index"], []).append(alert["origin"])
        assert not any(by_execution[1]), "the NaN came in through the tuple parameter"
        assert by_execution[2][0] is True, "log of a negative is where the NaN was born"
        assert answer["alerts"][answer["first_origin_index"]]["execution_index"] == 2
