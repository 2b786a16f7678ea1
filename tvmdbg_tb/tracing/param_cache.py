"""Parameter summaries once per value: a function's weights by default
(param_summaries="weights_once_per_value": the parameters past its num_input, which then get
no summary row in the compiled build), every tensor argument with "once_per_value".

Re-summarising unchanged weights on every call is most of the health cost of a call whose
parameters are large (a 1M-element weight reads 4 MB per call). TVM tensors carry no version
counter, so "unchanged" is decided by this rule:

- a tensor argument (or a tensor inside a tuple argument) that is the same TVM tensor
  object (the same runtime object, whatever Python wrapper carries it) as one summarised earlier in this session, in a function that has no in-place
  kernel, is not re-summarised: its Execution summary repeats the earlier counts and says
  where they come from (TensorSummary.summarized_in_execution);
- a tensor returned by a traced call counts as summarised there (its kernel row), so the
  updated weights of a training step are not summarised again when they come back in;
- writes the session can see end that: `copyfrom`/`copyto` into the tensor forget it;
  exporting it through DLPack (np.from_dlpack, torch.from_dlpack, `__dlpack__`), making a
  view of it, or importing memory with `tvm.runtime.from_dlpack` marks its memory as
  writable from outside for the rest of the session (summarised on every call);
- traced calls of a function with an in-place kernel forget their arguments.

What the rule cannot see (why it is opt-in beyond weights, which a model does not write): writes from native code that bypasses these
Python entry points (a raw compiled kernel called with the tensor as its output, a VM that
tvmdbg does not trace, C extensions holding the data pointer) and DLPack views made before
enable_dump_debug_info. A NaN written that way still shows in the first traced kernel output
it reaches (NaN and Inf propagate through arithmetic), but not in the parameter's own row.
Memory: one tensor per (function, argument slot) is kept referenced (the last one seen).
"""

from __future__ import annotations

import array
from typing import Any

from tvmdbg_tb.events.summaries import dtype_code, health_values
from tvmdbg_tb.proto import debug_event_pb2 as pb
from tvmdbg_tb.tracing.state import ACTIVE, ExportWatch
from tvmdbg_tb.tracing.summary import (
    debug_values,
    flatten,
    is_tensor,
    reading_own,
    tensor_summary,
    tuple_health_values,
)

SKIPPED = -1.0  # column 0 of a parameter row Python pre-marks: the guarded kernel leaves it


class _Entry:
    __slots__ = ("tensor", "full", "row", "index", "pointer", "summary")

    def __init__(self, tensor, full: list[float] | None, row: list[float] | None, index: int, pointer: int):
        self.tensor = tensor
        self.full = full  # FULL_HEALTH debug_values (None: derived from row when first needed)
        self.row = row  # the kernel row (compiled path), or None
        self.index = index
        self.pointer = pointer
        self.summary = None  # the reused TensorSummary (built once)

    def counts(self) -> list[float]:
        """FULL_HEALTH debug_values."""
        if self.full is None:
            self.full = full_from_row(self.row, str(self.tensor.dtype))
        return self.full


class SummaryCache:
    """Health of tensors already summarised in this session, by object identity.

    generation grows whenever a summary it holds stops holding (an entry dropped or replaced,
    its memory written or exported, the cache cleared): native_call's plans that repeat a
    summary (call_plans.py) hold while it is the one they were made at. It lives in
    generation_cell (one int64), which native_call's guards read in C after every call."""

    def __init__(self, exports: ExportWatch | None = None) -> None:
        self._by_slot: dict[tuple, _Entry] = {}
        self._by_id: dict[int, _Entry] = {}
        self._pointers: dict[int, int] = {}  # data pointer -> entries holding it
        self.generation_cell = array.array("q", [0])
        # A tuple argument whose tensors all hit: (their entries, its reused TensorSummary).
        self.tuples: dict[tuple, tuple[list[_Entry], Any]] = {}
        self._exports = exports if exports is not None else ACTIVE.state.exports
        install()
        self._exports.watched = True
        self._exports.caches.append(self)

    @property
    def generation(self) -> int:
        return self.generation_cell[0]

    def _changed(self) -> None:
        """A summary held stops holding: plans made before no longer apply."""
        self.generation_cell[0] += 1

    def close(self) -> None:
        exports = self._exports
        if self in exports.caches:
            exports.caches.remove(self)
        self.clear()
        if not exports.caches:  # the next session starts from its own exports (see the rule above)
            exports.tainted.clear()
            exports.overflow = False

    def lookup(self, tensor: Any) -> _Entry | None:
        entry = self._by_id.get(_key(tensor))
        exports = self._exports
        if entry is None or exports.overflow:
            return None
        if exports.tainted and entry.pointer in exports.tainted:
            self._drop(entry)
            return None
        return entry

    def store(self, slot: tuple, tensor: Any, full: list[float] | None, row: list[float] | None, index: int) -> None:
        """Records tensor's counts: FULL_HEALTH debug_values (full) or a kernel row (or both)."""
        try:
            pointer = int(tensor.data_ptr())
        except Exception:
            return
        if pointer in self._exports.tainted or self._exports.overflow:
            return
        old = self._by_slot.get(slot)
        if old is not None and self._by_id.get(_key(old.tensor)) is old:
            self._unindex(old)
        replaced = self._by_id.get(_key(tensor))
        if replaced is not None:
            self._unindex(replaced)
        entry = _Entry(tensor, full, row, index, pointer)
        self._by_slot[slot] = entry
        self._by_id[_key(tensor)] = entry
        self._pointers[pointer] = self._pointers.get(pointer, 0) + 1

    def forget(self, tensor: Any) -> None:
        entry = self._by_id.get(_key(tensor))
        if entry is not None:
            self._drop(entry)

    def clear(self) -> None:
        self._by_slot.clear()
        self._by_id.clear()
        self._pointers.clear()
        self.tuples.clear()
        self._changed()

    def forget_pointer(self, pointer: int) -> None:
        if pointer not in self._pointers:
            return
        for entry in [e for e in self._by_id.values() if e.pointer == pointer]:
            self._drop(entry)

    def tainted(self, pointer: int) -> None:
        """The memory at pointer may be written from outside from now on (lookup drops its
        entries when asked): the summaries holding it hold no more."""
        if pointer in self._pointers:
            self._changed()

    def _drop(self, entry: _Entry) -> None:
        if self._by_id.get(_key(entry.tensor)) is entry:
            self._unindex(entry)
        for slot in [s for s, e in self._by_slot.items() if e is entry]:
            del self._by_slot[slot]

    def _unindex(self, entry: _Entry) -> None:
        del self._by_id[_key(entry.tensor)]
        left = self._pointers.get(entry.pointer, 0) - 1
        if left > 0:
            self._pointers[entry.pointer] = left
        else:
            self._pointers.pop(entry.pointer, None)
        self._changed()


def _key(tensor: Any) -> int:
    """The runtime object's address (a TVM tensor fetched twice from a container comes in two
    Python wrappers); unique while the entry keeps the tensor referenced."""
    handle = getattr(tensor, "__chandle__", None)
    return handle() if handle is not None else id(tensor)


def full_from_row(row: list[float], dtype: str) -> list[float]:
    """FULL_HEALTH debug_values from a summary kernel row (compiled.py's layout)."""
    size, lt, gt, eq, neg_inf, pos_inf, rank = row[1:8]
    nan = size - lt - gt - eq
    return [0.0, float(dtype_code(dtype)), rank, size, neg_inf, pos_inf, nan, lt - neg_inf, eq, gt - pos_inf]


def row_from_full(full: list[float], shape: tuple[int, ...], width: int) -> list[float]:
    """A summary kernel row (column 0 = 1.0: written) from FULL_HEALTH debug_values."""
    _, _, rank, size, neg_inf, pos_inf, nan, negative, zero, positive = full
    row = [1.0, size, negative + neg_inf, positive + pos_inf, zero, neg_inf, pos_inf, rank, *map(float, shape)]
    return row + [0.0] * (width - len(row))


def reuse_allowed(function: Any) -> bool:
    """Whether a session.RuntimeFunction writes none of its arguments: every site is known
    and none is in place or a packed call (which may write what it is given)."""
    cached = getattr(function, "_tvmdbg_reuse", None)
    if cached is None:
        cached = bool(function.mapped) and all(
            site.info is not None and not site.info.inplace_indices and site.info.call_type != "call_packed"
            for site in function.sites
        )
        function._tvmdbg_reuse = cached
    return cached


# -- the writes and exports the session can see -----------------------------------------------


def _taint(tensor: Any) -> None:
    exports = ACTIVE.state.exports
    if not exports.caches or reading_own():
        return
    try:
        pointer = int(tensor.data_ptr())
    except Exception:  # not a tensor with memory (nothing to taint)
        return
    if len(exports.tainted) >= exports.TAINT_LIMIT:  # too many to track: nothing is reused any more
        exports.overflow = True
        for cache in list(exports.caches):
            cache.clear()
        return
    exports.tainted.add(pointer)
    for cache in list(exports.caches):
        cache.tainted(pointer)


def _forget(tensor: Any) -> None:
    """Runs inside the user's copyfrom/copyto: never raises (another thread may be changing
    a cache; a failure then forgets everything, which is always sound)."""
    caches = ACTIVE.state.exports.caches
    if not caches:
        return
    try:
        pointer = int(tensor.data_ptr())
        for cache in list(caches):
            cache.forget_pointer(pointer)
    except Exception:
        for cache in list(caches):
            cache.clear()


def install() -> None:
    """Wraps the Tensor methods that export or write memory (once per process); they read
    the tracing state in force (its ExportWatch)."""
    import tvm
    import tvm_ffi

    tensor_type = tvm.runtime.Tensor
    if getattr(tensor_type.copyfrom, "_tvmdbg", False):
        return

    def exporting(name):
        original = getattr(tensor_type, name, None)
        if original is None:
            return

        def wrapper(self, *args, **kwargs):
            _taint(self)
            return original(self, *args, **kwargs)

        wrapper.__wrapped__ = original
        setattr(tensor_type, name, wrapper)

    for name in ("__dlpack__", "_to_dlpack", "_to_dlpack_versioned", "_create_view"):
        exporting(name)

    copyfrom = tensor_type.copyfrom

    def copyfrom_wrapper(self, source_array):
        try:
            return copyfrom(self, source_array)
        finally:
            _forget(self)

    copyfrom_wrapper.__wrapped__ = copyfrom
    copyfrom_wrapper._tvmdbg = True  # the mark of the installed patches
    tensor_type.copyfrom = copyfrom_wrapper
    copyto = tensor_type.copyto

    def copyto_wrapper(self, target, *args, **kwargs):
        try:
            return copyto(self, target, *args, **kwargs)
        finally:
            if isinstance(target, tensor_type):
                _forget(target)

    copyto_wrapper.__wrapped__ = copyto
    tensor_type.copyto = copyto_wrapper

    def importing(module):
        original = getattr(module, "from_dlpack", None)
        if original is None or getattr(original, "_tvmdbg", False):
            return

        def wrapper(*args, **kwargs):
            result = original(*args, **kwargs)
            _taint(result)
            return result

        wrapper._tvmdbg = True
        wrapper.__wrapped__ = original
        module.from_dlpack = wrapper

    for module in (tvm.runtime, tvm_ffi, getattr(tvm.runtime, "_tensor", None)):
        if module is not None:
            importing(module)


def summarize(cache: SummaryCache, mode: int, value: Any, slot: tuple, index: int, lookup: bool = True):
    """The TensorSummary of a call's argument (or returned value) in a health mode, reusing
    (lookup) and recording the counts of its tensors; the layouts of summary.tensor_summary."""

    def counts(tensor, key):
        entry = cache.lookup(tensor) if lookup else None
        if entry is not None:
            return entry.counts(), entry.index
        full = debug_values(pb.FULL_HEALTH, tensor, str(tensor.dtype), tuple(tensor.shape))
        if full:
            cache.store(key, tensor, full, None, index)
        return full, None

    def one(tensor, key):
        entry = cache.lookup(tensor) if lookup else None
        if entry is not None and entry.summary is not None:
            return entry.summary, entry.counts()
        full, reused = counts(tensor, key)
        if not full:
            return tensor_summary(mode, tensor), full
        summary = pb.TensorSummary(dtype=str(tensor.dtype), shape=tuple(tensor.shape))
        summary.debug_values.extend(health_values(mode, full))
        if reused is not None:
            summary.summarized_in_execution = reused
            entry.summary = summary
        return summary, full

    if is_tensor(value):
        return one(value, slot)[0]
    leaves = flatten(value)
    if leaves == [value]:
        return tensor_summary(mode, value)
    entries = [cache.lookup(leaf) if lookup and is_tensor(leaf) else None for leaf in leaves]
    memo = cache.tuples.get(slot)
    if memo is not None and len(memo[0]) == len(entries) and all(a is b for a, b in zip(memo[0], entries)):
        return memo[1]  # every tensor unchanged since the summary was built
    summary = pb.TensorSummary(dtype="tuple", shape=[len(leaves)])
    fulls, reused = [], []
    for j, leaf in enumerate(leaves):
        if not is_tensor(leaf):
            summary.items.append(tensor_summary(mode, leaf))
            continue
        item, full = one(leaf, (*slot, j))
        summary.items.append(item)
        fulls.append(full)
        reused.append(item.summarized_in_execution if item.HasField("summarized_in_execution") else None)
    if not fulls or any(not f for f in fulls):
        return summary  # an element we cannot read: health unknown (as summary.tuple_summary)
    summary.debug_values.extend(tuple_health_values(mode, fulls))
    if all(r is not None for r in reused) and len(reused) == len(leaves):
        summary.summarized_in_execution = min(reused)
        if all(entry is not None for entry in entries):
            cache.tuples[slot] = (entries, summary)
    return summary
