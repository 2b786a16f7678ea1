"""Saved executables: the compile-time capture travels with the library.

Models are deployed as libraries: `executable.export_library(path)` in one process,
`tvm.runtime.load_module(path)` and a VirtualMachine in another. What tvmdbg captured at
compile time (graphs.ExecutableInfo: the ops, their source lines, and for an instrumented
build its stats buffer layout, compiled.CompiledFunction) lives in the compiling process; a
library loaded without it is traced by the VM instrument, ~10x slower a call, without source
lines. So export_library also writes the capture, and load_module reads it back and attaches
it to the module it returns: a loaded library is traced like the executable it was saved from.

Where it goes: appended to the shared library itself (an ELF file ignores bytes after its
sections, dlopen reads none of them), behind a trailer naming its length, so the capture
travels with the one file users copy; for a file that is not ELF (export_library to a .tar),
a sidecar `<file>.tvmdbg` next to it. Either way the capture holds the SHA-256 of the library
bytes it was written for, and is ignored (with a warning) when they differ: a library rebuilt
or edited since keeps no stale capture. The capture is pickled (trusted as the library is:
loading a shared library runs its code already) and holds no IR: each fused kernel's Relax
group, which the op-by-op replay re-runs (tvmdbg_tb.replay), is kept as TVMScript and parsed
only when a replay needs it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import os
import pickle
import re
import struct
import threading
from pathlib import Path
from typing import Any

import tvm

from tvmdbg_tb.capture import compiled, graphs, kernel_source
from tvmdbg_tb.capture import hooks as capture

logger = logging.getLogger("tvmdbg.saved")

MAGIC = b"TVMDBG-CAPTURE/1"  # the trailer's last 16 bytes (format 1)
_TRAILER = struct.Struct("<Q16s")  # payload length, MAGIC
_HASH = 32  # SHA-256 of the library bytes, first in the payload
SIDECAR = ".tvmdbg"
# The stats buffer layout the executable's kernels write, and the recount kernels' arguments they
# pass: a capture of another layout is not used.
LAYOUT = (kernel_source.ROW_WIDTH, kernel_source.STATS_COLUMN, kernel_source.INNER_COLUMN,
          kernel_source.INNER_FLAG_COLUMN, kernel_source.INNER_OPS_PER_ROW,
          kernel_source.RECOUNT_ARGUMENTS)  # fmt: skip


class SavedGroup:
    """A fused kernel's Relax group and the PrimFuncs it calls, as TVMScript: what
    replay.group reads of the FuseOps snapshot (get_global_vars, [gv]), parsed on first use
    (a real model's groups take seconds to parse, and only a replay needs one)."""

    def __init__(self, text: str):
        self.text = text
        self._lock = threading.Lock()
        self._module = None

    def _parsed(self):
        with self._lock:
            if self._module is None:
                self._module = tvm.script.from_source(self.text)
            return self._module

    def get_global_vars(self):
        return self._parsed().get_global_vars()

    def __getitem__(self, key):
        return self._parsed()[key]

    def __getstate__(self):
        return {"text": self.text}

    def __setstate__(self, state):
        self.__init__(state["text"])


def save(path: str | os.PathLike, executable: Any, info: graphs.ExecutableInfo) -> Path:
    """Writes info (and the layout of the functions it instruments) with the library that
    export_library wrote at path: appended to it when it is ELF, else into a sidecar.
    Returns the file written to."""
    path = Path(path)
    library = path.read_bytes()
    payload = hashlib.sha256(library).digest() + _pickled(executable, info)
    if library.startswith(b"\x7fELF"):
        with open(path, "ab") as out:
            out.write(payload + _TRAILER.pack(len(payload), MAGIC))
        return path
    sidecar = path.with_name(path.name + SIDECAR)
    sidecar.write_bytes(payload)
    return sidecar


def load(path: str | os.PathLike) -> graphs.ExecutableInfo | None:
    """The capture saved with the library at path, its functions registered so that the
    compiled tracer maps their stats buffers, and the summary kernels they call registered;
    None when there is none (a library exported without tvmdbg) or it does not apply."""
    path = Path(path)
    found = _read(path)
    if found is None:
        return None
    digest, library_size, payload = found
    if hashlib.sha256(_head(path, library_size)).digest() != digest:
        logger.warning("tvmdbg: ignoring the capture saved with %s: the library changed since it was saved", path)
        return None
    try:
        saved = pickle.loads(payload)
    except Exception as error:  # a damaged capture: traced as an unmapped library
        logger.warning("tvmdbg: ignoring the capture saved with %s: %s", path, error)
        return None
    if saved.get("layout") != LAYOUT:
        logger.warning(
            "tvmdbg: ignoring the capture saved with %s: another tvmdbg version wrote it (its kernels write "
            "another stats layout or call other summary kernels: export the library again with this one)",
            path,
        )
        return None
    info: graphs.ExecutableInfo = saved["info"]
    compiled.register(info)
    for name in saved["kernels"]:
        compiled.register_kernel(name)
    return info


def _pickled(executable: Any, info: graphs.ExecutableInfo) -> bytes:
    """info (with the CompiledFunctions of its instrumented functions) pickled without IR, and
    the summary kernels the executable calls."""
    kernels = set(re.findall(r"\btvmdbg\.(tvmdbg_[A-Za-z0-9_]+)", executable.as_text()))  # the VM's calls
    kernels = sorted(kernels.union(*(f.packed_kernels for f in info.compiled.values())))  # the kernels' own
    out = io.BytesIO()
    _Pickler(out, _groups(info)).dump({"layout": LAYOUT, "info": info, "kernels": kernels})
    return out.getvalue()


def _groups(info: graphs.ExecutableInfo) -> dict[str, SavedGroup | None]:
    """Each fused kernel's group (its Relax function and the PrimFuncs it calls) as TVMScript."""
    from tvm import relax

    fused = info.fused_module
    kernels = {site.kernel for f in info.functions.values() for site in f.sites if site.fused_module is not None}
    out: dict[str, SavedGroup | None] = {}
    if fused is None:
        return out
    by_name = {gv.name_hint: gv for gv in fused.get_global_vars()}
    for kernel in kernels:
        gv = by_name.get(kernel)
        func = fused[gv] if gv is not None else None
        out[kernel] = None
        if isinstance(func, relax.Function):
            members = {gv: func}
            for used in relax.analysis.all_global_vars(func):
                members[used] = fused[used]
            text = tvm.IRModule(members).script()
            if "metadata[" not in text:  # a tensor constant in the group: not printable in full
                out[kernel] = SavedGroup(text)
    return out


class _Pickler(pickle.Pickler):
    """Pickles the capture's dataclasses with their IR replaced: the FuseOps snapshot by
    nothing (compile time only), a site's by its SavedGroup, and a site's cached replay
    group dropped; any other TVM object is an error (not silently lost)."""

    def __init__(self, file, groups: dict[str, SavedGroup | None]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.groups = groups

    def reducer_override(self, obj):
        if isinstance(obj, graphs.SiteInfo):
            state = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
            state["fused_module"] = self.groups.get(obj.kernel) if obj.fused_module is not None else None
            return _rebuild, (graphs.SiteInfo, state)
        if isinstance(obj, graphs.ExecutableInfo):
            state = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
            state["fused_module"] = None
            return _rebuild, (graphs.ExecutableInfo, state)
        if isinstance(obj, tvm.runtime.Object):
            raise TypeError(f"tvmdbg cannot save {type(obj).__name__} with a library")
        return NotImplemented


def _rebuild(cls, state: dict):
    return cls(**state)


def _read(path: Path) -> tuple[bytes, int, bytes] | None:
    """(library digest, library size, pickled capture) of the capture saved with path, from
    its trailer or its sidecar; None when there is neither."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as library:
            if size >= _TRAILER.size:
                library.seek(size - _TRAILER.size)
                length, magic = _TRAILER.unpack(library.read(_TRAILER.size))
                if magic == MAGIC and _HASH <= length <= size - _TRAILER.size:
                    library.seek(size - _TRAILER.size - length)
                    payload = library.read(length)
                    return payload[:_HASH], size - _TRAILER.size - length, payload[_HASH:]
        sidecar = path.with_name(path.name + SIDECAR)
        if sidecar.is_file():
            payload = sidecar.read_bytes()
            return payload[:_HASH], size, payload[_HASH:]
    except OSError:
        return None
    return None


def _head(path: Path, size: int) -> bytes:
    with open(path, "rb") as library:
        return library.read(size)


_INSTALLED = False
_ORIGINALS: dict[str, Any] = {}


def install() -> None:
    """Wraps Executable.export_library and tvm.runtime.load_module once; a library exported
    or loaded while tvmdbg was never enabled has no capture (load_module then attaches none)."""
    global _INSTALLED
    if _INSTALLED:
        return
    executable_class = tvm.runtime.Executable
    original_export = executable_class.export_library
    original_load = tvm.runtime.load_module

    def export_library(self, file_name, *args, **kwargs):
        result = original_export(self, file_name, *args, **kwargs)
        info = capture.info_of(self)
        if info is not None and info.source_mapped:
            try:
                save(file_name, self, info)
            except Exception as error:  # the library is written: the user's export succeeded
                logger.warning("tvmdbg: could not save the compile-time capture with %s: %s", file_name, error)
        return result

    def load_module(path, *args, **kwargs):
        module = original_load(path, *args, **kwargs)
        try:
            info = load(path)
        except Exception as error:  # never fail the user's load
            logger.warning("tvmdbg: could not read the capture saved with %s: %s", path, error)
            info = None
        if info is not None:
            capture.attach(module, info)
        return module

    for owner, name, wrapper, original in (
        (executable_class, "export_library", export_library, original_export),
        (tvm.runtime, "load_module", load_module, original_load),
    ):
        wrapper.__wrapped__ = original
        wrapper.__doc__ = original.__doc__
        setattr(owner, name, wrapper)
        _ORIGINALS[name] = original
    tvm.runtime.module.load_module = load_module
    _INSTALLED = True
