"""The summary kernels, compiled once per machine and loaded by every process.

A summary kernel (kernel_source.py) is small, but TVMScript parses it and LLVM compiles it
in tens of milliseconds: a real model's build calls five or six of them (one per dtype), a
large share of a small transformer's whole build, paid again in every process
and equally when they are compiled inside the model's own LLVM build. So each kernel is
built once into the user cache directory (tvmdbg_tb.native.cache_dir(): one shared library
per kernel, keyed by its source and the TVM build), written atomically, and loaded at once.
Without a linker (export_library needs the system compiler) the kernel is compiled in
memory for this process only.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tvm

from tvmdbg_tb.native import cache_dir

logger = logging.getLogger("tvmdbg.kernel_cache")
TARGET = "llvm"  # generic x86-64: see bench/bench_summary_kernels.py for why not the host CPU

_LOCK = threading.Lock()
_MODULES: list[Any] = []  # loaded libraries, kept alive for the functions registered from them
_UNSAVED_SAID: list[bool] = []


def load(name: str, source: str, parse: Callable[[str], Any]) -> Any:
    """The compiled function `name` of the TVMScript source (parse(source) gives its
    PrimFunc): from the cache when built before, else built (and cached when possible)."""
    path = _path(name, source)
    with _LOCK:
        if path.exists():
            try:
                return _open(path, name)
            except Exception as error:  # a damaged or foreign file: build it again
                logger.warning("tvmdbg: rebuilding the summary kernel %s (%s)", name, error)
        library = tvm.tirx.build(tvm.IRModule({name: parse(source)}), target=TARGET)
        try:
            _save(library, path)
        except Exception as error:  # no linker, a read-only cache: compiled for this process only
            if not _UNSAVED_SAID:
                _UNSAVED_SAID.append(True)
                logger.warning("tvmdbg: summary kernels are compiled in each process (cannot cache them: %s)", error)
            _MODULES.append(library)
            return library[name]
        return _open(path, name)


def _path(name: str, source: str) -> Path:
    key = hashlib.sha256()
    for part in (source, TARGET, tvm.__version__, _tvm_ffi_version(), sys.platform):
        key.update(part.encode())
        key.update(b"\0")
    return cache_dir() / f"{name}-{key.hexdigest()[:16]}.so"


def _tvm_ffi_version() -> str:
    import tvm_ffi

    return tvm_ffi.__version__


def _open(path: Path, name: str) -> Any:
    module = tvm.runtime.load_module(str(path))
    function = module[name]
    _MODULES.append(module)
    return function


def _save(library: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=path.stem, suffix=".so.tmp", dir=path.parent)
    os.close(descriptor)
    try:
        library.export_library(temporary)
        os.replace(temporary, path)  # atomic: concurrent builders never load half a file
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
