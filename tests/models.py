"""Tiny real Relax models shared by tests: each compiles in well under a second.

`planted(frontend, fault, fuse)` builds a model in which one op (log of zero/negatives,
sqrt of negatives, or division by zero) produces NaN/Inf, and a later maximum(x, 0) (a
ReLU after a matmul, so in another kernel even with fusion) hides it; it returns the
executable, inputs and where the faulty op is.

    h = x - y;  bad = fault(h);  hidden = maximum(matmul(bad * 2, w), 0);  out = hidden + x
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend import nn
from tvm.target import Target

FAULTS = ("log", "sqrt", "div")
FAULT_OP_TYPES = {"log": "relax.log", "sqrt": "relax.sqrt", "div": "relax.divide"}

# x - y holds a zero (log -> -inf, x / 0 -> inf) and negatives (log, sqrt -> nan).
X = np.array([[1, 2, 3, 4, 5, 6, 7, 8]], dtype="float32")
Y = np.array([[1, 1, 5, 1, 9, 1, 1, 1]], dtype="float32")
W = np.eye(8, dtype="float32")
INPUTS = [X, Y, W]
SHAPE = (1, 8)


@dataclass
class Planted:
    """A compiled model with a planted non-finite op."""

    executable: object
    function: str
    inputs: list[np.ndarray]
    fault_op_type: str
    fault_line: int  # line in `fault_file` that creates the faulty op
    fault_file: str = __file__
    extra: dict = field(default_factory=dict)

    def run(self, device=None):
        vm = relax.VirtualMachine(self.executable, device or tvm.cpu())
        args = [tvm.runtime.tensor(a) for a in self.inputs]
        return vm, vm[self.function](*args)


def _line() -> int:
    return sys._getframe(1).f_lineno


def compile_module(mod, fuse: bool):
    """tvm.compile with the default pipeline or the fusing one."""
    if fuse:
        return tvm.compile(mod, "llvm", relax_pipeline=relax.get_default_pipeline(Target("llvm")))
    return tvm.compile(mod, "llvm")


def _fault_expr(fault: str, h, x):
    if fault == "log":
        return relax.op.log(h)
    if fault == "sqrt":
        return relax.op.sqrt(h)
    return relax.op.divide(x, h)


def blockbuilder_planted(fault: str = "log", fuse: bool = False) -> Planted:
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(SHAPE, "float32"))
    y = relax.Var("y", relax.TensorType(SHAPE, "float32"))
    w = relax.Var("w", relax.TensorType((8, 8), "float32"))
    with bb.function("main", [x, y, w]):
        with bb.dataflow():
            h = bb.emit(relax.op.subtract(x, y))
            bad, line = bb.emit(_fault_expr(fault, h, x)), _line()
            scaled = bb.emit(relax.op.multiply(bad, relax.const(2.0, "float32")))
            mixed = bb.emit(relax.op.matmul(scaled, w))
            hidden = bb.emit(relax.op.maximum(mixed, relax.const(0.0, "float32")))
            out = bb.emit_output(relax.op.add(hidden, x))
        bb.emit_func_output(out)
    return Planted(compile_module(bb.get(), fuse), "main", INPUTS, FAULT_OP_TYPES[fault], line)


class _PlantedNet(nn.Module):
    def __init__(self, fault: str):
        super().__init__()
        self.fault = fault
        self.line = -1

    def forward(self, x: nn.Tensor, y: nn.Tensor, w: nn.Tensor):
        h = x - y
        if self.fault == "log":
            bad, self.line = nn.op.log(h), _line()
        elif self.fault == "sqrt":
            bad, self.line = nn.op.sqrt(h), _line()
        else:
            bad, self.line = nn.op.divide(x, h), _line()
        hidden = nn.op.maximum(nn.op.matmul(bad * 2.0, w), nn.op.zeros([1, 8], "float32"))
        return hidden + x


def nn_planted(fault: str = "log", fuse: bool = False) -> Planted:
    net = _PlantedNet(fault)
    tensor = nn.spec.Tensor
    spec = {"forward": {"x": tensor([1, 8], "float32"), "y": tensor([1, 8], "float32"), "w": tensor([8, 8], "float32")}}
    mod, _ = net.export_tvm(spec=spec)
    return Planted(compile_module(mod, fuse), "forward", INPUTS, FAULT_OP_TYPES[fault], net.line)


def tvmscript_planted(fault: str = "log", fuse: bool = False) -> Planted:
    import models_tvmscript

    mod, marker = models_tvmscript.MODULES[fault]
    return Planted(
        compile_module(mod, fuse),
        "main",
        INPUTS,
        FAULT_OP_TYPES[fault],
        line_of(models_tvmscript.__file__, marker),
        fault_file=models_tvmscript.__file__,
    )


def line_of(path: str, marker: str) -> int:
    with open(path) as handle:
        for number, text in enumerate(handle, 1):
            if marker in text:
                return number
    raise LookupError(f"{marker!r} not in {path}")


FRONTENDS = {"blockbuilder": blockbuilder_planted, "nn": nn_planted, "tvmscript": tvmscript_planted}


def planted(frontend: str, fault: str = "log", fuse: bool = False) -> Planted:
    return FRONTENDS[frontend](fault, fuse)


def emit_chain(bb: relax.BlockBuilder, name: str, n: int, size: int) -> relax.GlobalVar:
    """Emits function `name` into bb: a chain of n tiny element-wise ops (add 1, multiply by
    0.5, alternately) on a float32 vector of size elements."""
    x = relax.Var("x", relax.TensorType((size,), "float32"))
    with bb.function(name, [x]):
        with bb.dataflow():
            value = x
            for i in range(n):
                op = relax.op.add if i % 2 == 0 else relax.op.multiply
                value = bb.emit(op(value, relax.const(1.0 if i % 2 == 0 else 0.5, "float32")))
            out = bb.emit_output(value)
        bb.emit_func_output(out)
    return bb.get().get_global_var(name)


def chain(n: int = 200, size: int = 16, fuse: bool = False):
    """A chain of n tiny element-wise ops (the per-kernel overhead benchmark); returns
    (executable, inputs)."""
    bb = relax.BlockBuilder()
    emit_chain(bb, "main", n, size)
    return compile_module(bb.get(), fuse), [np.linspace(-1, 1, size, dtype="float32")]


def mixed_dtypes(fuse: bool = False):
    """Outputs of several dtypes (float32, int64, bool, int32, float16) with NaN, +/-Inf,
    negatives and zeros in the float ones; returns (executable, inputs)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            logs = bb.emit(relax.op.log(x))
            arg = bb.emit(relax.op.argmax(x, axis=1))
            positive = bb.emit(relax.op.greater(x, relax.const(0.0, "float32")))
            ints = bb.emit(relax.op.astype(x, "int32"))
            halves = bb.emit(relax.op.astype(logs, "float16"))
            out = bb.emit_output(relax.Tuple([logs, arg, positive, ints, halves]))
        bb.emit_func_output(out)
    data = np.array([[0.0, -1.0, 2.0, 3.5], [np.inf, -np.inf, 1.0, -2.5]], dtype="float32")
    return compile_module(bb.get(), fuse), [data]


class NaiveCrossEntropy:
    """-sum(y * log(softmax(logits))): log(0) once softmax saturates, NaN soon after."""

    def __init__(self):
        from tvm.relax.training.loss import Loss

        self._loss = type("NaiveCrossEntropyLoss", (Loss,), {})("naive_cross_entropy", 1, "sum")
        self.log_line = -1

    @property
    def num_backbone_outputs(self) -> int:
        return 1

    def __call__(self, predictions, targets):
        bb = relax.BlockBuilder()
        logits = relax.Var("predictions", predictions)
        labels = relax.Var("targets", targets)
        with bb.function("naive_cross_entropy", [logits, labels]):
            with bb.dataflow():
                probs = bb.emit(relax.op.nn.softmax(logits))
                logs, self.log_line = bb.emit(relax.op.log(probs)), _line()
                picked = bb.emit(relax.op.multiply(labels, logs))
                loss = bb.emit_output(relax.op.negative(relax.op.sum(picked)))
            bb.emit_func_output(loss)
        return bb.get()["naive_cross_entropy"]


@dataclass
class Training:
    trainer: object
    inputs: np.ndarray
    targets: np.ndarray
    loss: NaiveCrossEntropy


def digits_training(lr: float = 7.0, fuse: bool = False, batch: int = 64, seed: int = 0) -> Training:
    """A 64->32->10 MLP on sklearn's digits with tvm.relax.training and SGD(lr); at lr 7 the
    loss goes NaN after a few steps (log of a saturated softmax)."""
    from sklearn.datasets import load_digits
    from tvm.relax.training import SetupTrainer, Trainer
    from tvm.relax.training.optimizer import SGD

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((batch, 64), "float32"))
    params = [
        relax.Var("w1", relax.TensorType((64, 32), "float32")),
        relax.Var("b1", relax.TensorType((32,), "float32")),
        relax.Var("w2", relax.TensorType((32, 10), "float32")),
        relax.Var("b2", relax.TensorType((10,), "float32")),
    ]
    w1, b1, w2, b2 = params
    with bb.function("backbone", [x, *params]):
        with bb.dataflow():
            hidden = bb.emit(relax.op.nn.relu(relax.op.add(relax.op.matmul(x, w1), b1)))
            logits = bb.emit_output(relax.op.add(relax.op.matmul(hidden, w2), b2))
        bb.emit_func_output(logits)
    backbone = bb.get().with_attrs({"param_num": 4, "state_num": 0})
    loss = NaiveCrossEntropy()
    setup = SetupTrainer(
        loss, SGD(lr), [relax.TensorType((batch, 10), "float32"), relax.TensorType((batch, 10), "float32")]
    )
    train_mod = setup(backbone)
    executable = compile_module(train_mod, fuse)
    vm = relax.VirtualMachine(executable, tvm.cpu())
    trainer = Trainer(train_mod, vm, tvm.cpu(), False)
    rng = np.random.default_rng(seed)
    trainer.load_params(
        [
            rng.normal(0, 0.1, (64, 32)).astype("float32"),
            np.zeros(32, "float32"),
            rng.normal(0, 0.1, (32, 10)).astype("float32"),
            np.zeros(10, "float32"),
        ]
    )
    digits = load_digits()
    data = (digits.data[:batch] / 16.0).astype("float32")
    targets = np.eye(10, dtype="float32")[digits.target[:batch]]
    return Training(trainer, data, targets, loss)


def _params(rng, shapes):
    return [relax.Var(name, relax.TensorType(shape, "float32")) for name, shape in shapes], [
        (rng.standard_normal(shape) * 0.1).astype("float32") for _, shape in shapes
    ]


def small_cnn(fuse: bool = True, seed: int = 0, batch: int = 4):
    """conv-relu-pool-conv-relu-pool-dense on batch x 3x32x32 images; returns (executable, inputs)."""
    rng = np.random.default_rng(seed)
    shapes = [("c1", (16, 3, 3, 3)), ("c2", (32, 16, 3, 3)), ("w", (32 * 8 * 8, 10)), ("b", (10,))]
    params, values = _params(rng, shapes)
    c1, c2, w, b = params
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((batch, 3, 32, 32), "float32"))
    op = relax.op
    with bb.function("main", [x, *params]):
        with bb.dataflow():
            h = bb.emit(op.nn.relu(op.nn.conv2d(x, c1, padding=1)))
            h = bb.emit(op.nn.max_pool2d(h, pool_size=2, strides=2))
            h = bb.emit(op.nn.relu(op.nn.conv2d(h, c2, padding=1)))
            h = bb.emit(op.nn.max_pool2d(h, pool_size=2, strides=2))
            h = bb.emit(op.reshape(h, (batch, 32 * 8 * 8)))
            out = bb.emit_output(op.add(op.matmul(h, w), b))
        bb.emit_func_output(out)
    image = rng.standard_normal((batch, 3, 32, 32)).astype("float32")
    return compile_module(bb.get(), fuse), [image, *values]


def transformer_block(fuse: bool = True, tokens: int = 32, dim: int = 128, seed: int = 0):
    """Pre-norm single-head attention + GELU MLP with residuals; returns (executable, inputs)."""
    rng = np.random.default_rng(seed)
    params, values = _params(
        rng,
        [
            ("g1", (dim,)),
            ("be1", (dim,)),
            ("wq", (dim, dim)),
            ("wk", (dim, dim)),
            ("wv", (dim, dim)),
            ("wo", (dim, dim)),
            ("g2", (dim,)),
            ("be2", (dim,)),
            ("w1", (dim, 2 * dim)),
            ("w2", (2 * dim, dim)),
        ],
    )
    g1, be1, wq, wk, wv, wo, g2, be2, w1, w2 = params
    values[0][:] = 1.0
    values[6][:] = 1.0
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((tokens, dim), "float32"))
    op = relax.op
    with bb.function("main", [x, *params]):
        with bb.dataflow():
            h = bb.emit(op.nn.layer_norm(x, g1, be1, axes=[-1]))
            q = bb.emit(op.matmul(h, wq))
            k = bb.emit(op.matmul(h, wk))
            v = bb.emit(op.matmul(h, wv))
            scores = bb.emit(op.multiply(op.matmul(q, op.permute_dims(k)), relax.const(dim**-0.5, "float32")))
            attention = bb.emit(op.matmul(op.nn.softmax(scores, axis=-1), v))
            x1 = bb.emit(op.add(x, op.matmul(attention, wo)))
            h2 = bb.emit(op.nn.layer_norm(x1, g2, be2, axes=[-1]))
            mlp = bb.emit(op.matmul(op.nn.gelu(op.matmul(h2, w1)), w2))
            out = bb.emit_output(op.add(x1, mlp))
        bb.emit_func_output(out)
    data = rng.standard_normal((tokens, dim)).astype("float32")
    return compile_module(bb.get(), fuse), [data, *values]


def big_elementwise(size: int = 1 << 20):
    """One kernel with a size-element float32 output (the 1M-element FULL_HEALTH case)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((size,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.add(x, relax.const(1.0, "float32")))
        bb.emit_func_output(out)
    return compile_module(bb.get(), False), [np.linspace(-1, 1, size, dtype="float32")]


def fused_scale_shift(size: int = 1 << 20):
    """`x * 1.0001 + 0.5` on size float32 elements, fused into one kernel (two ops: the
    multiply's values live inside it): the memory-bound fused kernel of the overhead floor."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((size,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            scaled = bb.emit(relax.op.multiply(x, relax.const(1.0001, "float32")))
            out = bb.emit_output(relax.op.add(scaled, relax.const(0.5, "float32")))
        bb.emit_func_output(out)
    return compile_module(bb.get(), True), [np.linspace(-1, 1, size, dtype="float32")]


def extern_kernel_between(symbol: str):
    """exp, then the extern packed kernel `symbol` (DPS, float32[4]), then add: a model whose
    middle kernel may raise; returns the Relax module."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.exp(x))
            b = bb.emit(relax.call_dps_packed(symbol, [a], relax.TensorType((4,), "float32")))
            out = bb.emit_output(relax.op.add(b, a))
        bb.emit_func_output(out)
    return bb.get()


def mismatched_shapes():
    """exp(x) + y with x and y sharing a symbolic length: called with two lengths, a VM
    builtin's shape check raises; returns the Relax module."""
    bb = relax.BlockBuilder()
    n = tvm.tirx.Var("n", "int64")
    x = relax.Var("x", relax.TensorType((n,), "float32"))
    y = relax.Var("y", relax.TensorType((n,), "float32"))
    with bb.function("main", [x, y]):
        with bb.dataflow():
            a = bb.emit(relax.op.exp(x))
            out = bb.emit_output(relax.op.add(a, y))
        bb.emit_func_output(out)
    return bb.get()
