"""TFRecord framing with a C CRC32C.

Each record is `uint64 length | uint32 masked_crc(length) | data | uint32 masked_crc(data)`,
little-endian: the framing TensorFlow and TensorBoard use, so standard tools read our files.
TensorBoard's own writer computes CRC32C in pure Python (~3 MB/s); google-crc32c is C.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import google_crc32c

HEADER_SIZE = 12  # length (8) + its CRC (4)
FOOTER_SIZE = 4
_MASK_DELTA = 0xA282EAD8
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_crc = google_crc32c.value


def masked_crc32c(data: bytes) -> int:
    """The CRC32C of data, masked as TFRecord specifies (so CRCs of CRCs stay distinct)."""
    crc = _crc(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


# Record headers by data length: a header depends on the length only, and most records of a
# stream have one of a few lengths, so this saves a CRC per record.
_HEADERS: dict[int, bytes] = {}


def encode(data: bytes) -> bytes:
    """Frames one serialized message as a record."""
    header = _HEADERS.get(len(data))
    if header is None:
        length = _U64.pack(len(data))
        header = length + _U32.pack(masked_crc32c(length))
        if len(_HEADERS) < 65536:
            _HEADERS[len(data)] = header
    return header + data + _U32.pack(masked_crc32c(data))


def encode_all(datas: list[bytes]) -> list[bytes]:
    """Frames many serialized messages (the instrumentation's batches): encode() with its
    lookups and the CRC mask inlined (fewer Python steps per record)."""
    get, crc, pack = _HEADERS.get, _crc, _U32.pack
    out = []
    for data in datas:
        header = get(len(data))
        if header is None:
            out.append(encode(data))
            continue
        c = crc(data)
        out.append(b"".join((header, data, pack((((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF))))
    return out


@dataclass(frozen=True)
class Corruption:
    """A damaged stretch of a record file: where it starts, how long, and why. misplaced: a
    whole record (or places) out of its run's order (events/integrity.py), skipped (not
    read) unless kept; executions: the [first, last] execution indices it concerns, when
    known from the records themselves."""

    path: str
    offset: int
    length: int
    reason: str
    misplaced: bool = False
    kept: bool = False
    executions: tuple[int, int] | None = None

    def __str__(self) -> str:
        if self.misplaced:
            skipped = f"; skipped {self.length} bytes" if self.length > 0 and not self.kept else ""
            return f"{self.path}: {self.reason} at byte {self.offset}{skipped}"
        skipped = f"skipped {self.length} bytes" if self.length >= 0 else "no valid record after it yet"
        return f"{self.path}: corrupt record at byte {self.offset} ({self.reason}); {skipped}"


def scan(buf: bytes, base_offset: int, path: str, final: bool = False) -> Iterator[tuple[int, int, int] | Corruption]:
    """Walks the records in buf, which starts at file offset base_offset.

    Yields (file_offset, data_start, data_len) per good record (data_start indexes buf) and a
    Corruption per damaged stretch, after which it resynchronises on the next valid record.
    Stops before an incomplete record at the end: the caller resumes after the last item
    yielded once more bytes arrive (a live writer). Damage with no valid record after it yields
    a Corruption of length -1 and is not consumed (the writer may still be mid-record there),
    unless final is set: then it spans to the end of buf.
    """
    pos, end = 0, len(buf)
    while end - pos >= HEADER_SIZE:
        header = buf[pos : pos + 8]
        (length,) = _U64.unpack(header)
        if _U32.unpack_from(buf, pos + 8)[0] != masked_crc32c(header):
            nxt = _resync(buf, pos + 1)
            if nxt is None:
                yield Corruption(path, base_offset + pos, end - pos if final else -1, "bad length CRC")
                return
            yield Corruption(path, base_offset + pos, nxt - pos, "bad length CRC")
            pos = nxt
            continue
        stop = pos + HEADER_SIZE + length + FOOTER_SIZE
        if stop > end:
            return  # truncated tail: wait for the rest
        data = buf[pos + HEADER_SIZE : stop - FOOTER_SIZE]
        if _U32.unpack_from(buf, stop - FOOTER_SIZE)[0] != masked_crc32c(data):
            yield Corruption(path, base_offset + pos, stop - pos, "bad data CRC")
        else:
            yield base_offset + pos, pos + HEADER_SIZE, length
        pos = stop


def intact(header: bytes, data: bytes, footer: bytes) -> bool:
    """Whether a record read in its three parts is whole: both CRCs hold and data has the
    length the header declares (no copy of data is made)."""
    return (
        len(header) == HEADER_SIZE
        and len(footer) == FOOTER_SIZE
        and _U64.unpack_from(header)[0] == len(data)
        and _U32.unpack_from(header, 8)[0] == masked_crc32c(header[:8])
        and _U32.unpack(footer)[0] == masked_crc32c(data)
    )


CHECK_CHUNK = 4 << 20  # bytes of a large record's data held at once while its CRC is taken
MAX_RECORD_BYTES = (2 << 30) - 1  # protobuf serialises no message larger: no writer made a longer record

WHOLE, CUT, TOO_LARGE, BAD_LENGTH, BAD_DATA = "whole", "cut", "too large", "bad length CRC", "bad data CRC"

Holes = Callable[[int, int], Iterator[tuple[int, int]]]
"""holes(start, stop) yields the [begin, end) stretches of [start, stop) that a sparse file
does not hold (they read as zeros)."""


def check_record(
    read: Callable[[int, int], bytes], offset: int, size: int, holes: Holes | None = None
) -> tuple[str, int]:
    """(state, data length) of the record at `offset` of a file of `size` bytes, read with
    read(offset, n): WHOLE (both CRCs hold), CUT (its length goes past the file's end),
    TOO_LARGE (longer than any record a writer can make), BAD_LENGTH or BAD_DATA.

    What a header declares is believed only as far as the file reaches, and the data's CRC is
    taken CHECK_CHUNK bytes at a time, the holes of a sparse file (`holes`) by arithmetic
    without reading them: checking a record costs one chunk of memory, and time for the bytes
    the file really holds, whatever length it declares (a damaged or hostile header saying
    2**63, a sparse file of zeros). Only a record known whole is ever read whole."""
    header = read(offset, HEADER_SIZE)
    if len(header) < HEADER_SIZE:
        return CUT, 0
    (length,) = _U64.unpack_from(header)
    if _U32.unpack_from(header, 8)[0] != masked_crc32c(header[:8]):
        return BAD_LENGTH, length
    if offset + HEADER_SIZE + length + FOOTER_SIZE > size:
        return CUT, length
    if length > MAX_RECORD_BYTES:
        return TOO_LARGE, length
    crc, start, stop = 0, offset + HEADER_SIZE, offset + HEADER_SIZE + length
    for begin, end in [*(holes(start, stop) if holes is not None else ()), (stop, stop)]:
        while start < begin:
            block = read(start, min(CHECK_CHUNK, begin - start))
            if not block:
                return CUT, length  # the file shrank meanwhile
            crc = google_crc32c.extend(crc, block)
            start += len(block)
        crc, start = extend_zeros(crc, end - begin), max(start, end)
    footer = read(stop, FOOTER_SIZE)
    if len(footer) < FOOTER_SIZE:
        return CUT, length
    masked = (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
    return (WHOLE if _U32.unpack(footer)[0] == masked else BAD_DATA), length


def _gf2_times(matrix: list[int], vector: int) -> int:
    out, row = 0, 0
    while vector:
        if vector & 1:
            out ^= matrix[row]
        vector >>= 1
        row += 1
    return out


def _zero_operators() -> list[list[int]]:
    """The CRC32C register's change over 2**k zero bytes, k = 0..63, as GF(2) matrices (the
    method of zlib's crc32_combine): google_crc32c can extend a CRC only by bytes it is given."""
    bit = [0x82F63B78] + [1 << k for k in range(31)]  # one zero bit, reflected polynomial
    square = bit
    for _ in range(3):
        square = [_gf2_times(square, column) for column in square]
    operators = [square]
    for _ in range(63):
        square = [_gf2_times(square, column) for column in square]
        operators.append(square)
    return operators


_ZERO_OPERATORS: list[list[int]] = []


def extend_zeros(crc: int, count: int) -> int:
    """google_crc32c.extend(crc, bytes(count)) without the bytes: O(log count)."""
    if count <= 0:
        return crc
    if not _ZERO_OPERATORS:
        _ZERO_OPERATORS.extend(_zero_operators())
    register, k = crc ^ 0xFFFFFFFF, 0
    while count:
        if count & 1:
            register = _gf2_times(_ZERO_OPERATORS[k], register)
        count >>= 1
        k += 1
    return register ^ 0xFFFFFFFF


def _resync(buf: bytes, start: int) -> int | None:
    """The first position at or after start where a whole valid record begins, if any."""
    end = len(buf)
    for pos in header_candidates(buf, start, end):
        (length,) = _U64.unpack_from(buf, pos)
        stop = pos + HEADER_SIZE + length + FOOTER_SIZE
        if _U32.unpack_from(buf, stop - FOOTER_SIZE)[0] == masked_crc32c(buf[pos + HEADER_SIZE : stop - FOOTER_SIZE]):
            return pos
    return None


def header_candidates(buf: bytes, start: int, room: int) -> list[int]:
    """Positions p >= start in buf, ascending, holding a valid record header whose record
    fits in `room` bytes from buf[0] (so may end beyond buf). Vectorised: a 4 MB stretch of
    garbage or zeros (a power loss) is searched in tens of milliseconds, not a CRC per byte.
    Cheap tests go first (a length's high word beyond the room: most garbage; a zero
    length without the CRC of zero: zeros), so few positions are left for the CRCs."""
    import numpy as np

    count = len(buf) - HEADER_SIZE + 1 - start
    if count <= 0:
        return []
    b = np.frombuffer(buf, dtype=np.uint8)
    words = np.ndarray(shape=(len(b) - 3,), dtype="<u4", buffer=b, strides=(1,))  # a u32 at each byte
    low, high = words[start : start + count], words[start + 4 : start + 4 + count]
    keep = (low != 0) | (high != 0) | (words[start + 8 : start + 8 + count] == _ZERO_LENGTH_CRC)
    keep &= high <= max(room - start, 0) >> 32
    positions = np.flatnonzero(keep) + start
    lengths = (high[positions - start].astype(np.uint64) << np.uint64(32)) | low[positions - start]
    fits = lengths <= np.clip(room - positions - HEADER_SIZE - FOOTER_SIZE, 0, None).astype(np.uint64)
    positions, lengths = positions[fits], lengths[fits]
    if not len(positions):
        return []
    values, inverse = np.unique(lengths, return_inverse=True)
    expected = np.array([masked_crc32c(_U64.pack(int(v))) for v in values.tolist()], dtype=np.uint32)
    return positions[expected[inverse] == words[positions + 8]].tolist()


_ZERO_LENGTH_CRC = masked_crc32c(bytes(8))
