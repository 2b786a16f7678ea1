"""tvmdbg: a debugger for Apache TVM models.

    import tvmdbg
    tvmdbg.enable_dump_debug_info("/tmp/tvmdbg_logdir", tensor_debug_mode="FULL_HEALTH")

Names that need TVM are imported lazily, so `import tvmdbg` stays fast for the reader,
the CLI and the TensorBoard plugin.
"""

from __future__ import annotations

import importlib
from importlib import metadata as _metadata
from typing import Any

try:
    __version__ = _metadata.version("tvmdbg")
except _metadata.PackageNotFoundError:
    __version__ = "unknown"

# Every public name is imported on first use: importing tvmdbg_tb (which TensorBoard does to
# load the plugin's entry point, tvmdbg_tb.plugin.loader) must not import numpy, protobuf or
# TVM, so that a broken install can never take TensorBoard down. Name -> module.
_ON_FIRST_USE = {
    "DebugDataReader": "tvmdbg_tb.events.reader",
    "RunReader": "tvmdbg_tb.events.reader",
    "StaleRecordError": "tvmdbg_tb.events.reader",
    "UnreadableStreamError": "tvmdbg_tb.events.reader",
    "describe": "tvmdbg_tb.events.reader",
    "TRACE_DIGEST": "tvmdbg_tb.events.reader",
    "EXECUTION_DIGEST": "tvmdbg_tb.events.reader",
    "MODE_NAMES": "tvmdbg_tb.events.modes",
    "DebugEventsWriter": "tvmdbg_tb.events.writer",
}
# Names that live in modules importing TVM.
_LAZY = {
    "enable_dump_debug_info": "tvmdbg_tb.debugger",
    "disable_dump_debug_info": "tvmdbg_tb.debugger",
    "enable_check_numerics": "tvmdbg_tb.debugger",
    "disable_check_numerics": "tvmdbg_tb.debugger",
    "CheckNumericsError": "tvmdbg_tb.debugger",
    "add_execution_listener": "tvmdbg_tb.debugger",
    "remove_execution_listener": "tvmdbg_tb.debugger",
    "register_tensor_filter": "tvmdbg_tb.cli.filters",
    "record_torch_reference": "tvmdbg_tb.tracing.torch_reference",
    "add_watchpoint": "tvmdbg_tb.live.api",
    "list_watchpoints": "tvmdbg_tb.live.api",
    "delete_watchpoint": "tvmdbg_tb.live.api",
    "request_pause": "tvmdbg_tb.live.api",
    "watchpoint_hits": "tvmdbg_tb.live.api",
    "watchpoint_hits_since": "tvmdbg_tb.live.api",
}

# Public sub-packages: tvmdbg.disco.ProcessSession (TVM imported when its names are).
_MODULES = {"disco": "tvmdbg_tb.disco"}

__all__ = [*_ON_FIRST_USE, *_LAZY, *_MODULES]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    if name in _ON_FIRST_USE:
        return getattr(importlib.import_module(_ON_FIRST_USE[name]), name)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tvmdbg' has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise NotImplementedError(f"tvmdbg.{name} is not available yet ({error})") from error
