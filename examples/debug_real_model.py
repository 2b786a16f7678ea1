"""Debug a model nobody here wrote: transformers' ResNet, built from a small config with random
weights (no download), exported with torch.export, imported into TVM and compiled with the
default fusing pipeline while tvmdbg records (docs/tutorial-real-model.md walks through it).

Three runs go under LOGDIR:

    LOGDIR/healthy    the model as built, FULL_HEALTH:          tvmdbg check LOGDIR/healthy
    LOGDIR/planted    one weight of a convolution of the middle stage set to +inf:
                                                                tvmdbg check LOGDIR/planted
    LOGDIR/tvm_stats  the healthy model in FULL_STATS, and
    LOGDIR/torch      PyTorch eager on the same input:          tvmdbg compare LOGDIR/tvm_stats LOGDIR/torch

The planted run's first origin is the convolution, at its line in transformers'
modeling_resnet.py (the model's own code), "called from" this file's import line.

    pip install torch transformers        # neither is a dependency of tvmdbg
    python examples/debug_real_model.py /tmp/tvmdbg_resnet
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import tvmdbg

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a config, never a download

# The convolution whose weight --plant sets to +inf: the first one of the middle stage.
PLANTED_STAGE = 1


def build_model(plant: bool):
    """ResNet from a small config (random weights, seeded) and an input image batch."""
    import torch
    import transformers

    config = transformers.ResNetConfig(
        embedding_size=16, hidden_sizes=[16, 32, 32], depths=[1, 1, 1], layer_type="basic", num_channels=3
    )
    torch.manual_seed(0)
    model = transformers.ResNetModel(config).eval()
    if plant:
        convolution = model.encoder.stages[PLANTED_STAGE].layers[0].layer[0].convolution
        with torch.no_grad():
            convolution.weight.view(-1)[5] = float("inf")
    pixels = torch.from_numpy(np.random.default_rng(0).normal(size=(1, 3, 32, 32)).astype("float32"))
    return model, pixels


def run_in_tvm(model, pixels, logdir: str, mode: str) -> None:
    """Export, import and compile the model while tvmdbg records into logdir, then call it once."""
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program
    from tvm.target import Target

    exported = torch.export.export(model, (pixels,))
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=-1)
    try:
        mod = from_exported_program(exported)  # every op keeps its line in modeling_resnet.py
        executable = tvm.compile(mod, "llvm", relax_pipeline=relax.get_default_pipeline(Target("llvm")))
        vm = relax.VirtualMachine(executable, tvm.cpu())
        vm["main"](tvm.runtime.tensor(pixels.numpy()))
    finally:
        tvmdbg.disable_dump_debug_info()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logdir", help="where the runs go (LOGDIR/healthy, LOGDIR/planted, ...)")
    args = parser.parse_args(argv)
    import torch

    model, pixels = build_model(plant=False)
    run_in_tvm(model, pixels, os.path.join(args.logdir, "healthy"), "FULL_HEALTH")
    planted, _ = build_model(plant=True)
    run_in_tvm(planted, pixels, os.path.join(args.logdir, "planted"), "FULL_HEALTH")
    # A reference: the same exported program run by PyTorch eager, op by op (fx nodes).
    run_in_tvm(model, pixels, os.path.join(args.logdir, "tvm_stats"), "FULL_STATS")
    tvmdbg.record_torch_reference(torch.export.export(model, (pixels,)), (pixels,), os.path.join(args.logdir, "torch"))
    print(
        "Now run:\n"
        f"  tvmdbg check {args.logdir}/healthy\n"
        f"  tvmdbg check {args.logdir}/planted\n"
        f"  tvmdbg compare {args.logdir}/tvm_stats {args.logdir}/torch\n"
        f"  tensorboard --logdir {args.logdir}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
