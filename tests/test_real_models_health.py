"""NaN/Inf answers on models nobody here wrote (tests/real_models.py): transformers' GPT-2,
BERT and ResNet, through torch.export and ONNX, fused and unfused.

- A healthy model passes `tvmdbg check`: its attention masks' -inf is absorbed by the
  softmax, listed apart, no alert.
- A weight planted as +inf in the middle block is the first origin: the op that reads it,
  named inside a fused kernel by the replay (not left "heuristic").
- BatchNorm with eps=0 and a zero variance makes -inf that the ReLU zeroes: still an alert,
  at the batch_norm.
- The graph is one connected piece: reshapes and tuple items (no kernels) keep the edge and
  the health of the tensor they are.
"""

from __future__ import annotations

import numpy as np
import pytest

real_models = pytest.importorskip("real_models")

from tvm import relax  # noqa: E402

import tvmdbg  # noqa: E402
from tvmdbg_tb import analysis  # noqa: E402
from tvmdbg_tb.cli.main import main as cli  # noqa: E402
from tvmdbg_tb.cli.reports import input_health  # noqa: E402
from tvmdbg_tb.proto import debug_event_pb2 as pb  # noqa: E402

pytestmark = pytest.mark.slow  # real models: each built once per test process

HEALTHY = [
    ("gpt2", "export", False),
    ("gpt2", "export", True),
    ("bert", "export", False),
    ("bert", "export", True),
    ("resnet", "export", False),
    ("resnet", "export", True),
    ("bert", "onnx", True),
]


def _run(logdir):
    reader = tvmdbg.DebugDataReader(logdir)
    reader.update()
    return reader, reader.run()


@pytest.mark.parametrize(("name", "via", "fuse"), HEALTHY)
def test_a_healthy_model_passes_check(tmp_path, name, via, fuse, capsys):
    built = real_models.build(name, fuse=fuse, via=via)
    logdir = real_models.record(built, tmp_path, calls=2)
    assert cli(["check", logdir]) == 0, capsys.readouterr()
    reader, run = _run(logdir)
    with reader:
        answer = analysis.alerts(run)
        assert answer["num_alerts"] == 0
        benign = answer["benign"]
        if name in ("gpt2", "bert") and via == "export":
            # The importer's where(mask, 0, -inf) per layer, absorbed by the softmax.
            assert benign["absorbed"] >= 2 * 3  # two calls, three layers
            assert any("relax.nn.softmax" in o["absorbed_by"] for o in benign["ops"])
            assert any("relax.where" in o["original_ops"] for o in benign["ops"])
            assert "intended masking" in capsys.readouterr().out


def _planted_vars(mod) -> set[str]:
    """Names of the Relax vars whose op reads the non-finite weight (the planted one; scalar
    constants such as the masks' -inf are no weights) in the imported module, and of the ops
    reading a transpose of it (the fusing pipeline folds a constant's transpose into the
    constant): what a correct first origin must hold."""
    found: set[str] = set()
    transposes: set[str] = set()
    for binding in (b for block in mod["main"].body.blocks for b in block.bindings):
        value = binding.value
        if not isinstance(value, relax.Call):
            continue
        name = str(binding.var.name)
        for arg in value.args:
            if isinstance(arg, relax.Var):
                if str(arg.name) in transposes:
                    found.add(name)
                continue
            data = getattr(arg, "value", None)
            array = data.numpy() if data is not None and hasattr(data, "numpy") else None
            if array is not None and array.size > 1 and not np.isfinite(array).all():
                found.add(name)
                if getattr(value.op, "name", "") == "relax.permute_dims":
                    transposes.add(name)
    return found


@pytest.mark.parametrize(
    ("name", "fuse"), [("gpt2", False), ("gpt2", True), ("bert", True), ("resnet", True), ("bert", False)]
)
def test_a_planted_inf_weight_in_the_middle_block_is_the_first_origin(tmp_path, name, fuse):
    built = real_models.build(name, fuse=fuse, plant="inf_weight")
    planted = _planted_vars(built.mod)
    assert 1 <= len(planted) <= 2, planted  # the op reading the corrupted weight (or its transpose)
    logdir = real_models.record(built, tmp_path)
    assert cli(["check", logdir, "--quiet"]) == 1
    reader, run = _run(logdir)
    with reader:
        answer = analysis.alerts(run)
        origin = answer["alerts"][answer["first_origin_index"]]
        names = {o["var_name"] for o in origin["original_ops"]}
        assert planted & names, (origin["op_name"], origin["kernel"], names, planted)
        if len(origin["original_ops"]) > 1:  # a fused kernel: the replay names the op
            assert origin["confirmed"] == "replay", origin
            assert origin["inner_op"]["var_name"] in planted
        if name != "resnet":  # the masks of the blocks before it are absorbed, no origins
            assert answer["benign"]["absorbed"] >= real_models.PLANTED_BLOCK


@pytest.mark.parametrize("fuse", [False, True])  # fused: the -inf never leaves fused_batch_norm_relu
def test_batch_norm_with_zero_variance_is_named_though_the_relu_hides_it(tmp_path, fuse):
    built = real_models.build("resnet", fuse=fuse, plant="bn_eps0")
    logdir = real_models.record(built, tmp_path)
    assert cli(["check", logdir, "--quiet"]) == 1
    reader, run = _run(logdir)
    with reader:
        answer = analysis.alerts(run)
        assert answer["benign"]["absorbed"] == 0  # computed from finite inputs: a bug
        origin = answer["alerts"][answer["first_origin_index"]]
        made_by = origin["inner_op"]["op_type"] if origin.get("inner_op") else origin["original_ops"][0]["op_type"]
        assert made_by == "relax.nn.batch_norm"
        assert origin["neg_inf_count"] > 0 and origin["nan_count"] == 0


def _pieces(ops: list[pb.GraphOpCreation]) -> int:
    """Connected pieces of the graph (edges: an input made by an op)."""
    parent = {op.op_id: op.op_id for op in ops}

    def root(op_id):
        while parent[op_id] != op_id:
            parent[op_id] = parent[parent[op_id]]
            op_id = parent[op_id]
        return op_id

    for op in ops:
        for inp in op.inputs:
            if inp.kind == pb.OpInput.OP_OUTPUT:
                parent[root(op.op_id)] = root(inp.producer_op_id)
    return len({root(op.op_id) for op in ops})


@pytest.mark.parametrize("fuse", [False, True])
def test_gpt2_is_one_connected_graph_and_views_keep_their_health(tmp_path, fuse):
    built = real_models.build("gpt2", fuse=fuse)
    logdir = real_models.record(built, tmp_path)
    reader, run = _run(logdir)
    with reader:
        ops = run.ops()
        assert _pieces(ops) == 1
        assert not [i.name for op in ops for i in op.inputs if i.kind == pb.OpInput.OTHER]
        (graph,) = run.graphs()
        assert [o.kind for o in graph.outputs] == [pb.OpInput.OP_OUTPUT]  # the logits' maker
        # Inputs that are views (a reshape: another shape than what the producer wrote) show
        # the producer's health, in the execution.
        shapes = {(op.op_id, slot): tuple(spec.shape) for op in ops for slot, spec in enumerate(op.outputs)}
        viewed = [
            (op, k)
            for op in ops
            for k, inp in enumerate(op.inputs)
            if inp.kind == pb.OpInput.OP_OUTPUT
            and shapes[(inp.producer_op_id, inp.producer_output_slot)] != tuple(inp.spec.shape)
        ]
        assert len(viewed) >= 3 * 2  # reshapes around each block's matmuls
        for op, k in viewed:
            assert input_health(run, op, 0)[k] not in ("-", "not recorded")
