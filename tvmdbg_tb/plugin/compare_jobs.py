"""The comparisons the dashboard asks for (the `compare` route): answered at once, the fused
first divergent kernel opened up (replayed op by op: TVM's import and a compile, seconds) in a
background thread whose finished answer the next request for the same comparison gets. The
dashboard asks again while the answer says "pending". A few answers are kept, per state of the
two runs (a run that grows is compared again)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

from tvmdbg_tb.compare import Comparison

logger = logging.getLogger("tvmdbg.plugin")

KEEP = 8  # finished answers kept


class CompareJobs:
    def __init__(self) -> None:
        self._done: OrderedDict[Hashable, dict] = OrderedDict()
        self._opening: set[Hashable] = set()
        self._lock = threading.Lock()

    def answer(self, key: Hashable, make: Callable[[], Comparison]) -> dict:
        """The finished answer for key, else a fresh comparison's (its fused kernel, if any,
        "pending" while a thread opens it). make() may raise CompareError."""
        with self._lock:
            if key in self._done:
                self._done.move_to_end(key)
                return self._done[key]
        comparison = make()
        if not comparison.pending:
            self._keep(key, comparison.result)
            return comparison.result
        with self._lock:
            start = key not in self._opening
            self._opening.add(key)
        if start:
            threading.Thread(target=self._open, args=(key, comparison), name="tvmdbg-compare", daemon=True).start()
        return comparison.result

    def _open(self, key: Hashable, comparison: Comparison) -> None:
        try:
            result = comparison.open()
        except Exception as error:  # a replay that failed: said in the answer, never a 500
            logger.exception("tvmdbg: opening the first divergent kernel failed")
            result = comparison.result
            inner = result["first_divergence"]["inner"]
            inner.update(
                status="not_found", reason=f"the kernel could not be replayed: {type(error).__name__}: {error}"
            )
        finally:
            with self._lock:
                self._opening.discard(key)
        self._keep(key, result)

    def _keep(self, key: Hashable, result: dict) -> None:
        with self._lock:
            self._done[key] = result
            self._done.move_to_end(key)
            while len(self._done) > KEEP:
                self._done.popitem(last=False)
