"""execution_template (a static function's health-mode Execution built in C++ by
native_rows, or in numpy) writes byte for byte what the per-summary Python loop writes: on a real training step's functions
(tensor and tuple arguments), from the rows their kernels wrote and from rows of every
count pattern (empty tensors, all non-finite, counts near 2**45); a row not written gives no
bytes on either."""

from __future__ import annotations

import numpy as np
import pytest
from models import digits_training

import tvmdbg
from tvmdbg_tb.capture import compiled
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import execution_template, fast_tracer, native_rows, vm_wrapper
from tvmdbg_tb.tracing.state import Paths, TracingState, activated

pytest.importorskip("sklearn")


_REAL_ROWS: dict[int, np.ndarray] = {}  # fid -> the rows its last traced call's kernels wrote


def _trained(tmp_path, mode: str):
    """The tracer of a traced training run (2 steps) and its functions' templates."""
    assert native_rows.LIBRARY.load() is not None, native_rows.LIBRARY.failure()  # fill() is native
    one_pass = fast_tracer.CompiledTracer._one_pass

    def keeping_rows(self, call, *args):  # copied before the one pass clears the buffer
        _REAL_ROWS[call.buffers[0][0]] = call.buffers[0][2].copy()
        return one_pass(self, call, *args)

    with activated(TracingState(paths=Paths(native_calls=False))):  # the Python path, whose pass is spied
        tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode=mode, circular_buffer_size=-1)
        try:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(fast_tracer.CompiledTracer, "_one_pass", keeping_rows)
                training = digits_training(lr=0.05, fuse=True)
                for _ in range(2):
                    training.trainer.update(training.inputs, training.targets)
            tracer = vm_wrapper.tracer_of(training.trainer.vm)
        finally:
            tvmdbg.disable_dump_debug_info()
    assert isinstance(tracer, fast_tracer.CompiledTracer)
    templates = {key[0]: t for key, t in tracer._health_templates.items() if t is not None}
    return tracer, templates


def _random_rows(rng, nrows: int, big: bool) -> np.ndarray:
    """Summary rows (compiled.py's layout) with consistent random counts."""
    array = np.zeros((nrows, compiled.ROW_WIDTH))
    scale = 2**45 if big else 50
    # negative, zero, positive, -inf, +inf, NaN; some rows all zero (an empty tensor)
    counts = rng.integers(0, scale, (nrows, 6)) * (rng.random((nrows, 6)) < 0.7)
    negative, zero, positive, neg_inf, pos_inf, nan = counts.T.astype(np.float64)
    array[:, 0] = rng.uniform(1e9, 1e12, nrows)  # the kernel's timestamp: written
    array[:, 1] = negative + zero + positive + neg_inf + pos_inf + nan
    array[:, 2] = negative + neg_inf
    array[:, 3] = positive + pos_inf
    array[:, 4] = zero
    array[:, 5], array[:, 6] = neg_inf, pos_inf
    array[:, 7] = rng.integers(0, compiled.MAX_RANK + 1, nrows)
    return array


@pytest.mark.parametrize("mode", ["CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH"])
def test_template_bytes_equal_the_loop(tmp_path, mode):
    tracer, templates = _trained(tmp_path, mode)
    names = {compiled.FUNCTIONS[fid].name: fid for fid in templates}
    assert {"backbone_loss_adjoint", "optimizer"} <= set(names)
    optimizer = templates[names["optimizer"]]
    assert optimizer[3] is not None and sum(isinstance(p[1], tuple) for p in optimizer[2]) == 3  # tuples covered
    rng = np.random.default_rng(14)
    for fid, template in templates.items():
        vectorised = template[3]
        assert vectorised is not None, compiled.FUNCTIONS[fid].name
        real = _REAL_ROWS[fid]
        nrows = len(real)
        arrays = [real] + [_random_rows(rng, nrows, big) for big in (False, True) for _ in range(20)]
        for array in arrays:
            expected = tracer._loop_execution(template, array, {})
            assert expected is not None
            assert vectorised.fill(array) == expected and vectorised.fill_numpy(array) == expected  # every byte
        execution = pb.Execution.FromString(vectorised.fill(real))
        first = execution.inputs[0].items[0] if execution.inputs[0].items else execution.inputs[0]
        row = real[template[1][0]].tolist()
        assert list(first.debug_values) == compiled.row_values(pb.TensorDebugMode.Value(mode), row, first.dtype)
        for k in (0, len(template[1]) - 1):  # a kernel that did not run: no template bytes
            unwritten = arrays[1].copy()
            unwritten[template[1][k], 0] = 0.0
            assert vectorised.fill(unwritten) is None and vectorised.fill_numpy(unwritten) is None
            assert tracer._loop_execution(template, unwritten, {}) is None


@pytest.mark.parametrize("mode", ["CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH"])
def test_template_with_reused_rows_equals_the_loop(tmp_path, mode):
    """param_summaries="once_per_value": a call whose parameter rows repeat earlier counts
    (with_reused: summarized_in_execution on those summaries, a tuple's when all its tensors
    repeat) fills the bytes the loop writes with the same rows reused."""
    tracer, templates = _trained(tmp_path, mode)
    rng = np.random.default_rng(3)
    tuples_closed = 0
    for fid, template in templates.items():
        header, row_ids, parts, _ = template
        array = _REAL_ROWS[fid]
        rows = sorted(set(row_ids))
        tuples = [p[1] for p in parts if isinstance(p[1], tuple)]
        choices = [{r: 7 for r in rows}, {rows[0]: 300}] + [
            {r: int(rng.integers(0, 2**40)) for r in rows if rng.random() < 0.5} for _ in range(10)
        ]
        choices += [{r: 1 + k for k, r in enumerate(t)} for t in tuples]  # one whole tuple: its closing index
        for reused in choices:
            expected = tracer._loop_execution(template, array, reused)
            reused_template = execution_template.ExecutionTemplate(
                pb.TensorDebugMode.Value(mode), header, execution_template.with_reused(parts, reused)
            )
            assert reused_template.fill(array) == expected and reused_template.fill_numpy(array) == expected
            if reused:
                assert expected != tracer._loop_execution(template, array, {})
            execution = pb.Execution.FromString(expected)
            for summary in [*execution.inputs, *execution.outputs]:
                tuples_closed += bool(summary.items) and summary.HasField("summarized_in_execution")
    assert tuples_closed  # a tuple's own summarized_in_execution was covered


def test_a_wrong_value_changes_the_bytes(tmp_path):
    """Each count of each summarised row reaches the bytes: the equality above can fail."""
    tracer, templates = _trained(tmp_path, "FULL_HEALTH")
    rng = np.random.default_rng(0)
    for template in templates.values():
        vectorised = template[3]
        array = _random_rows(rng, max(template[1]) + 1, False)
        before = vectorised.fill(array)
        for row in set(template[1]):
            for column in range(1, 8):
                changed = array.copy()
                changed[row, column] += 1.0
                assert vectorised.fill(changed) != before, (row, column)
                assert vectorised.fill(changed) == tracer._loop_execution(template, changed, {})
                assert vectorised.fill_numpy(changed) == vectorised.fill(changed)


def test_modes_without_a_template():
    with pytest.raises(ValueError, match="no Execution template"):
        execution_template.ExecutionTemplate(pb.FULL_STATS, b"", [])
    with pytest.raises(ValueError, match="empty tuple"):
        execution_template.ExecutionTemplate(pb.FULL_HEALTH, b"", [(b"\x2a", (), [], b"")])


def test_kilobyte_results_are_rewritten_only_when_nobody_holds_them():
    """Results above pymalloc's 512 bytes come from a few kept objects (python_buffer.h
    RecycledBytes, which keeps glibc from emptying its fastbins on every traced call): a
    result the caller still holds keeps its bytes, a rewritten one hashes as its new bytes."""
    native = native_rows.LIBRARY.load()
    assert native is not None, native_rows.LIBRARY.failure()
    rows, width = 40, compiled.ROW_WIDTH

    def tails(seed: int) -> bytes:
        rng = np.random.default_rng(seed)
        block = _random_rows(rng, rows, False)
        block[:, 0] = np.cumsum(rng.uniform(1, 2, rows))  # every kernel ran, in order
        which, out = native.trace_tails(block, rows, width, b"\x01" * (rows - 1), 10, np.ones(rows - 1), 0, 1.0)
        assert len(which) == 4 * (rows - 1) and len(out) > 512
        return out

    held = [tails(seed) for seed in range(20)]  # more than the kept objects
    copies = [bytes(bytearray(out)) for out in held]
    for _ in range(3):
        tails(99)
    assert held == copies and len({id(out) for out in held}) == len(held)
    first = tails(5)
    hash(first)  # cached in the object
    del first
    again = tails(6)  # may be the same object, rewritten
    assert again == tails(6) and hash(again) == hash(bytes(bytearray(again)))
