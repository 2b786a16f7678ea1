"""The digest rows: one fixed-size numpy row per trace or execution, the reader's index.

Shared by the reader (which keeps them) and the vectorized scanner (which fills them), so
the two agree on the flags and columns without importing each other.
"""

from __future__ import annotations

import numpy as np

# Trace digest flags.
HAS_ERROR = 1
HEALTH_KNOWN = 2  # the mode says whether the output is finite
NONFINITE = 4  # some element is NaN or +/-Inf
INNER_NONFINITE = 8  # the kernel's fused ops made NaN or +/-Inf inside it (inner_nonfinite)

TRACE_DIGEST = np.dtype(
    [
        ("index", "<i8"),
        ("op_id", "<i8"),
        ("execution_index", "<i8"),
        ("wall_time", "<f8"),
        ("offset", "<i8"),
        ("nan", "<i8"),
        ("neg_inf", "<i8"),
        ("pos_inf", "<i8"),
        ("duration_us", "<f4"),
        ("output_slot", "<i4"),
        ("flags", "u1"),
    ]
)
EXECUTION_DIGEST = np.dtype(
    [
        ("index", "<i8"),
        ("graph_id", "<i8"),
        ("wall_time", "<f8"),
        ("offset", "<i8"),
        ("num_traces", "<i8"),
        ("duration_us", "<f8"),
        ("function", "<i4"),  # index into RunReader.function_names
        ("call_number", "<i8"),  # Execution.call_number (0: not recorded)
        ("vm", "<i4"),  # Execution.vm (0: not recorded)
        ("flags", "u1"),
    ]
)
