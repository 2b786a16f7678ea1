"""tvm.relax.training (SetupTrainer + Trainer): the NaN of a diverging SGD run is traced to
the log of the user's loss, through AppendLoss, Gradient, LegalizeOps and fusion."""

from __future__ import annotations

import numpy as np
import pytest
from models import digits_training

import tvmdbg
from tvmdbg_tb.events.reader import NONFINITE

pytest.importorskip("sklearn")


@pytest.mark.parametrize("fuse", [False, True])
def test_diverging_training_nan_traced_to_loss_log(tmp_path, fuse):
    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        training = digits_training(lr=7.0, fuse=fuse)
        losses = [float(training.trainer.update(training.inputs, training.targets).numpy()) for _ in range(4)]
    finally:
        tvmdbg.disable_dump_debug_info()
    assert np.isfinite(losses[0]) and np.isnan(losses[-1])
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        names = {g.name for g in run.graphs()}
        assert {"backbone", "backbone_loss", "backbone_loss_adjoint", "optimizer"} <= names
        functions = [run.execution(i).function_name for i in range(run.num_executions())]
        assert functions == ["backbone_loss_adjoint", "optimizer"] * 4
        digests = run.trace_digests()
        first = run.trace(int(np.flatnonzero(digests["flags"] & NONFINITE)[0]))
        op = run.op(first.op_id)
        logs = [o for o in op.original_ops if o.op_type == "relax.log"]
        assert logs, [o.op_type for o in op.original_ops]
        frame = run.user_frame(logs[0].code_location)
        assert frame.file_path.endswith("models.py") and frame.line == training.loss.log_line
