"""Serialized traces given as parts, so that no Python loop runs per trace.

The compiled fast path knows each kernel row's constant fields (serialized once per
session), the call's own field (its execution index) and, from one pass over the stats
buffer (native or numpy), every row's tail (debug values, duration) as one packed buffer.
Trace k is statics[which[k]] + middle + tails[k * width:(k + 1) * width]: the writer frames
that natively (native_records) without building the payloads; anyone who iterates gets them
built here, once.
"""

from __future__ import annotations

from collections.abc import Sequence


class TraceParts(Sequence):
    """The traces of one call, as parts (see the module docstring)."""

    __slots__ = ("statics", "which", "middle", "tails", "width", "_items")

    def __init__(self, statics: list[bytes], which: bytes, middle: bytes, tails: bytes, width: int):
        self.statics = statics
        self.which = which  # each trace's static, a little-endian uint32 each
        self.middle = middle
        self.tails = tails
        self.width = width
        self._items: list[bytes] | None = None

    def rows(self) -> list[int]:
        """Each trace's static (its row in the function)."""
        return memoryview(self.which).cast("B").cast("I").tolist()

    def payloads(self) -> list[bytes]:
        """Each trace serialized (built once, on first use)."""
        if self._items is None:
            statics, middle, tails, width = self.statics, self.middle, self.tails, self.width
            self._items = [statics[i] + middle + tails[k * width : (k + 1) * width] for k, i in enumerate(self.rows())]
        return self._items

    def __len__(self) -> int:
        return len(self.which) // 4

    def __getitem__(self, k):
        return self.payloads()[k]

    def __iter__(self):
        return iter(self.payloads())
