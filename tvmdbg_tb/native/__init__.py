"""Small C++ helpers: tvm_ffi modules and CPython extensions, built into the wheel.

A NativeLibrary is one C++ source compiled into one .so whose name carries a key of what it
was built from (the source, its headers, the compile options and the versions it binds to):
`native_call-<key>.so`. The build backend compiles every helper into the package's own
directory (this one), so an installed wheel loads them at once and needs no compiler. Where
no file of the current key is there (an editable install, a source edited since, another
tvm_ffi), the library is built at first use with the system C++ compiler (g++, no ninja)
into a user cache directory, once per key, written atomically. Without either, when the
build fails, or when its environment switch is "0", load() returns None and the caller
keeps its pure-Python path: said once as a warning naming what is missing, never retried in
the same process.

Two kinds: a tvm_ffi module (NativeLibrary), for code the VM calls; and a CPython extension
(PythonExtension), for code Python calls on the hot path: its calls cost a fraction of
tvm_ffi's conversion of bytes arguments, and it reads numpy buffers in place.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any

logger = logging.getLogger("tvmdbg.native")

# Every C++ source of tvmdbg lives here, with the shared header (python_buffer.h); the Python
# module that loads one has the source's stem (native_call.cc: tracing/native_call.py).
HERE = Path(__file__).resolve().parent
PACKAGE_DIR = HERE  # where the build backend puts the libraries


def source(name: str) -> Path:
    """The C++ source `name` (every one lives in this package, see HERE)."""
    return HERE / name


# -ffp-contract=off: no fused multiply-adds, so doubles come out as numpy's and Python's.
COMPILE_OPTIONS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-ffp-contract=off")


def cache_dir() -> Path:
    """Where libraries built at first use are kept: $TVMDBG_CACHE_DIR, else
    $XDG_CACHE_HOME/tvmdbg, else ~/.cache/tvmdbg."""
    explicit = os.environ.get("TVMDBG_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tvmdbg"


class NativeLibrary:
    """One C++ source built as a tvm_ffi module (or None: see the module docstring)."""

    def __init__(self, source: Path, switch: str, what: str):
        self.source = source
        self.switch = switch  # the environment variable that disables it ("0")
        self.what = what  # how the log names it
        self._lock = threading.Lock()
        self._state: dict[str, Any] = {}  # "module" once loaded, "error" once it failed
        self._background = threading.Event()
        self._versions_found: tuple[str, ...] | None = None  # _bound_versions()

    def enabled(self) -> bool:
        """False when the environment switch says "0" (or false, no, off)."""
        return os.environ.get(self.switch, "1").strip().lower() not in ("0", "false", "no", "off")

    def file_name(self) -> str:
        """The library's file name: the source's stem and the key of what it is built from."""
        key = hashlib.sha256()
        for part in (self.source, *self._headers()):
            key.update(part.read_bytes())
        for part in (*COMPILE_OPTIONS, *self._bound_versions()):
            key.update(part.encode() + b"\0")
        return f"{self.source.stem}-{key.hexdigest()[:16]}.so"

    def _bound_versions(self) -> tuple[str, ...]:
        """_versions(), looked up once per process: what the loaded modules bind to does not
        change while it runs, and each lookup in the installed distributions' metadata costs
        ~0.5 ms of an enable."""
        if self._versions_found is None:
            self._versions_found = self._versions()
        return self._versions_found

    def path(self) -> Path:
        """The library built into the package if there is one, else its place in the cache
        (which exists once it was built at first use)."""
        name = self.file_name()
        packaged = PACKAGE_DIR / name
        return packaged if packaged.exists() else cache_dir() / name

    def loaded(self) -> Any | None:
        """The module if load() already succeeded; never builds or waits."""
        return self._state.get("module")

    def load(self, path: Path | None = None) -> Any | None:
        """The loaded module (built on first use when the package has none), or None when it
        is unavailable or switched off; a failure is logged once and remembered. The switch
        is read here, not per call: it is a process setting. path: self.path() when the
        caller has just worked it out (its key hashes the sources)."""
        state = self._state
        if "module" in state or "error" in state:
            return state.get("module")
        if not self.enabled():
            return None
        with self._lock:
            if "module" in state or "error" in state:
                return state.get("module")
            try:
                path = path if path is not None else self.path()
                if not path.exists():
                    self._build(path)
                state["module"] = self._open(path)
            except Exception as error:  # no compiler, a failed build, an unloadable library
                state["error"] = error
                logger.warning("tvmdbg: %s unavailable, staying in pure Python (slower): %s", self.what, error)
            return state.get("module")

    def start_loading(self) -> None:
        """Loads the library now when it is built already (in the package or the cache), so
        that the first traced call has it; otherwise builds it in a background thread, once
        per process, so that no traced call waits for a compiler (the Python path serves
        until it is loaded)."""
        if self._background.is_set() or not self.enabled():
            return
        self._background.set()
        path = self.path()
        if path.exists():
            self.load(path)
            return
        threading.Thread(target=self.load, name=f"tvmdbg-build-{self.source.stem}", daemon=True).start()

    def failure(self) -> BaseException | None:
        """Why load() returned None (None when it worked or was not tried)."""
        return self._state.get("error")

    def build_into(self, directory: Path) -> Path:
        """Builds the library into directory under its file name: what the build backend
        does for a wheel (a tvm_ffi module then finds libtvm_ffi relative to itself)."""
        path = Path(directory) / self.file_name()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._compile(path, self._flags(packaged=True))
        return path

    def _headers(self) -> list[Path]:
        """Headers the source may include (part of the build's key)."""
        return []

    def _versions(self) -> tuple[str, ...]:
        """What the library binds to: tvm_ffi's C ABI (the distribution's version, read
        without importing it) on this platform."""
        return "tvm_ffi", metadata.version("apache-tvm-ffi"), sysconfig.get_platform()

    def _flags(self, packaged: bool = False) -> list[str]:
        from tvm_ffi import libinfo

        library = Path(libinfo.find_libtvm_ffi())
        # In a wheel, libtvm_ffi is in the tvm_ffi package next to tvmdbg_tb; once tvm_ffi is
        # imported (always before this library) its soname resolves to the loaded copy anyway.
        rpath = "$ORIGIN/../../tvm_ffi/lib" if packaged else str(library.parent)
        return [
            f"-I{libinfo.find_include_path()}",
            f"-I{libinfo.find_dlpack_include_path()}",
            f"-L{library.parent}",
            f"-Wl,-rpath,{rpath}",
            "-ltvm_ffi",
        ]

    def _open(self, path: Path) -> Any:
        import tvm_ffi

        return tvm_ffi.load_module(str(path))

    def _missing(self) -> str:
        """Why the package holds no library of this key (for the message without a compiler)."""
        others = sorted(p.name for p in PACKAGE_DIR.glob(f"{self.source.stem}-*.so"))
        if not others:
            return "this installation has no prebuilt copy (an editable install or a source tree)"
        return (
            f"this installation's prebuilt {', '.join(others)} is for other versions than {' '.join(self._versions())}"
        )

    def _build(self, path: Path) -> None:
        """Builds the library at first use into path (the cache)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_builds(path.parent)
        self._compile(path, self._flags())

    def _compile(self, path: Path, flags: list[str]) -> None:
        compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
        if compiler is None:
            raise RuntimeError(
                f"{self._missing()}, and no C++ compiler was found to build it (c++ or g++ on PATH, or CXX)"
            )
        descriptor, temporary = tempfile.mkstemp(prefix=path.stem, suffix=".so.tmp", dir=path.parent)
        os.close(descriptor)
        command = [compiler, *COMPILE_OPTIONS, str(self.source), "-o", temporary, *flags]
        try:
            compiler_process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            _UNFINISHED[temporary] = compiler_process  # stopped and removed if the process exits first
            try:
                _, stderr = compiler_process.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                compiler_process.kill()
                _, stderr = compiler_process.communicate()
            if compiler_process.returncode != 0:
                raise RuntimeError(f"building {self.source.name} failed: {stderr.strip()[-2000:]}")
            os.chmod(temporary, 0o755)
            os.replace(temporary, path)  # atomic: concurrent builders never load half a file
        finally:
            _UNFINISHED.pop(temporary, None)
            if os.path.exists(temporary):
                os.unlink(temporary)


class PythonExtension(NativeLibrary):
    """One C++ source built as a CPython extension module named after the source's stem
    (it defines PyInit_<stem>); needs Python's headers, not tvm."""

    def _headers(self) -> list[Path]:
        # python_buffer.h; listed without Path.glob, which compiles its pattern on every call
        return sorted(HERE / name for name in os.listdir(HERE) if name.endswith(".h"))

    def _versions(self) -> tuple[str, ...]:
        """The interpreter's ABI (EXT_SUFFIX names implementation, version and platform)."""
        return "python", sysconfig.get_config_var("EXT_SUFFIX") or sys.implementation.cache_tag

    def _flags(self, packaged: bool = False) -> list[str]:
        include = sysconfig.get_paths()["include"]
        if not os.path.exists(os.path.join(include, "Python.h")):
            raise RuntimeError(f"Python's headers are not installed (no Python.h in {include})")
        return [f"-I{include}", f"-I{HERE}"]

    def _open(self, path: Path) -> Any:
        import importlib.machinery
        import importlib.util

        loader = importlib.machinery.ExtensionFileLoader(self.source.stem, str(path))
        spec = importlib.util.spec_from_file_location(self.source.stem, str(path), loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module


class TvmPythonExtension(PythonExtension):
    """A CPython extension that also calls tvm_ffi's C API: it registers a global function
    that the VM calls (native_call's "tvmdbg.stats"), sharing the extension's state without
    Python between them. Built against both (its key holds both ABIs)."""

    def _versions(self) -> tuple[str, ...]:
        return (*PythonExtension._versions(self), *NativeLibrary._versions(self))

    def _flags(self, packaged: bool = False) -> list[str]:
        return [*PythonExtension._flags(self, packaged), *NativeLibrary._flags(self, packaged)]


_UNFINISHED: dict[str, subprocess.Popen] = {}  # temporary output -> its compiler, while it runs


@atexit.register
def _remove_unfinished_builds() -> None:
    """A process that exits during a background build (a daemon thread) stops its compiler
    and leaves no temporary file."""
    for temporary, compiler_process in list(_UNFINISHED.items()):
        try:
            compiler_process.kill()
            compiler_process.wait(timeout=5)
        except Exception:  # it ended by itself meanwhile (or will, with the process): nothing to stop
            pass
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _remove_stale_builds(directory: Path, age: float = 3600.0) -> None:
    """Deletes temporary files of builds that never finished (a process killed while its
    background build ran leaves one)."""
    now = time.time()
    for stale in directory.glob("*.so.tmp"):
        try:
            if now - stale.stat().st_mtime > age:
                stale.unlink()
        except OSError:
            pass
