"""CUDA builds compiled while tvmdbg records, on a machine without a GPU (CUDA 13's nvcc compiles
the kernels; nothing here runs on a device). The graphs and each kernel's Relax ops are recorded
as for the same model built for llvm, and the executable carries no CPU summary kernel that
would read device memory: it is left to the VM instrument, and the graph says so."""

from __future__ import annotations

import collections
import glob
import os
import shutil

import llm_models
import pytest
import real_models
import tvm
from tvm import relax
from tvm.script import relax as R

import tvmdbg
from tvmdbg_tb import analysis

pytestmark = pytest.mark.slow  # three CUDA builds (nvcc) and their llvm twins

NVCC = shutil.which("nvcc") or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))), None)
if NVCC is None:
    pytest.skip("no nvcc: CUDA builds cannot compile here", allow_module_level=True)

CUDA = tvm.target.Target({"kind": "cuda", "arch": "sm_90"})
LLVM = tvm.target.Target("llvm")


@pytest.fixture(autouse=True)
def _nvcc_on_path(monkeypatch):
    monkeypatch.setenv("PATH", os.path.dirname(NVCC) + os.pathsep + os.environ.get("PATH", ""))


@tvm.script.ir_module
class Tiny:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.log(y)
            o = R.nn.relu(z)
            R.output(o)
        return o


def _recorded(build, tmp_path, name: str):
    """(the executable, the run) of build() called while tvmdbg records."""
    logdir = tmp_path / name
    tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        executable = build()
    finally:
        tvmdbg.disable_dump_debug_info()
    return executable, llm_models.read_run(logdir)


def _members(run, function: str) -> collections.Counter:
    """(op type, model node or line) of every Relax op of every kernel of a function."""
    graph = next(g for g in run.graphs() if g.name == function)
    out = collections.Counter()
    for op in run.ops(graph.graph_id):
        for original in op.original_ops:
            where = analysis.location(run, original.code_location) or {}
            node = (where.get("model_node") or {}).get("name")
            out[(original.op_type, node or (where.get("file_path"), where.get("line")))] += 1
    return out


def test_a_scheduled_cuda_build_records_its_ops_and_is_left_to_the_vm_instrument(tmp_path):
    def build():
        with CUDA:
            mod = relax.transform.LegalizeOps()(Tiny)
            mod = tvm.s_tir.dlight.ApplyDefaultSchedule(tvm.s_tir.dlight.gpu.Fallback())(mod)
        return tvm.compile(mod, target=CUDA)

    executable, run = _recorded(build, tmp_path, "tiny")
    (graph,) = run.graphs()
    assert '"kind":"cuda"' in graph.target.replace(" ", "") and graph.source_mapped
    assert graph.instrumentation == "vm_instrument" and "a cuda build" in graph.note, graph.note
    ops = sorted(run.ops(graph.graph_id), key=lambda o: o.position)
    assert [o.op_type for op in ops for o in op.original_ops] == ["relax.matmul", "relax.log", "relax.nn.relu"]
    assert all(o.code_location.stack_frame_ids for op in ops for o in op.original_ops)  # each at its line
    # The device code is there, and none of tvmdbg's summary kernels.
    (device,) = [m for m in executable.mod.imports[0].imports if m.kind == "cuda"]
    source = device.inspect_source()
    assert "__global__" in source and "tvmdbg" not in source
    assert "tvmdbg" not in executable.mod.imports[0].inspect_source()


@pytest.mark.parametrize("model", ["gpt2", "paged_decoder"])
def test_a_model_built_for_cuda_has_the_llvm_builds_lineage(tmp_path, model):
    """Each CUDA kernel names the Relax ops (model nodes, or lines) it computes, the same ops as
    the llvm build's kernels; only an op that is a kernel on one target and a builtin (a
    reshape) on the other may be missing."""
    if model == "gpt2":
        exported = real_models.exported("gpt2")

        def module():
            from tvm.relax.frontend.torch import from_exported_program

            return from_exported_program(exported)

        functions = ["main"]
    else:
        example = llm_models.paged_example()

        def module():
            decoder = example.Decoder(example.Config())
            return decoder.export_tvm(spec=decoder.spec())[0]

        functions = ["embed", "prefill", "decode"]

    def build(target):
        return lambda: tvm.compile(module(), target=target, relax_pipeline=relax.get_default_pipeline(target))

    _, on_cpu = _recorded(build(LLVM), tmp_path, "llvm")
    _, on_gpu = _recorded(build(CUDA), tmp_path, "cuda")
    for function in functions:
        cpu, gpu = _members(on_cpu, function), _members(on_gpu, function)
        assert gpu and not gpu - cpu, (function, gpu - cpu)
        missing = cpu - gpu
        assert all(op_type == "relax.reshape" for op_type, _ in missing), (function, missing)
    assert all(g.instrumentation == "vm_instrument" for g in on_gpu.graphs())
