"""`tvmdbg compare` of real models (transformers' GPT-2, BERT and ResNet, fused default
pipeline) against a PyTorch eager reference: aligned by the fx node each kernel computes, no
false alarm on a float32 build, and a converter made to differ is the first divergence, named
at the model's own line and node."""

from __future__ import annotations

import linecache

import pytest
import real_models

import tvmdbg
from tvmdbg_tb import analysis

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow  # four real-model builds and three PyTorch references


def _reference(name: str, logdir) -> str:
    inputs = tuple(torch.from_numpy(a) for a in real_models.torch_model(name)[1].values())
    return tvmdbg.record_torch_reference(real_models.exported(name), inputs, logdir)


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    return {name: _reference(name, tmp_path_factory.mktemp(f"ref_{name}")) for name in real_models.MODELS}


@pytest.mark.parametrize("name", real_models.MODELS)
def test_float32_build_agrees_with_eager_by_node(tmp_path, references, name):
    built = real_models.build(name, fuse=True, mode="FULL_STATS")
    run = real_models.record(built, tmp_path / "tvm")
    result = analysis.compare(run, references[name], rtol=1e-4, atol=1e-5)
    divergent = [(r["key"], r.get("op_name_b"), r.get("reason")) for r in result["ops"] if r["status"] == "divergent"]
    assert result["status"] == "within" and not divergent, divergent
    ops = [r for r in result["ops"] if r["kind"] == "op"]
    compared = [r for r in ops if r["status"] != "not_comparable"]
    # Every kernel that computes a node's output is compared with that very node.
    assert len(compared) >= 15 and all(r["key"] == f"main:node {r['op_name_b']}" for r in compared)
    assert not any("aligned_by" in r for r in ops)  # no guess needed
    # Kernels that end inside a node (a converter's intermediate value) have no counterpart.
    assert all("op_name_b" not in r for r in ops if r["status"] == "not_comparable")


def _skewed_gelu(node, importer):
    """BERT's GELU converted as gelu(1.02 x): the planted divergence."""
    from tvm import relax

    x = importer.env[node.args[0]]
    scaled = importer.block_builder.emit(relax.op.multiply(x, relax.const(1.02, "float32")))
    return importer.block_builder.emit(relax.op.nn.gelu(scaled))


@pytest.mark.parametrize("fuse", [False, True])
def test_converter_made_to_differ_is_named_at_the_model_line(tmp_path, references, fuse):
    """Unfused, the first divergence is the gelu node itself; fused, it is the kernel that
    holds the gelu (and ends with the reshape after it), whose fused ops name the gelu."""
    from tvm.relax.frontend.torch import from_exported_program

    tvmdbg.enable_dump_debug_info(tmp_path / "tvm", tensor_debug_mode="FULL_STATS", circular_buffer_size=-1)
    try:
        mod = from_exported_program(real_models.exported("bert"), custom_convert_map={"gelu.default": _skewed_gelu})
        executable = real_models.compile_module(mod, fuse)
        inputs = list(real_models.torch_model("bert")[1].values())
        real_models.Built("bert", None, "export", fuse, "FULL_STATS", mod, executable, inputs).run()
    finally:
        tvmdbg.disable_dump_debug_info()
    result = analysis.compare(str(tmp_path / "tvm"), references["bert"], rtol=1e-4, atol=1e-5)
    first = result["first_divergence"]
    assert result["status"] == "divergent" and first is not None
    # Everything before it agrees: the first block's attention, its layer norms.
    before = [r for r in result["ops"] if r["kind"] == "op" and r["trace_index_a"] < first["trace_index_a"]]
    assert len(before) > 5 and all(r["status"] != "divergent" for r in before)
    gelu = [o for o in first["fused_ops_a"] if o["location"]["model_node"]["name"] == "gelu"]
    assert gelu and gelu[-1]["op_type"] == "relax.nn.gelu"
    if not fuse:
        assert first["key"] == "main:node gelu" and first["op_name_b"] == "gelu" and first["op_type"] == "relax.nn.gelu"
    where = gelu[-1]["location"]
    # The line shown is in transformers' code (the activation's forward), the user's own code
    # that made the op next to it (here the converter).
    assert "/transformers/" in where["file_path"] and "act" in linecache.getline(where["file_path"], where["line"])
    assert where["called_from"]["file_path"] == __file__
