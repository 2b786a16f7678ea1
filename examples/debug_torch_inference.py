"""Inference of a small PyTorch model imported into TVM, optionally dumped by tvmdbg.

A tiny convolutional classifier for 8x8 digit images is defined in PyTorch, exported with
`torch.export`, imported with `tvm.relax.frontend.torch.from_exported_program`, compiled for
the CPU and run on a batch of scikit-learn's digits; the result is checked against PyTorch.
With --debug every kernel's output is summarised into the dump, and each op points back at
the line of `TinyConvNet.forward` below that created it.

    pip install torch                      # optional: tvmdbg never depends on torch
    python examples/debug_torch_inference.py --debug
    tensorboard --logdir /tmp/tvmdbg_logdir
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import tvmdbg


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=16, help="images per inference (default %(default)s)")
    parser.add_argument(
        "--fuse",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="compile with relax.get_default_pipeline (fuses kernels; default) or plain tvm.compile (--no-fuse)",
    )
    parser.add_argument("--debug", action="store_true", help="dump debug info with tvmdbg.enable_dump_debug_info")
    parser.add_argument("--dump_dir", default="/tmp/tvmdbg_logdir", help="where --debug dumps (default %(default)s)")
    parser.add_argument(
        "--dump_tensor_debug_mode",
        default="FULL_HEALTH",
        choices=tvmdbg.MODE_NAMES,
        help="what the dump keeps of each kernel output (default %(default)s)",
    )
    parser.add_argument(
        "--circular_buffer_size",
        type=int,
        default=-1,
        help="keep only the last N executions and traces in the dump; <= 0 keeps all (default %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    return args


def import_torch():
    """torch, or a clear exit: it is an optional extra of tvmdbg, never a dependency."""
    try:
        import torch
    except ImportError:
        sys.exit(
            "This example needs PyTorch, an optional extra that tvmdbg does not install.\n"
            "Install it with `pip install torch` (or `pip install 'tvmdbg[torch]'`) and run it again."
        )
    return torch


def define_model(torch):
    """A tiny CNN for 1x8x8 images, with fixed random weights."""
    nn = torch.nn

    class TinyConvNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(1, 8, kernel_size=3, padding=1)
            self.fc1 = nn.Linear(8 * 4 * 4, 32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            x = torch.relu(self.conv(x))
            x = torch.nn.functional.max_pool2d(x, 2)
            x = torch.flatten(x, 1)
            x = torch.relu(self.fc1(x))
            return torch.softmax(self.fc2(x), dim=1)

    torch.manual_seed(0)
    return TinyConvNet().eval()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch = import_torch()
    started = time.perf_counter()
    if args.debug:
        tvmdbg.enable_dump_debug_info(
            args.dump_dir,
            tensor_debug_mode=args.dump_tensor_debug_mode,
            circular_buffer_size=args.circular_buffer_size,
        )
    import tvm
    from sklearn.datasets import load_digits
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    images = (load_digits().images[: args.batch] / 16.0).astype("float32")[:, None]
    model = define_model(torch)
    example = torch.from_numpy(images)
    with torch.no_grad():
        exported = torch.export.export(model, (example,))
        expected = model(example).numpy()
    mod = from_exported_program(exported, keep_params_as_input=False)
    target = tvm.target.Target("llvm")
    if args.fuse:
        executable = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    else:
        executable = tvm.compile(mod, target=target)
    vm = relax.VirtualMachine(executable, tvm.cpu())
    compiled = time.perf_counter()
    result = vm["main"](tvm.runtime.tensor(images, tvm.cpu()))
    output = (result if isinstance(result, tvm.runtime.Tensor) else result[0]).numpy()
    ran = time.perf_counter()
    difference = float(np.abs(output - expected).max())
    print(f"imported and compiled in {compiled - started:.1f} s ({'fused' if args.fuse else 'unfused'})")
    print(
        f"ran a batch of {args.batch} in {(ran - compiled) * 1e3:.1f} ms; classes (untrained weights) {output.argmax(axis=1)}"
    )
    print(f"max |TVM - PyTorch| = {difference:.2e}")
    if args.debug:
        print(f"debug dump in {args.dump_dir}: tensorboard --logdir {args.dump_dir}")
    if not np.isfinite(output).all() or difference > 1e-4:
        print("TVM and PyTorch disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
