"""native_call: the compiled tracer's common VM call in C++ writes what the Python path
writes, hands back to Python whatever it does not serve, and never changes the user's call."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
import trace_paths
import tvm
from models import chain, digits_training, extern_kernel_between
from tvm import relax

import tvmdbg
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import fast_tracer, vm_wrapper
from tvmdbg_tb.tracing.state import ACTIVE


def _train(logdir, path: str, mode: str, steps: int, lr: float) -> tuple:
    """steps of the digits MLP's training loop traced by path: (the native tracer's counts or
    None, the last loss)."""
    with trace_paths.using(path):
        tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode=mode, circular_buffer_size=-1)
        try:
            training = digits_training(lr=lr, fuse=True)
            for _ in range(steps):
                loss = training.trainer.update(training.inputs, training.targets).numpy()
            native = vm_wrapper.tracer_of(training.trainer.vm)._native
            counts = native.counts() if native else None
        finally:
            tvmdbg.disable_dump_debug_info()
    return counts, loss


def _rows_handed_to_python(monkeypatch) -> list:
    """The call_rows results native_call hands to Python with the calls it does not finish."""
    handed, finish = [], fast_tracer.CompiledTracer._native_finish

    def finishing(self, name, *args):
        if args[-2] is not None:  # (..., rows, plan)
            handed.append(args[-2])
        return finish(self, name, *args)

    monkeypatch.setattr(fast_tracer.CompiledTracer, "_native_finish", finishing)
    return handed


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["NO_TENSOR", "SHAPE", "CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH"])
def test_native_and_python_call_paths_write_the_same_records(tmp_path, mode, monkeypatch):
    """A training loop that goes NaN (in health modes the replay re-runs the first such call):
    every record native_call writes is the Python path's, and it wrote the calls itself; the
    NaN call's rows, read by native_call's C entry, reach Python as call_rows gives them."""
    handed = _rows_handed_to_python(monkeypatch)
    runs = [_train(tmp_path / path, path, mode, 6, lr=7.0) for path in ("compiled", "python_call")]  # one line
    (native_counts, native_loss), (python_counts, python_loss) = runs
    assert python_counts is None
    np.testing.assert_array_equal(native_loss, python_loss)
    native, python = trace_paths.records(tmp_path / "compiled"), trace_paths.records(tmp_path / "python_call")
    assert native.keys() == python.keys()
    for stream in native:
        assert native[stream] == python[stream], stream
    assert len(native["execution"]) == 12
    call_points, plans, recorded = native_counts
    assert (call_points, plans) == (2, 2)  # the adjoint's and the optimizer's calls in Trainer.update
    # Every call but the one the replay re-ran (a first non-finite row goes to Python).
    nan_calls = 1 if mode in ("CURT_HEALTH", "CONCISE_HEALTH", "FULL_HEALTH") else 0
    assert recorded == 12 - nan_calls
    replays = [e for e in map(pb.DebugEvent.FromString, native["graphs"]) if e.HasField("fused_op_replay")]
    assert bool(replays) == bool(nan_calls)  # the replay confirmed the first NaN
    # That call's rows: the first non-finite kernel row to hunt, and the NaN counted.
    assert [(bad >= 0, nonfinite) for _, _, _, bad, _, nonfinite in handed] == [(True, True)] * nan_calls


def test_the_steady_state_runs_no_python_tracer(tmp_path, monkeypatch):
    """Once a call point and an argument count were seen, CompiledTracer.call (the Python
    path) is not entered and neither is fast_tracer._stats: the call is native_call's alone."""
    entered = []
    python_call = fast_tracer.CompiledTracer.call

    def counting(self, *args, **kwargs):
        entered.append(args[0])
        return python_call(self, *args, **kwargs)

    monkeypatch.setattr(fast_tracer.CompiledTracer, "call", counting)
    python_buffers = []  # fast_tracer._stats takes every buffer it hands out from _buffer
    python_buffer = fast_tracer._buffer
    monkeypatch.setattr(fast_tracer, "_buffer", lambda *a: python_buffers.append(a) or python_buffer(*a))
    counts, _ = _train(tmp_path, "compiled", "FULL_HEALTH", 5, lr=0.05)
    assert entered == [] and counts[2] == 10
    # tvmdbg.stats is native_call's: no stats buffer came from Python.
    assert fast_tracer._NATIVE_POOL and python_buffers == []


def test_a_recorded_calls_buffer_goes_back_to_its_pool_with_its_stamps_cleared(tmp_path):
    """native_call clears a stats buffer's column 0 (each row's stamp) as it reads the rows of
    a call it records, so that the buffer's next call needs no clearing pass: the pool holds
    it clean, its counts as the call left them."""
    from tvmdbg_tb.capture import compiled

    with trace_paths.using("compiled"):
        tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            executable, inputs = chain(3, 8)
            vm = relax.VirtualMachine(executable, tvm.cpu())
            for _ in range(3):
                vm["main"](tvm.runtime.tensor(inputs[0]))
            tracer = vm_wrapper.tracer_of(vm)
            fid = tracer._fids["main"]
            pool = fast_tracer._NATIVE_POOL[0]
            tensor, array, clean = pool.take(fid, compiled.FUNCTIONS[fid].nrows)
            pool.release(fid, tensor, array, clean)
            recorded = tracer._native.counts()[2]
        finally:
            tvmdbg.disable_dump_debug_info()
    assert recorded == 3
    assert clean and not array[:, 0].any() and array[1:, 1].all()  # stamps cleared, sizes kept


def test_calls_from_other_threads_keep_their_records(tmp_path):
    """Four threads, each calling its own VM of the same executable (a Relax VM is not
    thread-safe; the tracer is shared through the executable's functions, and each thread
    has its own buffer pool and current call): each Execution keeps its own kernels."""
    calls_per_thread, threads = 25, 4
    with trace_paths.using("compiled"):
        tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            executable, inputs = chain(6, 16)
            vms = [relax.VirtualMachine(executable, tvm.cpu()) for _ in range(threads)]
            x = tvm.runtime.tensor(inputs[0])
            expected = vms[0]["main"](x).numpy()
            errors = []

            def loop(vm):
                try:
                    for _ in range(calls_per_thread):
                        np.testing.assert_array_equal(vm["main"](x).numpy(), expected)
                except BaseException as error:  # noqa: BLE001 - reported below
                    errors.append(error)

            workers = [threading.Thread(target=loop, args=(vm,)) for vm in vms]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            assert not errors
            recorded = sum(vm_wrapper.tracer_of(vm)._native.counts()[2] for vm in vms)
        finally:
            tvmdbg.disable_dump_debug_info()
    assert recorded == 1 + calls_per_thread * threads
    with tvmdbg.DebugDataReader(str(tmp_path)) as reader:
        reader.update()
        run = reader.run()
        assert run.num_executions() == 1 + calls_per_thread * threads
        for index in range(run.num_executions()):
            traces = [run.trace(int(i)) for i in run.execution_trace_indices(index)]
            assert len(traces) == 6 and all(t.execution_index == index for t in traces)
            assert run.execution(index).num_traces == 6


_INNER: list = []


def _calls_the_vm(x, out):
    np.from_dlpack(out)[:] = _INNER[0](x).numpy()


tvm.register_global_func("tvmdbg_test.calls_the_vm", _calls_the_vm, override=True)


def _refuses(x, out):
    raise ValueError("the extern kernel refused its input")


tvm.register_global_func("tvmdbg_test.native_call_refuses", _refuses, override=True)


def _nested_run(logdir, path: str) -> tuple:
    with trace_paths.using(path):
        tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            inner_executable, _ = chain(2, 4)
            _INNER[:] = [relax.VirtualMachine(inner_executable, tvm.cpu())["main"]]
            outer = relax.VirtualMachine(
                tvm.compile(extern_kernel_between("tvmdbg_test.calls_the_vm"), "llvm"), tvm.cpu()
            )
            x = tvm.runtime.tensor(np.linspace(-1, 1, 4, dtype="float32"))
            outs = [outer["main"](x).numpy() for _ in range(3)]
            native = vm_wrapper.tracer_of(outer)._native
            counts = native.counts() if native else None
        finally:
            _INNER.clear()
            tvmdbg.disable_dump_debug_info()
    return outs, counts


def test_a_vm_call_inside_a_traced_call_is_part_of_it(tmp_path):
    """An extern kernel that calls another traced VM function: native_call sees a call under
    way and hands the inner one to the Python path, which runs it inside the outer
    Execution; the outer call, with two stats buffers, is finished by Python too. The
    records are the Python path's."""
    (native_outs, counts), (python_outs, _) = [_nested_run(tmp_path / p, p) for p in ("compiled", "python_call")]
    np.testing.assert_array_equal(native_outs, python_outs)
    assert counts[2] == 0  # every call finished in Python
    native, python = trace_paths.records(tmp_path / "compiled"), trace_paths.records(tmp_path / "python_call")
    assert native == python
    assert len(native["execution"]) == 3


def _sum_of_any_length():
    """main(x: n floats) -> sum(x): an argument of symbolic shape, a result of static shape."""
    n = tvm.tirx.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.sum(x))
        bb.emit_func_output(out)
    return bb.get()


def _lengths_run(logdir, path: str, lengths) -> tuple:
    """main called with each length in turn, looked up by vm["main"] at every call: (whether
    the lookups returned one object, the native tracer's counts or None)."""
    with trace_paths.using(path):
        tvmdbg.enable_dump_debug_info(str(logdir), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            vm = relax.VirtualMachine(tvm.compile(_sum_of_any_length(), "llvm"), tvm.cpu())
            functions = []
            for n in lengths:
                functions.append(vm["main"])
                functions[-1](tvm.runtime.tensor(np.arange(n, dtype="float32") - 2))
            native = vm_wrapper.tracer_of(vm)._native
            counts = native.counts() if native else None
        finally:
            tvmdbg.disable_dump_debug_info()
        assert vm["main"] is not functions[-1], "a function bound to the session that ended"
    return all(f is functions[0] for f in functions), counts


def test_a_learned_plan_holds_for_its_argument_shape_only(tmp_path):
    """A function of an argument of symbolic shape (its result's is static): native_call's
    plan learned at one length passes its guard for that length only (the argument's shape,
    read from its DLTensor), so every call's Execution carries its own shape, as the Python
    path writes it. vm["main"] returns the one bound function while the session lasts."""
    lengths = (4, 4, 4, 6, 6, 4, 6)
    (bound_once, counts), (_, python_counts) = [
        _lengths_run(tmp_path / p, p, lengths) for p in ("compiled", "python_call")
    ]
    assert bound_once and python_counts is None
    native, python = trace_paths.records(tmp_path / "compiled"), trace_paths.records(tmp_path / "python_call")
    assert native == python
    executions = [pb.DebugEvent.FromString(e).execution for e in native["execution"]]
    assert [list(e.inputs[0].shape) for e in executions] == [[n] for n in lengths]
    assert counts[2] >= 3, counts  # the calls after each length's first (and its plan learned)


def test_a_failing_hook_warns_and_leaves_the_call_unchanged(tmp_path, monkeypatch):
    """A bug in tvmdbg's own code on the native path (here: the plan hook raising) is a
    RuntimeWarning; the user's call returns what it returns, and the Python path records it."""

    def broken(self, name, num_inputs):
        raise RuntimeError("planted bug in _native_plan")

    monkeypatch.setattr(fast_tracer.CompiledTracer, "_native_plan", broken)
    plain_executable, inputs = chain(3, 8)
    with trace_paths.using("compiled"):
        tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            executable, inputs = chain(3, 8)
            vm = relax.VirtualMachine(executable, tvm.cpu())
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = vm["main"](tvm.runtime.tensor(inputs[0])).numpy()
        finally:
            tvmdbg.disable_dump_debug_info()
    assert any("planted bug in _native_plan" in str(w.message) for w in caught)
    plain = relax.VirtualMachine(plain_executable, tvm.cpu())
    np.testing.assert_array_equal(out, plain["main"](tvm.runtime.tensor(inputs[0])).numpy())
    with tvmdbg.DebugDataReader(str(tmp_path)) as reader:
        reader.update()
        run = reader.run()
        assert run.num_executions() == 1 and len(run.execution_trace_indices(0)) == 3


def test_a_failing_call_raises_its_own_error_and_is_recorded(tmp_path):
    """The VM's exception passes through native_call unchanged (type, message, traceback),
    and the Python path records the kernels that ran and the one that raised."""
    with trace_paths.using("compiled"):
        tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
        try:
            vm = relax.VirtualMachine(
                tvm.compile(extern_kernel_between("tvmdbg_test.native_call_refuses"), "llvm"), tvm.cpu()
            )
            function = vm["main"]
            assert type(function).__name__ == "Function"  # native_call's
            with pytest.raises(ValueError, match="refused its input") as raised:
                function(tvm.runtime.tensor(np.ones(4, "float32")))
        finally:
            tvmdbg.disable_dump_debug_info()
    assert raised.traceback  # the kernel's Python frames are still there
    with tvmdbg.DebugDataReader(str(tmp_path)) as reader:
        reader.update()
        run = reader.run()
        assert run.execution(0).error
        kernels = [(run.trace(int(i)).kernel, bool(run.trace(int(i)).error)) for i in run.execution_trace_indices(0)]
        assert kernels == [("tir_exp", False), ("tvmdbg_test.native_call_refuses", True)]


def test_switched_off_the_python_path_traces_every_call(tmp_path, monkeypatch):
    """TVMDBG_NATIVE_CALL=0: vm[name] is the Python path's TracedFunction, whose records
    are complete."""
    from tvmdbg_tb.tracing import native_call

    monkeypatch.setenv(native_call.ENV_SWITCH, "0")
    with trace_paths.using("compiled"):
        tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="NO_TENSOR", circular_buffer_size=-1)
        try:
            executable, inputs = chain(3, 8)
            vm = relax.VirtualMachine(executable, tvm.cpu())
            function = vm["main"]
            for _ in range(2):
                function(tvm.runtime.tensor(inputs[0]))
            assert type(function) is vm_wrapper.TracedFunction
            assert vm_wrapper.tracer_of(vm)._native is False
        finally:
            tvmdbg.disable_dump_debug_info()
    with tvmdbg.DebugDataReader(str(tmp_path)) as reader:
        reader.update()
        run = reader.run()
        assert run.num_executions() == 2 and run.num_traces() == 6


@pytest.mark.parametrize("hook", ["_native_plan", "_native_emit"])
def test_an_interrupt_in_tvmdbg_code_reaches_the_user(tmp_path, monkeypatch, hook):
    """As CompiledTracer._safely, native_call turns only an Exception of its own into a
    warning: a KeyboardInterrupt raised while it plans a call, or while it hands a call's
    records to a busy sink, reaches the user's program."""
    from tvmdbg_tb.tracing.session import Session

    def interrupted(*args):
        raise KeyboardInterrupt

    if hook == "_native_plan":
        monkeypatch.setattr(fast_tracer.CompiledTracer, hook, interrupted)
    else:  # a busy listener sends the records through _native_emit
        monkeypatch.setattr(Session, "serialized_execution_done", interrupted)  # _safely lets it pass
    with trace_paths.using("compiled"):
        tvmdbg.enable_dump_debug_info(str(tmp_path), tensor_debug_mode="NO_TENSOR", circular_buffer_size=-1)
        try:
            if hook == "_native_emit":
                monkeypatch.setattr(ACTIVE.state.session, "_sole_writer", None)
            executable, inputs = chain(2, 4)
            function = relax.VirtualMachine(executable, tvm.cpu())["main"]
            with pytest.raises(KeyboardInterrupt):
                function(tvm.runtime.tensor(inputs[0]))
        finally:
            tvmdbg.disable_dump_debug_info()


def _native_libraries() -> tuple:
    from tvmdbg_tb.events import native_records
    from tvmdbg_tb.tracing import native_call, native_rows

    libraries = (native_call.LIBRARY, native_rows.LIBRARY, native_records.LIBRARY)
    loaded = tuple(library.load() for library in libraries)
    assert None not in loaded, [library.failure() for library in libraries]
    return loaded


def test_the_tracer_runs_rows_and_queues_records_through_c_entries_only():
    """native_call runs each call's rows through native_rows' C entry (its capsule CALL_ROWS)
    and hands its records to native_records' (QUEUE_CALL): no Python object made for either.
    Anything else is refused when the tracer is made, not on a call."""
    call, rows, framing = _native_libraries()
    made = call.Tracer(None, fast_tracer._LOCAL, iter(()), None, {}, rows.CALL_ROWS, framing.QUEUE_CALL)
    assert made.counts() == (0, 0, 0)
    with pytest.raises(TypeError, match="native_records.QUEUE_CALL"):
        call.Tracer(None, fast_tracer._LOCAL, iter(()), None, {}, rows.CALL_ROWS, framing.queue_call)
    for other in (rows.call_rows, framing.QUEUE_CALL):  # the Python function, another capsule
        with pytest.raises(TypeError, match="native_rows.CALL_ROWS"):
            call.Tracer(None, fast_tracer._LOCAL, iter(()), None, {}, other, framing.QUEUE_CALL)
    with pytest.raises(TypeError, match="call_numbers must be a dict"):
        call.Tracer(None, fast_tracer._LOCAL, iter(()), None, [], rows.CALL_ROWS, framing.QUEUE_CALL)


def test_a_plan_whose_rows_do_not_fit_fails_when_it_is_made_with_call_rows_error():
    """A plan's call_rows arguments are read once, when native_call takes the plan (learn, or
    _native_plan's answer): arguments call_rows refuses are refused there, with call_rows' very
    error, before any call runs with them."""
    from tvmdbg_tb.capture import compiled
    from tvmdbg_tb.tracing.native_call import NativePlan

    call, rows, framing = _native_libraries()
    tracer = call.Tracer(None, fast_tracer._LOCAL, iter(()), None, {}, rows.CALL_ROWS, framing.QUEUE_CALL)
    width, codes = compiled.ROW_WIDTH, np.full(2, 2.0).tobytes()
    tails = (3, width, b"\x01\x01", 10, codes, compiled.STATS_COLUMN, 1.0)  # FULL_HEALTH, two kernel rows
    # One block summing rows 1 and 2 at byte 0 of a 90-byte template; the scan of both rows.
    summaries = (bytes(90), b"\0" * 4, np.array([0, 2], np.uint32).tobytes(), np.array([1, 2], np.uint32).tobytes(),
                 codes[:8], b"\x02", 10, width)  # fmt: skip
    scan = (3, width, b"\x01\x01")
    assert tracer.learn(1, 1, NativePlan([], 0, tails, summaries, None, scan, None))
    bad = [
        (tails[:2] + (b"\x01",) + tails[3:], summaries, scan),  # one traced flag for two rows
        (tails[:3] + (3,) + tails[4:], summaries, scan),  # no mode has 3 debug values
        (tails[:2] + (7,) + tails[3:], summaries, scan),  # traced: not bytes
        (tails[:6], summaries, scan),
        (tails, (bytes(40),) + summaries[1:], scan),  # the block's values past the template's end
        (tails, summaries, (3, width, b"\x01")),  # one scan flag for two rows
    ]
    block, said = np.zeros((3, width)), []
    for k, (bad_tails, bad_summaries, bad_scan) in enumerate(bad):
        with pytest.raises((TypeError, ValueError)) as made:
            tracer.learn(2, 1, NativePlan([], 0, bad_tails, bad_summaries, None, bad_scan, None))
        with pytest.raises((TypeError, ValueError)) as called:
            rows.call_rows(block, bad_tails, bad_summaries, bad_scan, False)
        assert (type(made.value), str(made.value)) == (type(called.value), str(called.value)), k
        said.append(str(made.value).split(" ")[0])
    assert said == ["trace_tails:", "trace_tails:", "traced", "call_rows(block,", "summaries:", "first_nonfinite:"]
    # A member row is checked on each call's block (a plan does not know its buffer's rows).
    far = summaries[:3] + (np.array([1, 5], np.uint32).tobytes(),) + summaries[4:]
    assert tracer.learn(3, 1, NativePlan([], 0, tails, far, None, scan, None))
    with pytest.raises(ValueError, match="summaries: the template does not describe the stats rows"):
        rows.call_rows(block, tails, far, scan, False)
