"""compare(run_a, run_b): op-by-op comparison of two runs, and the first divergent op.

Run B is the reference (e.g. PyTorch eager, or the float32 build). Executions are paired by
function name and call order (the k-th call of "main" in A with the k-th in B); inside a
pair, kernel outputs are paired by op identity (identity.py), function inputs by position.
Each aligned tensor gets a verdict (errors.py). The first divergent op is the first one, in
A's execution order, beyond tolerance while everything it reads (its inputs, looking
through ops without a counterpart) was within tolerance: where the error starts, not where
it propagated to. Every pair gets a verdict (for two FULL_STATS runs from all kernel
outputs' statistics at once, bulk.py); the table shows the first pair that diverges, over
all calls, or the pair asked for (calls.py), or when all agree the last one.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict

import numpy as np

from tvmdbg_tb import storage
from tvmdbg_tb.compare import bulk, calls, errors, inner
from tvmdbg_tb.compare.identity import NODE, OpIdentity, describe_key, op_identities
from tvmdbg_tb.events import layout
from tvmdbg_tb.events.modes import mode_name, spec
from tvmdbg_tb.events.reader import DebugDataReader, RunReader
from tvmdbg_tb.proto import debug_event_pb2 as pb

DEFAULT_RTOL = 1e-4
DEFAULT_ATOL = 1e-5
# Paired calls compared record by record when a run holds values (FULL_TENSOR).
_WALK_LIMIT = 256


class CompareError(ValueError):
    """The two runs cannot be compared; the message says why (CLI exit status 2)."""


def open_run(path_or_run: str | os.PathLike | RunReader) -> tuple[RunReader, DebugDataReader | None]:
    """A RunReader, read to its end, for a run directory or a logdir holding one run, and the
    reader this opened for it (None for a RunReader given: its owner closes it)."""
    if isinstance(path_or_run, RunReader):
        return path_or_run, None
    path = os.fspath(path_or_run)
    problem = storage.location_problem(path)
    if problem is not None:
        raise CompareError(f"{path}: {problem}")
    reader = DebugDataReader(path)
    reader.update()
    try:
        return reader.run(), reader
    except LookupError as error:
        reader.close()
        raise CompareError(str(error)) from None


class _Side:
    """One run's aligned view: identities of its ops and its executions by (function, k)."""

    def __init__(self, run: RunReader, label: str):
        self.run, self.label = run, label
        if run.metadata is None:
            raise CompareError(f"run {label} ({run.path}) has no metadata: not a tvmdbg run")
        self.mode = run.metadata.tensor_debug_mode
        if not spec(self.mode).comparable:
            raise CompareError(
                f"run {label} was recorded in {mode_name(self.mode)}, which keeps no statistics: "
                "record it with tensor_debug_mode='FULL_STATS' (or FULL_TENSOR)"
            )
        self.ops = op_identities(run)
        digests = run.execution_digests()
        self.calls: dict[tuple[str, int], int] = {}
        counts: dict[str, int] = defaultdict(int)
        self.order: list[tuple[str, int]] = []
        for function, index in zip(digests["function"].tolist(), digests["index"].tolist()):
            name = run.function_names[function] if 0 <= function < len(run.function_names) else "?"
            key = (name, counts[name])
            counts[name] += 1
            self.calls[key] = index
            self.order.append(key)
        traces = run.trace_digests()
        self.digests = traces  # a view of the reader's index
        by_execution = np.argsort(traces["execution_index"], kind="stable")
        indices = traces["execution_index"][by_execution]
        bounds = np.flatnonzero(np.diff(indices)) + 1
        self.traces = {
            int(indices[group[0]]): by_execution[group]
            for group in np.split(np.arange(len(indices)), bounds)
            if len(group)
        }

    def tensors(self, execution_index: int) -> list[tuple[tuple, int, pb.GraphExecutionTrace]]:
        """(op key + output slot, op_id, trace) of one execution's kernel outputs, in order."""
        positions = self.traces.get(execution_index, np.zeros(0, dtype=np.int64))
        out = []
        for trace in self.run.traces(positions.tolist()):
            identity = self.ops.get(trace.op_id)
            if identity is None or trace.error:
                continue
            out.append(((*identity.key, trace.output_slot), trace.op_id, trace))
        return out


def _public_stats(stats: dict | None) -> dict | None:
    return None if stats is None else {k: v for k, v in stats.items() if k != "device_id"}


def _clean(value):
    return None if isinstance(value, float) and math.isnan(value) else value


def compare(
    run_a: str | os.PathLike | RunReader,
    run_b: str | os.PathLike | RunReader,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    call: int | None = None,
    function: str | None = None,
) -> dict:
    """Op-by-op comparison of run A against the reference run B (paths or RunReaders).

    Calls are paired by order (calls.py): the i-th call of a function in A with the i-th in
    B. The table shows the first divergent pair over all calls, or the pair `function`/`call`
    picks. Returns {"status": "within"|"divergent", "first_divergence": op record or None,
    "ops": records in A's execution order, "matched": alignment counts, "calls": every
    pair's verdict and the unpaired calls, "notes": [...], "suggestion": str or None, ...}.
    Raises CompareError when the runs cannot be compared (no statistics, nothing aligned,
    no such call, ...). The whole answer: Comparison(...).open(); Comparison(...).result
    is the same at once, a fused first divergence not opened yet."""
    with Comparison(run_a, run_b, rtol, atol, call, function) as comparison:
        return comparison.open()


class Comparison:
    """A comparison in two steps: `result` at once (the aligned ops, every verdict, the first
    divergence), then open() opens a fused first divergent kernel up, replaying it op by op
    (inner.py: seconds, for TVM's import and a compile), which until then says "pending"."""

    def __init__(
        self,
        run_a: str | os.PathLike | RunReader,
        run_b: str | os.PathLike | RunReader,
        rtol: float = DEFAULT_RTOL,
        atol: float = DEFAULT_ATOL,
        call: int | None = None,
        function: str | None = None,
    ):
        if not (rtol >= 0 and atol >= 0):
            raise CompareError(f"rtol and atol must be >= 0 (got rtol={rtol}, atol={atol})")
        if call is not None and call < 0:
            raise CompareError(f"call must be >= 0 (got {call})")
        self.rtol, self.atol = rtol, atol
        self._opened: list[DebugDataReader] = []  # the readers of runs given by path: closed by close()
        try:
            self.a, self.b = self._side(run_a, "A"), self._side(run_b, "B")
            self.result = self._compare(call, function)
        except BaseException:
            self.close()
            raise
        first = self.result["first_divergence"]
        self._pending = first is not None and first["kind"] == "op" and inner.is_fused(self.a, self.b, first)
        if self._pending:
            first["inner"] = inner.pending(self.a, self.b, first)
        elif first is not None and first["kind"] == "op":
            first["inner"] = None

    def _side(self, run: str | os.PathLike | RunReader, label: str) -> _Side:
        run, reader = open_run(run)
        if reader is not None:
            self._opened.append(reader)
        return _Side(run, label)

    def close(self) -> None:
        """Closes the files of the runs this comparison opened by path (open() reads them)."""
        for reader in self._opened:
            reader.close()
        self._opened = []

    def __enter__(self) -> Comparison:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pending(self) -> bool:
        """Whether open() has a fused kernel to replay."""
        return self._pending

    def open(self) -> dict:
        """The result with the fused first divergent kernel opened up (which Relax op inside it
        diverged first); the result as it is when there is none."""
        if self._pending:
            first = self.result["first_divergence"]
            execution = {
                "execution_index_a": self.result["execution_index_a"],
                "execution_index_b": self.result["execution_index_b"],
            }
            first["inner"] = inner.inner_divergence(self.a, self.b, {**first, **execution}, self.rtol, self.atol)
            self._pending = False
        return self.result

    def _compare(self, call: int | None, function: str | None) -> dict:
        a, b, rtol, atol = self.a, self.b, self.rtol, self.atol
        keys, unpaired, call_notes = calls.pair_calls(a.order, b.order)
        pairs = [(key, a.calls[key], b.calls[key]) for key in keys]
        if not pairs:
            raise CompareError(
                "no function call of run A has a counterpart in run B "
                f"(A calls {sorted({k[0] for k in a.order}) or 'nothing'}, B calls {sorted({k[0] for k in b.order}) or 'nothing'})"
            )
        statuses, results = _pair_statuses(a, b, pairs, rtol, atol)
        try:
            shown = calls.pick(keys, statuses, function, call)
        except calls.CallError as error:
            raise CompareError(str(error)) from None
        result = results.get(shown) or _compare_pair(a, b, pairs[shown], rtol, atol)
        if isinstance(result, CompareError):
            raise result
        statuses[shown] = result["status"]
        return self._finish(result, pairs, statuses, unpaired, call_notes)

    def _finish(self, result: dict, pairs, statuses, unpaired, call_notes) -> dict:
        a, b = self.a, self.b
        result["calls"] = [
            {"function": f, "call": k, "execution_index_a": ia, "execution_index_b": ib, "status": status}
            for ((f, k), ia, ib), status in zip(pairs, statuses)
        ] + unpaired
        result["executions_compared"] = sum(1 for status in statuses if status is not None)
        result["executions_paired"] = len(pairs)
        result["notes"] = call_notes + result["notes"]
        if len(pairs) > _WALK_LIMIT and not _both_statistics(a, b):
            result["notes"].append(f"only the first {_WALK_LIMIT} of {len(pairs)} paired calls were checked (values)")
        result.update(
            run_a=a.run.path,
            run_b=b.run.path,
            mode_a=mode_name(a.mode),
            mode_b=mode_name(b.mode),
            rtol=self.rtol,
            atol=self.atol,
        )
        return result


def _both_statistics(a: _Side, b: _Side) -> bool:
    """Both runs hold statistics only (no values): every pair is judged from them in bulk."""
    return spec(a.mode).statistics and spec(b.mode).statistics


def _pair_statuses(a: _Side, b: _Side, pairs: list, rtol: float, atol: float) -> tuple[list, dict]:
    """Every pair's verdict (None: not checked), and the comparisons made on the way."""
    statuses: list[str | None] = [None] * len(pairs)
    results: dict[int, dict | CompareError] = {}
    if _both_statistics(a, b) and len(pairs) > 1:
        # Every pair's verdict in numpy; only the pair to show is read record by record.
        flags = _divergent_pairs(a, b, pairs, rtol, atol)
        return ["divergent" if flag else "within" for flag in flags.tolist()], results
    for i, pair in enumerate(pairs[:_WALK_LIMIT]):  # values on one side at least: such runs are small
        try:
            results[i] = _compare_pair(a, b, pair, rtol, atol)
            statuses[i] = results[i]["status"]
        except CompareError as error:
            results[i], statuses[i] = error, "cannot_compare"
    return statuses, results


def _compare_pair(a: _Side, b: _Side, pair, rtol: float, atol: float) -> dict:
    (function, call), index_a, index_b = pair
    tensors_a, tensors_b = a.tensors(index_a), b.tensors(index_b)
    by_key_b = {key: (op_id, trace) for key, op_id, trace in tensors_b}
    by_flow = _dataflow_matches(a, b, tensors_a, tensors_b, by_key_b)
    execution_a, execution_b = a.run.execution(_row(a.run, index_a)), b.run.execution(_row(b.run, index_b))
    rows = _input_rows(a, b, function, execution_a, execution_b, rtol, atol)  # function inputs first
    status_of_param = {position: r["status"] for position, r in enumerate(rows)}
    control_flow = _control_flow_notes(a, b, execution_a, execution_b)
    notes = _input_notes(b.run, execution_a, execution_b) + control_flow
    matched_b: set = set()
    status_of_op: dict[int, str] = {}
    for key, op_id, trace_a in tensors_a:
        found = by_key_b.get(key)
        by_dataflow = found is None and key in by_flow
        if by_dataflow:
            found = by_flow[key]  # no counterpart by identity (see _dataflow_matches)
        record = _op_row(a, b, key, op_id, trace_a, found, by_dataflow, bool(control_flow), rtol, atol)
        if found is not None:
            matched_b.add(key if not by_dataflow else (*b.ops[found[0]].key, found[1].output_slot))
        if record["status"] != "not_comparable":
            status_of_op[op_id] = record["status"]
        rows.append(record)
    first = _first_divergence(a.run, rows, status_of_op, status_of_param)
    compared = [r for r in rows if r["status"] != "not_comparable" and r["kind"] == "op"]
    if not compared:
        raise CompareError(
            f"no kernel output of {function} (call {call}) aligns between the runs: different models? "
            f"A has {len(tensors_a)} kernel outputs (e.g. {_examples(rows)}), B has {len(tensors_b)} "
            f"(e.g. {', '.join(describe_key(k[:-1]) for k, _, _ in tensors_b[:3]) or 'none'})"
        )
    divergent = [r for r in rows if r["status"] == "divergent"]
    only_b = len(by_key_b) - len(matched_b)
    unmatched_a = sum(1 for r in rows if r["kind"] == "op" and "op_id_b" not in r)
    if unmatched_a or only_b:
        notes.append(
            f"{len(compared)} kernel outputs aligned; {unmatched_a} in A and {only_b} in B have no counterpart "
            "(fusion merges ops: those are not comparable, not equal)"
        )
    if len(compared) < 0.5 * max(1, len(tensors_a)):
        notes.append("fewer than half of A's kernel outputs aligned: are these runs of the same model?")
    for r in rows:
        for field in ("max_abs_error", "max_rel_error", "cosine_similarity"):
            if field in r:
                r[field] = _clean(r[field])
    suggestion = _suggestion(rows, first)
    return {
        "status": "divergent" if divergent else "within",
        "first_divergence": first,
        "function": function,
        "call": call,
        "execution_index_a": index_a,
        "execution_index_b": index_b,
        "ops": rows,
        "matched": {
            "aligned": len(compared),
            "a_only": unmatched_a,
            "b_only": only_b,
            "divergent": len(divergent),
            "inputs": sum(1 for r in rows if r["kind"] == "input"),
        },
        "notes": notes,
        "suggestion": suggestion,
    }


def _input_rows(a: _Side, b: _Side, function: str, execution_a, execution_b, rtol: float, atol: float) -> list[dict]:
    """The records of the call's inputs, compared by position."""
    rows = []
    for position, summary_a in enumerate(execution_a.inputs):
        record = {"kind": "input", "key": f"{function}:input {position}", "op_type": "input", "location": None}
        record.update(op_name_a=f"input {position}", op_name_b=f"input {position}", output_slot=0)
        if position < len(execution_b.inputs):
            sa, sb = errors.summary(a.mode, summary_a), errors.summary(b.mode, execution_b.inputs[position])
            record.update(
                errors.verdict(sa, sb, rtol, atol), stats_a=_public_stats(sa[0]), stats_b=_public_stats(sb[0])
            )
        else:
            record.update(
                status="not_comparable",
                reason="run B's call has no input at this position (parameters lifted to inputs on one side only?)",
            )
        rows.append(record)
    return rows


def _op_row(a: _Side, b: _Side, key, op_id, trace_a, found, by_dataflow: bool, control_flow: bool, rtol, atol) -> dict:
    """The record of one kernel output of A and its counterpart in B (found: (op id, trace)
    or None)."""
    identity: OpIdentity = a.ops[op_id]
    record = {
        "kind": "op",
        "key": describe_key(key[:-1]),
        "op_type": identity.op_type or trace_a.kernel,
        "location": identity.location,
        "op_id_a": op_id,
        "op_name_a": identity.op_name,
        "kernel_a": identity.kernel,
        "fused_ops_a": list(identity.fused_ops),
        "output_slot": key[-1],
        "trace_index_a": int(trace_a.index),
    }
    if by_dataflow:
        record["aligned_by"] = "dataflow"
    if found is None:
        why = "no counterpart in run B (fused away or absent"
        why += ", or inside control flow that the reference ran as one node: see notes)" if control_flow else ")"
        record.update(status="not_comparable", reason=why)
        return record
    op_id_b, trace_b = found
    identity_b = b.ops[op_id_b]
    record.update(op_id_b=op_id_b, op_name_b=identity_b.op_name, kernel_b=identity_b.kernel)
    record["trace_index_b"] = int(trace_b.index)
    if record["location"] is None:
        record["location"] = identity_b.location
    sa, sb = errors.summary(a.mode, trace_a), errors.summary(b.mode, trace_b)
    if identity.key[1:2] == (NODE,) and _reshaped(sa[1], sb[1]):
        # A model node whose last ops are views (reshapes) has its values in the kernel
        # before them: the same elements in the same order.
        sa = (sa[0], sa[1].reshape(sb[1].shape), sa[2])
    record.update(errors.verdict(sa, sb, rtol, atol), stats_a=_public_stats(sa[0]), stats_b=_public_stats(sb[0]))
    return record


def _divergent_pairs(a: _Side, b: _Side, pairs: list, rtol: float, atol: float) -> np.ndarray:
    """Per call pair, whether an aligned kernel output is beyond tolerance (from the
    statistics of all traces at once, bulk.py)."""
    keys: dict[tuple, int] = {}
    kids = [
        {op_id: keys.setdefault(identity.key, len(keys)) for op_id, identity in side.ops.items()} for side in (a, b)
    ]
    composite = []
    for side, column, kid_of in ((a, 1, kids[0]), (b, 2, kids[1])):
        digests = side.digests
        # Look-up tables indexed by op id and execution index (no sort of a million rows).
        kid = _lookup(kid_of, digests["op_id"])
        pair = _lookup({int(p[column]): i for i, p in enumerate(pairs)}, digests["execution_index"])
        usable = (kid >= 0) & (pair >= 0) & (digests["output_slot"] < 4096) & ((digests["flags"] & 1) == 0)
        code = (pair * (len(keys) + 1) + kid) * 4096 + digests["output_slot"]
        composite.append((np.where(usable, code, -1), digests["offset"], pair))
    (code_a, offset_a, pair_a), (code_b, offset_b, _) = composite
    flags = np.zeros(len(pairs), dtype=bool)
    if not len(code_b) or not len(code_a):
        return flags
    order_b = np.argsort(code_b, kind="stable")
    at = np.searchsorted(code_b[order_b], code_a)
    at = np.minimum(at, len(order_b) - 1)
    matched = (code_a >= 0) & (len(order_b) > 0) & (code_b[order_b][at] == code_a)
    rows_a = np.flatnonzero(matched)
    rows_b = order_b[at[matched]]
    reference = bulk.stats_matrix(b.run, offset_b[rows_b])
    del order_b, at, code_b, offset_b, rows_b
    for positions, rows in bulk.iter_stats(a.run, offset_a[rows_a]):  # A chunk by chunk: bounded memory
        diverge = bulk.divergent(rows, reference[positions], rtol, atol)
        if diverge.any():
            flags[pair_a[rows_a[positions[diverge]]]] = True
    return flags


def _lookup(table: dict[int, int], keys: np.ndarray) -> np.ndarray:
    """table's value for each of keys, -1 where it has none: through an array indexed by key
    when the keys are dense (no sort of a million rows), else by sorting them."""
    if not len(keys):
        return np.full(0, -1, dtype=np.int64)
    low, high = int(keys.min()), int(keys.max())
    if low < 0 or high > 4 * len(keys) + (1 << 20):  # sparse (or damaged) keys
        unique, inverse = np.unique(keys, return_inverse=True)
        return np.array([table.get(int(k), -1) for k in unique], dtype=np.int64)[inverse]
    lut = np.full(high + 1, -1, dtype=np.int64)
    for key, value in table.items():
        if 0 <= key <= high:
            lut[key] = value
    return lut[keys]


def _reshaped(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return a is not None and b is not None and a.shape != b.shape and a.size == b.size


def _dataflow_matches(a: _Side, b: _Side, tensors_a: list, tensors_b: list, by_key_b: dict) -> dict:
    """Second-chance alignment of kernel outputs that have no counterpart by identity (a
    custom converter or kernel swapped in; ops without lines): by their place in the
    dataflow. An unpaired output's frontier is what it reads, looking through unpaired ops,
    up to the function's inputs and the outputs aligned by identity. Among the unpaired
    outputs with one frontier, dtype and shape, those no other of them reads are the ends of
    that piece of the graph; when each run has exactly one such end, the two pair (records
    say `aligned_by: "dataflow"`). Never by line: two ops at one line can compute anything."""
    aligned = {key[:-1] for key, _, _ in tensors_a if key in by_key_b}
    keys_a = {key for key, _, _ in tensors_a}

    def ends(side: _Side, tensors: list, unpaired) -> dict:
        frontier = _Frontier(side, aligned)
        groups: dict[tuple, list] = defaultdict(list)
        members = [(key, op_id, trace) for key, op_id, trace in tensors if unpaired(key)]
        fronts = {op_id: frontier.of(op_id) for _, op_id, _ in members}
        for key, op_id, trace in members:
            front = fronts[op_id]
            if not front:
                continue
            readers = frontier.readers(op_id)
            if any(fronts.get(reader) == front for reader in readers):
                continue  # read by another unpaired op of the same piece: not its end
            groups[(front, trace.dtype, tuple(trace.shape), key[-1])].append((key, op_id, trace))
        return groups

    # An op inside a model node (a converter's intermediate value) has its identity, and a
    # reference records node outputs only: it has no counterpart to find by its place.
    def inside_a_node(key) -> bool:
        return key[1:2] == (NODE,) and len(key) > 4

    groups_a = ends(a, tensors_a, lambda key: key not in by_key_b and not inside_a_node(key))
    groups_b = ends(b, tensors_b, lambda key: key not in keys_a and not inside_a_node(key))
    out = {}
    for group, members in groups_a.items():
        others = groups_b.get(group, [])
        if len(members) == 1 and len(others) == 1:
            out[members[0][0]] = (others[0][1], others[0][2])
    return out


class _Frontier:
    """What the ops of one run read, up to the function's inputs and the ops aligned by
    identity (keys without the output slot)."""

    def __init__(self, side: _Side, aligned: set):
        self.side, self.aligned = side, aligned
        self._memo: dict[int, frozenset] = {}
        self._readers: dict[int, list[int]] | None = None

    def _op(self, op_id: int):
        try:
            return self.side.run.op(op_id)
        except (KeyError, LookupError):
            return None

    def of(self, op_id: int) -> frozenset:
        found = self._memo.get(op_id)
        if found is not None:
            return found
        self._memo[op_id] = frozenset()  # a dataflow graph has no cycles; guard anyway
        anchors: set = set()
        op = self._op(op_id)
        for inp in op.inputs if op is not None else ():
            if inp.kind == pb.OpInput.PARAM:
                anchors.add(("input", inp.param_index, inp.tuple_item if inp.HasField("tuple_item") else -1))
            elif inp.kind == pb.OpInput.OP_OUTPUT:
                identity = self.side.ops.get(inp.producer_op_id)
                if identity is not None and identity.key in self.aligned:
                    anchors.add(("op", identity.key, inp.producer_output_slot))
                else:
                    anchors |= self.of(inp.producer_op_id)
        found = self._memo[op_id] = frozenset(anchors)
        return found

    def readers(self, op_id: int) -> list[int]:
        if self._readers is None:
            self._readers = defaultdict(list)
            for graph in self.side.run.graphs():
                for op in self.side.run.ops(graph.graph_id):
                    for inp in op.inputs:
                        if inp.kind == pb.OpInput.OP_OUTPUT:
                            self._readers[inp.producer_op_id].append(op.op_id)
        return self._readers.get(op_id, [])


def _graph_of(run: RunReader, execution) -> pb.DebuggedGraph | None:
    try:
        return run.graph(execution.graph_id)
    except (KeyError, LookupError):
        return None


def _input_notes(run_b: RunReader, execution_a, execution_b) -> list[str]:
    """Inputs of B's call beyond A's: said, not silently dropped (a PyTorch reference records
    the lifted parameters after the user inputs; a model imported without
    keep_params_as_input holds them as constants)."""
    extra = len(execution_b.inputs) - len(execution_a.inputs)
    if extra <= 0:
        return []
    graph = _graph_of(run_b, execution_b)
    names = list(graph.param_names[len(execution_a.inputs) :]) if graph is not None else []
    listed = f" ({', '.join(names[:8])}{', ...' if len(names) > 8 else ''})" if names else ""
    return [
        f"run B's call has {extra} more inputs than A's{listed}: not compared (parameters lifted to inputs in B "
        "are constants in A; import with from_exported_program(keep_params_as_input=True) to compare them)"
    ]


def _control_flow_notes(a: _Side, b: _Side, execution_a, execution_b) -> list[str]:
    """A reference graph's note on control flow (record_torch_reference writes it): the ops
    inside branches and loop bodies have no reference value."""
    out = []
    for side, execution in ((a, execution_a), (b, execution_b)):
        graph = _graph_of(side.run, execution)
        if graph is not None and layout.is_control_flow_note(graph.note):
            out.append(f"run {side.label}: {graph.note}")
    return out


def _examples(rows: list[dict]) -> str:
    return ", ".join(r["key"] for r in rows if r["kind"] == "op")[:300] or "none"


def _row(run: RunReader, execution_index: int) -> int:
    """Position of an execution in the run's execution digests."""
    positions = np.flatnonzero(run.execution_digests()["index"] == execution_index)
    return int(positions[0])


def _first_divergence(run: RunReader, rows: list[dict], status_of_op: dict, status_of_param: dict) -> dict | None:
    """The first divergent record whose inputs were all within tolerance (looking through
    ops without a counterpart to the compared ops they read)."""
    tainted_memo: dict[int, bool] = {}

    def reads_divergent(op_id: int, depth: int = 0) -> bool:
        try:
            op = run.op(op_id)
        except (KeyError, LookupError):
            return False
        for inp in op.inputs:
            if inp.kind == pb.OpInput.PARAM and status_of_param.get(inp.param_index) == "divergent":
                return True
            if inp.kind == pb.OpInput.OP_OUTPUT and tainted(inp.producer_op_id, depth + 1):
                return True
        return False

    def tainted(op_id: int, depth: int) -> bool:
        if op_id in status_of_op:
            return status_of_op[op_id] == "divergent"
        if op_id not in tainted_memo:
            tainted_memo[op_id] = False  # cycles cannot happen in a dataflow graph; guard anyway
            tainted_memo[op_id] = depth < 10_000 and reads_divergent(op_id, depth)
        return tainted_memo[op_id]

    for record in rows:
        if record["status"] != "divergent":
            continue
        if record["kind"] == "input" or not reads_divergent(record["op_id_a"]):
            record["origin"] = True
            return record
    return None


def _suggestion(rows: list[dict], first: dict | None) -> str | None:
    """When statistics decided, what would decide better: a FULL_TENSOR re-dump of suspects."""
    stats_within = [r for r in rows if r.get("basis") == "stats" and r["status"] == "within" and r["kind"] == "op"]
    if not stats_within:
        return None
    suspects = sorted(
        stats_within, key=lambda r: -(r.get("max_abs_error") or 0.0) / max(r.get("tolerance") or 1e-300, 1e-300)
    )[:5]
    if first is not None and first["kind"] == "op":  # inputs are dumped whatever op_regex says
        suspects = [first, *[r for r in suspects if r is not first]][:5]
    names = sorted({r["op_name_a"] for r in suspects})
    regex = "^(" + "|".join(names) + ")$"
    return (
        f"{len(stats_within)} ops agree by statistics only (a lower bound of the error; equal statistics can hide "
        f"different values). To compare their values, re-run both with "
        f"tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode='FULL_TENSOR', op_regex={regex!r}) "
        "and compare again."
    )
