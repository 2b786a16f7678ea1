"""Small C++ helpers built on the user's machine and loaded with tvm_ffi.

A NativeLibrary is one C++ source, built once with the system C++ compiler (g++, no ninja)
into a user cache directory, one .so per (source, tvm, tvm_ffi, python) version, written
atomically, and loaded once per process. Without a compiler, when the build fails, or when
its environment switch is "0", load() returns None and the caller keeps its pure-Python
path: said once in the log, never retried in the same process.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger("tvmdbg.native")


def cache_dir() -> Path:
    """Where built libraries are kept: $TVMDBG_CACHE_DIR, else $XDG_CACHE_HOME/tvmdbg, else ~/.cache/tvmdbg."""
    explicit = os.environ.get("TVMDBG_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tvmdbg"


class NativeLibrary:
    """One C++ source, built on first use and loaded with tvm_ffi (or None: see the module)."""

    def __init__(self, source: Path, switch: str, what: str):
        self.source = source
        self.switch = switch  # the environment variable that disables it ("0")
        self.what = what  # how the log names it
        self._lock = threading.Lock()
        self._state: dict[str, Any] = {}  # "module" once loaded, "error" once it failed

    def enabled(self) -> bool:
        """False when the environment switch says "0" (or false, no, off)."""
        return os.environ.get(self.switch, "1").strip().lower() not in ("0", "false", "no", "off")

    def path(self) -> Path:
        """The cached .so for this source and these tvm / tvm_ffi / python versions."""
        import tvm
        import tvm_ffi

        key = hashlib.sha256()
        key.update(self.source.read_bytes())
        for part in (tvm.__version__, tvm_ffi.__version__, sys.version, sys.platform):
            key.update(part.encode())
        return cache_dir() / f"{self.source.stem}-{key.hexdigest()[:16]}.so"

    def loaded(self) -> Any | None:
        """The module if load() already succeeded; never builds or waits."""
        return self._state.get("module")

    def load(self) -> Any | None:
        """The loaded module (built on first use), or None when it is unavailable; a failure
        is logged once and remembered."""
        state = self._state
        if "module" in state or "error" in state:
            return state.get("module")
        with self._lock:
            if "module" in state or "error" in state:
                return state.get("module")
            try:
                import tvm_ffi

                path = self.path()
                if not path.exists():
                    self._build(path)
                state["module"] = tvm_ffi.load_module(str(path))
            except Exception as error:  # no compiler, a failed build, an unloadable library
                state["error"] = error
                logger.warning("tvmdbg: %s unavailable, staying in pure Python: %s", self.what, error)
            return state.get("module")

    def failure(self) -> BaseException | None:
        """Why load() returned None (None when it worked or was not tried)."""
        return self._state.get("error")

    def _build(self, path: Path) -> None:
        from tvm_ffi import libinfo

        compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
        if compiler is None:
            raise RuntimeError("no C++ compiler found (c++/g++ not on PATH)")
        library = Path(libinfo.find_libtvm_ffi())
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_builds(path.parent)
        descriptor, temporary = tempfile.mkstemp(prefix=path.stem, suffix=".so.tmp", dir=path.parent)
        os.close(descriptor)
        command = [
            compiler,
            "-std=c++17",
            "-O2",
            "-fPIC",
            "-shared",
            f"-I{libinfo.find_include_path()}",
            f"-I{libinfo.find_dlpack_include_path()}",
            str(self.source),
            "-o",
            temporary,
            f"-L{library.parent}",
            f"-Wl,-rpath,{library.parent}",
            "-ltvm_ffi",
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise RuntimeError(f"building {self.source.name} failed: {done.stderr.strip()[-2000:]}")
            os.replace(temporary, path)  # atomic: concurrent builders never load half a file
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)


def _remove_stale_builds(directory: Path, age: float = 3600.0) -> None:
    """Deletes temporary files of builds that never finished (a process that exited while
    its background build ran leaves one)."""
    now = time.time()
    for stale in directory.glob("*.so.tmp"):
        try:
            if now - stale.stat().st_mtime > age:
                stale.unlink()
        except OSError:
            pass
