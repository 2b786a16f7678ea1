"""Replays one fused kernel call op by op and describes the result as a FusedOpReplay record.

Nothing here raises for a bad replay: the record's `error` says why it could not run, so a
caller (the tracer, check-numerics, the CLI) can always write or show it and carry on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tvmdbg_tb.capture import graphs
from tvmdbg_tb.events.layout import NO_INPUT
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.replay.group import FusedGroup, ReplayError, group_of

# (frames, user index, model node or None) -> CodeLocation: Session.code_location.
LocationOf = Callable[[list, int, object], pb.CodeLocation]


def is_replayable(site: graphs.SiteInfo | None) -> bool:
    """Whether a site is a fused kernel holding more than one Relax op (worth replaying)."""
    return site is not None and len(site.member_origins) > 1


def snapshot_inputs(values: Sequence[Any]) -> list:
    """Copies of a kernel's input tensors (they are valid only during the VM call)."""
    import numpy as np

    from tvmdbg_tb.tracing.summary import as_numpy

    out = []
    for value in values:
        array = as_numpy(value)
        if array is None:
            array = value.numpy()
        out.append(np.array(array, copy=True))
    return out


def _summary(array) -> pb.TensorSummary:
    from tvmdbg_tb.tracing.summary import debug_values

    dtype, shape = str(array.dtype), tuple(int(d) for d in array.shape)
    return pb.TensorSummary(dtype=dtype, shape=shape, debug_values=debug_values(pb.FULL_HEALTH, array, dtype, shape))


def _bad(summary: pb.TensorSummary) -> bool:
    values = summary.debug_values
    return len(values) == 10 and (values[4] + values[5] + values[6]) > 0


def _nan(summaries) -> bool:
    """Whether any of these FULL_HEALTH summaries counted a NaN."""
    return any(len(s.debug_values) == 10 and s.debug_values[6] > 0 for s in summaries)


def replay(
    info: graphs.ExecutableInfo | None,
    site: graphs.SiteInfo | None,
    inputs: list | None,
    *,
    execution_index: int,
    op_id: int,
    graph_id: int,
    trigger: str,
    location_of: LocationOf,
    kernel_output_bad: bool | None = None,
    note: str = "",
) -> pb.FusedOpReplay:
    """Runs the site's group on inputs (numpy copies) and returns the record (never raises)."""
    record = pb.FusedOpReplay(
        execution_index=execution_index,
        op_id=op_id,
        graph_id=graph_id,
        kernel=site.kernel if site is not None else "",
        trigger=trigger,
        first_nonfinite_op=-1,
        note=note,
    )
    group: FusedGroup | None = None
    try:
        if site is None:
            raise ReplayError("the kernel's executable was not compiled while tvmdbg was enabled: no ops to replay")
        group = group_of(site)
        if inputs is None:
            raise ReplayError("the kernel's inputs were not captured for this execution")
        record.inputs.extend(_summary(a) for a in inputs)
        outputs = group.run(inputs)
    except ReplayError as error:
        record.error = str(error)
        outputs = None
    except Exception as error:  # a replay must never hurt the program
        record.error = f"the replay failed: {type(error).__name__}: {error}"
        outputs = None
    if group is not None:
        constants = {k for k, i in enumerate(site.inputs) if i.kind == pb.OpInput.CONSTANT}
        _fill_ops(record, group, outputs, location_of, constants)
    if outputs is not None and kernel_output_bad is not None and record.ops:
        record.matches_kernel = any(_bad(s) for s in record.ops[-1].outputs) == kernel_output_bad
    elif outputs is not None:
        record.matches_kernel = True
    return record


def _fill_ops(
    record: pb.FusedOpReplay, group: FusedGroup, outputs, location_of: LocationOf, constants: set[int] = frozenset()
) -> None:
    """The record's ops and their outputs' health; the first op whose output holds NaN/Inf
    while its operands did not is the origin. A constant (a weight) is no operand that carries
    a bad value in: the op reading a non-finite weight is where it enters the computation."""
    bad_ops: list[bool] = []
    bad_inputs = [_bad(s) and k not in constants for k, s in enumerate(record.inputs)]
    for op in group.ops:
        entry = record.ops.add(index=op.index, op_type=op.op_type, var_name=op.var_name, prim_func=op.prim_func)
        entry.input_refs.extend(op.input_refs)
        if op.origin is not None and (op.origin.frames or op.origin.node is not None):
            entry.code_location.CopyFrom(location_of(op.origin.frames, op.origin.user_index, op.origin.node))
        if outputs is None:
            bad_ops.append(False)
            continue
        entry.outputs.extend(_summary(a) for a in outputs[op.index])
        bad = any(_bad(s) for s in entry.outputs)
        bad_ops.append(bad)

        def operand_bad(ref: int) -> bool:
            if ref == NO_INPUT:
                return False
            return bad_ops[ref] if ref >= 0 else bad_inputs[-1 - ref]

        # An op writing a non-finite literal (a mask's -inf) makes no value by writing it;
        # a NaN it makes is computed (0 x -inf of `(1 - keep) * -inf`).
        written = op.origin is not None and op.origin.nonfinite_literal and not _nan(entry.outputs)
        entry.origin = bad and not written and not any(operand_bad(r) for r in op.input_refs)
        if entry.origin and record.first_nonfinite_op < 0:
            record.first_nonfinite_op = op.index


def inner_origin(site: graphs.SiteInfo | None, inputs: list, kernel_output_bad: bool | None):
    """(the inner op that made the first NaN/Inf, the replay record) for a kernel call whose
    inputs are live (check-numerics); None when the site is no multi-op group or no inner
    op made one. Never raises."""
    if not is_replayable(site):
        return None
    record = replay(
        None,
        site,
        inputs,
        execution_index=-1,
        op_id=-1,
        graph_id=-1,
        trigger="check_numerics",
        location_of=lambda frames, user_index, node: pb.CodeLocation(user_frame_index=-1),
        kernel_output_bad=kernel_output_bad,
    )
    if record.error or record.first_nonfinite_op < 0:
        return None
    try:
        return group_of(site).ops[record.first_nonfinite_op], record
    except ReplayError:
        return None


def group_source(site: graphs.SiteInfo, inputs: list, location_of: LocationOf) -> pb.FusedGroupSource:
    """The FusedGroupSource of a fused site (raises ReplayError when it cannot be replayed)."""
    import tvm

    from tvmdbg_tb.tracing.summary import tensor_value

    group = group_of(site)
    listing = pb.FusedOpReplay()
    _fill_ops(listing, group, None, location_of)
    record = pb.FusedGroupSource(
        kernel=site.kernel,
        module_script=group._module.script(),
        tvm_version=tvm.__version__,
        num_inputs=group.num_inputs,
    )
    record.ops.extend(listing.ops)
    for k, value in enumerate(inputs):
        constant = k < len(site.inputs) and site.inputs[k].kind == pb.OpInput.CONSTANT
        if constant:
            record.constants.append(tensor_value(value, str(value.dtype), tuple(int(d) for d in value.shape)))
        else:
            record.constants.append(pb.TensorValue())
    return record
