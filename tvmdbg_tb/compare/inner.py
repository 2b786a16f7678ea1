"""Compare down to the Relax op: the first divergent kernel, when fused, opened up.

A fused kernel's output shows only that something inside it went wrong: the divide that ends
`fused_matmul_relu_multiply_divide` is blamed for the float16 overflow of the multiply
before it. From FULL_TENSOR dumps, the kernel call is replayed op by op from its recorded
inputs (replay/offline.py) on the side where it is fused, and each inner op's output is
paired with the other side's op of the same identity (identity.py gives every Relax op of a
kernel its key): that op's kernel output when it ends a kernel there, else its own replayed
value. The first inner op beyond tolerance whose operands were within it is named with its
line, and the answer says which side(s) were replayed.

The kernel's own inputs are checked the same way (against the other side's counterpart of
their producers): an inner op that reads a divergent input, or an input without counterpart
that already holds NaN/Inf, did not start the divergence, and the answer says where it came
in instead. When a side holds statistics only (FULL_STATS), nothing can be replayed there:
the answer says which targeted re-run (FULL_TENSOR, op_regex limited to the kernels involved
and their producers) decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from tvmdbg_tb.compare import errors
from tvmdbg_tb.compare.identity import OpIdentity, describe_key
from tvmdbg_tb.events.modes import spec
from tvmdbg_tb.events.reader import RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb


class Side(Protocol):
    """What inner comparison needs of one run (compare.core._Side)."""

    label: str
    run: RunReader
    mode: int
    ops: dict[int, OpIdentity]

    def tensors(self, execution_index: int) -> list[tuple[tuple, int, pb.GraphExecutionTrace]]: ...


@dataclass
class _Value:
    """One op's output on one side (errors.summary) and where it was read from."""

    summary: tuple
    op_name: str
    kernel: str
    replayed: bool


@dataclass
class _Replay:
    """One kernel call replayed op by op: the recorded ops, each one's first output, the inputs."""

    ops: list
    outputs: list
    inputs: list


@dataclass
class _Replays:
    """One side's replayed kernel calls of one execution, by op id (None: could not)."""

    side: Side
    execution_index: int
    done: dict[int, _Replay | None] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    needed: set[int] = field(default_factory=set)  # op ids a FULL_TENSOR re-run would make replayable

    def get(self, op_id: int) -> _Replay | None:
        if op_id not in self.done:
            self.done[op_id] = self._replay(op_id)
        return self.done[op_id]

    def _replay(self, op_id: int) -> _Replay | None:
        run = self.side.run
        if not spec(self.side.mode).values:
            self.needed.add(op_id)
            return None
        from tvmdbg_tb.replay.group import ReplayError
        from tvmdbg_tb.replay.offline import replay_values

        try:
            source, _group, inputs, outputs = replay_values(run, run.op(op_id), self.execution_index)
        except ReplayError as error:
            self.errors.append(f"run {self.side.label}: {error}")
            return None
        except Exception as error:  # a replay must never take compare down
            self.errors.append(f"run {self.side.label}: the replay failed: {type(error).__name__}: {error}")
            return None
        return _Replay(list(source.ops), [values[0] if values else None for values in outputs], list(inputs))


def _recorded_to_original(recorded_ops, original_ops) -> list[int | None]:
    """For each replayed op, the index of the same Relax op among the kernel's original ops,
    or None. Both list the fused function's bindings in order, so equal lengths pair by
    position (ops a pass rewrote carry the user op's var name and type, not their own);
    otherwise by var name and op type, in order."""
    if len(recorded_ops) == len(original_ops):
        return list(range(len(recorded_ops)))
    out: list[int | None] = []
    used: set[int] = set()
    for recorded in recorded_ops:
        match = next(
            (
                k
                for k, original in enumerate(original_ops)
                if k not in used and (original.var_name, original.op_type) == (recorded.var_name, recorded.op_type)
            ),
            None,
        )
        if match is not None:
            used.add(match)
        out.append(match)
    return out


class _Counterparts:
    """Where one side computes each op key in one execution: a kernel's output (its trace) or
    an op inside a fused kernel (a replay of that kernel)."""

    def __init__(self, side: Side, execution_index: int):
        self.side = side
        self.replays = _Replays(side, execution_index)
        self.outputs: dict[tuple, tuple[int, pb.GraphExecutionTrace]] = {}  # (key, slot) ->
        self.inside: dict[tuple, tuple[int, int]] = {}  # key -> (op id, index among original ops)
        for key, op_id, trace in side.tensors(execution_index):
            self.outputs[(key[:-1], key[-1])] = (op_id, trace)
            for k, inner_key in enumerate(side.ops[op_id].fused_keys[:-1]):
                self.inside.setdefault(inner_key, (op_id, k))

    def value(self, key: tuple, slot: int = 0) -> _Value | None:
        """The side's value of the op with this key (its output `slot`), or None."""
        if (key, slot) in self.outputs:
            op_id, trace = self.outputs[(key, slot)]
            identity = self.side.ops[op_id]
            return _Value(errors.summary(self.side.mode, trace), identity.op_name, identity.kernel, False)
        if slot != 0 or key not in self.inside:
            return None
        op_id, index = self.inside[key]
        kernel = self.side.ops[op_id].kernel
        original = self.side.run.op(op_id).original_ops
        name = original[index].var_name
        replay = self.replays.get(op_id)
        if replay is None:
            why = "kernel not replayed" + (" (statistics only)" if not spec(self.side.mode).values else "")
            return _Value((None, None, why), name, kernel, False)
        for array, position in zip(replay.outputs, _recorded_to_original(replay.ops, original)):
            if position == index and array is not None:
                return _Value(errors.array_summary(array), name, kernel, True)
        return _Value((None, None, "op not found in the kernel's replay"), name, kernel, True)


MAX_OPENED = 6  # kernels opened, following a divergence back through inputs without counterpart


def _identities(a: Side, b: Side, first: dict) -> tuple[OpIdentity | None, OpIdentity | None]:
    op_a, op_b = first.get("op_id_a"), first.get("op_id_b")
    return (a.ops.get(op_a) if op_a is not None else None, b.ops.get(op_b) if op_b is not None else None)


def is_fused(a: Side, b: Side, first: dict) -> bool:
    """Whether the first divergent kernel is fused on either side (there is an inside to open)."""
    return any(i is not None and len(i.fused_keys) > 1 for i in _identities(a, b, first))


def pending(a: Side, b: Side, first: dict) -> dict:
    """The inside of a fused first divergent kernel while it is being opened (replayed op by
    op): the kernels, and what is being done."""
    identity_a, identity_b = _identities(a, b, first)
    fused_a = identity_a is not None and len(identity_a.fused_keys) > 1
    walked = identity_a if fused_a else identity_b
    return {
        "status": "pending",
        "kernel_a": identity_a.kernel if identity_a else None,
        "kernel_b": identity_b.kernel if identity_b else None,
        "walked": "A" if fused_a else "B",
        "replayed": [],
        "kernel": walked.kernel,
        "opened": [],
        "op": None,
        "ops": [],
        "inputs": [],
        "reason": "opening the fused kernel: replaying its Relax ops one by one",
        "suggestion": None,
    }


def inner_divergence(a: Side, b: Side, first: dict, rtol: float, atol: float) -> dict | None:
    """Where inside the first divergent kernel the error starts (see the module doc), or None
    when the kernel is fused on neither side. `first` is compare's first divergent op record
    with the call's execution_index_a and execution_index_b."""
    op_a, op_b = first.get("op_id_a"), first.get("op_id_b")
    identity_a, identity_b = _identities(a, b, first)
    fused_a = identity_a is not None and len(identity_a.fused_keys) > 1
    fused_b = identity_b is not None and len(identity_b.fused_keys) > 1
    if not (fused_a or fused_b):
        return None
    # Walk the inner ops of the fused side (A's when both are), paired with the other side's.
    walk, other, op_id = (a, b, op_a) if fused_a else (b, a, op_b)
    executions = {a.label: first["execution_index_a"], b.label: first["execution_index_b"]}
    opener = _Opener(walk, other, executions, rtol, atol)
    answer = {
        "kernel_a": identity_a.kernel if identity_a else None,
        "kernel_b": identity_b.kernel if identity_b else None,
        "walked": walk.label,
        "replayed": [],
        "status": "not_found",
        "op": None,
        "kernel": walk.ops[op_id].kernel,
        "ops": [],
        "inputs": [],
        "opened": [],
        "reason": "",
        "suggestion": None,
    }
    while len(answer["opened"]) < MAX_OPENED:
        identity = walk.ops[op_id]
        opened = opener.open(op_id)
        if opened is None:  # this kernel cannot be replayed: say which re-run would do it
            answer["status"] = "needs_values"
            answer["reason"] = f"run {walk.label}'s kernel {identity.kernel} cannot be replayed: " + (
                "; ".join(opener.mine.replays.errors) or "the dump holds statistics only (FULL_STATS)"
            )
            theirs = opener.theirs
            other_needs = set() if spec(other.mode).values else _needed(theirs, identity.fused_keys)
            answer["suggestion"] = _suggestion(identity.kernel, [(walk, {op_id}), (other, other_needs)])
            break
        rows, inputs, origin = opened
        answer.update(kernel=identity.kernel, ops=rows, inputs=inputs)
        answer["opened"].append({"op_id": op_id, "op_name": identity.op_name, "kernel": identity.kernel})
        if origin is not None:
            answer.update(status="found", op=origin, reason=_why_found(origin, other.label))
            break
        answer["reason"] = _why_not_found(rows, inputs, other.label)
        # The divergence came in through an input without counterpart made by a fused kernel
        # of the same run: open that kernel next.
        producer = next(
            (
                r["producer_op_id"]
                for r in inputs
                if r["status"] == "unknown"
                and r["nonfinite"]
                and len(walk.ops.get(r.get("producer_op_id"), _NO_IDENTITY).fused_keys) > 1
                and r["producer_op_id"] not in {o["op_id"] for o in answer["opened"]}
            ),
            None,
        )
        if producer is None:
            break
        op_id = producer
    replayed_other = opener.theirs.replays.done and any(v is not None for v in opener.theirs.replays.done.values())
    answer["replayed"] = sorted(
        ({walk.label} if any(v is not None for v in opener.mine.replays.done.values()) else set())
        | ({other.label} if replayed_other else set())
    )
    notes = opener.mine.replays.errors + opener.theirs.replays.errors
    if notes and answer["status"] != "needs_values":
        answer["reason"] += "; " + "; ".join(notes)
    if opener.theirs.replays.needed and answer["suggestion"] is None:
        answer["suggestion"] = _suggestion(answer["kernel"], [(other, opener.theirs.replays.needed)])
    return answer


_NO_IDENTITY = OpIdentity((), "", None, "", "")


class _Opener:
    """Opens kernel calls of the walked run: each inner op (and each kernel input) with its
    verdict against the other run's value of the same op."""

    def __init__(self, walk: Side, other: Side, executions: dict, rtol: float, atol: float):
        self.walk, self.other, self.rtol, self.atol = walk, other, rtol, atol
        self.mine = _Counterparts(walk, executions[walk.label])
        self.theirs = _Counterparts(other, executions[other.label])

    def pair(self, summary: tuple, value: _Value | None) -> dict:
        """A verdict with run A's value first whichever run is walked."""
        if value is None:
            return {"status": "not_comparable", "reason": f"no counterpart in run {self.other.label}"}
        a_side, b_side = (summary, value.summary) if self.walk.label == "A" else (value.summary, summary)
        return errors.verdict(a_side, b_side, self.rtol, self.atol)

    def open(self, op_id: int) -> tuple[list[dict], list[dict], dict | None] | None:
        """(inner op rows, kernel input rows, the origin row or None); None when the kernel
        call cannot be replayed."""
        replay = self.mine.replays.get(op_id)
        if replay is None:
            return None
        identity = self.walk.ops[op_id]
        inputs = _kernel_inputs(self.walk, op_id, replay.inputs, self.theirs, self.pair)
        original = self.walk.run.op(op_id).original_ops
        rows: list[dict] = []
        for index, (op, array, position) in enumerate(
            zip(replay.ops, replay.outputs, _recorded_to_original(replay.ops, original))
        ):
            key = identity.fused_keys[position] if position is not None else None
            row = {
                "index": index,
                "op_type": op.op_type,
                "var_name": op.var_name,
                "input_refs": [int(r) for r in op.input_refs],  # >= 0: an earlier inner op; < 0: kernel input -1-r
                "location": identity.fused_ops[position]["location"] if position is not None else None,
                # The pass that made this op in place of the user's, and what it made.
                "rewritten_by": identity.fused_ops[position].get("rewritten_by") if position is not None else None,
                "key": describe_key(key) if key is not None else None,
                "nonfinite": _nonfinite(array),
            }
            if array is None:
                row.update(status="not_comparable", reason="no value in the replay")
            else:
                value = self.theirs.value(key) if key is not None else None
                summary = errors.array_summary(array)
                row["abs_max"] = summary[0]["abs_max"]  # of the finite elements (NaN: none)
                row.update(self.pair(summary, value))
                if value is not None:
                    row["counterpart"] = {"run": self.other.label, "op_name": value.op_name, "kernel": value.kernel}
                    row["counterpart_replayed"] = value.replayed
            row["reads_divergent"] = _reads_divergent(op.input_refs, index, rows, inputs)
            # Without a counterpart (a cast ToMixedPrecision inserted, ...), an op that turns
            # finite operands into NaN/Inf is where they were made.
            row["made_nonfinite"] = (
                row["status"] == "not_comparable"
                and row["nonfinite"]
                and not row["reads_divergent"]
                and _operands_finite(op.input_refs, index, rows, inputs)
            )
            rows.append(row)
        for row in rows:
            for name in ("max_abs_error", "max_rel_error", "cosine_similarity", "abs_max"):
                if isinstance(row.get(name), float) and row[name] != row[name]:
                    row[name] = None
        origin = next(
            (r for r in rows if (r["status"] == "divergent" and not r["reads_divergent"]) or r["made_nonfinite"]),
            None,
        )
        return rows, inputs, origin


def _nonfinite(array) -> bool:
    return array is not None and array.dtype.kind == "f" and not bool(np.isfinite(array).all())


def _operands_finite(refs, index: int, rows: list[dict], inputs: list[dict]) -> bool:
    for ref in refs:
        if 0 <= ref < index and rows[ref]["nonfinite"]:
            return False
        if ref < 0 and -1 - ref < len(inputs) and inputs[-1 - ref]["nonfinite"]:
            return False
    return True


def _why_found(origin: dict, other: str) -> str:
    if origin["made_nonfinite"]:
        return (
            f"the first inner op that turned finite operands into NaN/Inf; it has no counterpart in run {other} "
            "(an op a pass inserted?), so no error is computed for it"
        )
    return f"the first inner op beyond tolerance whose operands were within it ({origin['reason']})"


def _kernel_inputs(walk: Side, op_id: int, arrays: list, theirs: _Counterparts, pair) -> list[dict]:
    """Each input of the walked kernel call: its verdict against the other side's value of the
    same producer output ("unknown" without one), and whether it holds NaN/Inf. Function
    inputs and constants count as within (compare checks the call's inputs itself)."""
    out = []
    for index, (inp, array) in enumerate(zip(walk.run.op(op_id).inputs, arrays)):
        row = {"index": index, "name": inp.name, "producer": None, "status": "within"}
        row["nonfinite"] = _nonfinite(array)
        if inp.kind == pb.OpInput.OP_OUTPUT:
            producer = walk.ops.get(inp.producer_op_id)
            row["producer_op_id"] = int(inp.producer_op_id)
            row["producer"] = producer.op_name if producer else None
            row["producer_kernel"] = producer.kernel if producer else None
            value = theirs.value(producer.key, inp.producer_output_slot) if producer else None
            row["status"] = "unknown" if value is None else pair(errors.array_summary(array), value)["status"]
            if value is not None:
                row["counterpart_replayed"] = value.replayed
        out.append(row)
    return out


def _reads_divergent(refs, index: int, rows: list[dict], inputs: list[dict]) -> bool:
    """Whether an inner op reads a divergent value: an earlier inner op that diverged or read
    one, or a kernel input that diverged or, without counterpart, already holds NaN/Inf."""
    for ref in refs:
        if 0 <= ref < index:
            if rows[ref]["status"] == "divergent" or rows[ref]["reads_divergent"]:
                return True
        elif ref < 0 and -1 - ref < len(inputs):
            row = inputs[-1 - ref]
            if row["status"] == "divergent" or (row["status"] == "unknown" and row["nonfinite"]):
                return True
    return False


def _why_not_found(rows: list[dict], inputs: list[dict], other: str) -> str:
    came_in = [r for r in inputs if r["status"] == "divergent" or (r["status"] == "unknown" and r["nonfinite"])]
    if came_in and any(r["status"] == "divergent" for r in rows):
        parts = []
        for r in came_in:
            made = f" (made by {r['producer']} in kernel {r['producer_kernel']})" if r.get("producer") else ""
            if r["status"] == "divergent":
                parts.append(f"input {r['index']} {r['name']}{made} diverges")
            else:
                parts.append(
                    f"input {r['index']} {r['name']}{made} already holds NaN/Inf and has no counterpart in run {other}"
                )
        return "the divergence came in through the kernel's inputs: " + "; ".join(parts)
    return "no inner op with a counterpart is beyond tolerance"


def _needed(counterparts: _Counterparts, keys) -> set[int]:
    """The kernels of a side that compute these op keys (as outputs or inside)."""
    ops = {counterparts.outputs[(key, 0)][0] for key in keys if (key, 0) in counterparts.outputs}
    return ops | {counterparts.inside[key][0] for key in keys if key in counterparts.inside}


def _producers(run: RunReader, op_id: int) -> list[str]:
    """The op's name and its producers' (what a FULL_TENSOR re-run must keep to replay it)."""
    try:
        op = run.op(op_id)
    except KeyError:
        return []
    names = [op.op_name]
    for inp in op.inputs:
        if inp.kind == pb.OpInput.OP_OUTPUT:
            try:
                names.append(run.op(inp.producer_op_id).op_name)
            except KeyError:
                pass
    return names


def _suggestion(kernel: str, reruns: list[tuple[Side, set[int]]]) -> str | None:
    """The targeted re-run that makes the kernel calls replayable: FULL_TENSOR on the kernels
    involved and their producers (function inputs are dumped whatever op_regex says)."""
    parts = []
    for side, ops in reruns:
        names = sorted({name for op_id in ops for name in _producers(side.run, op_id)})
        if names:
            regex = "^(" + "|".join(names) + ")$"
            parts.append(
                f"{side.label} with tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode='FULL_TENSOR', "
                f"op_regex={regex!r})"
            )
    if not parts:
        return None
    return (
        f"To see inside {kernel}, re-run " + " and ".join(parts) + " and compare again: the kernel calls are then "
        "replayed op by op from their recorded inputs."
    )
