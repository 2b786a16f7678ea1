"""The model's own line on a model nobody here wrote (transformers' GPT-2 from a config,
torch.export, default fusing pipeline): each op's location is the innermost frame of the
model's code (transformers' files), the user's call site next to it (called_from), the fx
node it came from; `model_code=` says which files are the model's; the source view has the
file; the CLI prints it."""

from __future__ import annotations

import json
import linecache
import subprocess
import sys

import pytest

real_models = pytest.importorskip("real_models")

import tvmdbg  # noqa: E402
from tvmdbg_tb import analysis  # noqa: E402

pytestmark = pytest.mark.slow  # builds GPT-2 (once per test process) and imports it twice more

REAL_MODELS_FILE = real_models.__file__


def _planted_node(plant: str = "inf_weight") -> str:
    """The fx node of the planted matmul: Conv1D c_fc's addmm in block 1's MLP."""
    program = real_models.exported("gpt2", plant)
    path = f"transformer.h.{real_models.PLANTED_BLOCK}.mlp.c_fc"
    [node] = [
        n
        for n in program.graph.nodes
        if n.op == "call_function"
        and "addmm" in str(n.target)
        and list(n.meta.get("nn_module_stack", {}).values())[-1][0] == path
    ]
    return node.name


def _text(location: dict) -> str:
    return linecache.getline(location["file_path"], location["line"])


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    built = real_models.build("gpt2", fuse=True, plant="inf_weight")
    return real_models.record(built, tmp_path_factory.mktemp("gpt2_inf"))


def test_planted_weight_alert_is_at_the_model_code_line(planted_run):
    node = _planted_node()
    with tvmdbg.DebugDataReader(planted_run) as reader:
        reader.update()
        run = reader.run()
        alerts = analysis.alerts(run)["alerts"]
        planted = [
            a
            for a in alerts
            if any((o["location"] or {}).get("model_node", {}).get("name") == node for o in a["original_ops"])
        ]
        assert planted, [a["location"] for a in alerts]
        where = planted[0]["location"]
        # Conv1D's addmm in transformers' pytorch_utils.py, not the export call in real_models.py.
        assert where["file_path"].endswith("transformers/pytorch_utils.py") and "addmm" in _text(where)
        assert where["model_node"] == {
            "format": "torch.fx",
            "name": node,
            "op_type": "aten.addmm.default",
            "model_file": "",
            # Which of the blocks running that line: the planted one (torch.export's module path).
            "module": f"transformer.h.{real_models.PLANTED_BLOCK}.mlp.c_fc",
        }
        # The user's own call: the import (torch.export's stack of a model called with keyword
        # arguments starts in the model's forward).
        assert where["called_from"]["file_path"] == REAL_MODELS_FILE
        assert "from_exported_program(" in _text(where["called_from"])
        # The stack holds the MLP's call of c_fc in modeling_gpt2.py, the frame shown is innermost.
        op = run.op(planted[0]["op_id"])
        frames = [run.stack_frame(i) for i in op.code_location.stack_frame_ids]
        mlp = [f for f in frames if "self.c_fc(" in linecache.getline(f.file_path, f.line)]
        assert len(mlp) == 1
        # Every op of the model shows a line of transformers' code, none the user's call.
        ops = [op for g in run.graphs() for op in run.ops(g.graph_id) if op.original_ops]
        shown = {analysis.location(run, op.code_location)["file_path"] for op in ops}
        assert shown and all("/transformers/" in path for path in shown)
        # The source view has transformers' file, with the line.
        files = {f["file_path"]: f["index"] for f in analysis.source_files_list(run)}
        assert where["file_path"] in files
        source = analysis.source_file(run, files[where["file_path"]])
        assert "addmm" in source["lines"][where["line"] - 1]


def test_cli_prints_the_model_line_and_the_call_site(planted_run):
    def tvmdbg_cli(*args):
        code = "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)

    alerts = tvmdbg_cli("alerts", planted_run, "--json")
    assert alerts.returncode in (0, 1), alerts.stderr
    node = _planted_node()
    objects = json.loads(alerts.stdout)
    objects = objects["alerts"] if isinstance(objects, dict) else objects
    assert any(a["location"] and a["location"].get("model_node", {}).get("name") == node for a in objects)
    text = tvmdbg_cli("alerts", planted_run).stdout
    assert "pytorch_utils.py:" in text or "modeling_gpt2.py:" in text


def _import_lines(tmp_path, model_code) -> dict[str, dict]:
    """The location of every op, by its fx node, when GPT-2 is imported and compiled (unfused)
    with enable_dump_debug_info(model_code=model_code)."""
    from tvm.relax.frontend.torch import from_exported_program

    tvmdbg.enable_dump_debug_info(tmp_path, tensor_debug_mode="NO_TENSOR", model_code=model_code)
    try:
        mod = from_exported_program(real_models.exported("gpt2", "inf_weight"))
        real_models.compile_module(mod, fuse=False)
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(tmp_path) as reader:
        reader.update()
        run = reader.run()
        out = {}
        for op in run.ops():
            where = analysis.location(run, op.code_location)
            if where and "model_node" in where:
                out[where["model_node"]["name"]] = where
        return out


def test_model_code_option_says_which_files_are_the_model(tmp_path):
    node = _planted_node()
    # Only transformers' modeling files: the MLP's `self.c_fc(...)` call, not Conv1D's addmm.
    modeling = _import_lines(tmp_path / "modeling", "transformers.models")[node]
    assert modeling["file_path"].endswith("modeling_gpt2.py") and "self.c_fc(" in _text(modeling)
    assert modeling["called_from"]["file_path"] == __file__ and "from_exported_program(" in _text(
        modeling["called_from"]
    )
    # The user's own files only: the user's line that imported the model, nothing next to it.
    own = _import_lines(tmp_path / "own", [])[node]
    assert own["file_path"] == __file__ and "from_exported_program(" in _text(own) and "called_from" not in own
    with pytest.raises(ValueError, match="no_such_package_anywhere"):
        tvmdbg.enable_dump_debug_info(tmp_path / "bad", model_code="no_such_package_anywhere")
