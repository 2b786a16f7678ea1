"""Serialized traces given as parts, so that no Python loop runs per trace.

The compiled fast path knows each kernel row's constant fields (serialized once per
session), the call's own field (its execution index) and, from one numpy pass over the
stats buffer, every row's tail (debug values, duration) as one packed array. Trace k is
statics[which[k]] + middle + tails[k * width:(k + 1) * width]: the writer frames that
natively (native_records) without building the payloads; anyone who iterates gets them
built here, once.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np


def static_table(statics: Sequence[bytes]) -> tuple[bytes, bytes]:
    """statics end to end, and their offsets (len + 1 little-endian u32): what
    TraceParts passes to the native framing for them."""
    ends = [0]
    for static in statics:
        ends.append(ends[-1] + len(static))
    return b"".join(statics), struct.pack(f"<{len(ends)}I", *ends)


class TraceParts(Sequence):
    """The traces of one call, as parts (see the module docstring)."""

    __slots__ = ("statics", "table", "which", "middle", "tails", "width", "_items")

    def __init__(
        self,
        statics: Sequence[bytes],
        table: tuple[bytes, bytes],
        which: np.ndarray,
        middle: bytes,
        tails: bytes,
        width: int,
    ):
        self.statics = statics
        self.table = table  # static_table(statics), kept by the caller
        self.which = which  # uint32 row of each trace
        self.middle = middle
        self.tails = tails
        self.width = width
        self._items: list[bytes] | None = None

    def payloads(self) -> list[bytes]:
        """Each trace serialized (built once, on first use)."""
        if self._items is None:
            statics, middle, tails, width = self.statics, self.middle, self.tails, self.width
            self._items = [
                statics[i] + middle + tails[k * width : (k + 1) * width] for k, i in enumerate(self.which.tolist())
            ]
        return self._items

    def __len__(self) -> int:
        return len(self.which)

    def __getitem__(self, k):
        return self.payloads()[k]

    def __iter__(self):
        return iter(self.payloads())
