"""The hot path's cost rules, on real compiles and runs: summary kernels built once per
dtype/rank (no TVMScript parsed per call site), and health counts still exact."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import trace_paths
import tvm
from models import chain
from tvm import relax

import tvmdbg
from tvmdbg_tb.proto import debug_event_pb2 as tvmdbg_pb


@pytest.fixture(params=trace_paths.PATHS)
def trace_path(request):
    with trace_paths.using(request.param):
        yield request.param


def _full_health_rows(logdir):
    with tvmdbg.DebugDataReader(logdir) as reader:
        reader.update()
        run = reader.run()
        return [list(run.trace(i).debug_values) for i in range(run.num_traces())]


def test_call_sites_parse_no_tvmscript(tmp_path, monkeypatch):
    """After the first compile built the summary kernels, a 40-kernel chain parses nothing."""
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    try:
        chain(4)  # builds the float32 rank-1 summary kernel and the timestamp kernel
        parses = []
        real_from_source = tvm.script.from_source

        def counting_from_source(*args, **kwargs):
            parses.append(args[0][:60])
            return real_from_source(*args, **kwargs)

        monkeypatch.setattr(tvm.script, "from_source", counting_from_source)
        executable, inputs = chain(40)
        assert parses == []
        vm = relax.VirtualMachine(executable, tvm.cpu())
        vm["main"](tvm.runtime.tensor(inputs[0]))
    finally:
        tvmdbg.disable_dump_debug_info()
    rows = _full_health_rows(str(tmp_path))
    # The last kernel's output, computed in numpy: (x + 1) * 0.5 applied 20 times.
    value = inputs[0].copy()
    for i in range(40):
        value = (value + np.float32(1.0)) if i % 2 == 0 else (value * np.float32(0.5))
    neg, zero, pos = int((value < 0).sum()), int((value == 0).sum()), int((value > 0).sum())
    assert rows[-1][3:] == [16, 0, 0, 0, neg, zero, pos]


def _deeper(depth: int, fn):
    if depth:
        return _deeper(depth - 1, fn)
    return fn()


def test_call_locations_exact_at_any_depth(tmp_path, trace_path):
    """Cached call stacks: each call point keeps its own user line and its own depth, in a
    loop that alternates two call points and a call 30 frames deeper."""
    tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="NO_TENSOR", circular_buffer_size=-1)
    try:
        executable, inputs = chain(2)
        function = relax.VirtualMachine(executable, tvm.cpu())["main"]
        x = tvm.runtime.tensor(inputs[0])
        expected = []
        for _ in range(3):
            function(x)
            expected.append((inspect.currentframe().f_lineno - 1, "test_call_locations_exact_at_any_depth", 0))
            function(x)
            expected.append((inspect.currentframe().f_lineno - 1, "test_call_locations_exact_at_any_depth", 0))
            _deeper(30, lambda: function(x))
            expected.append((inspect.currentframe().f_lineno - 1, "<lambda>", 30))
    finally:
        tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(str(tmp_path)) as reader:
        reader.update()
        run = reader.run()
        assert run.num_executions() == len(expected)
        for i, (line, function_name, extra) in enumerate(expected):
            location = run.execution(i).code_location
            frame = run.user_frame(location)
            assert (frame.line, frame.function) == (line, function_name)
            names = [f.function for f in run.frames(location)]
            assert names.count("_deeper") == min(extra + 1, 40) if extra else "_deeper" not in names


def test_call_point_keys_keep_their_code_objects_alive():
    """capture_call keys frames by code object address: its cache entry holds those code
    objects, so a freed function's address cannot pass to another code object, whose calls
    would then get the freed function's stack."""
    import gc
    import weakref

    from tvmdbg_tb.capture import frames

    namespace = {"frames": frames}
    exec("def transient():\n    return frames.capture_call(0)\n", namespace)
    stack, _ = namespace["transient"]()
    code = weakref.ref(namespace["transient"].__code__)
    del namespace
    gc.collect()
    assert code() is not None  # held by its cache entry
    assert stack[-1][2] == "transient"


def _reference(array: np.ndarray) -> list[float]:
    """FULL_HEALTH debug_values of array, in numpy."""
    from tvmdbg_tb.events.summaries import dtype_code

    is_float = array.dtype.kind == "f"
    nan = int(np.isnan(array).sum()) if is_float else 0
    pos_inf = int(np.isposinf(array).sum()) if is_float else 0
    neg_inf = int(np.isneginf(array).sum()) if is_float else 0
    finite = array[np.isfinite(array)] if is_float else array.astype("int64")
    counts = [int((finite < 0).sum()), int((finite == 0).sum()), int((finite > 0).sum())]
    return [0, dtype_code(str(array.dtype)), array.ndim, array.size, neg_inf, pos_inf, nan, *counts]


@pytest.mark.parametrize(
    "dtype", ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "uint32", "bool"]
)
@pytest.mark.parametrize("shape", [(0,), (1,), (7, 3), (2, 0, 5), (5, 1, 3, 2)])
def test_numpy_health_counts_match_reference(dtype, shape):
    """summary.health (tuple arguments, the VM-instrument path) against a plain reference,
    on random values with NaN, +/-Inf, zeros and negatives in odd and empty shapes."""
    from tvmdbg_tb.events.summaries import is_float_dtype
    from tvmdbg_tb.tracing.summary import health

    rng = np.random.default_rng(sum(shape) + len(dtype))
    values = rng.integers(-3, 4, size=shape).astype("float64")
    if is_float_dtype(dtype):
        specials = rng.choice([np.nan, np.inf, -np.inf, 0.0, 1.5], size=shape)
        values = np.where(rng.random(shape) < 0.3, specials, values * 0.75)
    array = values.astype(dtype) if dtype != "uint8" and dtype != "uint32" else np.abs(values).astype(dtype)
    expected = _reference(array)
    neg_inf, pos_inf, nan, negative, zero, positive = health(array, is_float_dtype(dtype))
    assert [neg_inf, pos_inf, nan, negative, zero, positive] == expected[4:]


def _nested_chain(n: int, size: int):
    """main: an add, then helper (a chain of n kernels, a nested Relax function with its own
    stats buffer), then a multiply; returns (executable, inputs)."""
    from models import compile_module, emit_chain

    rx = relax
    bb = rx.BlockBuilder()
    helper = emit_chain(bb, "helper", n, size)
    y = rx.Var("y", rx.TensorType((size,), "float32"))
    with bb.function("main", [y]):
        first = bb.emit(rx.op.add(y, y))
        nested = bb.emit(rx.Call(helper, [first]))
        bb.emit_func_output(bb.emit(rx.op.multiply(nested, nested)))
    return compile_module(bb.get(), False), [np.linspace(-1, 1, size, dtype="float32")]


def _chain_traces(
    logdir, monkeypatch, vectorized: bool, op_regex=None, mode="FULL_HEALTH", native=True, build=lambda: chain(30, 9)
):
    from tvmdbg_tb.events import native_records
    from tvmdbg_tb.tracing import fast_tracer, native_rows

    for library in (native_records.LIBRARY, native_rows.LIBRARY):
        assert library.load() is not None, library.failure()
        if not native:  # as if switched off: framed in Python, tails in numpy
            monkeypatch.setattr(library, "_state", {"error": RuntimeError("off in this test")})
    if not vectorized:  # neither the one native pass nor the parts: the row loop
        monkeypatch.setattr(fast_tracer.CompiledTracer, "_one_pass", lambda *args: None)
        monkeypatch.setattr(fast_tracer.CompiledTracer, "_parts", lambda *args: None)
    tvmdbg.enable_dump_debug_info(str(logdir), mode, circular_buffer_size=-1, op_regex=op_regex)
    try:
        executable, inputs = build()  # >= fast_tracer._VECTOR_ROWS rows
        function = relax.VirtualMachine(executable, tvm.cpu())["main"]
        special = inputs[0].copy()
        special[[0, 3, 5]] = [np.nan, np.inf, -np.inf]
        for data in (inputs[0], special):
            function(tvm.runtime.tensor(data))
    finally:
        tvmdbg.disable_dump_debug_info()
        monkeypatch.undo()
    with tvmdbg.DebugDataReader(str(logdir)) as reader:
        reader.update()
        run = reader.run()
        traces = [run.trace(i) for i in range(run.num_traces())]
    assert all(t.duration_us > 0 for t in traces)
    for trace in traces:
        trace.duration_us = 0
    return [t.SerializeToString() for t in traces]


@pytest.mark.parametrize("mode", ["FULL_HEALTH", "CONCISE_HEALTH", "CURT_HEALTH", "FULL_STATS", "NO_TENSOR", "SHAPE"])
@pytest.mark.parametrize("op_regex", [None, "multiply"])
@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_vectorised_health_traces_equal_row_loop(tmp_path, monkeypatch, op_regex, mode, native):
    """Trace payloads built as parts (tails native and framed natively, or tails in numpy
    and built and framed in Python) are the bytes the per-row loop writes (all fields but the duration, which
    differs between runs), with and without filtered ops."""
    with trace_paths.using("python_call"):  # the pieces patched are the Python path's
        fast = _chain_traces(tmp_path / "fast", monkeypatch, True, op_regex, mode, native)
        loop = _chain_traces(tmp_path / "loop", monkeypatch, False, op_regex, mode, native)
    assert fast == loop
    assert len(fast) == (2 * 30 if op_regex is None else 2 * 15)


@pytest.mark.parametrize("mode", ["FULL_HEALTH", "NO_TENSOR"])
def test_parts_of_a_nested_function_are_ordered_with_its_callers_traces(tmp_path, monkeypatch, mode):
    """A call with two stats buffers (main and a nested 26-kernel function): the nested
    function's traces, built from parts, take their place in time among main's."""
    with trace_paths.using("python_call"):  # the pieces patched are the Python path's
        build = lambda: _nested_chain(26, 9)  # noqa: E731
        fast = _chain_traces(tmp_path / "fast", monkeypatch, True, mode=mode, build=build)
        loop = _chain_traces(tmp_path / "loop", monkeypatch, False, mode=mode, build=build)
    assert fast == loop
    assert len(fast) == 2 * 28
    graphs = [tvmdbg_pb.GraphExecutionTrace.FromString(t).graph_id for t in fast[:28]]
    assert graphs[0] == graphs[-1] and set(graphs[1:-1]) == {1 - graphs[0]}  # main's add, helper's 26, main's multiply


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["FULL_HEALTH", "CONCISE_HEALTH", "CURT_HEALTH", "FULL_STATS", "NO_TENSOR", "SHAPE"])
@pytest.mark.parametrize("model", ["chain5", "chain30", "mixed_dtypes", "digits_training"])
def test_native_numpy_and_loop_traces_are_the_same_bytes(tmp_path, monkeypatch, mode, model):
    """On the very buffers of real calls, durations included: the traces whose tails
    native_rows builds are the bytes numpy's pass (from _VECTOR_ROWS rows) and the row
    loop build, on functions short and long, of every health dtype, with NaN and Inf."""
    import models

    from tvmdbg_tb.events.trace_parts import TraceParts
    from tvmdbg_tb.tracing import fast_tracer, native_rows

    assert native_rows.LIBRARY.load() is not None, native_rows.LIBRARY.failure()
    original, one_pass = fast_tracer.CompiledTracer._payloads, fast_tracer.CompiledTracer._one_pass
    calls = []

    def references(self, call):  # numpy's pass and the row loop, before the buffer is cleared
        with monkeypatch.context() as patch:
            patch.setattr(native_rows.LIBRARY, "_state", {"error": RuntimeError("off in this test")})
            numpy = list(original(self, call))
            patch.setattr(fast_tracer.CompiledTracer, "_parts", lambda *args: None)
            return numpy, list(original(self, call))

    def compared(self, call):
        numpy, loop = references(self, call)
        result = original(self, call)
        calls.append((isinstance(result, TraceParts), list(result), numpy, loop))
        return result

    def compared_one_pass(self, call, *args):  # the tails of native_rows.call_rows
        numpy, loop = references(self, call)
        result = one_pass(self, call, *args)
        if result is not None:
            calls.append((True, list(result[0]), numpy, loop))
        return result

    monkeypatch.setattr(fast_tracer.CompiledTracer, "_payloads", compared)
    monkeypatch.setattr(fast_tracer.CompiledTracer, "_one_pass", compared_one_pass)
    with trace_paths.using("python_call"):  # the pieces patched are the Python path's
        tvmdbg.enable_dump_debug_info(str(tmp_path), mode, circular_buffer_size=-1)
        try:
            if model == "digits_training":
                training = models.digits_training(lr=0.05, fuse=True)
                for _ in range(2):
                    training.trainer.update(training.inputs, training.targets)
            else:
                executable, inputs = models.mixed_dtypes() if model == "mixed_dtypes" else chain(int(model[5:]), 9)
                function = relax.VirtualMachine(executable, tvm.cpu())["main"]
                special = inputs[0].copy()
                special.flat[[0, 3, 5]] = [np.nan, np.inf, -np.inf]
                for data in (inputs[0], special):
                    function(tvm.runtime.tensor(data))
        finally:
            tvmdbg.disable_dump_debug_info()
    assert calls
    bool_stats = model == "mixed_dtypes" and mode == "FULL_STATS"  # bool rows: the loop's statistics
    assert any(native for native, *_ in calls) != bool_stats  # the native pass ran where it should
    for _, native, numpy, loop in calls:
        assert native == loop and numpy == loop


def test_call_rows_refuses_what_does_not_describe_the_rows():
    """native_rows.call_rows: the tails of the rows that ran, the buffer's timestamps cleared
    only when asked, and a clear error, never a crash, for arguments that do not match (a
    wrong tuple, a buffer too small for its rows, a read-only buffer to clear)."""
    from tvmdbg_tb.capture import compiled
    from tvmdbg_tb.tracing import native_rows

    native = native_rows.LIBRARY.load()
    assert native is not None, native_rows.LIBRARY.failure()
    width = compiled.ROW_WIDTH
    block = np.zeros((3, width))
    block[:, 0] = [1.0, 2.0, 4.0]  # the call's start, then two kernels
    tails = (3, width, b"\x01\x01", 0, b"", compiled.STATS_COLUMN, 1.0)  # NO_TENSOR: durations only
    which, tail_bytes, execution, bad, cleared, nonfinite = native.call_rows(block, tails, None, None, False)
    assert np.frombuffer(which, np.uint32).tolist() == [0, 1] and execution is None and bad == -1
    assert nonfinite is None  # no counts: the writer counts the call as unchecked
    assert tail_bytes == b"\x59" + np.float64(1.0).tobytes() + b"\x59" + np.float64(2.0).tobytes()
    assert not cleared and block[:, 0].tolist() == [1.0, 2.0, 4.0]
    again = native.call_rows(block, tails, None, None, True)
    assert again[:2] == (which, tail_bytes) and again[4] and not block[:, 0].any()
    with pytest.raises(TypeError, match="call_rows"):
        native.call_rows(block, tails[:6], None, None, False)
    with pytest.raises(TypeError, match="call_rows"):
        native.call_rows(block, tails, (1, 2), None, False)
    with pytest.raises(ValueError, match="do not describe the stats rows"):
        native.call_rows(block[:2], tails, None, None, False)  # three rows asked of two
    frozen = np.zeros((3, width))
    frozen[:, 0] = [1.0, 2.0, 4.0]
    frozen.flags.writeable = False
    with pytest.raises(TypeError, match="writable"):
        native.call_rows(frozen, tails, None, None, True)
    assert frozen[:, 0].all()
    # A call whose kernels' ops made a NaN or an Inf (row 0's flag holds its start stamp) is
    # left as it is: its rows are read again, and the next taker zeroes all of it.
    flagged = np.zeros((3, width))
    flagged[:, 0] = [1.0, 2.0, 4.0]
    flagged[0, compiled.INNER_FLAG_COLUMN] = 1.0
    assert not native.call_rows(flagged, tails, None, None, True)[4] and flagged[:, 0].all()


def test_native_rows_refuse_a_row_width_or_stats_column_out_of_range():
    """The checks native_rows makes once per plan (the C entry's, and every function's from
    Python) hold for any int64: a row width whose rows * width * 8 wraps around 2**64 (it
    read far outside the block, or divided by zero), or a stats column before the row, is a
    ValueError, never a crash."""
    from tvmdbg_tb.capture import compiled
    from tvmdbg_tb.tracing import native_rows

    native = native_rows.LIBRARY.load()
    assert native is not None, native_rows.LIBRARY.failure()
    wraps = 2**62 + 2**60 + 1  # 2 rows of it: 16 bytes modulo 2**64; row 1 at 2**63 + 8
    small = np.zeros(2)  # 16 bytes
    mismatch = "do not describe the stats rows"
    with pytest.raises(ValueError, match=mismatch):
        native.call_rows(small, (2, wraps, b"\x00", 0, b"", 0, 1.0), None, None, False)
    with pytest.raises(ValueError, match=mismatch):
        native.trace_tails(small, 2, wraps, b"\x00", 0, b"", 0, 1.0)
    with pytest.raises(ValueError, match=mismatch):
        native.first_nonfinite(small, 2, wraps, b"\x01")
    width = compiled.ROW_WIDTH
    block = np.ones((3, width))
    summaries = (bytes(80), bytes(4), np.array([0, 1], np.uint32).tobytes(), bytes(4), bytes(8), b"\x00", 10)
    with pytest.raises(ValueError, match="does not describe"):  # 8 * 2**61 wraps to 0
        native.summaries(*summaries, block, 2**61)
    codes = np.full(2, 2.0).tobytes()
    for stats in (-(10**7), -1, width - 4, 2**63 - 1):  # FULL_STATS' five columns outside the row
        tails = (3, width, b"\x01\x01", 15, codes, stats, 1.0)
        with pytest.raises(ValueError, match=mismatch):
            native.call_rows(block, tails, None, None, False)
    tails = (3, width, b"\x01\x01", 15, codes, width - 5, 1.0)  # the last five columns: fine
    assert len(native.call_rows(block, tails, None, None, False)[0]) == 8


def test_call_rows_leaves_the_stamps_of_a_call_python_reads_again():
    """call_rows (native_call's C entry runs the same code) clears the buffer's column 0 only
    for a call it gives complete: not when a summarised row was not written (Python says what
    it knows), nor when a kernel hides a NaN its fused ops made (Python records them)."""
    from tvmdbg_tb.capture import compiled
    from tvmdbg_tb.tracing import native_rows

    native = native_rows.LIBRARY.load()
    assert native is not None, native_rows.LIBRARY.failure()
    width, codes = compiled.ROW_WIDTH, np.full(2, 2.0).tobytes()
    tails = (3, width, b"\x01\x01", 10, codes, compiled.STATS_COLUMN, 1.0)  # FULL_HEALTH
    # The Execution's one summary, at byte 0 of its template: the sum of rows 1 and 2.
    members = np.array([1, 2], np.uint32).tobytes()
    summaries = (bytes(90), bytes(4), np.array([0, 2], np.uint32).tobytes(), members, codes[:8], b"\x02", 10, width)

    def block():
        rows = np.zeros((3, width))
        rows[:, 0] = [1.0, 2.0, 4.0]
        rows[1:, 1:8] = [8, 0, 8, 0, 0, 0, 1]  # finite counts
        return rows

    complete = block()
    which, _, execution, bad, cleared, nonfinite = native.call_rows(complete, tails, summaries, None, True)
    assert len(which) == 8 and bad == -1 and nonfinite is False
    assert np.frombuffer(execution[:80]).tolist() == [0, 2, 2, 16, 0, 0, 0, 0, 0, 16]  # FULL_HEALTH's ten values
    assert cleared and not complete[:, 0].any()
    unwritten = block()
    unwritten[2, 0] = 0.0  # the second kernel did not run
    _, _, execution, bad, cleared, _ = native.call_rows(unwritten, tails, summaries, None, True)
    assert execution is None and bad == -1 and not cleared and unwritten[:, 0].tolist() == [1.0, 2.0, 0.0]
    hidden = block()
    hidden[0, compiled.INNER_FLAG_COLUMN] = hidden[0, 0]  # the call's flag: fused ops made one
    hidden[1, compiled.INNER_COLUMN] = 1.0  # in the first kernel, whose output is finite
    _, _, execution, bad, cleared, nonfinite = native.call_rows(hidden, tails, summaries, None, True)
    assert execution is not None and bad == 0 and nonfinite is True
    assert not cleared and hidden[:, 0].tolist() == [1.0, 2.0, 4.0]


def test_call_rows_says_whether_a_traced_row_went_non_finite():
    """call_rows' last answer, for the writer's accounting of calls (which calls the circular
    buffer keeps whole): a traced kernel row whose counts hold a NaN, -Inf or +Inf; an untraced
    row does not count."""
    from tvmdbg_tb.capture import compiled
    from tvmdbg_tb.tracing import native_rows

    native = native_rows.LIBRARY.load()
    assert native is not None, native_rows.LIBRARY.failure()
    width = compiled.ROW_WIDTH
    codes = np.full(2, 2.0).tobytes()  # float32
    block = np.zeros((3, width))
    block[:, 0] = [1.0, 2.0, 4.0]
    block[1, 1:8] = [8, 0, 8, 0, 0, 0, 1]  # size, lt0, gt0, eq0, -inf, +inf, rank: finite
    block[2, 1:8] = [8, 0, 4, 0, 0, 0, 1]  # 4 elements in no class: NaN
    for traced, expected in ((b"\x01\x01", True), (b"\x01\x00", False)):
        tails = (3, width, traced, 10, codes, compiled.STATS_COLUMN, 1.0)  # FULL_HEALTH
        assert native.call_rows(block, tails, None, None, False)[5] is expected, traced
    block[2, 1:8] = [8, 0, 7, 0, 0, 1, 1]  # one +Inf
    assert native.call_rows(block, (3, width, b"\x01\x01", 10, codes, compiled.STATS_COLUMN, 1.0), None, None, False)[5]
