"""The shared real-model builders (tests/real_models.py): each model, imported through
torch.export or ONNX and compiled with the fusing pipeline while tvmdbg records, computes
what PyTorch eager computes, and a traced call records its graph and kernels."""

from __future__ import annotations

import numpy as np
import pytest

real_models = pytest.importorskip("real_models")

import tvmdbg  # noqa: E402

pytestmark = pytest.mark.slow  # builds four models (each once per test process)


@pytest.mark.parametrize(
    ("name", "via"), [("gpt2", "export"), ("bert", "export"), ("resnet", "export"), ("bert", "onnx")]
)
def test_a_real_model_built_under_tvmdbg_matches_pytorch(tmp_path, name, via):
    built = real_models.build(name, fuse=True, via=via)
    logdir = real_models.record(built, tmp_path)
    outputs = built.run()  # untraced now: the same values
    reference = real_models.reference_outputs(name)
    assert len(outputs) == len(reference)
    for ours, theirs in zip(outputs, reference):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        assert run.num_executions() == 1
        assert len(run.ops()) > 10 and run.num_traces() >= len(run.ops())
