"""LLM-shaped models nobody here wrote, shared by the tests: transformers' decoders beyond
GPT-2 (Llama, Mistral with a sliding window, Qwen2: RoPE, RMSNorm, grouped-query attention)
run on a batch of two prompts with left or right padding, and the encoders of ViT, T5 and
Whisper, each built from a small config (random weights, no download: 2 layers, width 64),
exported with `torch.export` and imported with `from_exported_program(keep_params_as_input=
True)`, as LLM deployments load their weights: the weights are the function's inputs, so a
planted weight is a run-time change and one build serves every test of a family.

Each family is built once per test process (pytest worker) and kept, compiled with the
default fusing pipeline while tvmdbg records in FULL_STATS (its summary kernels serve the
FULL_HEALTH runs too):

    built = llm_models.build("llama")
    logdir = llm_models.record(built, tmp_path, padding="left")           # healthy
    logdir = llm_models.record(built, tmp_path, plant=llm_models.Plant("model.layers.1.mlp.up_proj.weight"))

The tiny `nn.Module` decoder with TVM's own paged KV cache is examples/generate_paged_kv.py's,
driven as its `generate` drives it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import subprocess
import sys
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DECODERS = ("llama", "mistral", "qwen2")
ENCODERS = ("vit", "t5", "whisper")
FAMILIES = DECODERS + ENCODERS
BATCH, SEQ = 2, 8
PADDED = 3  # tokens of padding in the second prompt
_SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
# Whisper's sizes but its encoder's depth (model_zoo builds it deeper).
WHISPER = dict(
    d_model=64,
    encoder_attention_heads=4,
    encoder_ffn_dim=128,
    decoder_layers=1,
    decoder_attention_heads=4,
    decoder_ffn_dim=128,
    num_mel_bins=16,
    max_source_positions=16,
)


def _config(name: str):
    """(model class, config) of a family: 2 layers, width 64."""
    decoder = dict(_SIZES, num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, use_cache=False)
    if name == "llama":
        return transformers.LlamaForCausalLM, transformers.LlamaConfig(**decoder)
    if name == "mistral":  # a window shorter than the prompt: the mask is banded
        return transformers.MistralForCausalLM, transformers.MistralConfig(sliding_window=4, **decoder)
    if name == "qwen2":
        return transformers.Qwen2ForCausalLM, transformers.Qwen2Config(**decoder)
    if name == "vit":
        config = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, **_SIZES)
        return transformers.ViTModel, config
    if name == "t5":
        config = transformers.T5Config(
            d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=256, feed_forward_proj="gated-gelu"
        )
        return transformers.T5EncoderModel, config
    if name == "whisper":
        config = transformers.WhisperConfig(encoder_layers=2, vocab_size=256, **WHISPER)
        return transformers.WhisperForAudioClassification, config
    raise ValueError(f"unknown family {name!r}; one of {FAMILIES}")


def inputs(name: str, padding: str = "none") -> dict[str, np.ndarray]:
    """Example inputs of a batch of two, in the order of the model's forward; padding ("none",
    "left", "right") masks PADDED tokens of the second prompt (decoders and T5)."""
    generator = np.random.default_rng(0)
    if name == "vit":
        return {"pixel_values": generator.normal(size=(BATCH, 3, 32, 32)).astype("float32")}
    if name == "whisper":
        return {"input_features": generator.normal(size=(BATCH, 16, 32)).astype("float32")}
    ids = generator.integers(1, 256, size=(BATCH, SEQ)).astype("int64")
    mask = np.ones((BATCH, SEQ), dtype="int64")
    if padding == "left":
        mask[1, :PADDED] = 0
        ids[1, :PADDED] = 0
    elif padding == "right":
        mask[1, -PADDED:] = 0
        ids[1, -PADDED:] = 0
    elif padding != "none":
        raise ValueError(f"padding is 'none', 'left' or 'right', got {padding!r}")
    return {"input_ids": ids, "attention_mask": mask}


@functools.cache
def torch_model(name: str):
    """The eval-mode torch model with random weights (seeded)."""
    cls, config = _config(name)
    torch.manual_seed(0)
    model = cls(config).eval()
    if name in ENCODERS:
        model.config._attn_implementation = "eager"
    return model


@functools.cache
def exported(name: str):
    """torch.export.export of the model on its (unpadded) example inputs."""
    example = {k: torch.from_numpy(v) for k, v in inputs(name).items()}
    with torch.no_grad():
        return torch.export.export(torch_model(name), (), example)


def eager_output(model, feed: dict[str, np.ndarray]) -> np.ndarray:
    """A torch model's first output on feed, in eager PyTorch."""
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in feed.items()})
    return next(v for v in out.values() if isinstance(v, torch.Tensor)).numpy()


def reference_outputs(name: str, feed: dict[str, np.ndarray]) -> np.ndarray:
    """PyTorch eager's first output on feed."""
    return eager_output(torch_model(name), feed)


def module_of(node) -> str:
    """The torch module path an fx node was made in ("model.layers.1.mlp"), "" when unknown."""
    stack = node.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else ""


@dataclass(frozen=True)
class Plant:
    """A weight set to a non-finite value at one element: `parameter` by its PyTorch name."""

    parameter: str
    value: float = float("inf")
    element: int = 5


@dataclass
class Built:
    """One compiled model and its weights (numpy, in the order `main` takes them, named by
    param_names: the PyTorch parameter names)."""

    name: str
    mod: object
    executable: object
    weights: list[np.ndarray] = field(default_factory=list)
    param_names: list[str] = field(default_factory=list)

    def run(self, feed: dict[str, np.ndarray], plant: Plant | None = None) -> np.ndarray:
        """Calls main on feed (traced when tvmdbg is enabled); its first output."""
        weights = list(self.weights)
        if plant is not None:
            k = self.param_names.index(plant.parameter)
            weights[k] = weights[k].copy()
            weights[k].reshape(-1)[plant.element] = plant.value
        vm = relax.VirtualMachine(self.executable, tvm.cpu())
        out = vm["main"](*[tvm.runtime.tensor(a) for a in [*feed.values(), *weights]])
        while not isinstance(out, tvm.runtime.Tensor):
            out = out[0]
        return out.numpy()


@contextlib.contextmanager
def recording(mode: str = "FULL_STATS"):
    """tvmdbg enabled into a scratch directory (compile-time capture needs a session)."""
    tvmdbg.enable_dump_debug_info(tempfile.mkdtemp(prefix="tvmdbg_llm_models_"), tensor_debug_mode=mode)
    try:
        yield
    finally:
        tvmdbg.disable_dump_debug_info()


def compile_module(mod):
    return tvm.compile(mod, "llvm", relax_pipeline=relax.get_default_pipeline(Target("llvm")))


def compile_exported(name: str, program, custom_convert_map: tuple = ()) -> Built:
    """An exported program imported with its weights as inputs and compiled (fused) while
    tvmdbg records in FULL_STATS; custom_convert_map: (fx target, converter) pairs (a converter
    made to differ). tests/model_zoo.py builds its families with it too."""
    from tvm.relax.frontend.torch import from_exported_program

    with recording():
        mod = from_exported_program(
            program, keep_params_as_input=True, custom_convert_map=dict(custom_convert_map) or None
        )
        weights = [w.numpy() for w in mod["main"].attrs["params"]]
        mod["main"] = mod["main"].without_attr("params")
        executable = compile_module(mod)
    return Built(name, mod, executable, weights, list(dict(program.named_parameters())))


@functools.cache
def build(name: str, custom_convert_map: tuple = ()) -> Built:
    """The family compiled once (compile_exported)."""
    return compile_exported(name, exported(name), custom_convert_map)


def record_feed(
    built: Built, logdir, feed: dict, plant: Plant | None = None, mode: str = "FULL_HEALTH", **options
) -> str:
    """Runs the model once on feed under enable_dump_debug_info(logdir, mode) (the whole run
    kept); returns logdir as a string."""
    logdir = str(logdir)
    options.setdefault("circular_buffer_size", -1)
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, **options)
    try:
        built.run(feed, plant)
    finally:
        tvmdbg.disable_dump_debug_info()
    return logdir


def record(
    built: Built,
    logdir,
    padding: str = "none",
    plant: Plant | None = None,
    mode: str = "FULL_HEALTH",
    **options,
) -> str:
    """The family run once on its (padded) inputs (record_feed)."""
    return record_feed(built, logdir, inputs(built.name, padding), plant, mode, **options)


def reference_run(program, feed: dict, logdir, mode: str = "FULL_STATS") -> str:
    """PyTorch eager's reference run of program (record_torch_reference) on feed."""
    arrays = tuple(torch.from_numpy(v) for v in feed.values())
    return tvmdbg.record_torch_reference(program, arrays, str(logdir), tensor_debug_mode=mode)


def record_reference(name: str, logdir, padding: str = "none") -> str:
    """PyTorch eager's reference run on the family's padded inputs."""
    return reference_run(exported(name), inputs(name, padding), logdir)


# -- TVM's own LLM path: the example's paged-KV decoder -----------------------------------------


@functools.cache
def paged_example():
    """examples/generate_paged_kv.py as a module (its Decoder, build and generate)."""
    path = os.path.join(ROOT, "examples", "generate_paged_kv.py")
    spec = importlib.util.spec_from_file_location("generate_paged_kv", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]


def check(logdir) -> subprocess.CompletedProcess:
    """`tvmdbg check LOGDIR`, its output captured."""
    return subprocess.run([*TVMDBG, "check", str(logdir)], capture_output=True, text=True, timeout=300)


def read_run(logdir):
    """The run a reader of logdir shows, read to its end."""
    import tvmdbg

    reader = tvmdbg.DebugDataReader(str(logdir))
    reader.update()
    return reader.run()
