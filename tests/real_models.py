"""Models nobody here wrote, shared by the tests: transformers' GPT-2, BERT and ResNet built
from small configs (random weights, no download), exported with `torch.export` and imported
with `from_exported_program`, or exported with `torch.onnx.export` and imported with
`from_onnx`, compiled with the default fusing pipeline or without it.

Everything is built once per test process (pytest worker) and kept: a test asks for

    model = real_models.build("gpt2", fuse=True)                  # healthy, torch.export
    model = real_models.build("gpt2", fuse=True, plant="inf_weight")
    logdir = real_models.record(model, tmp_path)                  # one traced call

`build` imports and compiles while tvmdbg records into a scratch directory, so the ops carry
their source lines and the executable its compile-time instrumentation; `record` runs it in a
session of its own (the executable is described again there). Plants (see PLANTS) corrupt
the torch model before it is exported. Tests skip when torch or transformers is missing.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from dataclasses import dataclass, field

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: never download

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tvm  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.target import Target  # noqa: E402

import tvmdbg  # noqa: E402

MODELS = ("gpt2", "bert", "resnet")
# The benchmarks' realistic sizes (bench/bench_real_models.py, never the tests): GPT-2, BERT and a
# Llama-style decoder 768 wide over 128 tokens (one layer: TVM's untuned CPU matmuls take
# seconds a call), ResNet with ResNet-50's widths (bottleneck stages 256-2048) on a 64x64 image.
REALISTIC = ("gpt2-768", "bert-768", "resnet50w", "llama-768")
# A small Llama-style decoder (grouped-query attention, RMSNorm, SwiGLU) for the benchmarks.
BENCH_ONLY = ("llama", *REALISTIC)
REALISTIC_TOKENS = 128
# The block a weight plant corrupts: a middle one (GPT-2 has 3 blocks, BERT 3 layers, ResNet 3
# stages), so that healthy blocks run before and after it.
PLANTED_BLOCK = 1
PLANTS = {
    # One weight of the middle block's first MLP matmul set to +inf (GPT-2: Conv1D c_fc; BERT:
    # the intermediate dense layer; ResNet: the first convolution of the middle stage).
    "inf_weight": ("gpt2", "bert", "resnet"),
    # ResNet: the middle stage's first BatchNorm with eps=0, one channel with zero variance
    # and a mean above every input: batch_norm makes -inf there, the ReLU after it zeroes it.
    "bn_eps0": ("resnet",),
}
PLANTED_CHANNEL = 3  # bn_eps0: the channel whose variance is zero


# Each model: (its transformers class, its config class, the config's arguments).
_CONFIGS = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", dict(n_layer=3, n_embd=64, n_head=2, vocab_size=256, n_positions=64)),
    "bert": (
        "BertModel",
        "BertConfig",
        dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=2, intermediate_size=128, vocab_size=256),
    ),
    "resnet": (
        "ResNetModel",
        "ResNetConfig",
        dict(embedding_size=16, hidden_sizes=[16, 32, 32], depths=[1, 1, 1], layer_type="basic"),
    ),
    "llama": (
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=256,
        ),
    ),
    "gpt2-768": ("GPT2LMHeadModel", "GPT2Config", dict(n_layer=1, n_embd=768, n_head=12, vocab_size=2048)),
    "bert-768": (
        "BertModel",
        "BertConfig",
        dict(hidden_size=768, num_hidden_layers=1, num_attention_heads=12, intermediate_size=3072, vocab_size=2048),
    ),
    "resnet50w": (
        "ResNetModel",
        "ResNetConfig",
        dict(embedding_size=64, hidden_sizes=[256, 512, 1024, 2048], depths=[1, 1, 1, 1], layer_type="bottleneck"),
    ),
    "llama-768": (
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(
            hidden_size=768,
            intermediate_size=2048,
            num_hidden_layers=1,
            num_attention_heads=12,
            num_key_value_heads=4,
            vocab_size=2048,
        ),
    ),
}
# What every config of a family shares: positions for the longest input, no KV cache (one call
# of a whole sequence), GPT-2's special tokens inside the small vocabulary, RGB images.
_FAMILY = {
    "GPT2Config": dict(use_cache=False, bos_token_id=0, eos_token_id=0),
    "BertConfig": {},
    "ResNetConfig": dict(num_channels=3),
    "LlamaConfig": dict(use_cache=False),
}
_POSITIONS = {
    "GPT2Config": "n_positions",
    "BertConfig": "max_position_embeddings",
    "LlamaConfig": "max_position_embeddings",
}


def _configs(name: str):
    """(the transformers model class, its config) of a model by name."""
    if name not in _CONFIGS:
        raise ValueError(f"unknown model {name!r}; one of {MODELS + BENCH_ONLY}")
    model_class, config_class, arguments = _CONFIGS[name]
    arguments = {**_FAMILY[config_class], **arguments}
    if config_class in _POSITIONS:
        arguments[_POSITIONS[config_class]] = 256 if name in REALISTIC else 64
    return getattr(transformers, model_class), getattr(transformers, config_class)(**arguments)


def _inputs(name: str) -> dict[str, np.ndarray]:
    """Example inputs, in the order of the model's forward (and of the Relax function)."""
    generator = np.random.default_rng(0)
    if name in ("resnet", "resnet50w"):
        side = 64 if name == "resnet50w" else 32
        return {"pixel_values": generator.normal(size=(1, 3, side, side)).astype("float32")}
    tokens, vocab = (REALISTIC_TOKENS, 2048) if name in REALISTIC else (8, 256)
    ids = generator.integers(0, vocab, size=(1, tokens)).astype("int64")
    mask = np.ones((1, tokens), dtype="int64")  # GPT-2 needs it explicit (see DESIGN.md)
    if name.startswith("bert"):
        mask[0, -2:] = 0  # padding: a real mask
    return {"input_ids": ids, "attention_mask": mask}


def planted_module(model, name: str, plant: str | None):
    """The submodule a plant corrupts (None for a healthy model)."""
    if plant is None:
        return None
    if name not in PLANTS.get(plant, ()):
        raise ValueError(f"no plant {plant!r} for {name!r}; plants: {PLANTS}")
    if name == "gpt2":
        return model.transformer.h[PLANTED_BLOCK].mlp.c_fc
    if name == "bert":
        return model.encoder.layer[PLANTED_BLOCK].intermediate.dense
    stage = model.encoder.stages[PLANTED_BLOCK].layers[0].layer[0]
    return stage.normalization if plant == "bn_eps0" else stage.convolution


@functools.cache
def torch_model(name: str, plant: str | None = None):
    """(the eval-mode torch model with random weights, its example inputs as numpy arrays)."""
    cls, config = _configs(name)
    torch.manual_seed(0)
    model = cls(config).eval()
    target = planted_module(model, name, plant)
    with torch.no_grad():
        if plant == "inf_weight":
            target.weight.view(-1)[5] = float("inf")
        elif plant == "bn_eps0":
            target.eps = 0.0
            target.running_var[PLANTED_CHANNEL] = 0.0
            target.running_mean[PLANTED_CHANNEL] = 1e4
    return model, _inputs(name)


def _torch_inputs(name: str, plant: str | None) -> dict:
    return {k: torch.from_numpy(v) for k, v in torch_model(name, plant)[1].items()}


@functools.cache
def exported(name: str, plant: str | None = None):
    """torch.export.export of the model (with its example inputs as keyword arguments)."""
    model, _ = torch_model(name, plant)
    with torch.no_grad():
        return torch.export.export(model, (), _torch_inputs(name, plant))


@functools.cache
def onnx_model(name: str, plant: str | None = None):
    """The ONNX ModelProto torch.onnx.export(dynamo=True) makes of the model."""
    model, _ = torch_model(name, plant)
    with torch.no_grad(), contextlib.redirect_stdout(None):
        program = torch.onnx.export(model, (), kwargs=_torch_inputs(name, plant), dynamo=True, verbose=False)
    return program.model_proto


def reference_outputs(name: str, plant: str | None = None) -> list[np.ndarray]:
    """PyTorch eager's outputs, flattened in the order the Relax function returns them."""
    model, _ = torch_model(name, plant)
    with torch.no_grad():
        out = model(**_torch_inputs(name, plant))
    return [t.numpy() for t in out.values() if isinstance(t, torch.Tensor)]


@dataclass
class Built:
    """One compiled real model and the arrays to call its `main` with."""

    name: str
    plant: str | None
    via: str  # "export" (torch.export + from_exported_program) or "onnx"
    fuse: bool
    mode: str  # the tensor_debug_mode it was compiled under (its summary kernels)
    mod: object  # the imported Relax module
    executable: object
    inputs: list[np.ndarray]
    seconds: dict[str, float] = field(default_factory=dict)

    def run(self, calls: int = 1) -> list[np.ndarray]:
        """Calls main `calls` times (traced when tvmdbg is enabled); the last call's outputs."""
        vm = relax.VirtualMachine(self.executable, tvm.cpu())
        args = [tvm.runtime.tensor(a) for a in self.inputs]
        out = None
        for _ in range(calls):
            out = vm["main"](*args)
        return _flatten(out)


def _flatten(value) -> list[np.ndarray]:
    if isinstance(value, (tvm.runtime.Tensor,)):
        return [value.numpy()]
    return [a for item in value for a in _flatten(item)]


@contextlib.contextmanager
def _recording(mode: str):
    """tvmdbg enabled into a scratch directory (compile-time capture needs a session)."""
    scratch = tempfile.mkdtemp(prefix="tvmdbg_real_models_")
    tvmdbg.enable_dump_debug_info(scratch, tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        yield
    finally:
        tvmdbg.disable_dump_debug_info()


def compile_module(mod, fuse: bool):
    if fuse:
        return tvm.compile(mod, "llvm", relax_pipeline=relax.get_default_pipeline(Target("llvm")))
    return tvm.compile(mod, "llvm")


@functools.cache
def build(name: str, *, fuse: bool, plant: str | None = None, via: str = "export", mode: str = "FULL_HEALTH") -> Built:
    """The model imported (via "export" or "onnx") and compiled while tvmdbg records in `mode`."""
    import time

    if via not in ("export", "onnx"):
        raise ValueError(f"via must be 'export' or 'onnx', got {via!r}")
    seconds = {}
    start = time.perf_counter()
    source = exported(name, plant) if via == "export" else onnx_model(name, plant)
    seconds["export"] = time.perf_counter() - start
    with _recording(mode):
        start = time.perf_counter()
        if via == "export":
            from tvm.relax.frontend.torch import from_exported_program

            mod = from_exported_program(source)
        else:
            from tvm.relax.frontend.onnx import from_onnx

            mod = from_onnx(source)
        seconds["import"] = time.perf_counter() - start
        start = time.perf_counter()
        executable = compile_module(mod, fuse)
        seconds["compile"] = time.perf_counter() - start
    inputs = list(torch_model(name, plant)[1].values())
    return Built(name, plant, via, fuse, mode, mod, executable, inputs, seconds)


def record(built: Built, logdir, mode: str | None = None, calls: int = 1, **options) -> str:
    """Runs the model `calls` times under enable_dump_debug_info(logdir, ...) (the build's mode
    by default, the whole run kept); returns logdir as a string."""
    logdir = str(logdir)
    options.setdefault("circular_buffer_size", -1)
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode or built.mode, **options)
    try:
        built.run(calls)
    finally:
        tvmdbg.disable_dump_debug_info()
    return logdir
