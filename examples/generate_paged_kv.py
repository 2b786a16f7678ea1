"""Generate tokens with a tiny decoder written with TVM's `nn.Module`, the way TVM's LLM
runtime (and MLC-LLM) runs one: the model exported with `export_tvm` (its weights packed in
one tuple), separate `embed`, `prefill` and `decode` functions, and TVM's paged KV cache
(`TIRPagedKVCache`) holding the keys and values between the calls. The README's tutorial
"Debugging a generation loop" walks through it.

    python examples/generate_paged_kv.py /tmp/tvmdbg_generate/healthy
    tvmdbg check /tmp/tvmdbg_generate/healthy                        # all finite, exit 0
    python examples/generate_paged_kv.py /tmp/tvmdbg_generate/planted --plant
    tvmdbg check /tmp/tvmdbg_generate/planted                        # exit 1: the embed call

--plant puts a NaN in the embedding row of one prompt token: the prompt's `embed` call reads
it, the prefill carries it into the KV cache, and every decode step reads it back from there.
tvmdbg names the `embed` call that read the weight, at the line of `embed` below.

--width realistic builds a 1024-wide, 4-layer model instead of the tiny one; --schedule
compiles the matmuls as scheduled GEMVs (see `build`), which a model of that width needs on a
CPU (a decode step ~11 ms instead of ~0.5 s).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax, te
from tvm.relax.backend import cpu_generic
from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import Tensor, op
from tvm.relax.frontend.nn.llm.kv_cache import PagedKVCache, RopeMode, TIRPagedKVCache
from tvm.runtime import ShapeTuple
from tvm.s_tir import dlight
from tvm.target import Target

TARGET = Target("llvm")
PROMPT = [3, 17, 42, 8, 25]  # the token ids of the prompt
PLANTED_TOKEN = 42  # --plant: its embedding row holds a NaN


@dataclass(frozen=True)
class Config:
    hidden: int = 32
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2  # grouped-query attention: two query heads share a key/value head
    ffn: int = 64
    vocab: int = 64

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


# realistic: the shape of a small LLM's layers (a 2816-wide MLP, 16 query / 4 key-value heads).
WIDTHS = {
    "tiny": Config(),
    "realistic": Config(hidden=1024, layers=4, heads=16, kv_heads=4, ffn=2816, vocab=4096),
}


class Attention(nn.Module):
    def __init__(self, config: Config):
        self.config = config
        width = (config.heads + 2 * config.kv_heads) * config.head_dim
        self.qkv_proj = nn.Linear(config.hidden, width, bias=False)
        self.o_proj = nn.Linear(config.heads * config.head_dim, config.hidden, bias=False)

    def forward(self, x: Tensor, cache: PagedKVCache, layer: int) -> Tensor:
        c = self.config
        b, s, _ = x.shape
        qkv = op.reshape(self.qkv_proj(x), (b, s, c.heads + 2 * c.kv_heads, c.head_dim))
        # RoPE, the cache append and the attention all run inside the cache's builtin.
        out = cache.attention_with_fused_qkv(layer, qkv, c.heads, sm_scale=c.head_dim**-0.5)
        return self.o_proj(op.reshape(out, (b, s, c.heads * c.head_dim)))


class MLP(nn.Module):
    def __init__(self, config: Config):
        self.gate_up_proj = nn.Linear(config.hidden, 2 * config.ffn, bias=False)
        self.down_proj = nn.Linear(config.ffn, config.hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = op.split(self.gate_up_proj(x), 2, axis=-1)
        return self.down_proj(op.silu(gate) * up)


class Layer(nn.Module):
    def __init__(self, config: Config):
        self.attn = Attention(config)
        self.mlp = MLP(config)
        self.attn_norm = nn.RMSNorm(config.hidden, -1, 1e-5, bias=False)
        self.mlp_norm = nn.RMSNorm(config.hidden, -1, 1e-5, bias=False)

    def forward(self, x: Tensor, cache: PagedKVCache, layer: int) -> Tensor:
        x = x + self.attn(self.attn_norm(x), cache, layer)
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    def __init__(self, config: Config):
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab, config.hidden)
        self.layers = nn.ModuleList([Layer(config) for _ in range(config.layers)])
        self.norm = nn.RMSNorm(config.hidden, -1, 1e-5, bias=False)
        self.lm_head = nn.Linear(config.hidden, config.vocab, bias=False)

    def embed(self, ids: Tensor) -> Tensor:
        return op.reshape(self.embed_tokens(ids), (1, ids.shape[0], self.config.hidden))

    def _layers(self, x: Tensor, cache: PagedKVCache) -> Tensor:
        for k, layer in enumerate(self.layers):
            x = layer(x, cache, k)
        return x

    def prefill(self, x: Tensor, cache: PagedKVCache):
        def last(h: te.Tensor):  # only the last position's logits pick the next token
            b, s, d = h.shape
            return te.compute((b, 1, d), lambda i, _, k: h[i, s - 1, k], name="last")

        h = op.tensor_expr_op(last, "last", [self._layers(x, cache)])
        return self.lm_head(self.norm(h)), cache

    def decode(self, x: Tensor, cache: PagedKVCache):
        return self.lm_head(self.norm(self._layers(x, cache))), cache

    def create_paged_kv_cache(self, max_batch_size, max_total_seq_len, prefill_chunk_size, page_size):
        c = self.config
        return TIRPagedKVCache(
            attn_kind="mha",
            max_batch_size=max_batch_size,
            max_total_seq_len=max_total_seq_len,
            prefill_chunk_size=prefill_chunk_size,
            page_size=page_size,
            support_sliding_window=0,
            layer_partition=relax.ShapeExpr([0, c.layers]),
            num_hidden_layers=c.layers,
            num_attention_heads=c.heads,
            num_key_value_heads=c.kv_heads,
            qk_head_dim=c.head_dim,
            v_head_dim=c.head_dim,
            mla_original_qk_head_dim=0,
            mla_original_v_head_dim=0,
            rope_mode=RopeMode.NORMAL,
            rope_scale=1,
            rope_theta=10000,
            rope_scaling={},
            rope_ext_factors=relax.op.null_value(),  # none: a tensor here means "longrope"
            rotary_dim=c.head_dim,
            enable_disaggregation=False,
            dtype="float32",
            target=TARGET,
        )

    def spec(self) -> nn.spec.ModuleSpec:
        c = self.config
        packed = {"param_mode": "packed", "effect_mode": "none"}
        cache = nn.spec.Object(object_type=PagedKVCache)
        return nn.spec.ModuleSpec.from_raw(
            {
                "embed": {"ids": nn.spec.Tensor(["n"], "int32"), "$": packed},
                "prefill": {"x": nn.spec.Tensor([1, "n", c.hidden], "float32"), "cache": cache, "$": packed},
                "decode": {"x": nn.spec.Tensor([1, 1, c.hidden], "float32"), "cache": cache, "$": packed},
                "create_paged_kv_cache": {
                    "max_batch_size": int,
                    "max_total_seq_len": int,
                    "prefill_chunk_size": int,
                    "page_size": int,
                    "$": {"param_mode": "none", "effect_mode": "none"},
                },
            },
            self,
        )


class RowGEMV(dlight.cpu.GEMV):
    """dlight's CPU GEMV rule with its schedule vectorized along each weight row: a partial sum
    per SIMD lane (rfactor) in registers, added up at the row's end. dlight's own vectorizes
    across rows, which reads a row-major weight in strides (~10x slower here, and LLVM takes
    ~80 s to compile it at 1024 wide)."""

    LANES = 16

    def sch_inner_reduction(self, sch, target, block, vector_input_buffers, epilogue_info):
        _, rows, reduction, _ = sch.get_loops(block)
        length = sch.get(reduction).extent
        if not isinstance(length, tvm.tirx.IntImm) or length.value % self.LANES:
            return None
        _, lanes = sch.split(reduction, factors=[None, self.LANES])
        partial = sch.rfactor(lanes, factor_axis=0)
        _, rows, along, lanes, _ = sch.get_loops(partial)
        sch.reverse_compute_at(block, rows)
        sch.set_scope(partial, 0, "local")
        sch.parallel(rows)
        sch.vectorize(lanes)
        sch.decompose_reduction(partial, along)
        return sch


def scheduled_pipeline(target: Target):
    """TVM's CPU pipeline after FuseTransposeMatmul (each matmul by a transposed weight made one
    op), with dlight scheduling the decode step's matmuls as GEMVs (MLC-LLM's pipeline does the
    same on llvm, with dlight's own rule)."""

    @tvm.transform.module_pass(opt_level=0)
    def pipeline(mod: tvm.IRModule, _context) -> tvm.IRModule:
        with target:
            passes = [
                relax.transform.FuseTransposeMatmul(),
                *cpu_generic.library_dispatch_passes(target),
                *cpu_generic.legalize_passes(target),
                dlight.ApplyDefaultSchedule(RowGEMV()),
                *cpu_generic.pipeline.dataflow_lower_passes(target),
                *cpu_generic.finalize_passes(target),
            ]
            return tvm.transform.Sequential(passes)(mod)

    return pipeline


def build(config: Config = Config(), schedule: bool = False):
    """(the compiled executable, the parameter names in the order of the packed tuple).
    schedule: scheduled_pipeline instead of TVM's default one, which leaves every matmul a
    naive loop after a transpose of its weight on every call."""
    model = Decoder(config)
    mod, named_params = model.export_tvm(spec=model.spec())
    pipeline = scheduled_pipeline(TARGET) if schedule else relax.get_default_pipeline(TARGET)
    executable = tvm.compile(mod, TARGET, relax_pipeline=pipeline)
    return executable, [name for name, _ in named_params]


def weights(executable, names: list[str], config: Config = Config(), plant: bool = False, seed: int = 0):
    """Random weights for the packed tuple (norms at 1); plant: a NaN in PLANTED_TOKEN's embedding row."""
    del executable  # the names say which weight is which
    rng = np.random.default_rng(seed)
    shapes = {
        "embed_tokens.weight": (config.vocab, config.hidden),
        "lm_head.weight": (config.vocab, config.hidden),
        "norm.weight": (config.hidden,),
    }
    out = []
    for name in names:
        if name.endswith("norm.weight"):
            out.append(np.ones(config.hidden, "float32"))
            continue
        shape = shapes.get(name) or _layer_shape(name, config)
        out.append((rng.normal(size=shape) / np.sqrt(shape[-1])).astype("float32"))
    if plant:
        out[names.index("embed_tokens.weight")][PLANTED_TOKEN, 1] = np.nan
    return [tvm.runtime.tensor(w) for w in out]


def _layer_shape(name: str, c: Config) -> tuple[int, int]:
    if name.endswith("qkv_proj.weight"):
        return ((c.heads + 2 * c.kv_heads) * c.head_dim, c.hidden)
    if name.endswith("o_proj.weight"):
        return (c.hidden, c.heads * c.head_dim)
    if name.endswith("gate_up_proj.weight"):
        return (2 * c.ffn, c.hidden)
    if name.endswith("down_proj.weight"):
        return (c.hidden, c.ffn)
    raise ValueError(f"no shape for {name}")


class Generator:
    """One sequence generated greedily: a prefill of the prompt, then one decode step per token."""

    def __init__(self, executable, params, max_tokens: int = 64):
        self.vm = relax.VirtualMachine(executable, tvm.cpu())
        self.params = params
        self.cache = self.vm["create_paged_kv_cache"](
            ShapeTuple([1]), ShapeTuple([max_tokens]), ShapeTuple([max_tokens]), ShapeTuple([16])
        )
        self._begin = tvm.get_global_func("vm.builtin.kv_state_begin_forward")
        self._end = tvm.get_global_func("vm.builtin.kv_state_end_forward")
        tvm.get_global_func("vm.builtin.kv_state_add_sequence")(self.cache, 0)

    def embed(self, tokens: list[int]):
        return self.vm["embed"](tvm.runtime.tensor(np.array(tokens, "int32")), self.params)

    def _forward(self, function: str, tokens: list[int]) -> int:
        x = self.embed(tokens)
        self._begin(self.cache, ShapeTuple([0]), ShapeTuple([len(tokens)]))
        logits, self.cache = self.vm[function](x, self.cache, self.params)
        self._end(self.cache)
        return int(np.argmax(logits.numpy()[0, -1]))

    def prefill(self, prompt: list[int]) -> int:
        return self._forward("prefill", prompt)

    def decode(self, token: int) -> int:
        return self._forward("decode", [token])

    def generate(self, prompt: list[int], steps: int) -> list[int]:
        tokens = [self.prefill(prompt)]
        for _ in range(steps - 1):
            tokens.append(self.decode(tokens[-1]))
        return tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logdir", help="where tvmdbg writes the dump")
    parser.add_argument("--plant", action="store_true", help=f"a NaN in token {PLANTED_TOKEN}'s embedding row")
    parser.add_argument("--steps", type=int, default=8, help="tokens to generate")
    parser.add_argument("--mode", default="FULL_HEALTH", help="tvmdbg's tensor_debug_mode")
    parser.add_argument("--width", choices=sorted(WIDTHS), default="tiny", help="the model's size (WIDTHS)")
    parser.add_argument("--schedule", action="store_true", help="compile with scheduled_pipeline")
    args = parser.parse_args(argv)
    config = WIDTHS[args.width]
    import tvmdbg

    tvmdbg.enable_dump_debug_info(args.logdir, tensor_debug_mode=args.mode, circular_buffer_size=-1)
    try:
        executable, names = build(config, args.schedule)
        generator = Generator(executable, weights(executable, names, config, plant=args.plant))
        tokens = generator.generate(PROMPT, args.steps)
    finally:
        tvmdbg.disable_dump_debug_info()
    print("generated:", tokens)
    print(f"Now run:\n  tvmdbg check {args.logdir}\n  tvmdbg alerts {args.logdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
