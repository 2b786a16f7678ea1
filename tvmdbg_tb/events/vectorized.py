"""Record scanning and trace digests without a Python object per record.

Indexing 1.5M traces one `DebugEvent.FromString` at a time costs seconds and a gigabyte of
short-lived objects. Here the TFRecord framing is walked in one tight loop (C CRC32C on each
record), and the few fields a digest needs are decoded from all records of a chunk at once
with numpy: the protobuf wire format walked field by field, one vector step per field for all
records together. Anything the fast path does not understand (a field with an unexpected wire
type, a FULL_TENSOR value, odd debug values) is flagged so the caller parses that record with
protobuf instead: the result is always what protobuf would give.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import google_crc32c
import numpy as np

from tvmdbg_tb.events import records
from tvmdbg_tb.events.digests import HAS_ERROR, HEALTH_KNOWN, INNER_NONFINITE, NONFINITE
from tvmdbg_tb.events.modes import MODES
from tvmdbg_tb.events.summaries import ANY_NONFINITE, NONFINITE_AT
from tvmdbg_tb.proto import debug_event_pb2 as pb

_U64 = struct.Struct("<Q").unpack_from
_U32 = struct.Struct("<I").unpack_from
_MASK_DELTA = 0xA282EAD8
PAD = 16  # zero bytes after a chunk so vector reads past a record's end stay in bounds
_MAX_STEPS = 4096  # fields walked in one message (an Execution's summaries are one field each)

_VALUE_MODES = [value for value, m in MODES.items() if m.values]  # counts from the stored tensor


def _crc32c_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0x82F63B78), table >> 1).astype(np.uint32)
    return table


_CRC_TABLE = _crc32c_table()


def _masked(crc: np.ndarray) -> np.ndarray:
    crc = crc.astype(np.uint64)
    return (
        (((crc >> np.uint64(15)) | (crc << np.uint64(17))) + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)
    ).astype(np.uint32)


def _header_crcs_ok(b: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Vectorised CRC32C check of the 8-byte length fields at pos (table-driven)."""
    crc = np.full(len(pos), 0xFFFFFFFF, dtype=np.uint32)
    for k in range(8):
        crc = _CRC_TABLE[(crc ^ b[pos + k]) & 0xFF] ^ (crc >> np.uint32(8))
    return _masked(crc ^ np.uint32(0xFFFFFFFF)) == _u32_at(b, pos + 8)


def _u32_at(b: np.ndarray, pos: np.ndarray) -> np.ndarray:
    view = np.ndarray(shape=(len(b) - 3,), dtype="<u4", buffer=b, strides=(1,))
    return view[pos]


def scan(buf: bytes, base_offset: int, path: str, b: np.ndarray | None = None):
    """Like records.scan over buf, returning arrays: (file offsets, data starts, data lengths,
    corruptions, bytes consumed).

    One tight loop follows the length fields and takes each record's data CRC32C (C); the
    CRCs are then compared, and the length fields' CRCs computed and compared, for all
    records at once. From the first record that fails (damage, or a record cut by the end of
    buf) on, records.scan decides. b: buf already padded (see `padded`), if at hand.
    """
    n = len(buf)
    pos = 0
    positions: list[int] = []
    add_position = positions.append
    overhead = records.HEADER_SIZE + records.FOOTER_SIZE
    while n - pos >= records.HEADER_SIZE:
        stop = pos + overhead + _U64(buf, pos)[0]
        if stop > n:
            break
        add_position(pos)
        pos = stop
    # The data CRCs, iterated in C (no Python bytecode per record).
    starts = np.array(positions, dtype=np.int64)
    stops = np.append(starts[1:], pos)
    data = map(slice, (starts + records.HEADER_SIZE).tolist(), (stops - records.FOOTER_SIZE).tolist())
    crcs = list(map(google_crc32c.value, map(buf.__getitem__, data)))
    if len(starts):
        b = padded(buf) if b is None else b
        good = _masked(np.array(crcs, dtype=np.uint32)) == _u32_at(b, stops - records.FOOTER_SIZE)
        good &= _header_crcs_ok(b, starts)
        if not good.all():
            first_bad = int(np.argmin(good))
            starts, stops = starts[:first_bad], stops[:first_bad]
            pos = int(stops[-1]) if len(stops) else 0
    data_starts = [starts + records.HEADER_SIZE]
    data_lengths = [stops - starts - records.HEADER_SIZE - records.FOOTER_SIZE]
    consumed = pos
    bad: list[records.Corruption] = []
    if n - pos >= records.HEADER_SIZE:
        more_starts, more_lengths = [], []
        for item in records.scan(buf[pos:], base_offset + pos, path):
            if isinstance(item, records.Corruption):
                bad.append(item)
                if item.length < 0:
                    break
                consumed = item.offset + item.length - base_offset
            else:
                offset, start, length = item
                more_starts.append(pos + start)
                more_lengths.append(length)
                consumed = pos + start + length + records.FOOTER_SIZE
        data_starts.append(np.array(more_starts, dtype=np.int64))
        data_lengths.append(np.array(more_lengths, dtype=np.int64))
    data_start = np.concatenate(data_starts)
    return data_start - records.HEADER_SIZE + base_offset, data_start, np.concatenate(data_lengths), bad, consumed


USABLE, CUT, DAMAGED = 0, 1, 2  # frames_at's states


def frames_at(b: np.ndarray, pos: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data starts, data lengths, state) of the records starting at pos in b (padded, `size`
    real bytes): USABLE, CUT (the record goes on past size) or DAMAGED (its length field's
    CRC fails). For records already verified when they were indexed: their data CRC is not
    taken again (scan()'s framing loop and CRCs cost as much as decoding the values)."""
    pos = np.asarray(pos, dtype=np.int64)
    header_in = pos + records.HEADER_SIZE <= size
    at = np.where(header_in, pos, 0)
    lengths = _fixed(b, at, "<u8").astype(np.int64)
    crc_ok = _header_crcs_ok(b, at)
    ends = at + records.HEADER_SIZE + lengths + records.FOOTER_SIZE
    state = np.where(~header_in, CUT, np.where(~crc_ok | (lengths < 0), DAMAGED, np.where(ends > size, CUT, USABLE)))
    return at + records.HEADER_SIZE, lengths, state


def padded(buf: bytes) -> np.ndarray:
    """buf as uint8 with PAD zero bytes after it."""
    out = np.zeros(len(buf) + PAD, dtype=np.uint8)
    out[: len(buf)] = np.frombuffer(buf, dtype=np.uint8)
    return out


def _varint(b: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value as int64, bytes used, malformed) of the varints at pos."""
    first = b[pos].astype(np.int64)
    value = first & 0x7F
    used = np.ones(len(pos), dtype=np.int64)
    bad = np.zeros(len(pos), dtype=bool)
    multi = np.flatnonzero(first >= 0x80)
    if len(multi):
        p = pos[multi]
        v = value[multi].astype(np.uint64)
        n = np.ones(len(multi), dtype=np.int64)
        more = np.ones(len(multi), dtype=bool)
        for k in range(1, 10):
            byte = b[np.minimum(p + k, len(b) - 1)].astype(np.uint64)
            v |= np.where(more, (byte & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
            n += more
            more &= byte >= 0x80
            if not more.any():
                break
        value[multi] = v.view(np.int64)
        used[multi] = n
        bad[multi] = more
    return value, used, bad


def _fixed(b: np.ndarray, pos: np.ndarray, dtype: str) -> np.ndarray:
    """The 8-byte little-endian values at byte positions pos (an unaligned strided view of b)."""
    view = np.ndarray(shape=(len(b) - 7,), dtype=dtype, buffer=b, strides=(1,))
    return view[pos]


def _doubles(b: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return _fixed(b, pos, "<f8")


def _walk(b: np.ndarray, cur: np.ndarray, end: np.ndarray, ok: np.ndarray, fields: dict) -> None:
    """Walks the messages [cur, end) of all records with ok set, one field per step.

    fields maps a field number to (wire type, callback): callback(rows, value) for varints,
    callback(rows, position) for fixed64, callback(rows, position, length) for length-delimited.
    Unknown fields are skipped; a known field with another wire type clears ok for its record,
    and so does a record with more than _MAX_STEPS fields: a step costs the same for one record
    as for thousands, and a record of millions of tiny fields (8 MiB of zeros with valid CRCs:
    2 bytes a field) would take hours here, not milliseconds in protobuf.
    """
    cur = cur.copy()
    active = np.flatnonzero(ok & (cur < end))
    for _ in range(_MAX_STEPS):
        if not len(active):
            return
        c = cur[active]
        first = b[c]
        counts = np.bincount(first, minlength=256)
        tags = np.flatnonzero(counts)
        if tags[-1] >= 0x80:  # a multi-byte tag (field number >= 16): the general step
            nxt, bad = _mixed_field(b, c, end[active], active, fields)
        elif len(tags) == 1:  # the common case: every record is at the same field
            nxt, bad = _uniform_field(b, c + 1, int(tags[0]), active, fields)
        else:  # a few groups (fields left out when zero): one uniform step per group
            nxt = np.empty(len(c), dtype=np.int64)
            bad = np.empty(len(c), dtype=bool)
            for tag in tags.tolist():
                group = np.flatnonzero(first == tag)
                nxt[group], bad[group] = _uniform_field(b, c[group] + 1, tag, active[group], fields)
        bad |= (nxt < 0) | (nxt > end[active])
        ok[active[bad]] = False
        cur[active] = nxt
        keep = ~bad & (nxt < end[active])
        active = active[keep]
    ok[active] = False  # more fields than any record of ours has: protobuf decides


def _uniform_field(b: np.ndarray, c: np.ndarray, tag: int, active: np.ndarray, fields: dict):
    """One step of _walk when all records are at the same field (tag already read)."""
    number, wire = tag >> 3, tag & 7
    bad = np.zeros(len(c), dtype=bool)
    if wire == 0:
        value, used, bad = _varint(b, c)
        nxt, payload = c + used, (value,)
    elif wire == 1:
        nxt, payload = c + 8, (c,)
    elif wire == 2:
        length, used, bad = _varint(b, c)
        bad |= length < 0
        start = c + used
        nxt, payload = start + length, (start, length)
    elif wire == 5:
        nxt, payload = c + 4, ()
    else:
        return np.full(len(c), -1, dtype=np.int64), np.ones(len(c), dtype=bool)
    spec = fields.get(number)
    if spec is not None:
        if spec[0] != wire:
            bad[:] = True
        else:
            sel = ~bad
            if sel.all():
                spec[1](active, *payload)
            elif sel.any():
                spec[1](active[sel], *(p[sel] for p in payload))
    return nxt, bad


def _mixed_field(b: np.ndarray, c: np.ndarray, end: np.ndarray, active: np.ndarray, fields: dict):
    """One step of _walk when records are at different fields."""
    tag, used, bad = _varint(b, c)
    c = c + used
    field, wire = tag >> 3, tag & 7
    nxt = np.full(len(c), -1, dtype=np.int64)
    values: dict[int, tuple] = {}
    i0 = np.flatnonzero(wire == 0)
    if len(i0):
        v, n, vb = _varint(b, c[i0])
        nxt[i0] = c[i0] + n
        bad[i0] |= vb
        values[0] = (i0, v)
    i1 = np.flatnonzero(wire == 1)
    nxt[i1] = c[i1] + 8
    values[1] = (i1, c[i1])
    i2 = np.flatnonzero(wire == 2)
    if len(i2):
        length, n, lb = _varint(b, c[i2])
        start = c[i2] + n
        nxt[i2] = start + length
        bad[i2] |= lb | (length < 0)
        values[2] = (i2, start, length)
    i5 = np.flatnonzero(wire == 5)
    nxt[i5] = c[i5] + 4
    bad |= (nxt < 0) | (nxt > end)
    for number, (wire_type, callback) in fields.items():
        hit = (field == number) & ~bad
        bad |= hit & (wire != wire_type)
        if wire_type not in values:
            continue
        idx, *payload = values[wire_type]
        sel = hit[idx] & (wire[idx] == wire_type)
        if sel.any():
            callback(active[idx[sel]], *(p[sel] for p in payload))
    return nxt, bad


def _health(b: np.ndarray, mode: np.ndarray, dv_start: np.ndarray, dv_len: np.ndarray, ok: np.ndarray):
    """(counts (nan, neg_inf, pos_inf; -1 unknown), known) of packed debug values, as
    summaries.nonfinite_counts computes them; clears ok where that would need protobuf."""
    n = len(mode)
    ok &= (dv_len % 8) == 0
    counts = np.full((n, 3), -1, dtype=np.int64)
    known = np.zeros(n, dtype=bool)
    # The values each counting mode needs, and the offsets (in doubles) of nan, neg_inf, pos_inf.
    for counting, (need, i_nan, i_neg, i_pos) in NONFINITE_AT.items():
        rows = np.flatnonzero(ok & (mode == counting) & (dv_len >= 8 * need))
        if len(rows):
            # describe() converts every value of the layout to int: a NaN anywhere means no counts.
            every = np.ndarray(shape=(len(b) - 8 * need + 1, need), dtype="<f8", buffer=b, strides=(1, 8))[
                dv_start[rows]
            ]
            got = every[:, [i_nan, i_neg, i_pos]]
            fine = np.isfinite(every).all(axis=1) & (np.abs(got) < 2.0**62).all(axis=1)
            ok[rows[~fine]] = False
            rows, got = rows[fine], got[fine]
            counts[rows] = got.astype(np.int64)
            known[rows] = True
    rows = np.flatnonzero(ok & np.isin(mode, ANY_NONFINITE) & (dv_len >= 8))
    if len(rows):
        counts[rows] = np.where(_doubles(b, dv_start[rows]) != 0, -1, 0)[:, None]
        known[rows] = True
    return counts, known


class _Envelopes(NamedTuple):
    """The DebugEvent fields around the submessage of each record (see _envelopes)."""

    wall: np.ndarray
    sub_start: np.ndarray
    sub_end: np.ndarray
    ok: np.ndarray
    run_key: np.ndarray  # uint64
    sequence: np.ndarray


def _envelopes(b: np.ndarray, starts: np.ndarray, lengths: np.ndarray, field: int) -> _Envelopes:
    """wall_time, submessage start and end, ok, run_key and sequence of DebugEvents holding
    `field`."""
    n = len(starts)
    ok = np.ones(n, dtype=bool)
    wall = np.zeros(n)
    sub_start = np.zeros(n, dtype=np.int64)
    sub_end = np.zeros(n, dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    run_key = np.zeros(n, dtype=np.uint64)
    sequence = np.zeros(n, dtype=np.int64)

    def on_wall(rows, pos):
        wall[rows] = _doubles(b, pos)

    def on_message(rows, start, length):
        ok[rows[seen[rows]]] = False  # a repeated submessage merges: leave it to protobuf
        seen[rows] = True
        sub_start[rows], sub_end[rows] = start, start + length

    def on_key(rows, pos):
        run_key[rows] = _fixed(b, pos, "<u8")

    def on_sequence(rows, value):
        sequence[rows] = value

    fields = {1: (1, on_wall), field: (2, on_message), 12: (1, on_key), 13: (0, on_sequence)}
    _walk(b, starts, starts + lengths, ok, fields)
    ok &= seen
    return _Envelopes(wall, sub_start, sub_end, ok, run_key, sequence)


def execution_digests(b: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
    """Digest columns of the Execution records at starts/lengths in b (padded): index,
    graph_id, wall_time, num_traces, duration_us, call_number, vm, flags, the function name's (start, length)
    in b, the envelope's run_key and sequence, and `ok` (False: parse that record with
    protobuf instead)."""
    envelopes = _envelopes(b, starts, lengths, 8)
    wall, sub_start, sub_end, ok = envelopes.wall, envelopes.sub_start, envelopes.sub_end, envelopes.ok
    n = len(starts)
    cols = {
        name: np.zeros(n, dtype=np.int64) for name in ("index", "graph_id", "mode", "num_traces", "call_number", "vm")
    }
    duration = np.zeros(n)
    name_start = np.zeros(n, dtype=np.int64)
    name_len = np.zeros(n, dtype=np.int64)
    error_len = np.zeros(n, dtype=np.int64)
    outputs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def setter(name):
        def set_column(rows, value):
            cols[name][rows] = value

        return set_column

    def on_name(rows, start, length):
        name_start[rows], name_len[rows] = start, length

    def on_duration(rows, pos):
        duration[rows] = _doubles(b, pos)

    def on_error(rows, start, length):
        error_len[rows] += length

    def on_output(rows, start, length):
        outputs.append((rows, start, start + length))

    numbers = pb.Execution.DESCRIPTOR.fields_by_name
    varints = ("index", "graph_id", "num_traces", "call_number", "vm")
    fields = {numbers[name].number: (0, setter(name)) for name in varints}
    fields[numbers["tensor_debug_mode"].number] = (0, setter("mode"))
    fields.update({2: (2, on_name), 6: (2, on_output), 7: (1, on_duration), 10: (2, on_error)})
    _walk(b, sub_start, sub_end, ok, fields)
    flags = np.where(error_len > 0, HAS_ERROR, 0)
    if outputs:
        owner = np.concatenate([o[0] for o in outputs])
        o_start = np.concatenate([o[1] for o in outputs])
        o_end = np.concatenate([o[2] for o in outputs])
        o_ok = ok[owner].copy()
        dv_start = np.zeros(len(owner), dtype=np.int64)
        dv_len = np.zeros(len(owner), dtype=np.int64)

        def on_values(rows, start, length):
            o_ok[rows[dv_len[rows] > 0]] = False
            dv_start[rows], dv_len[rows] = start, length

        _walk(b, o_start, o_end, o_ok, {1: (2, on_values)})
        counts, known = _health(b, cols["mode"][owner], dv_start, dv_len, o_ok)
        ok[owner[~o_ok]] = False
        any_known = np.bincount(owner[known], minlength=n) > 0
        any_bad = np.bincount(owner[known & (counts != 0).any(axis=1)], minlength=n) > 0
        flags = flags | np.where(any_known, HEALTH_KNOWN, 0) | np.where(any_bad, NONFINITE, 0)
    return {
        "index": cols["index"],
        "graph_id": cols["graph_id"],
        "wall_time": wall,
        "num_traces": cols["num_traces"],
        "duration_us": duration,
        "call_number": cols["call_number"],
        "vm": cols["vm"],
        "flags": flags.astype(np.uint8),
        "name_start": name_start,
        "name_len": name_len,
        "run_key": envelopes.run_key,
        "sequence": envelopes.sequence,
        "ok": ok,
    }


def trace_digests(b: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
    """Digest columns of the GraphExecutionTrace records at starts/lengths in b (padded).

    Returns index, op_id, execution_index, wall_time, nan, neg_inf, pos_inf, duration_us,
    output_slot, flags, the envelope's run_key, and `ok` (False: parse that record with
    protobuf instead).
    """
    envelopes = _envelopes(b, starts, lengths, 9)
    wall, sub_start, sub_end, ok = envelopes.wall, envelopes.sub_start, envelopes.sub_end, envelopes.ok
    n = len(starts)
    cols = {name: np.zeros(n, dtype=np.int64) for name in ("op_id", "execution_index", "index", "mode", "slot")}
    duration = np.zeros(n)
    dv_start = np.zeros(n, dtype=np.int64)
    dv_len = np.zeros(n, dtype=np.int64)
    error_len = np.zeros(n, dtype=np.int64)
    has_value = np.zeros(n, dtype=bool)
    has_inner = np.zeros(n, dtype=bool)

    def setter(name):
        def set_column(rows, value):
            cols[name][rows] = value

        return set_column

    def on_values(rows, start, length):
        ok[rows[dv_len[rows] > 0]] = False  # repeated packed runs concatenate: protobuf's job
        dv_start[rows], dv_len[rows] = start, length

    def on_index(rows, pos):
        cols["index"][rows] = _fixed(b, pos, "<i8")

    def on_duration(rows, pos):
        duration[rows] = _doubles(b, pos)

    def on_error(rows, start, length):
        error_len[rows] += length

    def on_value(rows, start, length):
        has_value[rows] = True

    def on_inner(rows, start, length):
        has_inner[rows] = True

    _walk(
        b,
        sub_start,
        sub_end,
        ok,
        {
            1: (0, setter("op_id")),
            2: (0, setter("slot")),
            3: (0, setter("execution_index")),
            7: (0, setter("mode")),
            8: (2, on_values),
            9: (2, on_value),
            11: (1, on_duration),
            12: (2, on_error),
            13: (1, on_index),  # sfixed64
            16: (2, on_inner),  # inner_nonfinite
        },
    )
    mode = cols["mode"]
    counts, known = _health(b, mode, dv_start, dv_len, ok)
    ok &= ~(np.isin(mode, _VALUE_MODES) & has_value)  # FULL_TENSOR counts come from the value: protobuf path
    flags = np.where(error_len > 0, HAS_ERROR, 0) | np.where(known, HEALTH_KNOWN, 0)
    flags |= np.where(known & (counts != 0).any(axis=1), NONFINITE, 0) | np.where(has_inner, INNER_NONFINITE, 0)
    return {
        "index": cols["index"],
        "op_id": cols["op_id"],
        "execution_index": cols["execution_index"],
        "wall_time": wall,
        "nan": counts[:, 0],
        "neg_inf": counts[:, 1],
        "pos_inf": counts[:, 2],
        "duration_us": duration,
        "output_slot": cols["slot"],
        "flags": flags.astype(np.uint8),
        "run_key": envelopes.run_key,
        "ok": ok,
    }


def trace_debug_values(b: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """The first `width` debug_values of each GraphExecutionTrace record at starts/lengths in b
    (padded), as an (n, width) float64 array; NaN rows where a record holds fewer values or
    needs protobuf (e.g. a repeated packed run). For bulk readers such as tvmdbg_tb.compare."""
    _, sub_start, sub_end, ok, _, _ = _envelopes(b, starts, lengths, 9)
    n = len(starts)
    dv_start = np.zeros(n, dtype=np.int64)
    dv_len = np.zeros(n, dtype=np.int64)

    def on_values(rows, start, length):
        ok[rows[dv_len[rows] > 0]] = False
        dv_start[rows], dv_len[rows] = start, length

    _walk(b, sub_start, sub_end, ok, {8: (2, on_values)})
    out = np.full((n, width), np.nan)
    rows = np.flatnonzero(ok & (dv_len >= 8 * width))
    if len(rows):
        every = np.ndarray(shape=(len(b) - 8 * width + 1, width), dtype="<f8", buffer=b, strides=(1, 8))
        out[rows] = every[dv_start[rows]]
    return out
