"""tvmdbg: a debugger for Apache TVM models.

    import tvmdbg
    tvmdbg.enable_dump_debug_info("/tmp/tvmdbg_logdir", tensor_debug_mode="FULL_HEALTH")

Names that need TVM are imported lazily, so `import tvmdbg` stays fast for the reader,
the CLI and the TensorBoard plugin.
"""

from __future__ import annotations

import importlib
from typing import Any

from tvmdbg_tb.events.reader import DebugDataReader, RunReader, StaleRecordError
from tvmdbg_tb.events.summaries import MODE_NAMES
from tvmdbg_tb.events.writer import DebugEventsWriter, package_version

__version__ = package_version("tvmdbg")

# Public names that live in modules importing TVM: name -> module.
_LAZY = {
    "enable_dump_debug_info": "tvmdbg_tb.instrument.api",
    "disable_dump_debug_info": "tvmdbg_tb.instrument.api",
    "enable_check_numerics": "tvmdbg_tb.instrument.api",
    "disable_check_numerics": "tvmdbg_tb.instrument.api",
    "register_tensor_filter": "tvmdbg_tb.cli.filters",  # no TVM, but only `tvmdbg run` needs it
}

__all__ = [
    "DebugDataReader",
    "DebugEventsWriter",
    "MODE_NAMES",
    "RunReader",
    "StaleRecordError",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tvmdbg' has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise NotImplementedError(f"tvmdbg.{name} is not available yet ({error})") from error
