"""FULL_STATS: the summary kernels compiled into the module give the statistics numpy gives
on the VM-instrument path, for every dtype, with NaN/Inf, and for function inputs."""

from __future__ import annotations

import numpy as np
import pytest
import trace_paths
import tvm
from models import blockbuilder_planted, mixed_dtypes
from models_compare import reduction_model
from tvm import relax

import tvmdbg
from tvmdbg_tb.events.reader import INNER_NONFINITE
from tvmdbg_tb.events.summaries import describe
from tvmdbg_tb.proto import debug_event_pb2 as pb


def _record(logdir, path: str, build):
    with trace_paths.using(path):
        tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_STATS")
        try:
            executable, inputs = build()
            vm = relax.VirtualMachine(executable, tvm.cpu())
            vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
        finally:
            tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        instrumentation = {g.instrumentation for g in run.graphs()}
        traces = [(t.op_name, t.output_slot, list(t.debug_values)) for t in run.traces(range(run.num_traces()))]
        inputs = [list(s.debug_values) for s in run.execution(0).inputs]
        flags = run.trace_digests()["flags"].tolist()
    return instrumentation, traces, inputs, flags


def _large_values():
    """All finite, but squares beyond float32's range (|x| ~ 1e20): the masked float64 pass."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((5000,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.multiply(x, relax.const(0.5, "float32")))
        bb.emit_func_output(y)
    values = np.random.default_rng(3).uniform(-3e20, 3e20, size=5000).astype("float32")
    values[7] = 0
    return tvm.compile(bb.get(), "llvm"), [values]


BUILDS = {
    "large_values": _large_values,
    "mixed_dtypes": lambda: mixed_dtypes(fuse=False),
    "planted_log_fused": lambda: (lambda p: (p.executable, p.inputs))(blockbuilder_planted("log", fuse=True)),
    "reduction_fp16": lambda: reduction_model("float16", fuse=True)[:2],
}


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_compiled_statistics_match_numpy(tmp_path, name):
    fast = _record(tmp_path / "fast", "compiled", BUILDS[name])
    slow = _record(tmp_path / "slow", "vm_instrument", BUILDS[name])
    assert fast[0] == {"compiled"} and slow[0] == {"vm_instrument"}
    assert [t[:2] for t in fast[1]] == [t[:2] for t in slow[1]]
    # The digests read the NaN/Inf counts of FULL_STATS; the compiled path's fused kernels
    # also say which of their ops made them (the inner-op check, not on the VM path).
    assert [f & ~INNER_NONFINITE for f in fast[3]] == slow[3]
    assert any(f & INNER_NONFINITE for f in fast[3]) == (name == "planted_log_fused")
    for (op, slot, a), (_, _, b) in zip(
        fast[1] + [("in", 0, x) for x in fast[2]], slow[1] + [("in", 0, x) for x in slow[2]]
    ):
        assert len(a) == len(b) == 15, (op, slot, a, b)
        assert a[:10] == b[:10], op
        # Sums in another order (and float32 partial sums per block for 16/32-bit floats):
        # equal to ~1e-7 relative, NaN where there is no finite element.
        np.testing.assert_allclose(a[10:], b[10:], rtol=1e-6, atol=1e-12, err_msg=op)
        fields = describe(pb.FULL_STATS, a)
        assert set(fields) >= {"min", "max", "mean", "l2_norm", "abs_max", "nan", "size"}
