"""Is every record where it belongs, in the run it belongs to?

Each record carries its run's key and its place in its file (DebugEvent.run_key and
sequence; a trace's index). Read in file order, a file's records, with the RecordsDropped
records the circular buffer leaves in place of what it dropped, take the places 0, 1, 2, ...
one after the other. What does not fit is damage, with its file and offset, like a bad CRC:
a record of another run (foreign), a place taken twice (duplicated), a record that comes
after a later one (reordered), places nobody took (missing). A record whose CRC is fine can
be wrong only in these ways, or by its content, which no framing can tell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tvmdbg_tb.events.records import Corruption


@dataclass
class Drop:
    """Places [first, first + count) of a file that the circular buffer dropped, before the
    `before`-th record kept from the chunk (see RecordOrder.check)."""

    before: int
    first: int
    count: int


@dataclass
class Misplaced:
    """A record, or places, that do not fit: `position` is the record's in its chunk (that
    of the record after the missing places for a gap); kept: the record is read all the same."""

    position: int
    offset: int
    length: int
    reason: str
    kept: bool = False

    def corruption(self, path: str, executions: tuple[int, int] | None = None) -> Corruption:
        return Corruption(path, self.offset, self.length, self.reason, True, self.kept, executions)


class RecordOrder:
    """Follows one file's places across the chunks of its records (reset when the file is
    replaced by a compaction)."""

    def __init__(self, path: str):
        self.path = path
        self.reset()

    def reset(self) -> None:
        self.expected = 0  # the next place
        self.missing: list[list[int]] = []  # [first, last] places skipped so far, a later record may fill
        self.dropped = 0  # places the circular buffer dropped (its RecordsDropped records)

    def check(
        self,
        offsets: np.ndarray,
        sizes: np.ndarray,
        places: np.ndarray,
        keys: np.ndarray,
        run_key: int,
        drops: list[tuple[int, int, int, int, int]] = (),
    ) -> tuple[np.ndarray, list[Misplaced], list[Drop]]:
        """(which records to keep, what does not fit, the circular buffer's drops) of one chunk
        of records in file order: their file offsets, sizes (framing included), places and run
        keys; drops: the chunk's RecordsDropped records as (position: the record they precede,
        offset, size, first place, count), in file order. Records of another run and places
        taken twice are not kept; a reordered record is (its data is this run's)."""
        n = len(places)
        keep = np.ones(n, dtype=bool)
        if (
            not drops
            and n
            and int(places[0]) == self.expected
            and bool((keys == run_key).all())
            and bool((np.diff(places) == 1).all())
        ):
            self.expected += n  # the common case, one vector step
            return keep, [], []
        bad: list[Misplaced] = []
        found: list[Drop] = []
        pending = sorted(drops)
        d = 0
        kept = 0
        for i in range(n + 1):
            while d < len(pending) and pending[d][0] <= i:
                _, offset, size, first, count = pending[d]
                d += 1
                if self._take(first, first + count, i, offset, size, bad, "a circular buffer's drop record"):
                    self.dropped += count
                    found.append(Drop(kept, first, count))
            if i == n:
                break
            offset, size = int(offsets[i]), int(sizes[i])
            if int(keys[i]) != run_key:
                keep[i] = False
                _add(bad, Misplaced(i, offset, size, f"a record of another run (run key {int(keys[i]):016x})"))
                continue
            place = int(places[i])
            keep[i] = self._take(place, place + 1, i, offset, size, bad, "a record")
            kept += bool(keep[i])
        return keep, bad, found

    def _take(self, first: int, stop: int, position: int, offset: int, size: int, bad: list, what: str) -> bool:
        """Places [first, stop) read at offset; False for a place already taken."""
        if first == self.expected:
            self.expected = stop
            return True
        if first > self.expected:
            self.missing.append([self.expected, first - 1])
            text = f"records missing before it: {_places(self.expected, first - 1)}"
            _add(bad, Misplaced(position, offset, 0, text, True))
            self.expected = stop
            return True
        for gap in self.missing:
            if gap[0] <= first and stop - 1 <= gap[1]:  # a place skipped before: out of order
                self.missing.remove(gap)
                if gap[0] < first:
                    self.missing.append([gap[0], first - 1])
                if stop - 1 < gap[1]:
                    self.missing.append([stop, gap[1]])
                text = f"{what} out of order ({_places(first, stop - 1)} after {self.expected - 1})"
                _add(bad, Misplaced(position, offset, size, text, True))
                return True
        _add(bad, Misplaced(position, offset, size, f"{what} read twice ({_places(first, stop - 1)})"))
        return False


def _places(first: int, last: int) -> str:
    return f"place {first}" if first == last else f"places {first}-{last}"


def _add(bad: list[Misplaced], item: Misplaced) -> None:
    """Appends item, merged with the last one when both are whole records of another run
    that follow each other (a spliced stretch is one piece of damage, not thousands)."""
    if bad and item.reason.startswith("a record of another run"):
        last = bad[-1]
        if last.reason.startswith("a record of another run") and last.offset + last.length == item.offset:
            last.length += item.length
            return
    bad.append(item)
