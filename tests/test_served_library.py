"""A library compiled without tvmdbg (what a deployment ships), loaded in another process and
traced by the VM instrument, gives the answers of the same program built while tvmdbg records:
each call's own sizes (a symbolic batch), the same origin rule (a NaN in the caller's data comes
in through the inputs; later calls that read already-bad state are no origins), the inputs named
as the VM knows them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import library_child
import llm_models
import pytest
import tvm
from tvm.script import relax as R

import tvmdbg
from tvmdbg_tb import analysis

pytestmark = pytest.mark.slow  # two builds, two child processes

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "library_child.py")


@tvm.script.ir_module
class Symbolic:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.multiply(y, y)
            s = R.sqrt(z)
            o = R.add(s, x)
            R.output(o)
        return o


def _serve(tmp_path, library: str, scenario: str, *extra: str):
    logdir = tmp_path / f"served_{scenario}"
    done = subprocess.run(
        [sys.executable, CHILD, str(logdir), library, scenario, *extra], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return logdir


def _page(logdir) -> dict:
    return analysis.alerts(llm_models.read_run(logdir))


def test_a_nan_in_the_callers_data_reads_as_in_the_traced_build(tmp_path):
    library = str(tmp_path / "symbolic.so")
    tvm.compile(Symbolic, "llvm").export_library(library)
    served = _page(_serve(tmp_path, library, "symbolic"))
    traced_dir = tmp_path / "traced"
    with llm_models.recording("FULL_HEALTH"):
        executable = tvm.compile(Symbolic, "llvm")
    tvmdbg.enable_dump_debug_info(str(traced_dir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        library_child.symbolic(executable)
    finally:
        tvmdbg.disable_dump_debug_info()
    traced = _page(traced_dir)
    for page in (served, traced):
        assert page["first_origin_index"] is None and page["origin_alerts"] == 0, page["alerts"][:2]
        # Each alert's size is its own call's (16 x 4), not the first call's (40 x 4).
        assert [a["size"] for a in page["alerts"]] == [64] * 8
        first = page["alerts"][0]
        assert (first["function_name"], first["call"]) == ("main", 2)
        assert [p["name"] for p in first["bad_parameters"]] == ["x"], first
    for logdir in (tmp_path / "served_symbolic", traced_dir):
        done = llm_models.check(logdir)
        assert done.returncode == 1 and "it came in through the function's inputs" in done.stdout, done.stdout
        assert "4 NaN of 64" in done.stdout


def test_a_generation_loop_has_no_origins_from_already_bad_state(tmp_path):
    """The paged-KV decoder with a NaN in one embedding row: the prompt's embed call reads it,
    prefill carries it into the KV cache and every decode step reads it back. Served, the first
    alert is that embed call (the packed weights are the caller's input to the library), and no
    later call is an origin; the traced build names the same call."""
    example = llm_models.paged_example()
    executable, names = example.build()
    library = str(tmp_path / "generate.so")
    executable.export_library(library)
    examples = os.path.join(llm_models.ROOT, "examples")
    served = _page(_serve(tmp_path, library, "generate", json.dumps(names), examples))
    assert served["origin_alerts"] == 0, [
        (a["function_name"], a["call"], a["op_name"]) for a in served["alerts"] if a["origin"]
    ]
    first = served["alerts"][0]
    assert (first["function_name"], first["call"], first["size"]) == ("embed", 1, 160), first
    assert [p["name"] for p in first["bad_parameters"]] == ["packed_params[0]"], first
    done = llm_models.check(tmp_path / "served_generate")
    assert done.returncode == 1 and "it came in through the function's inputs" in done.stdout, done.stdout
    traced_dir = tmp_path / "traced"
    with llm_models.recording("FULL_HEALTH"):
        traced_executable, _ = example.build()
    tvmdbg.enable_dump_debug_info(str(traced_dir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        weights = example.weights(traced_executable, names, plant=True)
        example.Generator(traced_executable, weights).generate(example.PROMPT, 6)
    finally:
        tvmdbg.disable_dump_debug_info()
    traced = _page(traced_dir)
    origin = traced["alerts"][traced["first_origin_index"]]
    assert traced["origin_alerts"] == 1 and (origin["function_name"], origin["call"]) == ("embed", 1)
    assert origin["op_id"] == traced["alerts"][0]["op_id"] and origin["size"] == first["size"]
