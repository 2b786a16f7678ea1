"""Records kept compact, parsed when asked for: a run's ops, stack frames and source files.

A parsed protobuf message costs 1.2-1.6 KB of memory whatever its size (its arena), about ten
times its serialized bytes: a graph of 300,000 ops held parsed took ~490 MB, its frames much
more, and a source file ~9 times its text, so TensorBoard passed 800 MB on one such dump. Ops
and frames are kept as their serialized bytes (~40 MB for 300,000), source files only as their
place in the file, the ops' uses as numpy rows; the recently used ones are also kept parsed (most models have fewer ops
than the cache holds, so they are parsed once, as before).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

M = TypeVar("M")

CACHED = 16384  # parsed messages kept per store (the most recently used)


class CompactStore(Generic[M]):
    """key -> message, kept as what load() turns into the message (its bytes, its offset in
    a file), with an LRU cache of parsed ones. Messages handed out are shared: read them,
    never change them."""

    def __init__(self, load: Callable[[Any], M], cached: int = CACHED):
        self._load = load
        self._cached = cached
        self._data: dict[int, Any] = {}
        self._parsed: OrderedDict[int, M] = OrderedDict()
        self._lock = threading.Lock()  # request threads share the cache
        self._loading: dict[int, threading.Event] = {}  # keys being parsed now

    def put(self, key: int, value: Any) -> None:
        """Stores under key what load() reads the message from."""
        with self._lock:
            self._data[key] = value
            self._parsed.pop(key, None)

    def __getitem__(self, key: int) -> M:
        with self._lock:
            parsed = self._parsed.get(key)
            if parsed is not None:
                self._parsed.move_to_end(key)
                return parsed
            value = self._data[key]
            loading = self._loading.get(key)
            mine = loading is None
            if mine:  # one thread parses a record, the others asking meanwhile wait for it
                loading = self._loading[key] = threading.Event()
        if not mine:
            loading.wait()
            return self[key]
        try:
            parsed = self._load(value)
            with self._lock:
                self._parsed[key] = parsed
                if len(self._parsed) > self._cached:
                    self._parsed.popitem(last=False)
        finally:
            with self._lock:
                del self._loading[key]
            loading.set()
        return parsed

    def get(self, key: int, default: M | None = None) -> M | None:
        return self[key] if key in self._data else default

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._data))

    def values(self) -> Iterator[M]:
        """Every message, parsed one at a time (a loop over all holds one, not all)."""
        return (self[key] for key in list(self._data))

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._parsed.clear()


class LazyList(Sequence[M]):
    """The messages of a list of keys, parsed as they are read (len() and slices cost only what
    they return)."""

    def __init__(self, store: CompactStore[M], keys: list[int]):
        self._store = store
        self._keys = keys

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._store[key] for key in self._keys[index]]
        return self._store[self._keys[index]]

    def __iter__(self) -> Iterator[M]:
        return (self._store[key] for key in self._keys)


class Uses:
    """Who reads each op's outputs: (producer, consumer, input slot, output slot) rows in numpy
    arrays (32 bytes a use, against ~250 in a dict of lists of tuples), sorted by producer when
    next asked after new rows came."""

    def __init__(self):
        self._rows = np.zeros((1024, 4), dtype=np.int64)
        self._size = 0
        self._sorted: np.ndarray | None = None
        self._lock = threading.Lock()

    def add(self, rows: list[tuple[int, int, int, int]]) -> None:
        if not rows:
            return
        with self._lock:
            need = self._size + len(rows)
            if need > len(self._rows):
                grown = np.zeros((max(need, 2 * len(self._rows)), 4), dtype=np.int64)
                grown[: self._size] = self._rows[: self._size]
                self._rows = grown
            self._rows[self._size : need] = rows
            self._size = need
            self._sorted = None

    def of(self, producer: int) -> list[tuple[int, int, int]]:
        """(consumer, its input slot, producer output slot) of each use, in the order read."""
        with self._lock:
            if self._sorted is None:
                rows = self._rows[: self._size]
                self._sorted = rows[np.argsort(rows[:, 0], kind="stable")]
            table = self._sorted
        begin, end = np.searchsorted(table[:, 0], [producer, producer + 1])
        return [tuple(row) for row in table[begin:end, 1:].tolist()]
