"""A health-mode Execution's bytes from the summary rows in a few numpy operations.

The compiled fast path's Execution in CURT_HEALTH, CONCISE_HEALTH and FULL_HEALTH is, for
a fully static function, the same bytes on every call except the packed debug_values of
each input and output summary (and of each tuple's totals): every length is fixed because
each debug_values holds a fixed number of doubles. So the constant bytes are kept once as
a uint8 buffer with the byte positions of each summary's values; a call computes every
summary's values at once (counts of a tensor and a tuple's totals are the same linear map
of its rows' counts: a selection matrix product) and scatters them into a copy of the
buffer. This replaces a Python loop step per summary (a training step's optimizer call has
dozens), and writes byte for byte what fast_tracer._summary_body and
_tuple_body write (tests/test_execution_template.py compares them). With native_rows
loaded the same template is filled in C++ (summaries), without numpy's cost per operation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tvmdbg_tb.capture.kernel_source import ROW_WIDTH
from tvmdbg_tb.events import modes
from tvmdbg_tb.events.modes import Counts
from tvmdbg_tb.events.summaries import dtype_code
from tvmdbg_tb.events.wire import varint
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing import native_rows

# Columns 1..7 of a summary row (compiled.py's layout): size, lt0, gt0, eq0, -inf, +inf, rank.
_SIZE, _LT, _GT, _EQ, _NEG_INF, _POS_INF, _RANK = range(7)
_COUNT_COLUMNS = slice(1, 8)


_NAN = {_SIZE: 1, _LT: -1, _GT: -1, _EQ: -1}
# Each debug_value of the health layouts (modes.py) as a combination of a row's count
# columns (compiled.row_values); device_id and dtype are constants, not counts.
_COLUMNS = {
    "device_id": {},
    "dtype": {},
    "rank": {_RANK: 1},
    "size": {_SIZE: 1},
    "neg_inf": {_NEG_INF: 1},
    "pos_inf": {_POS_INF: 1},
    "nan": _NAN,
    "negative": {_LT: 1, _NEG_INF: -1},
    "zero": {_EQ: 1},
    "positive": {_GT: 1, _POS_INF: -1},
    "has_inf_or_nan": {**_NAN, _NEG_INF: 1, _POS_INF: 1},  # the non-finite total, compared with 0 after
}


def _linear_map(mode: int) -> np.ndarray:
    """(7, k): each of the mode's debug_values as a combination of a row's count columns."""
    columns = [_COLUMNS[name] for name in modes.spec(mode).layout]
    out = np.zeros((7, len(columns)))
    for k, column in enumerate(columns):
        for row, weight in column.items():
            out[row, k] = weight
    return out


_OUTPUTS_TAG = bytes([6 << 3 | 2])  # Execution.outputs


class ExecutionTemplate:
    """The constant bytes of one function's health-mode Execution (header, tags, lengths,
    dtypes and shapes) and where each summary's values go; fill() writes one call's."""

    __slots__ = ("rows", "select", "linear", "keep", "constant", "curt", "full", "buffer", "positions", "native")

    def __init__(self, mode: int, header: bytes, parts: list[tuple]):
        """parts: fast_tracer's (field tag, buffer row or tuple of rows, dtype or items,
        serialized dtype and shape) of each input and output, in Execution order; a row of
        None: a constant summary, its serialized bytes last (an object's, weights summarised
        once per value: call_plans.py); a tuple's may end with the bytes closing its summary
        (with_reused)."""
        if not modes.spec(mode).health:
            raise ValueError(f"no Execution template in mode {mode}")
        layout = modes.spec(mode).layout
        self.curt, self.full = modes.spec(mode).counts is Counts.ANY, "dtype" in layout
        self.linear = _linear_map(mode)
        width = self.linear.shape[1]
        values_field = b"\x0a" + varint(8 * width)  # TensorSummary.debug_values, packed
        rows: list[int] = []
        # (rows' positions, dtype code, a tuple's totals, an output's own summary)
        blocks: list[tuple[list[int], float, bool, bool]] = []
        pieces: list[bytes | int] = [header]  # bytes, or the index of a block of values

        def value_block(positions: list[int], code: float, totals: bool, output: bool) -> list[bytes | int]:
            blocks.append((positions, code, totals, output))
            return [values_field, len(blocks) - 1]

        for tag, row, dtype, spec, *closing in parts:
            output = tag == _OUTPUTS_TAG
            if row is None:
                pieces += [tag + varint(len(spec)), spec]
                continue
            if isinstance(row, tuple):  # summary.tuple_summary's layout: totals, dtype and shape, items
                if not row:
                    raise ValueError("an empty tuple has no totals")
                codes = {dtype_code(item_dtype) for item_dtype, _ in dtype}
                code = codes.pop() if len(codes) == 1 else pb.DTYPE_UNKNOWN
                first = len(rows)
                body = [*value_block(list(range(first, first + len(row))), code, True, output), spec]
                rows.extend(row)
                for k, (item_dtype, item_spec) in enumerate(dtype):
                    blocks.append(([first + k], dtype_code(item_dtype), False, False))
                    item = [values_field, len(blocks) - 1, item_spec]
                    body += [b"\xc2\x02" + varint(_length(item, width)), *item]  # TensorSummary.items
                body += closing
            else:
                rows.append(row)
                body = [*value_block([len(rows) - 1], dtype_code(dtype), False, output), spec]
            pieces += [tag + varint(_length(body, width)), *body]
        self.rows = np.array(rows, np.intp)
        self.select = np.zeros((len(blocks), len(rows)))
        self.keep = np.ones((len(blocks), width))
        self.constant = np.zeros((len(blocks), width))
        for b, (positions, code, totals, _) in enumerate(blocks):
            self.select[b, positions] = 1.0
            if self.full:
                self.constant[b, layout.index("dtype")] = code
                self.keep[b, layout.index("rank")] = 0.0 if totals else 1.0  # a tuple's rank is 0
        buffer, positions, offset = bytearray(), np.zeros((len(blocks), 8 * width), np.intp), 0
        for piece in pieces:
            if isinstance(piece, int):
                positions[piece] = np.arange(offset, offset + 8 * width)
                buffer += bytes(8 * width)
                offset += 8 * width
            else:
                buffer += piece
                offset += len(piece)
        self.buffer = np.frombuffer(bytes(buffer), np.uint8)
        self.positions = positions.ravel()
        # native_rows.summaries' arguments: the buffer, each block's offset, its rows (as
        # buffer rows, a block's run of members), dtype code and flags (1: a tuple's totals,
        # 2: an output's own summary, whose NaN/Inf the writer counts).
        starts = np.cumsum([0] + [len(block[0]) for block in blocks])
        self.native = (
            bytes(buffer),
            positions[:, 0].astype(np.uint32).tobytes(),
            starts.astype(np.uint32).tobytes(),
            self.rows[[p for block in blocks for p in block[0]]].astype(np.uint32).tobytes(),
            np.array([block[1] for block in blocks], np.float64).tobytes(),
            bytes(int(totals) | 2 * int(output) for _, _, totals, output in blocks),
            width,
        )

    def fill(self, array: np.ndarray) -> bytes | None:
        """The Execution's bytes (without its per-call fields) from one call's summary rows;
        None when a row was not written (a kernel that did not run)."""
        native = native_rows.LIBRARY.loaded()
        if native is not None:
            return native.summaries(*self.native, array, ROW_WIDTH)
        return self.fill_numpy(array)

    def fill_numpy(self, array: np.ndarray) -> bytes | None:
        """fill() in numpy: when native_rows is not loaded."""
        rows = array[self.rows]
        if np.count_nonzero(rows[:, 0]) < len(rows):  # cheaper than .all() (no ufunc reduction)
            return None
        values = self.select @ rows[:, _COUNT_COLUMNS] @ self.linear
        if self.curt:
            values = (values > 0).astype(np.float64)
        elif self.full:  # the dtype codes, and a tuple's rank 0
            values *= self.keep
            values += self.constant
        out = self.buffer.copy()
        out[self.positions] = values.view(np.uint8).ravel()
        return out.tobytes()


def reused_field(index: int) -> bytes:
    """TensorSummary.summarized_in_execution (field 70): where a repeated summary's counts
    were computed (param_cache.py)."""
    return b"\xb0\x04" + varint(index)


def with_reused(parts: list[tuple], reused: dict[int, int]) -> list[tuple]:
    """parts (ExecutionTemplate's) of a call whose buffer rows in reused repeat the counts of
    an earlier call (row -> its execution index): their summaries say so, as
    fast_tracer._summary_body and _tuple_body write it (a tuple: when all its tensors do,
    the earliest index, after its items)."""
    out = []
    for tag, row, dtype, spec in parts:
        if isinstance(row, tuple):
            items = [(d, s + reused_field(reused[r]) if r in reused else s) for (d, s), r in zip(dtype, row)]
            indices = [reused.get(r) for r in row]
            closing = reused_field(min(indices)) if all(i is not None for i in indices) else b""
            out.append((tag, row, items, spec, closing))
        elif row is not None and row in reused:
            out.append((tag, row, dtype, spec + reused_field(reused[row])))
        else:
            out.append((tag, row, dtype, spec))
    return out


def _length(pieces: list[Any], width: int) -> int:
    return sum(8 * width if isinstance(p, int) else len(p) for p in pieces)
