"""GraphOpCreation events composed from serialized pieces.

A build registers one op record per kernel call site: a thousand for a 1000-kernel function.
Built with the protobuf API, a record is mostly field sets and submessage copies, most of
them for pieces that repeat across sites (tensor specs, code locations, kernel names). Here each
piece is serialized once and a record is the join of its pieces, parsed once into its
DebugEvent for the sinks that read messages; the writer serializes that event again, so the
bytes on disk are protobuf's own, whatever order the pieces were joined in.
"""

from __future__ import annotations

from collections.abc import Callable

from tvmdbg_tb.capture import graphs
from tvmdbg_tb.events.wire import varint
from tvmdbg_tb.proto import debug_event_pb2 as pb

_MASK64 = (1 << 64) - 1
_OP_OUTPUT = pb.OpInput.OP_OUTPUT
_PARAM = pb.OpInput.PARAM
# Field keys ((number << 3) | wire type) of GraphOpCreation, OriginalOp and OpInput.
# As bytes where the caller joins them, as ints where _field or a cache adds the length.
_OP_ID, _GRAPH_ID, _OP_NAME, _KERNEL, _CALL_TYPE = b"\x08", b"\x10", b"\x1a", 0x22, 0x2A
_ORIGINAL_OP, _INPUT, _OUTPUT, _OUTPUT_NAME_KEY = b"\x32", b"\x3a", 0x42, 0x4A
_DEVICE, _POSITION, _CODE_LOCATION = b"\x52\x05cpu:0", b"\x58", b"\x62"
_ORIGIN_TYPE, _ORIGIN_VAR, _ORIGIN_LOCATION, _ORIGIN_REWRITTEN_BY = 0x0A, 0x12, b"\x1a", 0x22
_ORIGIN_NODE_OUTPUT = b"\x28\x01"  # node_output = true
_KIND, _NAME, _PRODUCER, _SLOT, _PARAM_INDEX, _SPEC = b"\x08", 0x12, b"\x18", b"\x20", b"\x28", 0x32
_TUPLE_ITEM = varint(40 << 3)
_INPUT_LITERAL = varint(41 << 3) + b"\x01"  # OpInput.nonfinite_literal = true
_ORIGIN_LITERAL = b"\x30\x01"  # OriginalOp.nonfinite_literal (field 6) = true
_EVENT_OP = b"\x3a"  # DebugEvent.graph_op_creation
_FUSED_MEMBER = varint(40 << 3 | 2)  # GraphOpCreation.fused_members
_MEMBER_LITERAL = b"\x18\x01"  # FusedMember.nonfinite_literal = true


_VARINTS = [varint(n) for n in range(1 << 14)]  # a list lookup instead of a call per field


def _int(value: int) -> bytes:
    """A varint field value (negative ints as protobuf writes them: 10 bytes)."""
    if 0 <= value < 16384:
        return _VARINTS[value]
    return varint(value if value >= 0 else value & _MASK64)


def _field(key: int, data: bytes) -> bytes:
    """A length-delimited field (key < 128)."""
    size = len(data)
    return _KEYS[key] + (_VARINTS[size] if size < 16384 else varint(size)) + data


def _length(data: bytes) -> bytes:
    size = len(data)
    return _VARINTS[size] if size < 16384 else varint(size)


_KEYS = [bytes((key,)) for key in range(128)]


class OpEncoder:
    """Serializes a session's op records; caches the pieces that repeat (bounded)."""

    def __init__(self, spec_message: Callable[[graphs.Spec | None], pb.TensorSpec]):
        self._spec_message = spec_message
        self._strings: dict[tuple[int, str], bytes] = {}
        self._specs: dict[tuple[int, graphs.Spec | None], bytes] = {}
        # id(location) -> (the location, kept alive so the id stays its own; its bytes).
        self._locations: dict[int, tuple[pb.CodeLocation, bytes]] = {}

    def _string(self, key: int, text: str) -> bytes:
        """A string field whose text repeats (kernel names, op types)."""
        found = self._strings.get((key, text))
        if found is None:
            found = _field(key, text.encode())
            if len(self._strings) < 65536:
                self._strings[(key, text)] = found
        return found

    def _spec(self, key: int, spec: graphs.Spec | None) -> bytes:
        found = self._specs.get((key, spec))
        if found is None:
            found = _field(key, self._spec_message(spec).SerializeToString())
            if len(self._specs) < 4096:
                self._specs[(key, spec)] = found
        return found

    def _location(self, location: pb.CodeLocation) -> bytes:
        found = self._locations.get(id(location))
        if found is None or found[0] is not location:
            found = (location, location.SerializeToString())
            if len(self._locations) >= 65536:
                self._locations.clear()
            self._locations[id(location)] = found
        return found[1]

    def event(
        self,
        op_id: int,
        graph_id: int,
        site: graphs.SiteInfo,
        locations: list[pb.CodeLocation],
        op_ids: list[int],
    ) -> pb.DebugEvent:
        """The DebugEvent (without wall_time) of one site's GraphOpCreation: the op ids of the
        function's sites by position in op_ids (site.position indexes it), the origins' code
        locations given in order (the op's own is the first with frames)."""
        small, string, spec_field = _VARINTS, self._string, self._spec
        name = site.name.encode()
        parts = [
            _OP_ID,
            _int(op_id),
            _GRAPH_ID,
            _int(graph_id),
            _OP_NAME,
            _length(name),
            name,
            string(_KERNEL, site.kernel),
            string(_CALL_TYPE, site.call_type),
        ]
        first_located = None
        for origin, location in zip(site.origins, locations):
            located = self._location(location)
            body = b"".join(
                (
                    string(_ORIGIN_TYPE, origin.op_type),
                    _field(_ORIGIN_VAR, origin.var_name.encode()),
                    _ORIGIN_LOCATION,
                    _length(located),
                    located,
                    _ORIGIN_LITERAL if origin.nonfinite_literal else b"",
                )
            )
            if origin.rewritten_by:
                body += string(_ORIGIN_REWRITTEN_BY, origin.rewritten_by)
            if origin.node_output:
                body += _ORIGIN_NODE_OUTPUT
            parts += [_ORIGINAL_OP, _length(body), body]
            if first_located is None and (location.stack_frame_ids or location.HasField("model_node")):
                first_located = located
        for item in site.inputs:
            kind = item.kind
            entry = [_KIND, small[kind], _field(_NAME, item.name.encode()), spec_field(_SPEC, item.spec)]
            if kind == _OP_OUTPUT:
                position = item.producer_position  # < 0: counted back from this site, as a list would
                producer = op_ids[position] if position >= 0 else op_ids[: site.position][position]
                entry += [_PRODUCER, _int(producer), _SLOT, _int(item.producer_slot)]
            elif kind == _PARAM:
                entry += [_PARAM_INDEX, _int(item.param_index)]
                if item.tuple_item >= 0:
                    entry += [_TUPLE_ITEM, _int(item.tuple_item)]
            elif item.nonfinite_literal:
                entry.append(_INPUT_LITERAL)
            body = b"".join(entry)
            parts += [_INPUT, _length(body), body]
        for spec in site.outputs:
            parts.append(spec_field(_OUTPUT, spec))
        for output_name in site.output_names:
            parts.append(_field(_OUTPUT_NAME_KEY, output_name.encode()))
        parts += [_DEVICE, _POSITION, _int(site.position)]
        if first_located is not None:
            parts += [_CODE_LOCATION, _length(first_located), first_located]
        for member, flow in zip(site.member_origins, site.member_flow):
            op_type = member.op_type if member is not None and member.op_type else flow.op_type
            refs = b"".join(_int(r) for r in flow.input_refs)
            body = string(_ORIGIN_TYPE, op_type) + (_field(0x12, refs) if refs else b"")
            if flow.literal or (member is not None and member.nonfinite_literal):
                body += _MEMBER_LITERAL
            parts += [_FUSED_MEMBER, _length(body), body]
        op = b"".join(parts)
        return pb.DebugEvent.FromString(_EVENT_OP + _length(op) + op)
