"""transformers' encoders (ViT, T5's encoder with a padded batch, Whisper's audio encoder),
imported with their weights as inputs (tests/llm_models.py): healthy runs pass `check`, a
planted weight of the later layer is the origin at its line and layer, compare against
PyTorch is clean; and a user's own mask bug in a wrapper around BERT, `(1.0 - keep) * -inf`
(0 x -inf is NaN at every kept position), is named at the multiply's line."""

from __future__ import annotations

import linecache

import llm_models
import numpy as np
import pytest
import real_models
from models import line_of

import tvmdbg
from tvmdbg_tb import analysis

pytestmark = pytest.mark.slow  # three model families and a wrapped BERT, built once each here

# Per family: the padding its runs use and the weight of the later layer a plant sets to +inf.
CASES = {
    "vit": ("none", "layers.1.mlp.fc1.weight"),
    "t5": ("right", "encoder.block.1.layer.1.DenseReluDense.wi_0.weight"),
    "whisper": ("none", "encoder.layers.1.fc1.weight"),
}


@pytest.mark.parametrize("name", llm_models.ENCODERS)
def test_a_healthy_encoder_passes_check_and_agrees_with_pytorch(tmp_path, name):
    padding, _ = CASES[name]
    built = llm_models.build(name)
    feed = llm_models.inputs(name, padding)
    np.testing.assert_allclose(built.run(feed), llm_models.reference_outputs(name, feed), atol=1e-4)
    done = llm_models.check(llm_models.record(built, tmp_path / "health", padding=padding))
    assert done.returncode == 0, done.stdout + done.stderr
    tvm_run = llm_models.record(built, tmp_path / "tvm", padding=padding, mode="FULL_STATS")
    result = analysis.compare(tvm_run, llm_models.record_reference(name, tmp_path / "torch", padding))
    divergent = [(r["key"], r.get("op_name_b")) for r in result["ops"] if r["status"] == "divergent"]
    assert result["status"] == "within" and not divergent, divergent
    compared = [r for r in result["ops"] if r["kind"] == "op" and r["status"] != "not_comparable"]
    assert len(compared) >= 20 and all(r["key"] == f"main:node {r['op_name_b']}" for r in compared)


@pytest.mark.parametrize("name", llm_models.ENCODERS)
def test_a_planted_weight_is_named_at_its_line_and_layer(tmp_path, name):
    padding, parameter = CASES[name]
    logdir = llm_models.record(
        llm_models.build(name), tmp_path, padding=padding, plant=llm_models.Plant(parameter, element=1)
    )
    page = analysis.alerts(llm_models.read_run(logdir))
    first = page["alerts"][page["first_origin_index"]]
    assert [p["name"] for p in first["bad_parameters"]] == [parameter], first
    where = first["location"]
    module = parameter.removesuffix(".weight")
    assert where["model_node"]["module"] == module, where
    assert where["file_path"].endswith(f"modeling_{name}.py"), where
    assert module.rsplit(".", 1)[-1] in linecache.getline(where["file_path"], where["line"]), where
    done = llm_models.check(logdir)
    assert done.returncode == 1 and f"in {module}" in done.stdout, done.stdout


# -- a user's mask bug around BERT ---------------------------------------------------------------


@pytest.fixture(scope="module")
def user_masked_bert():
    """BERT called through a wrapper that builds its additive mask itself, with the bug;
    compiled once while tvmdbg records."""
    torch = pytest.importorskip("torch")
    from tvm.relax.frontend.torch import from_exported_program

    class UserMaskedBert(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, keep):
            keep = keep[:, None, None, :].float()
            mask = (1.0 - keep) * float("-inf")  # the bug: 0 * -inf is NaN where kept
            hidden = self.bert.embeddings(input_ids=input_ids)
            return self.bert.encoder(hidden, attention_mask=mask).last_hidden_state

    bert, feed = real_models.torch_model("bert")
    example = tuple(torch.from_numpy(feed[k]) for k in ("input_ids", "attention_mask"))
    with torch.no_grad():
        exported = torch.export.export(UserMaskedBert(bert).eval(), example)
    with llm_models.recording("FULL_HEALTH"):
        executable = real_models.compile_module(from_exported_program(exported), fuse=True)
    return executable, [feed["input_ids"], feed["attention_mask"]]


def test_a_users_mask_bug_is_named_at_the_multiply(tmp_path, user_masked_bert):
    """The multiply by the -inf literal makes NaN of finite data (0 x -inf at each kept
    position): a mask's literal does not make a NaN, so that kernel is the origin, and its
    replay names the multiply at its own line, not the kernel's first ops the line before."""
    import tvm
    from tvm import relax

    executable, feed = user_masked_bert
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        vm = relax.VirtualMachine(executable, tvm.cpu())  # kept: the replay re-runs the call on it
        vm["main"](*[tvm.runtime.tensor(a) for a in feed])
    finally:
        tvmdbg.disable_dump_debug_info()
    page = analysis.alerts(llm_models.read_run(tmp_path))
    first = page["alerts"][page["first_origin_index"]]
    assert first["inner_op"] is not None and first["inner_op"]["op_type"] == "relax.multiply", first
    line = line_of(__file__, "# the bug: 0 * -inf")
    assert (first["location"]["file_path"], first["location"]["line"]) == (__file__, line), first["location"]
    done = llm_models.check(tmp_path)
    assert done.returncode == 1 and f"{__file__}:{line}" in done.stdout, done.stdout
