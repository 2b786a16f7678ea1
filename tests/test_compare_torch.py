"""A torch-imported model against PyTorch eager (optional: skipped without torch): the op
we made differ on purpose is named, with its forward line; an honest import agrees."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tvm  # noqa: E402
from models import compile_module, line_of  # noqa: E402
from models_compare import compare_cli  # noqa: E402
from tvm import relax  # noqa: E402

import tvmdbg  # noqa: E402
from tvmdbg_tb import analysis  # noqa: E402

X = np.random.default_rng(1).normal(size=(4, 16)).astype("float32")


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.register_buffer("w", torch.randn(16, 16, generator=generator) * 0.3)

    def forward(self, x):
        h = torch.matmul(x, self.w)
        g = torch.tanh(h)  # planted: tanh
        s = torch.softmax(g * 3.0, dim=-1)
        return s + x


def _skewed_tanh(node, importer):
    """A tanh converter that is slightly wrong (tanh(1.05 x)): the planted divergence."""
    x = importer.env[node.args[0]]
    scaled = importer.block_builder.emit(relax.op.multiply(x, relax.const(1.05, "float32")))
    return importer.block_builder.emit(relax.op.tanh(scaled))


def _tvm_run(logdir, fuse: bool, planted: bool) -> str:
    from tvm.relax.frontend.torch import from_exported_program

    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_STATS")
    try:
        exported = torch.export.export(_Net(), (torch.from_numpy(X),))
        mod = from_exported_program(exported, custom_convert_map={"tanh.default": _skewed_tanh} if planted else None)
        vm = relax.VirtualMachine(compile_module(mod, fuse), tvm.cpu())
        vm["main"](tvm.runtime.tensor(X))
    finally:
        tvmdbg.disable_dump_debug_info()
    return str(logdir)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    exported = torch.export.export(_Net(), (torch.from_numpy(X),))
    return tvmdbg.record_torch_reference(exported, (torch.from_numpy(X),), tmp_path_factory.mktemp("torch_ref"))


@pytest.mark.parametrize("fuse", [False, True])
def test_planted_tanh_is_the_first_divergence_against_eager(tmp_path, reference, fuse):
    run = _tvm_run(tmp_path / "tvm", fuse, planted=True)
    result = analysis.compare(run, reference, rtol=1e-4, atol=1e-5)
    first = result["first_divergence"]
    assert result["status"] == "divergent" and first is not None
    line = line_of(__file__, "# planted: tanh")
    if fuse:  # tanh is fused with the next line's multiply: the kernel holding it diverges
        tanh = [o for o in first["fused_ops_a"] if o["op_type"] == "relax.tanh"]
        assert len(tanh) == 1 and tanh[0]["location"]["model_node"]["name"] == "tanh"
        assert (tanh[0]["location"]["file_path"], tanh[0]["location"]["line"]) == (__file__, line)
        assert first["location"]["line"] in (line, line + 1)
    else:
        assert first["op_type"] == "relax.tanh"
        assert first["location"]["file_path"] == __file__ and first["location"]["line"] == line
    if not fuse:  # before the planted op, the matmul agrees with eager (fused, it is in tanh's kernel)
        matmul = [r for r in result["ops"] if r["op_type"] == "relax.matmul"]
        assert matmul and matmul[0]["status"] == "within"
    cli = compare_cli(run, reference, "--json")
    assert cli.returncode == 1, cli.stderr
    assert json.loads(cli.stdout)["first_divergence"]["location"]["line"] == first["location"]["line"]
    text = compare_cli(run, reference)
    # Unfused, the op; fused, the kernel (its output's op and line), opened only with values.
    head = "First divergent kernel: " if fuse else "First divergent op: relax.tanh "
    named = [ln for ln in text.stdout.splitlines() if ln.startswith(head)]
    assert text.returncode == 1 and named and f"{__file__}:{first['location']['line']} (forward)" in named[0]


def test_honest_import_agrees_with_eager(tmp_path, reference):
    run = _tvm_run(tmp_path / "tvm", True, planted=False)
    result = analysis.compare(run, reference, rtol=1e-4, atol=1e-5)
    assert result["status"] == "within", [r for r in result["ops"] if r["status"] == "divergent"]
    assert result["matched"]["aligned"] >= 2  # the two fused kernels, each at a node boundary
    assert not any("more inputs" in note for note in result["notes"])  # a buffer is a constant on both sides


class _Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(16, 8)

    def forward(self, x):
        return torch.tanh(self.lin(x))


def _linear_run(logdir, keep_params_as_input: bool, scale: float = 1.0) -> str:
    from tvm.relax.frontend import detach_params
    from tvm.relax.frontend.torch import from_exported_program

    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_STATS")  # before the import: source lines
    try:
        exported = torch.export.export(_Linear(), (torch.from_numpy(X),))
        mod, params = detach_params(from_exported_program(exported, keep_params_as_input=keep_params_as_input))
        vm = relax.VirtualMachine(compile_module(mod, True), tvm.cpu())
        weights = [tvm.runtime.tensor(p.numpy() * scale) for p in params.get("main", [])]
        vm["main"](tvm.runtime.tensor(X), *weights)
    finally:
        tvmdbg.disable_dump_debug_info()
    return str(logdir)


def test_lifted_parameters_compared_when_kept_as_inputs(tmp_path):
    """The reference captures the lifted parameters after the user inputs, the order of the
    compiled main's parameters with keep_params_as_input=True: they are compared like any
    input (a skewed weight is the first divergence); imported as constants, the extra
    reference inputs are reported in a note, not silently dropped."""
    exported = torch.export.export(_Linear(), (torch.from_numpy(X),))
    reference = tvmdbg.record_torch_reference(exported, (torch.from_numpy(X),), tmp_path / "ref")
    kept = analysis.compare(_linear_run(tmp_path / "kept", True), reference, rtol=1e-4, atol=1e-5)
    inputs = [r for r in kept["ops"] if r["kind"] == "input"]
    assert [r["status"] for r in inputs] == ["within", "within", "within"] and kept["status"] == "within"
    assert inputs[1]["stats_b"]["size"] == 8 * 16 and inputs[2]["stats_b"]["size"] == 8
    assert not any("more inputs" in note for note in kept["notes"])
    skewed = analysis.compare(_linear_run(tmp_path / "skewed", True, 1.1), reference, rtol=1e-4, atol=1e-5)
    assert skewed["first_divergence"]["key"] == "main:input 1"
    constants = analysis.compare(_linear_run(tmp_path / "constants", False), reference, rtol=1e-4, atol=1e-5)
    assert constants["status"] == "within"
    assert any("2 more inputs than A's (p_lin_weight, p_lin_bias)" in n for n in constants["notes"])


class _Branchy(torch.nn.Module):
    def forward(self, x):
        h = x * 2.0

        def positive(h):
            return torch.tanh(h)  # inside the cond: no eager value of its own

        def negative(h):
            return torch.sigmoid(h)

        g = torch.cond(h.sum() > 0, positive, negative, (h,))  # control flow
        return torch.relu(g + 1.0)


def test_control_flow_is_reported_not_silently_skipped(tmp_path):
    """torch.cond runs in eager as one node: the ops inside the taken branch are not
    comparable and say why (a note naming the cond and its line); the ops after it compare."""
    from tvm.relax.frontend.torch import from_exported_program

    x = torch.from_numpy(np.abs(X))
    exported = torch.export.export(_Branchy(), (x,))
    reference = tvmdbg.record_torch_reference(exported, (x,), tmp_path / "ref")
    tvmdbg.enable_dump_debug_info(tmp_path / "tvm", tensor_debug_mode="FULL_STATS")
    try:
        vm = relax.VirtualMachine(compile_module(from_exported_program(exported), False), tvm.cpu())
        vm["main"](tvm.runtime.tensor(x.numpy()))
    finally:
        tvmdbg.disable_dump_debug_info()
    result = analysis.compare(str(tmp_path / "tvm"), reference, rtol=1e-4, atol=1e-5)
    line = line_of(__file__, "# control flow")
    assert any("control flow: cond" in n and f"test_compare_torch.py:{line}" in n for n in result["notes"])
    tanh = [r for r in result["ops"] if r["op_type"] == "relax.tanh"]
    assert tanh and tanh[0]["status"] == "not_comparable" and "control flow" in tanh[0]["reason"]
    relu = [r for r in result["ops"] if r["op_type"] == "relax.nn.relu"]
    assert relu and relu[0]["status"] == "within" and result["status"] == "within"


def _tanh_via_sigmoid(scale: float):
    """tanh(x) as 2 * sigmoid(2 * scale * x) - 1: other Relax op types at the same line."""

    def convert(node, importer):
        bb, x = importer.block_builder, importer.env[node.args[0]]
        doubled = bb.emit(relax.op.multiply(x, relax.const(2.0 * scale, "float32")))
        sig = bb.emit(relax.op.sigmoid(doubled))
        twice = bb.emit(relax.op.multiply(sig, relax.const(2.0, "float32")))
        return bb.emit(relax.op.subtract(twice, relax.const(1.0, "float32")))

    return convert


@pytest.mark.parametrize("scale", [1.0, 1.05])
def test_swapped_converter_aligns_by_fx_node(tmp_path, reference, scale):
    """A converter made of other Relax ops (subtract last) lines up with the eager tanh by the
    fx node both come from, never by line: equal math is within tolerance, a skewed one is
    the first divergence, named at the tanh line."""
    from tvm.relax.frontend.torch import from_exported_program

    tvmdbg.enable_dump_debug_info(tmp_path / "tvm", tensor_debug_mode="FULL_STATS")
    try:
        exported = torch.export.export(_Net(), (torch.from_numpy(X),))
        mod = from_exported_program(exported, custom_convert_map={"tanh.default": _tanh_via_sigmoid(scale)})
        vm = relax.VirtualMachine(compile_module(mod, False), tvm.cpu())
        vm["main"](tvm.runtime.tensor(X))
    finally:
        tvmdbg.disable_dump_debug_info()
    result = analysis.compare(str(tmp_path / "tvm"), reference, rtol=1e-4, atol=1e-5)
    line = line_of(__file__, "# planted: tanh")
    tanh = [r for r in result["ops"] if r.get("op_name_b") == "tanh"]
    assert [(r["op_type"], r["key"], r["location"]["line"], "aligned_by" in r) for r in tanh] == [
        ("relax.subtract", "main:node tanh", line, False)
    ]
    # The converter's inner ops are parts of the node: no counterpart, never paired by line.
    inner = [r for r in result["ops"] if r["op_type"] in ("relax.sigmoid", "relax.multiply") and r["kind"] == "op"]
    assert inner and all(r["status"] == "not_comparable" for r in inner if r["location"]["line"] == line)
    if scale == 1.0:
        assert result["status"] == "within"
    else:
        assert result["first_divergence"]["location"]["line"] == line
        assert result["first_divergence"]["op_name_b"] == "tanh"
