"""How a stream is kept where files cannot be appended to: immutable sealed segments.

A stream `stem` (e.g. tvmdbg.execution) is the concatenation of its segments
`stem.00000000`, `stem.00000001`, ... in number order; each holds whole records. The
circular buffer drops a segment by uploading `stem.NNNNNNNN.dropped` (holding the record
that says what was dropped) and then deleting the segment: a reader takes the marker in its
place, whichever of the two it lists.
"""

from __future__ import annotations

import re

DIGITS = 8
DROPPED = ".dropped"
_SUFFIX = re.compile(r"\.(\d{" + str(DIGITS) + r"})(" + re.escape(DROPPED) + r")?$")


def segment_name(stem: str, number: int) -> str:
    return f"{stem}.{number:0{DIGITS}d}"


def dropped_name(stem: str, number: int) -> str:
    return segment_name(stem, number) + DROPPED


def parse(stem: str, name: str) -> tuple[int, bool] | None:
    """(number, is a drop marker) of one of stem's segments, None for any other name."""
    if not name.startswith(stem):
        return None
    match = _SUFFIX.fullmatch(name, len(stem))
    if match is None:
        return None
    return int(match.group(1)), match.group(2) is not None


def is_stream_file(stem: str, name: str) -> bool:
    """Whether name holds (part of) stream stem, in either layout."""
    return name == stem or parse(stem, name) is not None
