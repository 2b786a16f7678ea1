"""A sweep of transformers' architectures, none written here: each family built from a tiny
config (random weights, no download: 4 layers, width 64) by transformers' Auto classes,
exported with `torch.export` and imported with `from_exported_program(keep_params_as_input=
True)` (the weights are the function's inputs: a planted weight is a run-time change, and one
build serves every test of a family), compiled with the default fusing pipeline while tvmdbg
records in FULL_STATS.

The families are chosen by kind, not by what tvmdbg was tuned on: decoders, encoders, vision
and audio encoders; which of transformers' families the importer takes, and what stops the
others, is docs/families.md (scripts/family_sweep.py writes it with this module).

    built = model_zoo.build("opt")
    logdir = model_zoo.record(built, tmp_path, padding="left")
    logdir = model_zoo.record(built, tmp_path, plant=model_zoo.planted_weight("opt"))
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: never download

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import llm_models  # noqa: E402  (the shared mechanism: weights as inputs, plants, records)
from tvm import relax  # noqa: E402

LAYERS = 4
PLANTED_LAYER = 2  # a later layer: healthy layers run before and after it
BATCH, SEQ, PADDED = 2, 8, 3
IMAGE = 32
_TEXT = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=LAYERS,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=256,
    max_position_embeddings=64,
    use_cache=False,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


@dataclass(frozen=True)
class Family:
    """One architecture: its config's model_type, what it reads, and its own config keys."""

    model_type: str
    kind: str  # "decoder" (input_ids + attention_mask), "encoder" (the same), "vision", "audio"
    overrides: tuple = ()  # (key, value) pairs on top of the kind's sizes (None: leave the key out)
    model_class: str = ""  # transformers class, when the Auto class is not the one to use


def _f(model_type: str, kind: str, model_class: str = "", **overrides) -> Family:
    return Family(model_type, kind, tuple(sorted(overrides.items())), model_class)


# Staged vision models (hierarchical widths) take none of a flat transformer's sizes.
_FLAT_ONLY = dict(hidden_size=None, intermediate_size=None, num_hidden_layers=None, num_attention_heads=None)

FAMILIES: dict[str, Family] = {
    # Decoders.
    "gpt2": _f("gpt2", "decoder"),
    "gpt_neox": _f("gpt_neox", "decoder"),
    "gpt_neo": _f("gpt_neo", "decoder", attention_types=[[["global", "local"], LAYERS // 2]], window_size=4),
    "gptj": _f("gptj", "decoder", rotary_dim=8),
    "codegen": _f("codegen", "decoder", rotary_dim=8),
    "opt": _f("opt", "decoder", ffn_dim=128, word_embed_proj_dim=64),
    "bloom": _f("bloom", "decoder"),
    "falcon": _f("falcon", "decoder", new_decoder_architecture=True, num_kv_heads=2, head_dim=None),
    "gpt_bigcode": _f("gpt_bigcode", "decoder"),
    "llama": _f("llama", "decoder"),
    "mistral": _f("mistral", "decoder", sliding_window=4),
    "qwen2": _f("qwen2", "decoder"),
    "qwen3": _f("qwen3", "decoder"),
    "phi": _f("phi", "decoder"),
    "phi3": _f("phi3", "decoder"),
    "gemma": _f("gemma", "decoder"),
    "gemma2": _f("gemma2", "decoder", sliding_window=4),
    "stablelm": _f("stablelm", "decoder"),
    "starcoder2": _f("starcoder2", "decoder"),
    "olmo": _f("olmo", "decoder"),
    "olmo2": _f("olmo2", "decoder"),
    "granite": _f("granite", "decoder"),
    "cohere": _f("cohere", "decoder"),
    "mpt": _f("mpt", "decoder", d_model=64, n_heads=4, n_layers=LAYERS, expansion_ratio=2),
    "xglm": _f("xglm", "decoder", d_model=64, ffn_dim=128, attention_heads=4),
    "biogpt": _f("biogpt", "decoder"),
    # Encoders.
    "bert": _f("bert", "encoder"),
    "roberta": _f("roberta", "encoder"),
    "distilbert": _f("distilbert", "encoder", dim=64, hidden_dim=128, n_layers=LAYERS, n_heads=4),
    "electra": _f("electra", "encoder", embedding_size=64),
    "albert": _f("albert", "encoder", embedding_size=64),
    "xlm-roberta": _f("xlm-roberta", "encoder"),
    "deberta-v2": _f("deberta-v2", "encoder"),
    "mpnet": _f("mpnet", "encoder"),
    "t5": _f("t5", "encoder", "T5EncoderModel", d_model=64, d_kv=16, d_ff=128, num_layers=LAYERS, num_heads=4),
    "clip_text": _f("clip_text_model", "encoder"),
    # Vision.
    "vit": _f("vit", "vision", image_size=IMAGE, patch_size=8),
    "deit": _f("deit", "vision", image_size=IMAGE, patch_size=8),
    "beit": _f("beit", "vision", image_size=IMAGE, patch_size=8),
    "dinov2": _f("dinov2", "vision", image_size=IMAGE, patch_size=8),
    "clip_vision": _f("clip_vision_model", "vision", image_size=IMAGE, patch_size=8),
    "siglip_vision": _f("siglip_vision_model", "vision", image_size=IMAGE, patch_size=8),
    "swin": _f(
        "swin",
        "vision",
        image_size=IMAGE,
        patch_size=4,
        embed_dim=16,
        depths=[2, 2],
        num_heads=[2, 4],
        window_size=4,
        num_attention_heads=None,
        num_hidden_layers=None,
        hidden_size=None,
    ),
    "convnext": _f("convnext", "vision", hidden_sizes=[16, 32], depths=[2, 2], num_stages=2, **_FLAT_ONLY),
    "resnet": _f(
        "resnet", "vision", embedding_size=16, hidden_sizes=[16, 32], depths=[2, 2], layer_type="basic", **_FLAT_ONLY
    ),
    "mobilevit": _f("mobilevit", "vision", image_size=IMAGE),
    # Audio.
    "whisper": _f("whisper", "audio", "WhisperForAudioClassification", encoder_layers=LAYERS, **llm_models.WHISPER),
}


# The families the tests sweep: all those the importer takes and TVM builds right (the others,
# and why, in docs/families.md): most of them used by no earlier test, with the 4-layer
# BERT, Llama and ViT whose shared kernels compare used to pair with layer 0's nodes.
SWEEP_DECODERS = (
    "llama", "gpt_neox", "gptj", "codegen", "opt", "bloom", "gpt_bigcode", "qwen3", "phi", "phi3", "gemma",
    "stablelm", "starcoder2", "olmo", "olmo2", "granite",
)  # fmt: skip
SWEEP_ENCODERS = (
    "bert", "vit", "roberta", "distilbert", "electra", "albert", "deberta-v2", "clip_text", "deit", "beit", "dinov2",
    "siglip_vision", "swin", "convnext",
)  # fmt: skip
# Families compared with values too (FULL_TENSOR): those whose shared kernels were mis-paired.
VALUES_DECODERS = ("llama", "gpt_neox", "gptj")
VALUES_ENCODERS = ("bert", "vit")
# Families whose later-layer activation is swapped (each kind of activation among them).
SWAPPED_DECODERS = ("opt", "gpt_neox", "qwen3", "phi")
SWAPPED_ENCODERS = ("electra", "deit")


def _sizes(family: Family) -> dict:
    if family.kind in ("decoder", "encoder"):
        return dict(_TEXT)
    if family.kind == "vision":
        return dict(
            hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS, num_attention_heads=4, num_channels=3
        )
    return {}


def is_text(name: str) -> bool:
    return FAMILIES[name].kind in ("decoder", "encoder")


def config(name: str):
    family = FAMILIES[name]
    settings = {**_sizes(family), **dict(family.overrides)}
    return transformers.AutoConfig.for_model(family.model_type, **{k: v for k, v in settings.items() if v is not None})


@functools.cache
def torch_model(name: str):
    """The eval-mode torch model with random weights (seeded), eager attention."""
    family = FAMILIES[name]
    settings = config(name)
    settings._attn_implementation = "eager"
    torch.manual_seed(0)
    if family.model_class:
        model = getattr(transformers, family.model_class)(settings)
    elif family.kind == "decoder":
        model = transformers.AutoModelForCausalLM.from_config(settings)
    else:
        model = transformers.AutoModel.from_config(settings)
    return model.eval()


def inputs(name: str, padding: str = "none") -> dict[str, np.ndarray]:
    """A batch of two, in the order of the model's forward; padding ("none", "left", "right")
    masks PADDED tokens of the second prompt (text families)."""
    generator = np.random.default_rng(0)
    kind = FAMILIES[name].kind
    if kind == "vision":
        return {"pixel_values": generator.normal(size=(BATCH, 3, IMAGE, IMAGE)).astype("float32")}
    if kind == "audio":
        return {"input_features": generator.normal(size=(BATCH, 16, 32)).astype("float32")}
    ids = generator.integers(3, 256, size=(BATCH, SEQ)).astype("int64")
    mask = np.ones((BATCH, SEQ), dtype="int64")
    if padding == "left":
        mask[1, :PADDED], ids[1, :PADDED] = 0, 0
    elif padding == "right":
        mask[1, -PADDED:], ids[1, -PADDED:] = 0, 0
    elif padding != "none":
        raise ValueError(f"padding is 'none', 'left' or 'right', got {padding!r}")
    return {"input_ids": ids, "attention_mask": mask}


@functools.cache
def exported(name: str):
    """torch.export.export of the model on its (unpadded) example inputs."""
    example = {k: torch.from_numpy(v) for k, v in inputs(name).items()}
    with torch.no_grad():
        return torch.export.export(torch_model(name), (), example)


def reference_outputs(name: str, feed: dict[str, np.ndarray]) -> np.ndarray:
    """PyTorch eager's first output on feed."""
    return llm_models.eager_output(torch_model(name), feed)


def param_names(name: str) -> list[str]:
    """The model's parameter names, in the order the compiled `main` takes them after its inputs."""
    return list(dict(exported(name).named_parameters()))


_FEED_FORWARD = re.compile(r"mlp|intermediate|ffn|fc1|c_fc|dense_h_to_4h|up_proj|wi|lin1|fc_in|feed_forward")


def planted_weight(name: str) -> str:
    """The parameter a plant corrupts: a matrix in the later half of the model's blocks (its
    feed-forward's first when the names tell), found by position, whatever the family calls
    its layers (layers.2, stages.1.layers.0, one layer group shared by every layer)."""
    shapes = dict(exported(name).named_parameters())
    matrices = [p for p in param_names(name) if shapes[p].dim() >= 2 and "embed" not in p]
    later = matrices[len(matrices) // 2 :]
    if not later:
        raise LookupError(f"{name}: no weight matrix among {param_names(name)[:8]}...")
    preferred = [p for p in later if _FEED_FORWARD.search(p.rsplit(".", 2)[-2])]
    return (preferred or later)[0]


def module_of_parameter(parameter: str) -> str:
    """The torch module a parameter belongs to ("model.layers.2.mlp.up_proj")."""
    return parameter.rsplit(".", 1)[0]


# Activations an fx graph (run_decompositions) holds as one aten op each.
_ACTIVATIONS = ("gelu.default", "silu.default", "relu.default", "tanh.default", "sigmoid.default")


@dataclass(frozen=True)
class Swap:
    """An activation of layer PLANTED_LAYER converted differently (relu for it, or gelu for a
    relu): node, the fx node; convert_map, the from_exported_program custom_convert_map that
    does it (every other node of that op converted as the importer would)."""

    target: str
    node: str
    convert_map: tuple


@functools.cache
def swapped_activation(name: str) -> Swap:
    program = exported(name).run_decompositions()  # the graph from_exported_program converts
    layer = f".{PLANTED_LAYER}."
    for node in program.graph.nodes:
        target = getattr(node.target, "__name__", "")
        if node.op == "call_function" and target in _ACTIVATIONS and layer in llm_models.module_of(node) + ".":
            return Swap(target, node.name, ((target, _swapping(target, node.name)),))
    raise LookupError(f"{name}: no activation ({', '.join(_ACTIVATIONS)}) in layer {PLANTED_LAYER}")


def _swapping(target: str, chosen: str):
    def convert(node, importer):
        if node.name != chosen:
            return importer.create_convert_map()[target](node)
        x = importer.env[node.args[0]]
        return importer.block_builder.emit(relax.op.nn.gelu(x) if target == "relu.default" else relax.op.nn.relu(x))

    return convert


@functools.cache
def build(name: str, custom_convert_map: tuple = ()) -> llm_models.Built:
    """The family imported with its weights as inputs and compiled (fused) while tvmdbg records
    in FULL_STATS (llm_models.compile_exported); custom_convert_map: (fx target, converter)
    pairs (a converter made to differ)."""
    return llm_models.compile_exported(name, exported(name), custom_convert_map)


def record(
    built: llm_models.Built, logdir, padding: str = "none", plant: str | None = None, mode: str = "FULL_HEALTH"
) -> str:
    """Runs the family once under enable_dump_debug_info(logdir, mode) (the whole run kept),
    with +inf at one element of the parameter `plant`."""
    planted = llm_models.Plant(plant) if plant is not None else None
    return llm_models.record_feed(built, logdir, inputs(built.name, padding), planted, mode)


def record_reference(name: str, logdir, padding: str = "none", mode: str = "FULL_STATS") -> str:
    """PyTorch eager's reference run (record_torch_reference) on the (padded) inputs."""
    return llm_models.reference_run(exported(name), inputs(name, padding), logdir, mode)
