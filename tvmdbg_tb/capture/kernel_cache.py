"""The summary kernels, prebuilt into the wheel, else compiled once per machine.

A summary kernel (kernel_source.py) is small, but TVMScript parses it and LLVM compiles it
in tens of milliseconds: a real model's build calls five or six of them (one per dtype), a
large share of a small transformer's whole build, paid again in every process and equally
when they are compiled inside the model's own LLVM build. They are generic (one per dtype and
mode, any rank), so:

- the wheel ships all of them in one library (setup.py calls build_library), named after a
  key of their sources and the TVM build they were compiled by; a process whose TVM matches
  loads it at once and compiles nothing (no compiler needed);
- otherwise (a source checkout, another TVM) each kernel is built at first use into the user
  cache directory (tvmdbg_tb.native.cache_dir(): one shared library per kernel, keyed the
  same way), written atomically, and loaded by every later process;
- without a linker (export_library needs the system C compiler) a kernel is compiled in
  memory for this process only, said once as a warning.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import tvm

from tvmdbg_tb import native
from tvmdbg_tb.capture import kernel_source

logger = logging.getLogger("tvmdbg.kernel_cache")
TARGET = "llvm"  # generic x86-64: see bench/bench_summary_kernels.py for why not the host CPU
LIBRARY_STEM = "tvmdbg_kernels"  # the wheel's library of every summary kernel

_LOCK = threading.Lock()
_MODULES: list[Any] = []  # loaded libraries, kept alive for the functions registered from them
_UNSAVED_SAID: list[bool] = []
# What this process did to get its kernels (compiled(): the packaging test's proof that an
# installed wheel compiles none), and the packaged library once looked for ([module or None]).
_COMPILED: list[str] = []
_PACKAGED: list[Any] = []


def load(name: str, source: str) -> Any:
    """The compiled function `name` of the TVMScript source: from the wheel's library when it
    holds this very source for this TVM, else from the user cache when built before, else
    built (and cached when possible)."""
    with _LOCK:
        packaged = _packaged_library()
        if packaged is not None and kernel_source.catalogue().get(name) == source:
            return packaged[name]
        path = _path(name, source)
        if path.exists():
            try:
                return _open(path, name)
            except Exception as error:  # a damaged or foreign file: build it again
                logger.warning("tvmdbg: rebuilding the summary kernel %s (%s)", name, error)
        library = _build({name: source})
        try:
            _save(library, path)
        except Exception as error:  # no linker, a read-only cache: compiled for this process only
            if not _UNSAVED_SAID:
                _UNSAVED_SAID.append(True)
                logger.warning(
                    "tvmdbg: summary kernels are compiled in each process (%s; cannot cache them: %s)",
                    _why_not_packaged(),
                    error,
                )
            _MODULES.append(library)
            return library[name]
        return _open(path, name)


def compiled() -> list[str]:
    """The summary kernels this process compiled with LLVM (none when the wheel's library or
    the user cache served them)."""
    return list(_COMPILED)


def library_file_name() -> str:
    """The file name of the library of every summary kernel for this TVM build."""
    return f"{LIBRARY_STEM}-{_key(sorted(kernel_source.catalogue().items()))}.so"


def packaged_library_path() -> Path:
    """Where the wheel's library of this TVM build is (it may not exist)."""
    return native.PACKAGE_DIR / library_file_name()


def build_library(directory: Path) -> Path:
    """Compiles every summary kernel into one library in directory (the wheel's build)."""
    path = Path(directory) / library_file_name()
    _save(_build(kernel_source.catalogue()), path)
    return path


def _packaged_library() -> Any | None:
    """The wheel's library for this TVM build, loaded once (None: not in this installation)."""
    if not _PACKAGED:
        module = None
        path = packaged_library_path() if _any_packaged() else None
        if path is not None and path.exists():
            try:
                module = tvm.runtime.load_module(str(path))
            except Exception as error:  # a damaged file: the per-kernel path serves
                logger.warning("tvmdbg: cannot load the packaged summary kernels %s: %s", path.name, error)
        _PACKAGED.append(module)
    return _PACKAGED[0]


def _any_packaged() -> bool:
    """Whether the package holds a library of summary kernels at all: a listing, before the
    key of this build's is worked out from every kernel's source (kernel_source.catalogue:
    ~0.5 ms of a source checkout's first build, which has none)."""
    try:
        return any(
            name.startswith(f"{LIBRARY_STEM}-") and name.endswith(".so") for name in os.listdir(native.PACKAGE_DIR)
        )
    except OSError:
        return False


def _why_not_packaged() -> str:
    others = sorted(p.name for p in native.PACKAGE_DIR.glob(f"{LIBRARY_STEM}-*.so"))
    if not others:
        return "this installation has no prebuilt summary kernels (a source checkout)"
    return f"the prebuilt {', '.join(others)} is for another TVM build than tvm {tvm.__version__}"


def _build(sources: dict[str, str]) -> Any:
    """One library of the kernels `sources` (name -> TVMScript), compiled by LLVM here."""
    functions = {
        name: tvm.script.from_source(source).with_attr("global_symbol", name) for name, source in sources.items()
    }
    _COMPILED.extend(sources)
    logger.info("tvmdbg: compiling summary kernels %s", ", ".join(sources))
    return tvm.tirx.build(tvm.IRModule(functions), target=TARGET)


def _key(parts: list[tuple[str, str]]) -> str:
    key = hashlib.sha256()
    for name, source in parts:
        key.update(name.encode() + b"\0" + source.encode() + b"\0")
    for part in (TARGET, tvm.__version__, _tvm_ffi_version(), sys.platform):
        key.update(part.encode() + b"\0")
    return key.hexdigest()[:16]


def _path(name: str, source: str) -> Path:
    key = hashlib.sha256()
    for part in (source, TARGET, tvm.__version__, _tvm_ffi_version(), sys.platform):
        key.update(part.encode())
        key.update(b"\0")
    return native.cache_dir() / f"{name}-{key.hexdigest()[:16]}.so"


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
