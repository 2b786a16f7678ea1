"""What an op reads of its function's parameters, and their health in one execution.

A function's parameters are its data inputs and, past Relax's num_input attribute
(DebuggedGraph.num_inputs: nn.Module export, from_exported_program(keep_params_as_input=True)),
its weights. An item of a tuple parameter (nn.Module export's packed params) is told apart
from the others by its own summary (TensorSummary.items). An input that is neither a tensor,
a tuple nor a plain value is an object (an LLM's KV cache): state that earlier calls may have
written, whose content is not summarised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tvmdbg_tb.events.health import value_nonfinite_counts
from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.events.summaries import dtype_code, nonfinite_counts
from tvmdbg_tb.proto import debug_event_pb2 as pb

# Opaque argument types that cannot hold a NaN (a shape, a Python scalar): not state.
_PLAIN_OPAQUE = frozenset(("Shape", "ShapeTuple", "int", "float", "bool", "str", "NoneType", "tuple"))


@dataclass(frozen=True)
class OpReads:
    """What one op reads: producer (op, slot) pairs, (parameter, tuple item or -1) pairs,
    whether an input's health is unknown, and which parameters are the function's weights."""

    producers: list[tuple[int, int]]
    params: list[tuple[int, int]]
    unknown: bool
    weights: frozenset[int]

    @classmethod
    def of(cls, run: RunReader, op: pb.GraphOpCreation) -> OpReads:
        producers, params, unknown = [], [], False
        for inp in op.inputs:
            if inp.kind == pb.OpInput.OP_OUTPUT:
                producers.append((int(inp.producer_op_id), int(inp.producer_output_slot)))
            elif inp.kind == pb.OpInput.PARAM:
                params.append((int(inp.param_index), int(inp.tuple_item) if inp.HasField("tuple_item") else -1))
            elif inp.kind == pb.OpInput.OTHER:
                unknown = True
        first_weight = _num_inputs(run, int(op.graph_id))
        weights = frozenset(p for p, _ in params if first_weight is not None and p >= first_weight)
        return cls(producers, params, unknown, weights)


def _num_inputs(run: RunReader, graph_id: int) -> int | None:
    """The function's data inputs (DebuggedGraph.num_inputs): the parameters after are weights."""
    try:
        graph = run.graph(graph_id)
    except KeyError:
        return None
    return int(graph.num_inputs) if graph.HasField("num_inputs") else None


@dataclass(frozen=True)
class ParamHealth:
    """The health of one execution's inputs: the non-finite ones by (parameter, tuple item;
    -1 for the whole parameter), the parameters whose tuple items are told apart, and the
    objects (state such as a KV cache: what they hold is not summarised)."""

    bad: frozenset[tuple[int, int]]
    itemized: frozenset[int]
    objects: frozenset[int]

    @property
    def indices(self) -> frozenset[int]:
        """The parameters holding a non-finite value (absorption's view)."""
        return frozenset(p for p, item in self.bad if item < 0)

    def holds(self, param: int, item: int) -> bool:
        """Whether what an op reads of this parameter (an item, or all of it) held NaN/Inf."""
        if item < 0 or param not in self.itemized:
            return (param, -1) in self.bad
        return (param, item) in self.bad

    def read_by(self, reads: OpReads) -> tuple[bool, bool, bool]:
        """(a non-finite data input, a non-finite weight, an object) among what an op reads."""
        data = weight = False
        for param, item in reads.params:
            if self.holds(param, item):
                if param in reads.weights:
                    weight = True
                else:
                    data = True
        return data, weight, any(p in self.objects for p, _ in reads.params)


def param_health(run: RunReader, execution_index: int) -> ParamHealth | None:
    """The ParamHealth of an execution's inputs; None while its record is not read."""
    hits = np.flatnonzero(run.execution_digests()["index"] == execution_index)
    if not len(hits):
        return None
    execution = run.execution(int(hits[-1]))
    mode = execution.tensor_debug_mode
    bad, itemized, objects = set(), set(), set()
    for i, summary in enumerate(execution.inputs):
        counts = _summary_counts(mode, summary)
        if counts is None and summary.items:  # a FULL_TENSOR tuple: from its tensors
            parts = [_summary_counts(mode, item) for item in summary.items]
            counts = tuple(map(sum, zip(*[p for p in parts if p is not None]))) or None
        if counts is not None and any(counts):
            bad.add((i, -1))
        if len(summary.items):
            itemized.add(i)
            for j, item in enumerate(summary.items):
                found = _summary_counts(mode, item)
                if found is not None and any(found):
                    bad.add((i, j))
        elif _is_object(summary):
            objects.add(i)
    return ParamHealth(frozenset(bad), frozenset(itemized), frozenset(objects))


def _summary_counts(mode: int, summary: pb.TensorSummary) -> tuple[int, int, int] | None:
    counts = nonfinite_counts(mode, summary.debug_values)
    if counts is None and summary.HasField("tensor_value"):  # FULL_TENSOR: from the values
        counts = value_nonfinite_counts(summary.tensor_value)
    return counts


def _is_object(summary: pb.TensorSummary) -> bool:
    """Whether an input is an object (no tensor, tuple or plain value): state a call may read."""
    if len(summary.debug_values) or summary.HasField("tensor_value") or len(summary.shape):
        return False
    return summary.dtype not in _PLAIN_OPAQUE and dtype_code(summary.dtype) == pb.DTYPE_UNKNOWN
