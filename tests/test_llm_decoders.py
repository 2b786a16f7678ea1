"""transformers' decoders beyond GPT-2 (Llama, Mistral with a sliding window, Qwen2: RoPE,
RMSNorm, grouped-query attention) on a batch of two prompts, the second left- or right-padded,
imported with their weights as inputs (tests/llm_models.py). Healthy runs pass `check`: a
fully padded query row makes PyTorch's safe softmax NaN, selected away by the same mask in
the same kernel, which is masking. A planted weight is the origin, named by its parameter
name at its line and layer; compare against PyTorch is clean on both padded batches, and a
converter made to differ in the later layer is named at its line and layer."""

from __future__ import annotations

import llm_models
import numpy as np
import pytest

from tvmdbg_tb import analysis

pytestmark = pytest.mark.slow  # three model families, built once each in this module

# One weight of the later layer's MLP up projection set to +inf, per family.
PLANTS = {name: llm_models.Plant("model.layers.1.mlp.up_proj.weight") for name in llm_models.DECODERS}


@pytest.mark.parametrize("padding", ["left", "right"])
@pytest.mark.parametrize("name", llm_models.DECODERS)
def test_a_padded_batch_passes_check(tmp_path, name, padding):
    """Outputs equal PyTorch's; the only non-finite values are the mask's: its -inf, and with
    left padding the NaN of the fully masked query rows, made and selected away inside the
    softmax's kernel (both absorbed), so `check` passes."""
    built = llm_models.build(name)
    feed = llm_models.inputs(name, padding)
    np.testing.assert_allclose(built.run(feed), llm_models.reference_outputs(name, feed), atol=1e-4)
    logdir = llm_models.record(built, tmp_path, padding=padding)
    done = llm_models.check(logdir)
    assert done.returncode == 0, done.stdout + done.stderr
    page = analysis.alerts(llm_models.read_run(logdir))
    assert page["num_alerts"] == 0 and page["benign"]["absorbed"] > 0, page["benign"]
    if padding == "left":  # the safe softmax's NaN, made inside one kernel and selected away
        softmax = [o for o in page["benign"]["ops"] if "relax.nn.softmax" in o["original_ops"]]
        assert softmax and all(o["nan"] > 0 for o in softmax), page["benign"]["ops"]


@pytest.mark.parametrize("name", llm_models.DECODERS)
def test_a_planted_weight_is_named_by_its_parameter_at_its_line_and_layer(tmp_path, name):
    plant = PLANTS[name]
    logdir = llm_models.record(llm_models.build(name), tmp_path, padding="left", plant=plant)
    page = analysis.alerts(llm_models.read_run(logdir))
    first = page["alerts"][page["first_origin_index"]]
    assert [p["name"] for p in first["bad_parameters"]] == [plant.parameter], first
    where = first["location"]
    assert where["file_path"].endswith(f"models/{name}/modeling_{name}.py"), where
    assert "up_proj" in _line(where) and where["model_node"]["module"] == "model.layers.1.mlp.up_proj", where
    assert page["origin_alerts"] == 1
    done = llm_models.check(logdir)
    assert done.returncode == 1 and "model.layers.1.mlp.up_proj" in done.stdout, done.stdout


def _line(where: dict) -> str:
    import linecache

    return linecache.getline(where["file_path"], where["line"])


@pytest.mark.parametrize(
    "name, padding", [("llama", "left"), ("llama", "right"), ("mistral", "left"), ("qwen2", "left")]
)
def test_compare_against_pytorch_is_clean(tmp_path, name, padding):
    """Every kernel output (and every weight: they are inputs) agrees with PyTorch eager on
    the padded batch, each layer's call of a shared fused kernel with that layer's nodes."""
    built = llm_models.build(name)
    tvm_run = llm_models.record(built, tmp_path / "tvm", padding=padding, mode="FULL_STATS")
    reference = llm_models.record_reference(name, tmp_path / "torch", padding)
    result = analysis.compare(tvm_run, reference, rtol=1e-4, atol=1e-5)
    divergent = [(r["key"], r.get("op_name_b")) for r in result["ops"] if r["status"] == "divergent"]
    assert result["status"] == "within" and not divergent, divergent
    compared = [r for r in result["ops"] if r["kind"] == "op" and r["status"] != "not_comparable"]
    assert len(compared) >= 30 and all(r["key"] == f"main:node {r['op_name_b']}" for r in compared)
    # A kernel every layer calls (the softmax's) is paired with each layer's own node.
    softmax = [r for r in compared if "softmax" in r["kernel_a"]]
    assert len(softmax) == 2 and len({r["op_name_b"] for r in softmax}) == 2, softmax


def _skewed_sigmoid(node, importer):
    """The SiLU's sigmoid (torch.export decomposes silu into x * sigmoid(x)) converted as
    sigmoid(1.02 x) in the later layer only: the planted divergence."""
    from tvm import relax

    x = importer.env[node.args[0]]
    if llm_models.module_of(node).startswith("model.layers.1."):
        x = importer.block_builder.emit(relax.op.multiply(x, relax.const(1.02, "float32")))
    return importer.block_builder.emit(relax.op.sigmoid(x))


def test_a_converter_made_to_differ_in_the_later_layer_is_named_at_its_line_and_layer(tmp_path):
    built = llm_models.build("llama", custom_convert_map=(("sigmoid.default", _skewed_sigmoid),))
    tvm_run = llm_models.record(built, tmp_path / "tvm", padding="left", mode="FULL_STATS")
    reference = llm_models.record_reference("llama", tmp_path / "torch", "left")
    result = analysis.compare(tvm_run, reference, rtol=1e-4, atol=1e-5)
    first = result["first_divergence"]
    assert result["status"] == "divergent" and first is not None, result["status"]
    nodes = [(o["location"] or {}).get("model_node", {}) for o in first["fused_ops_a"]]
    sigmoid = [n for n in nodes if n.get("op_type") == "aten.sigmoid.default"]
    assert sigmoid and sigmoid[-1]["module"].startswith("model.layers.1.mlp"), nodes
    where = first["location"]
    assert where["model_node"]["module"].startswith("model.layers.1.mlp"), where
    assert where["file_path"].endswith("modeling_llama.py") and "act_fn" in _line(where), where
    # Everything of layer 0 agrees.
    before = [r for r in result["ops"] if r["kind"] == "op" and r["trace_index_a"] < first["trace_index_a"]]
    assert len(before) > 10 and all(r["status"] != "divergent" for r in before)
