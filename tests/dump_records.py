"""A dump's files as lists of whole records, to damage them the way a disk, a copy or a
careless script would (tests of events/integrity.py), or to write them as an older tvmdbg
did (no run key, no places)."""

from __future__ import annotations

from pathlib import Path

from tvmdbg_tb.events import layout, records
from tvmdbg_tb.proto import debug_event_pb2 as pb

FILES = [layout.file_name(s) for s in layout.STREAMS]


def read(path: Path) -> list[bytes]:
    """The framed records of a file, in order (the file must be undamaged)."""
    data = Path(path).read_bytes()
    out = []
    for item in records.scan(data, 0, str(path), final=True):
        assert not isinstance(item, records.Corruption), item
        offset, start, length = item
        out.append(data[offset : start + length + records.FOOTER_SIZE])
    assert sum(map(len, out)) == len(data)
    return out


def write(path: Path, framed: list[bytes]) -> None:
    Path(path).write_bytes(b"".join(framed))


def event(framed: bytes) -> pb.DebugEvent:
    return pb.DebugEvent.FromString(framed[records.HEADER_SIZE : -records.FOOTER_SIZE])


def frame(message: pb.DebugEvent) -> bytes:
    return records.encode(message.SerializeToString())


def strip_identity(run_dir: Path) -> None:
    """Rewrites a run as a tvmdbg before run keys and places wrote it: no run_key, sequence or
    RecordsDropped record, a RunEnd without the counts that came with them, and a ring file
    holding its newest records only (what precedes its last RecordsDropped record, the calls
    kept whole, goes: an older ring kept none)."""
    for name in FILES:
        path = Path(run_dir) / name
        framed_records = read(path)
        drops = [i for i, framed in enumerate(framed_records) if event(framed).HasField("records_dropped")]
        kept = []
        for framed in framed_records[drops[-1] + 1 :] if drops else framed_records:
            message = event(framed)
            message.ClearField("run_key")
            message.ClearField("sequence")
            if message.HasField("run_end"):
                end = message.run_end
                for field in ("nonfinite_executions", "unchecked_executions", "dropped_executions", "dropped_traces"):
                    end.ClearField(field)
                end.ClearField("records")
            kept.append(frame(message))
        write(path, kept)
