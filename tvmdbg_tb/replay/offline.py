"""Replay of a recorded fused kernel call from a FULL_TENSOR dump (`tvmdbg replay`).

The dump holds the call's inputs (producer traces' and the execution's tensor values) and, per
fused site, the unfused module (FusedGroupSource). The replay runs here, in the reading
process, with the same TVM version; it never writes to the dump. A recorded module is built
once per process (a few recent ones are kept): comparing again, or another call of the same
kernel, replays without building it again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.events.values import BadValue, stored_array
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.replay.group import FusedGroup, InnerOp, ReplayError
from tvmdbg_tb.replay.replayer import _fill_ops, _summary


def _array(value: pb.TensorValue, what: str) -> np.ndarray:
    if value.truncated:
        raise ReplayError(f"{what} was truncated in the dump (larger than the FULL_TENSOR limit)")
    try:
        array, whole = stored_array(value)
    except BadValue as error:
        raise ReplayError(f"{what}: {error}") from None
    if not whole:
        raise ReplayError(f"{what}: {array.size} values do not fill its shape {list(value.shape)}")
    return array.copy()


def _as_input(array: np.ndarray, inp: pb.OpInput) -> np.ndarray:
    """The value as the kernel reads it: an input that is a view (a reshape) of its producer's
    output has the view's static shape."""
    shape = tuple(int(d) for d in inp.spec.shape)
    if shape and all(d >= 0 for d in shape) and shape != array.shape and np.prod(shape) == array.size:
        return array.reshape(shape)
    return array


def _inputs(run: RunReader, op: pb.GraphOpCreation, source: pb.FusedGroupSource, execution: int) -> list[np.ndarray]:
    digests = run.trace_digests()
    here = run.execution_trace_indices(execution)
    executions = np.flatnonzero(run.execution_digests()["index"] == execution)
    out = []
    for k, inp in enumerate(op.inputs):
        what = f"input {k} `{inp.name}`"
        if k < len(source.constants) and source.constants[k].dtype:
            out.append(_array(source.constants[k], what))
        elif inp.kind == pb.OpInput.OP_OUTPUT:
            hits = here[
                (digests["op_id"][here] == inp.producer_op_id)
                & (digests["output_slot"][here] == inp.producer_output_slot)
            ]
            if not len(hits):
                raise ReplayError(f"{what}: its producer's output in execution {execution} is not in the dump")
            trace = run.trace(int(hits[-1]))
            if not trace.HasField("tensor_value"):
                raise ReplayError(f"{what}: its producer's trace holds no value")
            out.append(_as_input(_array(trace.tensor_value, what), inp))
        elif inp.kind == pb.OpInput.PARAM:
            if not len(executions):
                raise ReplayError(f"{what}: execution {execution} is no longer in the dump")
            summaries = run.execution(int(executions[-1])).inputs
            if inp.param_index >= len(summaries) or not summaries[inp.param_index].HasField("tensor_value"):
                raise ReplayError(f"{what}: parameter {inp.param_index} of execution {execution} holds no value")
            out.append(_as_input(_array(summaries[inp.param_index].tensor_value, what), inp))
        else:
            raise ReplayError(f"{what} is the result of a VM builtin, whose value the dump does not keep")
    return out


def replay_recorded(run: RunReader, op: pb.GraphOpCreation, execution: int) -> pb.FusedOpReplay:
    """Replays kernel call (op, execution) from the dump; raises ReplayError saying why not."""
    source, group, inputs, outputs = replay_values(run, op, execution)
    record = pb.FusedOpReplay(
        execution_index=execution,
        op_id=op.op_id,
        graph_id=op.graph_id,
        kernel=op.kernel,
        trigger="request",
        first_nonfinite_op=-1,
        note="replayed from the FULL_TENSOR dump",
        matches_kernel=True,
    )
    record.inputs.extend(_summary(a) for a in inputs)
    _fill_ops(record, group, outputs, lambda frames, user_index, node: pb.CodeLocation())
    for entry, recorded in zip(record.ops, source.ops):
        entry.op_type = recorded.op_type
        entry.code_location.CopyFrom(recorded.code_location)
    return record


def replay_values(
    run: RunReader, op: pb.GraphOpCreation, execution: int
) -> tuple[pb.FusedGroupSource, FusedGroup, list[np.ndarray], list[list[np.ndarray]]]:
    """(the kernel's recorded ops, the group, its inputs, every inner op's outputs) of kernel
    call (op, execution) replayed from the dump; raises ReplayError saying why not."""
    import tvm

    source = run.fused_group_source(op.op_id)
    if source is None:
        raise ReplayError(
            f"the dump holds no replay source for kernel {op.kernel} (its ops could not be replayed alone)"
        )
    if source.tvm_version != tvm.__version__:
        raise ReplayError(
            f"the dump was written with TVM {source.tvm_version}; this process has TVM {tvm.__version__}, "
            "which cannot load its compiled ops"
        )
    inputs = _inputs(run, op, source, execution)
    group, lock = _group(op.kernel, source)
    with lock:  # a VM runs one call at a time
        return source, group, inputs, group.run(inputs)


_GROUPS: OrderedDict[tuple, tuple[FusedGroup, threading.Lock]] = OrderedDict()
_GROUPS_LOCK = threading.Lock()
_MAX_GROUPS = 16


def _group(kernel: str, source: pb.FusedGroupSource) -> tuple[FusedGroup, threading.Lock]:
    """The replayable group of a recorded module (built on first use, then kept)."""
    import tvm

    key = (
        kernel,
        source.module_script,
        tuple((o.index, o.var_name, o.prim_func, tuple(o.input_refs)) for o in source.ops),
    )
    with _GROUPS_LOCK:
        found = _GROUPS.get(key)
        if found is not None:
            _GROUPS.move_to_end(key)
            return found
    try:
        module = tvm.script.from_source(source.module_script)
    except Exception as error:
        raise ReplayError(f"the recorded ops of {kernel} cannot be loaded: {error}") from None
    ops = [InnerOp(o.index, o.var_name, o.prim_func, list(o.input_refs), None) for o in source.ops]
    found = (FusedGroup(kernel, ops, source.num_inputs, _module=module), threading.Lock())
    with _GROUPS_LOCK:
        found = _GROUPS.setdefault(key, found)
        while len(_GROUPS) > _MAX_GROUPS:
            _GROUPS.popitem(last=False)
    return found
