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


def field_tag(message_type, field_name: str) -> bytes:
    """The wire tag of a field, from the message's descriptor (never written out by hand):
    field_tag(pb.Execution, "call_number") is field 41's varint tag, b"\\xc8\\x02"."""
    field = message_type.DESCRIPTOR.fields_by_name[field_name]
    wire_type = _WIRE_TYPES.get(field.type, 2)
    return varint(field.number << 3 | wire_type)


# FieldDescriptor types by wire type: varints (0), 64-bit (1), 32-bit (5); the rest are
# length-delimited (2).
_WIRE_TYPES = {
    **dict.fromkeys((3, 4, 5, 8, 13, 14, 17, 18), 0),  # int64 uint64 int32 bool uint32 enum sint32 sint64
    **dict.fromkeys((1, 6, 16), 1),  # double fixed64 sfixed64
    **dict.fromkeys((2, 7, 15), 5),  # float fixed32 sfixed32
}
