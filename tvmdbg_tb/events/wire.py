"""Protobuf wire-format pieces for code that appends raw fields to serialized messages
(the writer's trace fast path, the instrumentation's per-site trace templates)."""

from __future__ import annotations

_SMALL = [bytes((v,)) for v in range(128)] + [bytes(((v & 0x7F) | 0x80, v >> 7)) for v in range(128, 1 << 14)]


def varint(value: int) -> bytes:
    """The base-128 varint of a non-negative int (negative int64s: pass value & (2**64 - 1))."""
    if value < 16384:
        return _SMALL[value]
    if value < 1 << 21:  # execution indices of a long loop: no loop below
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
