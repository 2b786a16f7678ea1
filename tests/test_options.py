"""enable_dump_debug_info's options: declared once (DumpOptions), checked once, compared whole.

The public keywords are a contract with users and scripts: their names, order (positional
calls) and defaults are pinned here. Adding an option appends a line to PUBLIC.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

import tvmdbg
from tvmdbg_tb.events.options import DumpOptions, LiveOptions, ParamSummaries, public_signature, public_values
from tvmdbg_tb.proto import debug_event_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent / "tvmdbg_tb"

# (keyword, default) in the public order, as users have called them.
PUBLIC = [
    ("logdir", inspect.Parameter.empty),
    ("tensor_debug_mode", "NO_TENSOR"),
    ("circular_buffer_size", 1000),
    ("op_regex", None),
    ("tensor_dtypes", None),
    ("trace_fused_ops", False),
    ("live", False),
    ("live_timeout", 60.0),
    ("param_summaries", "weights_once_per_value"),
    ("run_name", None),
    ("circular_buffer_bytes", None),
    ("model_code", None),
    ("expected_nonfinite", None),
    ("inner_op_check", True),
]


def test_the_public_signature_is_the_options_dataclass():
    signature = inspect.signature(tvmdbg.enable_dump_debug_info)
    assert [(p.name, p.default) for p in signature.parameters.values()] == PUBLIC
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in signature.parameters.values())
    assert signature == public_signature()
    # Every option is one keyword, and every keyword (but logdir) one option.
    assert list(public_values(DumpOptions())) == [name for name, _ in PUBLIC[1:]]
    assert all(f.kw_only for f in dataclasses.fields(DumpOptions)) and DumpOptions.__dataclass_params__.frozen
    doc = inspect.getdoc(tvmdbg.enable_dump_debug_info)
    for name, _ in PUBLIC[1:]:
        assert f"\n{name}: " in doc, name
    assert "{options}" not in doc and "Adding an option" not in doc


def test_no_function_declares_the_options_again():
    """A function taking three or more of the options as parameters is a second declaration
    of them (as DumpArgs, the tracing switch and the writer were): they take DumpOptions."""
    names = {name for name, _ in PUBLIC[1:]}
    again = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                declared = names & {a.arg for a in arguments}
                if len(declared) >= 3:
                    again.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {sorted(declared)}")
            elif isinstance(node, ast.ClassDef) and node.name != "DumpOptions":
                fields = {
                    t.target.id for t in node.body if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)
                }
                if len(names & fields) >= 3:
                    again.append(f"{path.relative_to(ROOT)}:{node.lineno} class {node.name}")
    assert again == []


def test_positional_and_keyword_calls_mean_what_they_meant():
    options = DumpOptions.from_call("FULL_HEALTH", 5, "matmul", live=True, live_timeout=3)
    assert options.tensor_debug_mode == pb.FULL_HEALTH and options.circular_buffer_size == 5
    assert options.op_regex == "matmul"
    assert options.live == LiveOptions(enabled=True, timeout=3.0)
    assert options.param_summaries is ParamSummaries.WEIGHTS_ONCE_PER_VALUE
    assert options.param_summaries == "weights_once_per_value"
    assert DumpOptions.from_call() == DumpOptions()
    with pytest.raises(TypeError, match="live_timout"):
        DumpOptions.from_call(live_timout=3)
    with pytest.raises(TypeError):
        DumpOptions.from_call("FULL_HEALTH", tensor_debug_mode="NO_TENSOR")


def test_values_are_normalised_so_equal_calls_compare_equal():
    a = DumpOptions(tensor_debug_mode="full_health", tensor_dtypes=["float32", "float16"], model_code="a, b")
    b = DumpOptions(tensor_debug_mode=pb.FULL_HEALTH, tensor_dtypes=("float16", "float32"), model_code=["a", "b"])
    assert a == b and hash(a) == hash(b)
    assert DumpOptions(run_name="  x ") == DumpOptions(run_name="x")
    assert DumpOptions(expected_nonfinite="") == DumpOptions()
    assert DumpOptions(live=LiveOptions(timeout=5)) != DumpOptions()
    assert DumpOptions().differences(DumpOptions(live=LiveOptions(timeout=5))) == ["live_timeout: 60.0 -> 5.0"]


@pytest.mark.parametrize(
    "keywords, error, message",
    [
        ({"tensor_debug_mode": "LOUD"}, ValueError, "unknown tensor_debug_mode 'LOUD'"),
        ({"circular_buffer_size": 1.5}, TypeError, "circular_buffer_size must be an int"),
        ({"circular_buffer_size": True}, TypeError, "circular_buffer_size must be an int"),
        ({"circular_buffer_bytes": -1}, ValueError, "circular_buffer_bytes must be >= 0"),
        ({"op_regex": "("}, ValueError, "op_regex '\\(' is not a valid regular expression"),
        ({"expected_nonfinite": 3}, TypeError, "expected_nonfinite must be a string"),
        ({"trace_fused_ops": 1}, TypeError, "trace_fused_ops must be True or False"),
        ({"inner_op_check": "yes"}, TypeError, "inner_op_check must be True or False"),
        ({"live": 1}, TypeError, "live must be True or False"),
        ({"live_timeout": 0}, ValueError, "live_timeout must be a positive number"),
        ({"param_summaries": "sometimes"}, ValueError, "param_summaries must be one of"),
        ({"run_name": "two\nlines"}, ValueError, "one line of printable text"),
        ({"run_name": " "}, ValueError, "run_name must not be empty"),
        ({"tensor_dtypes": 3}, TypeError, "tensor_dtypes must be dtype names or a callable"),
        ({"model_code": [3]}, TypeError, "model_code must be module names or paths"),
    ],
)
def test_a_bad_option_is_a_clear_error_before_anything_starts(tmp_path, keywords, error, message):
    with pytest.raises(error, match=message):
        tvmdbg.enable_dump_debug_info(tmp_path / "dump", **keywords)
    assert not (tmp_path / "dump").exists()


def test_a_second_enable_compares_every_option_live_timeout_included(tmp_path):
    """live_timeout was left out of the comparison: a second enable with another timeout
    returned the first dump's writer, silently keeping the old timeout."""
    writer = tvmdbg.enable_dump_debug_info(tmp_path, "FULL_HEALTH", live_timeout=30.0)
    try:
        assert tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", live_timeout=30) is writer
        with pytest.raises(ValueError, match=r"different arguments \(live_timeout: 30.0 -> 5.0\)"):
            tvmdbg.enable_dump_debug_info(tmp_path, "FULL_HEALTH", live_timeout=5.0)
        assert writer.options == DumpOptions(tensor_debug_mode="FULL_HEALTH", live=LiveOptions(timeout=30.0))
    finally:
        tvmdbg.disable_dump_debug_info()


def test_the_writer_keeps_the_users_run_name_apart_from_its_directory(tmp_path):
    from tvmdbg_tb.events.reader import DebugDataReader

    writer = tvmdbg.enable_dump_debug_info(tmp_path, run_name="baseline")
    tvmdbg.disable_dump_debug_info()
    reader = DebugDataReader(tmp_path)
    reader.update()
    run = reader.run(writer.run_id)
    assert run.metadata.run_id == writer.run_id != "baseline"
    assert run.metadata.run_name == "baseline"
