"""Non-finite values a model makes on purpose, told apart from bugs by the data.

Attention masks write -inf on purpose (`where(mask, 0, -inf)`, `masked_fill(mask, -inf)`)
and the softmax after them turns it into 0: every healthy transformer has such outputs. In
one execution, the non-finite kernel outputs linked by graph edges (an output and the ops
that read it) form a region. A region is **absorbed** ("intended masking", not an alert)
when the data proves it harmless:

- every source of the region (an output none of whose inputs was non-finite) is an op that
  takes a non-finite scalar constant, a literal of the program (OpInput/OriginalOp
  `nonfinite_literal`), or an op the user declared as expected (`expected_nonfinite`): a
  value computed from finite inputs (1/0, log(0), an overflow, a batch_norm with zero
  variance) is a bug even when a later op hides it, and so is one read from a non-finite
  weight or function input;
- every op that reads a value of the region was traced in that execution with a known
  health, and those outside the region wrote finite values (softmax, exp, max, a `where`
  that selects the -inf away: the consumers absorbed it);
- no value of the region is returned by the function (or, for dumps that do not say what
  a function returns, the function returned finite values).

NaN inside such a region (a softmax over a row that the mask covers entirely, zeroed by the
`where` after it, as transformers' attention does) is absorbed with it: it never leaves the
region. Outputs of ops matching the user's `expected_nonfinite` pattern, and those computed
only from them, are **expected**: listed apart, whatever their consumers do (a non-finite
function output still fails `tvmdbg check`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tvmdbg_tb.analysis.inner_ops import masked_inside
from tvmdbg_tb.analysis.inputs import OpReads, ParamHealth
from tvmdbg_tb.events import options
from tvmdbg_tb.events.options import checked_regex
from tvmdbg_tb.events.reader import HEALTH_KNOWN, NONFINITE, RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb

ALERT, ABSORBED, EXPECTED = 0, 1, 2  # the kinds of a non-finite output
KIND_NAMES = {ABSORBED: "absorbed", EXPECTED: "expected"}


def compile_pattern(pattern: str | None) -> re.Pattern | None:
    """The expected_nonfinite pattern compiled (None for none); ValueError naming a bad one."""
    pattern = checked_regex("expected_nonfinite", pattern or None)
    return re.compile(pattern) if pattern else None


def op_matches(op: pb.GraphOpCreation, pattern: re.Pattern) -> bool:
    """Whether the pattern is found where op_regex is searched at record time (options.op_matches)."""
    return options.op_matches(pattern, op.op_name, op.kernel, op.original_ops)


@dataclass
class OpFacts:
    """What the graph says about one op (kernel call site)."""

    producers: list[tuple[int, int]]  # (op, output slot) of each input made by an op
    reads: OpReads  # its inputs, parameters (and tuple items, weights) among them
    unknown: bool  # an input of unknown health
    literal: bool  # takes a non-finite scalar constant
    expected: bool  # matches the user's expected_nonfinite pattern
    consumers: dict[int, list[int]] = field(default_factory=dict)  # output slot -> ops reading it
    members: bool = False  # the dump holds the data flow inside the kernel (fused_members)
    # An output of it is returned by the function (None: the graph does not say what it returns).
    returned: bool | None = None


class Facts:
    """OpFacts of a run's ops, read once per op."""

    def __init__(self, run: RunReader, expected: re.Pattern | None):
        self._run = run
        self._expected = expected
        self._facts: dict[int, OpFacts] = {}
        self._returned: dict[int, set[int] | None] = {}  # graph -> ops whose outputs it returns

    def of(self, op_id: int) -> OpFacts | None:
        """The op's facts; None while its record is not read (not cached then)."""
        facts = self._facts.get(op_id)
        if facts is not None:
            return facts
        try:
            op = self._run.op(op_id)
        except KeyError:
            return None
        reads = OpReads.of(self._run, op)
        literal = any(o.nonfinite_literal for o in op.original_ops)
        literal |= any(inp.kind == pb.OpInput.CONSTANT and inp.nonfinite_literal for inp in op.inputs)
        consumers: dict[int, list[int]] = {}
        for consumer, _, slot in self._run.consumers(op_id):
            consumers.setdefault(int(slot), []).append(int(consumer))
        expected = self._expected is not None and op_matches(op, self._expected)
        returned = self._returned_ops(int(op.graph_id))
        facts = self._facts[op_id] = OpFacts(
            reads.producers,
            reads,
            reads.unknown,
            literal,
            expected,
            consumers,
            members=len(op.fused_members) > 0,
            returned=None if returned is None else op_id in returned,
        )
        return facts

    def masked_inputs(self, op_id: int, execution: int, output_kinds: dict[tuple[int, int], int]) -> set[int]:
        """The op's inputs that carried non-finite values classified absorbed or expected in
        that execution (a mask's values coming in)."""
        try:
            op = self._run.op(op_id)
        except KeyError:
            return set()
        return {
            i
            for i, inp in enumerate(op.inputs)
            if inp.kind == pb.OpInput.OP_OUTPUT
            and output_kinds.get((execution, int(inp.producer_op_id)), ALERT) != ALERT
        }

    def masked_inside(self, position: int, masked_inputs: set[int]) -> bool:
        """inner_ops.masked_inside of the kernel call traced at position."""
        return masked_inside(self._run, self._run.trace(position), masked_inputs)

    def _returned_ops(self, graph_id: int) -> set[int] | None:
        if graph_id not in self._returned:
            try:
                outputs = self._run.graph(graph_id).outputs
            except KeyError:
                return None  # not read yet: not cached
            self._returned[graph_id] = (
                {int(o.producer_op_id) for o in outputs if o.kind == pb.OpInput.OP_OUTPUT} if len(outputs) else None
            )
        return self._returned[graph_id]


@dataclass
class Outputs:
    """The non-finite outputs to classify: those of a set of whole executions, as arrays."""

    execution: np.ndarray  # Execution.index
    op: np.ndarray  # op id
    slot: np.ndarray
    position: np.ndarray  # trace position (order within an execution)


@dataclass
class Evidence:
    """What the dump holds about those executions, beyond their non-finite outputs."""

    # Every trace of the executions: (execution, op) -> whether all its outputs were known
    # and finite (only traces of ops outside the regions matter).
    trace_execution: np.ndarray
    trace_op: np.ndarray
    trace_flags: np.ndarray
    # Executions whose returned values were all known and finite.
    finite_returns: set[int]
    # Execution -> the health of its parameters (None: its record is not read).
    param_health: Callable[[int], ParamHealth | None]
    # Fused kernel calls (execution, op) whose replay found the inner op that made the value
    # from finite operands -> whether that op writes a non-finite literal.
    made_inside: dict[tuple[int, int], bool] = field(default_factory=dict)


def _pair_keys(execution: np.ndarray, op: np.ndarray) -> np.ndarray:
    return (execution.astype(np.int64) << 32) ^ op.astype(np.int64)


def classify(facts: Facts, outputs: Outputs, evidence: Evidence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kind of each output: ALERT, ABSORBED or EXPECTED; whether a non-finite value came
    into its op: a producer's output in the same execution or a parameter; whether a replay
    found the inner op that made it inside), by the rules of the module doc. Vectorised per
    op: a run that went NaN everywhere stays fast."""
    if not len(outputs.op):
        return np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=bool), np.zeros(0, dtype=bool)
    nodes = _Nodes(outputs, evidence)
    ops, op_rows = np.unique(nodes.op, return_inverse=True)
    by_op = np.argsort(op_rows, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(op_rows, minlength=len(ops)))))
    for k, op_id in enumerate(ops.tolist()):
        nodes.apply_rules(facts.of(op_id), by_op[bounds[k] : bounds[k + 1]])
    return nodes.kinds()


class _Nodes:
    """One node per (execution, op) of the outputs to classify (an op's outputs stand or fall
    together), with what the rules find of each: dirty (an alert's region), expected, fed (a
    non-finite value came in), bad_param, inside (made inside from finite operands)."""

    def __init__(self, outputs: Outputs, evidence: Evidence):
        self.evidence = evidence
        self.keys, first, self.node_of = np.unique(
            _pair_keys(outputs.execution, outputs.op), return_index=True, return_inverse=True
        )
        self.execution, self.op = outputs.execution[first], outputs.op[first]
        m = len(self.keys)
        self.traced_keys, self.traced_ok = _finite_traces(evidence)
        self.returns_ok = np.isin(self.execution, np.fromiter(evidence.finite_returns, np.int64))
        self.dirty = np.zeros(m, dtype=bool)
        self.expected = np.zeros(m, dtype=bool)
        self.fed = np.zeros(m, dtype=bool)  # a non-finite value came in (a producer or a parameter)
        self.bad_param = np.zeros(m, dtype=bool)
        # A fused kernel call whose replay found the inner op that made its value from finite
        # operands: a source of its own, whatever non-finite input it also read.
        self.inside = np.zeros(m, dtype=bool)
        self.inner_literal = np.zeros(m, dtype=bool)
        if evidence.made_inside:
            replayed = list(evidence.made_inside)
            keys = _pair_keys(np.array([e for e, _ in replayed]), np.array([o for _, o in replayed]))
            found, at = _lookup(self.keys, keys)
            self.inside[at[found]] = True
            self.inner_literal[at[found]] = np.array(list(evidence.made_inside.values()), dtype=bool)[found]
        self.edges_from: list[np.ndarray] = []  # producer node -> consumer node, both non-finite
        self.edges_to: list[np.ndarray] = []

    def apply_rules(self, op_facts: OpFacts | None, rows: np.ndarray) -> None:
        """The rules for the nodes of one op (rows)."""
        if op_facts is None:  # the op's record is not read: nothing proves anything
            self.dirty[rows] = True
            return
        e = self.execution[rows]
        self.expected[rows] = op_facts.expected
        literal = np.where(self.inside[rows], self.inner_literal[rows], op_facts.literal)
        if op_facts.returned is None:  # what the function returns is unknown: its returns must be finite
            self.dirty[rows] |= ~self.returns_ok[rows]
        elif op_facts.returned:
            self.dirty[rows] = True  # a non-finite value the function returns
        self._producers(op_facts, rows, e)
        self._params(op_facts, rows, e)
        source = ~self.fed[rows] & ~self.bad_param[rows]
        if not op_facts.expected:
            self.dirty[rows] |= source & ~literal  # computed from finite inputs: a bug, whatever follows
        if op_facts.unknown:
            self.dirty[rows] |= source  # what fed it is unknown
        self._consumers(op_facts, rows, e)

    def _producers(self, op_facts: OpFacts, rows: np.ndarray, e: np.ndarray) -> None:
        """Edges from the non-finite producers of the same executions."""
        for producer, _ in op_facts.producers:
            found, at = _lookup(self.keys, _pair_keys(e, np.full(len(rows), producer)))
            found &= ~self.inside[rows]  # made inside from finite operands: the input was absorbed first
            self.edges_from.append(at[found])
            self.edges_to.append(rows[found])
            self.fed[rows[found]] = True

    def _params(self, op_facts: OpFacts, rows: np.ndarray, e: np.ndarray) -> None:
        if not op_facts.reads.params:
            return
        for j, execution in zip(rows.tolist(), e.tolist()):
            health = self.evidence.param_health(execution)
            if health is None:
                self.dirty[j] = True  # the execution's inputs are not in the dump
                continue
            data, weight, _ = health.read_by(op_facts.reads)
            if data:
                self.bad_param[j] = True  # a non-finite function input is the caller's, not a mask
            # A non-finite weight: the op brings it in (an origin; never a mask's literal).
            self.dirty[j] |= weight

    def _consumers(self, op_facts: OpFacts, rows: np.ndarray, e: np.ndarray) -> None:
        """Outside the region, a consumer must have been traced there, all finite, or have
        absorbed the value before an op of its own made another (a replay says so)."""
        for consumer in {c for readers in op_facts.consumers.values() for c in readers}:
            pair = _pair_keys(e, np.full(len(rows), consumer))
            in_region, node = _lookup(self.keys, pair)
            traced, at = _lookup(self.traced_keys, pair)
            absorbed = (traced & self.traced_ok[at]) | (in_region & self.inside[node])
            self.dirty[rows] |= ~(in_region & ~self.inside[node]) & ~absorbed

    def kinds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each output's kind, fed and inside, once the regions are spread."""
        m, dirty, expected, bad_param = len(self.keys), self.dirty, self.expected, self.bad_param
        self.fed |= bad_param
        dirty |= bad_param
        src = np.concatenate(self.edges_from) if self.edges_from else np.zeros(0, np.int64)
        dst = np.concatenate(self.edges_to) if self.edges_to else np.zeros(0, np.int64)
        # A region is dirty as a whole: spread along its edges, both ways, until nothing changes.
        for _ in range(m):
            before = int(np.count_nonzero(dirty))
            dirty[dst] |= dirty[src]
            dirty[src] |= dirty[dst]
            if int(np.count_nonzero(dirty)) == before:
                break
        # Expected: a matching op, or one fed only by expected ops (downstream, until stable).
        has_producer = np.zeros(m, dtype=bool)
        has_producer[dst] = True
        for _ in range(m):
            from_unexpected = np.zeros(m, dtype=bool)
            from_unexpected[dst[~expected[src]]] = True
            grown = expected | (has_producer & ~from_unexpected & ~bad_param)
            if (grown == expected).all():
                break
            expected = grown
        node_kind = np.where(expected, EXPECTED, np.where(dirty, ALERT, ABSORBED)).astype(np.uint8)
        return node_kind[self.node_of], self.fed[self.node_of], self.inside[self.node_of]


def _finite_traces(evidence: Evidence) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique (execution, op) keys of the traces, whether all of that op's outputs
    there were known and finite)."""
    keys = _pair_keys(evidence.trace_execution, evidence.trace_op)
    ok = _finite_known(evidence.trace_flags)
    unique, inverse = np.unique(keys, return_inverse=True)
    all_ok = np.ones(len(unique), dtype=bool)
    np.logical_and.at(all_ok, inverse, ok)
    return unique, all_ok


def _finite_known(flags: np.ndarray) -> np.ndarray:
    return ((flags & HEALTH_KNOWN) != 0) & ((flags & NONFINITE) == 0)


def _lookup(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(found, index; 0 where not found) of keys in sorted_keys."""
    if not len(sorted_keys):
        return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys, at


def classify_inner(
    facts: Facts,
    calls: Outputs,
    literal: np.ndarray,
    made_nan: np.ndarray,
    evidence: Evidence,
    output_kinds: dict[tuple[int, int], int],
) -> np.ndarray:
    """The kind of each kernel call whose output is finite but whose fused ops made NaN/Inf
    inside it (the inner-op check, GraphExecutionTrace.inner_nonfinite): EXPECTED when the op
    matches the user's pattern; ABSORBED when the kernel absorbed a mask itself: nothing
    non-finite came in but what is absorbed or expected (output_kinds: (execution, op) -> kind
    of the non-finite outputs classified with them), and its ops made only a non-finite literal
    and its spread (literal: a mask's -inf, made and absorbed in one kernel;
    inner_ops.inner_literal) or, for a NaN (made_nan), only what inner_ops.masked_inside calls
    masking: made of the mask's values and selected away by a `where` computed from them
    (PyTorch's safe softmax on a fully masked row). ALERT otherwise: a value computed of finite
    data, also next to a mask (`-inf - -inf` of the mask's and data's, sqrt of a negative)."""
    kinds = np.full(len(calls.op), ALERT, dtype=np.uint8)
    for k, (execution, op_id) in enumerate(zip(calls.execution.tolist(), calls.op.tolist())):
        op_facts = facts.of(op_id)
        if op_facts is None:
            continue
        if op_facts.expected:
            kinds[k] = EXPECTED
            continue
        came_in = [output_kinds[(execution, p)] for p, _ in op_facts.producers if (execution, p) in output_kinds]
        if op_facts.reads.params:
            health = evidence.param_health(execution)
            if health is None or any(health.read_by(op_facts.reads)[:2]):
                continue  # a non-finite function input or weight (or unknown ones)
        if ALERT in came_in or (not came_in and op_facts.unknown):
            continue
        if op_facts.members:  # the data flow inside the kernel decides
            masked = facts.masked_inputs(op_id, execution, output_kinds)
            if not facts.masked_inside(int(calls.position[k]), masked):
                continue
        elif made_nan[k] or not (came_in or literal[k]):  # a dump without it: by the kinds made
            continue
        kinds[k] = EXPECTED if came_in and all(c == EXPECTED for c in came_in) else ABSORBED
    return kinds
