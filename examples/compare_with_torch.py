"""Does the compiled model match PyTorch? A small PyTorch MLP imported into TVM, compared op
by op with its eager run.

    python examples/compare_with_torch.py [--plant] [--mode FULL_TENSOR]   # writes both runs
    tvmdbg compare /tmp/tvmdbg_compare/tvm /tmp/tvmdbg_compare/torch

With --plant, the GELU is imported with the tanh approximation instead of the exact erf form
(as a custom converter, or a different frontend version, might do): `tvmdbg compare` then
names that op and its line in `forward` below as the first divergent op.
"""

from __future__ import annotations

import argparse
import shutil

import numpy as np
import torch

import tvmdbg


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(64, 128)
        self.norm = torch.nn.LayerNorm(128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        h = self.norm(self.fc1(x))
        h = torch.nn.functional.gelu(h)
        return torch.softmax(self.fc2(h), dim=-1)


def _gelu_tanh(node, importer):
    """GELU with the tanh approximation: the planted difference."""
    from tvm import relax

    x = importer.env[node.args[0]]
    return importer.block_builder.emit(relax.op.nn.gelu_tanh(x))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logdir", default="/tmp/tvmdbg_compare")
    parser.add_argument("--plant", action="store_true", help="import GELU with the tanh approximation")
    parser.add_argument("--fuse", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--mode", default="FULL_STATS", choices=["FULL_STATS", "FULL_TENSOR"], help="what both runs keep"
    )
    args = parser.parse_args()
    shutil.rmtree(args.logdir, ignore_errors=True)

    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    x = np.random.default_rng(0).normal(size=(8, 64)).astype("float32")
    exported = torch.export.export(MLP().eval(), (torch.from_numpy(x),))
    # 1. The reference: PyTorch eager, every fx node's output statistics.
    tvmdbg.record_torch_reference(exported, (torch.from_numpy(x),), f"{args.logdir}/torch", tensor_debug_mode=args.mode)
    # 2. The compiled model, dumped with statistics.
    tvmdbg.enable_dump_debug_info(f"{args.logdir}/tvm", tensor_debug_mode=args.mode)
    mod = from_exported_program(exported, custom_convert_map={"gelu.default": _gelu_tanh} if args.plant else None)
    pipeline = relax.get_default_pipeline(tvm.target.Target("llvm")) if args.fuse else None
    executable = tvm.compile(mod, "llvm", relax_pipeline=pipeline) if pipeline else tvm.compile(mod, "llvm")
    vm = relax.VirtualMachine(executable, tvm.cpu())
    vm["main"](tvm.runtime.tensor(x))
    tvmdbg.disable_dump_debug_info()
    print(f"now: tvmdbg compare {args.logdir}/tvm {args.logdir}/torch")


if __name__ == "__main__":
    main()
