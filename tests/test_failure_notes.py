"""When TVM itself fails on a model (its code generator on a kernel, its importer on a node),
its error names neither; with tvmdbg recording, the error carries a note naming the kernel, the
model's op or node and the line of the model's code that made it. Our small model, and
transformers' GPT-2 and ResNet (from configs) in the cases TVM 0.27 cannot handle: GPT-2 without
an attention mask (a cumsum over booleans fails in LLVM codegen) and float16 models (the
importer cannot type an addmm or a batch_norm)."""

from __future__ import annotations

import copy
import inspect
import linecache
import re

import numpy as np
import pytest
import tvm
from tvm import relax

import tvmdbg
from tvmdbg_tb.capture import build_failure

NOTE_PLACE = re.compile(r" at (\S+):(\d+)(?:, called from (\S+):(\d+))?")


@pytest.fixture
def recording(tmp_path):
    tvmdbg.enable_dump_debug_info(str(tmp_path / "dump"), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    yield
    tvmdbg.disable_dump_debug_info()


def _bool_cumsum_module():
    """x + cumsum(x > 0): TVM's LLVM codegen cannot add booleans. Returns (module, the line
    that builds the cumsum)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            positive = bb.emit(relax.op.greater(x, relax.const(0.0)))
            line = inspect.currentframe().f_lineno + 1
            counts = bb.emit(relax.op.cumsum(positive, axis=1))
            out = bb.emit_output(relax.op.add(x, relax.op.astype(counts, "float32")))
        bb.emit_func_output(out)
    return bb.get(), line


def _notes(error: BaseException) -> list[str]:
    return [n for n in getattr(error, "__notes__", []) if n.startswith("tvmdbg:")]


def test_a_kernel_that_fails_codegen_is_named_with_its_op_and_line(recording):
    mod, line = _bool_cumsum_module()
    with pytest.raises(tvm.error.InternalError) as caught:
        tvm.compile(mod, "llvm")
    [note] = _notes(caught.value)
    assert "kernel cumsum\n" in note, note
    [op] = [text for text in note.splitlines() if "relax.cumsum" in text]
    assert op.strip() == f"relax.cumsum at {__file__}:{line}", note
    # Only the cumsum fails: the kernels of the comparison and the add build on their own.
    assert note.count("  kernel ") == 1, note


def test_without_recording_the_error_is_tvms_own():
    mod, _ = _bool_cumsum_module()
    with pytest.raises(tvm.error.InternalError) as caught:
        tvm.compile(mod, "llvm")
    assert _notes(caught.value) == []


def test_the_search_names_each_kernel_that_fails_alone():
    """failing_kernels on a module whose builds fail by name: halves down to each one."""
    names = [f"k{i}" for i in range(13)]
    bad = {"k3", "k11"}
    tir_mod = tvm.IRModule({tvm.ir.GlobalVar(n): _prim_func() for n in names})
    built = []

    def build_one(module):
        part = {gvar.name_hint for gvar in module.get_global_vars()}
        built.append(part)
        if part & bad:
            raise RuntimeError("cannot build")

    found, complete = build_failure.failing_kernels(tir_mod, build_one)
    assert sorted(found) == ["k11", "k3"] and complete
    assert len(built) < 2 * len(names), built  # halving, not every kernel alone
    found, complete = build_failure.failing_kernels(tir_mod, lambda module: None)
    assert (found, complete) == ([], True)  # the kernels build: linking failed, nothing to blame
    found, complete = build_failure.failing_kernels(tir_mod, build_one, budget=0.0)
    assert not complete and len(found) < 2


def _prim_func():
    from tvm.script import tirx as T

    @T.prim_func
    def copy(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
        for i in range(4):
            b[i] = a[i]

    return copy


# transformers' models: the case TVM cannot build and the cases it cannot import.

real_models = pytest.importorskip("real_models")
torch = real_models.torch


def _place(note: str) -> tuple[str, str, str | None]:
    """(the file, its line's text, the called-from file) of a note's first op."""
    found = NOTE_PLACE.search(note)
    assert found, note
    return found[1], linecache.getline(found[1], int(found[2])).strip(), found[3]


@pytest.mark.slow
def test_gpt2_without_attention_mask_names_the_mask_kernels(recording):
    from tvm.relax.frontend.torch import from_exported_program

    model, inputs = real_models.torch_model("gpt2")
    with torch.no_grad():
        program = torch.export.export(model, (), {"input_ids": torch.from_numpy(inputs["input_ids"])})
    mod = from_exported_program(program)
    with pytest.raises(tvm.error.InternalError) as caught:
        real_models.compile_module(mod, fuse=True)
    [note] = _notes(caught.value)
    assert "  kernel cumsum\n" in note, note
    [op] = [text for text in note.splitlines() if "relax.cumsum" in text]
    assert "(model node cumsum, aten.cumsum.default)" in op, op
    file, text, called_from = _place(op)
    assert file.endswith("modeling_gpt2.py") and text.startswith("causal_mask = create_causal_mask("), (file, text)
    assert called_from == __file__, op


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, node, file, line_text",
    [
        ("gpt2", "addmm (aten.addmm.default)", "pytorch_utils.py", "x = torch.addmm("),
        ("resnet", "(aten._native_batch_norm_legit_no_training.default)", "modeling_resnet.py", "hidden_states = self.normalization("),
    ],
)  # fmt: skip
def test_float16_models_name_the_node_the_importer_fails_on(recording, name, node, file, line_text):
    from tvm.relax.frontend.torch import from_exported_program

    model, inputs = real_models.torch_model(name)
    model = copy.deepcopy(model).half()
    kwargs = {k: torch.from_numpy(v.astype(np.float16) if v.dtype == np.float32 else v) for k, v in inputs.items()}
    with torch.no_grad():
        program = torch.export.export(model, (), kwargs)
    with pytest.raises(TypeError) as caught:
        from_exported_program(program)
    [note] = _notes(caught.value)
    assert note.startswith("tvmdbg: TVM's importer failed converting torch.fx node "), note
    assert node in note, note
    found_file, text, called_from = _place(note)
    assert found_file.endswith(file) and text.startswith(line_text), (found_file, text)
    assert called_from == __file__, note
