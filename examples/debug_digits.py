"""A TVM training loop that goes NaN: the tvmdbg demo.

A 64->32->10 MLP learns to read 8x8 handwritten digits (scikit-learn's `load_digits`,
shipped with the package, no download) with `tvm.relax.training` and plain SGD. Its loss is
the textbook cross-entropy written naively, `-sum(y * log(softmax(logits)))`. At learning
rate 7 the logits are soon thrown so far apart that softmax probabilities underflow to 0:
`log(0)` is -inf, `0 * -inf` is NaN, the loss is `nan` at step 4 and accuracy falls to chance.

    python examples/debug_digits.py            # watch it go NaN
    python examples/debug_digits.py --debug    # the same, dumped to /tmp/tvmdbg_logdir
    python examples/debug_digits.py --fix      # log_softmax and lr 1: 95.3% test accuracy in 50 steps

Then `tensorboard --logdir /tmp/tvmdbg_logdir` and open the "TVM Debugger" tab.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import tvm
from sklearn.datasets import load_digits
from tvm import relax
from tvm.relax.training import SetupTrainer, Trainer
from tvm.relax.training.loss import Loss
from tvm.relax.training.optimizer import SGD

import tvmdbg

NUM_FEATURES, NUM_HIDDEN, NUM_CLASSES = 64, 32, 10
BUGGY_LR = 7.0  # large steps blow the logits up until a softmax probability underflows to 0
FIXED_LR = 1.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50, help="SGD steps (full batch) to run (default 50)")
    parser.add_argument(
        "--lr", type=float, default=None, help=f"SGD learning rate (default {BUGGY_LR:g}, or {FIXED_LR:g} with --fix)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial parameters (default 0)")
    parser.add_argument(
        "--fix",
        action="store_true",
        help="the repaired training: the log_softmax loss (never log(0)) and a learning rate that does not diverge",
    )
    parser.add_argument(
        "--fuse",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="compile with relax.get_default_pipeline (fuses kernels; default) or plain tvm.compile (--no-fuse)",
    )
    parser.add_argument("--debug", action="store_true", help="dump debug info with tvmdbg.enable_dump_debug_info")
    parser.add_argument(
        "--live",
        action="store_true",
        help="with --debug: let the TensorBoard tab pause, step and continue the training (live=True)",
    )
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
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.lr is None:
        args.lr = FIXED_LR if args.fix else BUGGY_LR
    return args


def load_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Digits as (train_x, train_y one-hot, test_x, test_labels); pixels scaled to [0, 1]."""
    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    labels = digits.target.astype("int64")
    order = np.random.default_rng(seed).permutation(len(x))
    x, labels = x[order], labels[order]
    split = int(0.8 * len(x))
    one_hot = np.eye(NUM_CLASSES, dtype="float32")[labels]
    return x[:split], one_hot[:split], x[split:], labels[split:]


def initial_params(seed: int) -> list[np.ndarray]:
    """Glorot-uniform weights and zero biases from a fixed seed (our own: Trainer's
    xaiver_uniform_init_params is broken in TVM 0.27)."""
    rng = np.random.default_rng(seed)

    def glorot(fan_in: int, fan_out: int) -> np.ndarray:
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, (fan_in, fan_out)).astype("float32")

    return [
        glorot(NUM_FEATURES, NUM_HIDDEN),
        np.zeros(NUM_HIDDEN, "float32"),
        glorot(NUM_HIDDEN, NUM_CLASSES),
        np.zeros(NUM_CLASSES, "float32"),
    ]


def build_backbone(n: int):
    """The MLP as a Relax module: backbone(x, w0, b0, w1, b1) -> logits, one op per line, for
    batches of n examples (relax.training's AppendLoss needs static shapes)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n, NUM_FEATURES), "float32"))
    w0 = relax.Var("w0", relax.TensorType((NUM_FEATURES, NUM_HIDDEN), "float32"))
    b0 = relax.Var("b0", relax.TensorType((NUM_HIDDEN,), "float32"))
    w1 = relax.Var("w1", relax.TensorType((NUM_HIDDEN, NUM_CLASSES), "float32"))
    b1 = relax.Var("b1", relax.TensorType((NUM_CLASSES,), "float32"))
    with bb.function("backbone", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            h = bb.emit(relax.op.matmul(x, w0))
            h = bb.emit(relax.op.add(h, b0))
            h = bb.emit(relax.op.nn.relu(h))
            logits = bb.emit(relax.op.matmul(h, w1))
            logits = bb.emit_output(relax.op.add(logits, b1))
        bb.emit_func_output(logits)
    return bb.get().with_attrs({"param_num": 4, "state_num": 0})


class CrossEntropyLoss(Loss):
    """-mean(sum(labels * log_probs)): with log(softmax) (naive, the bug) or log_softmax (fix)."""

    def __init__(self, fix: bool) -> None:
        super().__init__("stable_cross_entropy" if fix else "naive_cross_entropy", 1)
        self.fix = fix

    def __call__(self, predictions, targets):
        bb = relax.BlockBuilder()
        logits = relax.Var("logits", predictions)
        labels = relax.Var("labels", targets)
        with bb.function(self._loss_name, [logits, labels]):
            with bb.dataflow():
                if self.fix:
                    log_probs = bb.emit(relax.op.nn.log_softmax(logits))  # the fix: never log(0)
                else:
                    probs = bb.emit(relax.op.nn.softmax(logits))
                    log_probs = bb.emit(relax.op.log(probs))  # the bug: log(0) = -inf once a prob underflows
                picked = bb.emit(relax.op.multiply(labels, log_probs))
                per_example = bb.emit(relax.op.sum(picked, axis=[1]))
                loss = bb.emit_output(relax.op.negative(relax.op.mean(per_example)))
            bb.emit_func_output(loss)
        return bb.get()[self._loss_name]


def predict(trainer, x: np.ndarray, batch: int) -> np.ndarray:
    """Predicted labels of x, run through the backbone in zero-padded batches of its size."""
    labels = []
    for start in range(0, len(x), batch):
        chunk = x[start : start + batch]
        padded = np.zeros((batch, NUM_FEATURES), "float32")
        padded[: len(chunk)] = chunk
        labels.append(trainer.predict(padded).numpy()[: len(chunk)].argmax(axis=1))
    return np.concatenate(labels)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    if args.debug:  # the one line that turns the debugger on
        tvmdbg.enable_dump_debug_info(
            args.dump_dir,
            tensor_debug_mode=args.dump_tensor_debug_mode,
            circular_buffer_size=args.circular_buffer_size,
            live=args.live,
        )
        if args.live:  # wait at the first kernel: set watchpoints in the Live panel, then "Next hit"
            tvmdbg.request_pause()
            print("live: paused at the first kernel; open the TVM Debugger tab's Live panel", flush=True)
    train_x, train_y, test_x, test_labels = load_data(args.seed)
    batch = len(train_x)
    backbone = build_backbone(batch)
    setup = SetupTrainer(
        CrossEntropyLoss(args.fix),
        SGD(args.lr),
        [relax.TensorType((batch, NUM_CLASSES), "float32")] * 2,
        legalize=False,  # let tvm.compile legalize, so the compiled ops still know their Relax origin
    )
    train_mod = setup(backbone)
    target = tvm.target.Target("llvm")
    if args.fuse:
        executable = tvm.compile(train_mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    else:
        executable = tvm.compile(train_mod, target=target)
    device = tvm.cpu()
    trainer = Trainer(train_mod, relax.VirtualMachine(executable, device), device, zero_init_param_state=False)
    trainer.load_params(initial_params(args.seed))
    compiled = time.perf_counter()
    print(f"compiled in {compiled - started:.1f} s ({'fused' if args.fuse else 'unfused'}, lr {args.lr})")

    accuracy = 0.0
    for step in range(1, args.steps + 1):
        loss = float(trainer.update(train_x, train_y).numpy())
        accuracy = float((predict(trainer, test_x, batch) == test_labels).mean())
        print(f"step {step:3d}  loss {loss:10.4f}  test accuracy {accuracy:.3f}")
    print(f"trained {args.steps} steps in {time.perf_counter() - compiled:.1f} s; final test accuracy {accuracy:.3f}")
    if args.debug:
        print(f"debug dump in {args.dump_dir}: tensorboard --logdir {args.dump_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
