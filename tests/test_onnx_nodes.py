"""ONNX imports keep the node: every Relax op from_onnx makes carries its ONNX node (name, op
type), the planted inf weight's alert names that node, with the Python line the exporter
recorded (torch.onnx.export(dynamo=True) writes each node's stack into its metadata_props);
without that metadata the node itself is the location, in the JSON and in the CLI."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

real_models = pytest.importorskip("real_models")

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import tvmdbg  # noqa: E402
from tvmdbg_tb import analysis  # noqa: E402

pytestmark = pytest.mark.slow  # exports ResNet to ONNX, builds it twice

PLANTED_WEIGHT = f"encoder.stages.{real_models.PLANTED_BLOCK}.layers.0.layer.0.convolution.weight"


def _planted_node(model) -> str:
    [node] = [n for n in model.graph.node if PLANTED_WEIGHT in n.input]
    return node.name


def _planted_alerts(run, node: str) -> list[dict]:
    return [
        a for a in analysis.alerts(run)["alerts"] if (a["location"] or {}).get("model_node", {}).get("name") == node
    ]


def test_onnx_alert_names_the_node_and_the_exporters_line(tmp_path):
    built = real_models.build("resnet", fuse=True, via="onnx", plant="inf_weight")
    node = _planted_node(real_models.onnx_model("resnet", "inf_weight"))
    logdir = real_models.record(built, tmp_path)
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        [alert] = _planted_alerts(run, node)
        where = alert["location"]
        assert where["model_node"] == {
            "format": "onnx",
            "name": node,
            "op_type": "Conv",
            "model_file": "",
            "module": "",
        }
        # The stack torch.onnx recorded: the convolution's forward in transformers' ResNet.
        assert where["file_path"].endswith("modeling_resnet.py") and where["function"] == "forward"
        assert where["called_from"]["file_path"] == real_models.__file__  # the from_onnx call
        # Every op of the model came from a node.
        ops = [op for op in run.ops() if op.original_ops]
        assert ops and all(o.code_location.model_node.format == "onnx" for op in ops for o in op.original_ops)


def _without_metadata(model):
    stripped = type(model)()
    stripped.CopyFrom(model)
    for node in stripped.graph.node:
        del node.metadata_props[:]
    return stripped


def test_without_python_stack_the_node_is_the_location(tmp_path):
    from tvm.relax.frontend.onnx import from_onnx

    model = _without_metadata(real_models.onnx_model("resnet", "inf_weight"))
    node = _planted_node(model)
    logdir = tmp_path / "dump"
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        mod = from_onnx(model)  # import: the user's line
        vm = relax.VirtualMachine(real_models.compile_module(mod, fuse=False), tvm.cpu())
        vm["main"](
            *[tvm.runtime.tensor(np.asarray(a)) for a in real_models.torch_model("resnet", "inf_weight")[1].values()]
        )
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        [alert] = _planted_alerts(run, node)
        where = alert["location"]
        assert "file_path" not in where and where["model_node"]["op_type"] == "Conv"
        assert where["called_from"]["file_path"] == __file__
        assert "from_onnx(model)" in open(__file__).read().splitlines()[where["called_from"]["line"] - 1]
        op = analysis.op_info(run, run.op(alert["op_id"]))
        assert op["location"]["model_node"]["name"] == node
    code = "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"
    text = subprocess.run(
        [sys.executable, "-c", code, "alerts", str(logdir)], capture_output=True, text=True, timeout=120
    )
    assert f"ONNX node {node} (Conv)" in text.stdout, text.stdout + text.stderr
