"""`tvm.runtime.disco` importable on TVM 0.27's CPU wheel.

There `from tvm.runtime import disco` gives None: the disco package is imported while the
runtime library that registers `runtime.disco.DRef` is not loaded yet, and the failure is
swallowed. Once `tvm` is imported, importing the package again works; process_pool stays (it
registers a global function at import, which may not be registered twice).
"""

from __future__ import annotations

import importlib
import sys

_STALE = ("tvm.runtime.disco", "tvm.runtime.disco._ffi_api", "tvm.runtime.disco.session")


def disco_module():
    """tvm.runtime.disco, imported again if the first import failed."""
    import tvm.runtime

    module = getattr(tvm.runtime, "disco", None)
    if module is not None and hasattr(module, "ProcessSession"):
        return module
    for name in _STALE:
        sys.modules.pop(name, None)
    module = importlib.import_module("tvm.runtime.disco")
    tvm.runtime.disco = module
    return module
