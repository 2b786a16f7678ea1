"""Health counts of one tensor by the compiled summary kernel, for the VM-instrument path.

The fallback path (check-numerics, control flow, executables compiled before enable)
summarises each kernel output in its callback. numpy takes several passes and a fixed cost
per tensor; the summary kernel the compiled path calls after each kernel
(compiled.kernel, built once per dtype per process) counts in one native pass and
writes one row, read here into the same debug_values (compiled.row_values). Only the health
modes use it: their counts are exact, so both ways give identical values (FULL_STATS keeps
numpy, whose float sums differ from the kernel's in the last bits).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import tvm

from tvmdbg_tb.capture import compiled
from tvmdbg_tb.events.modes import spec

_CPU = 1  # DLPack's kDLCPU
_FUNCTIONS: dict[str, Any] = {}


class _Row(threading.local):
    def __init__(self):
        self.tensor = tvm.runtime.tensor(np.zeros((1, compiled.ROW_WIDTH), "float64"))
        self.view = np.from_dlpack(self.tensor)


_ROW: _Row | None = None


def health_values(mode: int, value: Any, dtype: str, shape: tuple[int, ...]) -> list[float] | None:
    """value's debug_values in a health mode, counted by the summary kernel; None when the
    kernel does not apply (another mode or dtype, a rank over compiled.MAX_RANK, a tensor not
    in CPU memory, or any failure): the caller then summarises in numpy."""
    global _ROW
    if not spec(mode).health or dtype not in compiled.HEALTH_DTYPES or len(shape) > compiled.MAX_RANK:
        return None
    try:
        if value.device.dlpack_device_type() != _CPU:
            return None
        function = _FUNCTIONS.get(dtype)
        if function is None:
            function = _FUNCTIONS[dtype] = tvm.get_global_func(compiled.kernel(dtype))
        if _ROW is None:
            _ROW = _Row()
        row = _ROW
        row.view[0, 0] = 0.0  # an unwritten row: the kernel leaves a written one as it is
        function(value, row.tensor, 0)
        return compiled.row_values(mode, row.view[0].tolist(), dtype)
    except Exception:
        return None
