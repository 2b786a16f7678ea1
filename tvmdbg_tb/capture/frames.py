"""Python stacks as (file, line, function) tuples, with the frame to show marked.

The frame shown for an op is the innermost frame of **model code** (docs/source-lines.md):

- the user's own files (anything outside installed packages and the standard library), and
- by default, the files of installed packages other than the frameworks tvmdbg knows
  (TVM, tvm_ffi, PyTorch, NumPy, tvmdbg itself): the libraries that define models, such as
  transformers' modeling_*.py, so a GPT-2 op shows the line in modeling_gpt2.py (or
  pytorch_utils.py's Conv1D) that made it rather than the user's call of the model.

`set_model_code(places)` (enable_dump_debug_info(model_code=...), TVMDBG_MODEL_CODE) replaces
the default: model code is then the user's own files plus the places listed (module or
package names, files or directories; a place inside a framework counts too, e.g.
"torch.nn.modules"); an empty list keeps the user's own files only. When the frame shown is
in a library, the user's own innermost frame is the op's `called_from`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import site
import sys
import sysconfig
from collections.abc import Iterable

Frame = tuple[str, int, str]

# Innermost frames kept per stack (deep framework stacks add nothing past this).
MAX_FRAMES = 40
# The environment variable read when enable_dump_debug_info gets no model_code.
MODEL_CODE_ENV = "TVMDBG_MODEL_CODE"


def _package_dir(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return os.path.realpath(list(spec.submodule_search_locations)[0])
    return os.path.realpath(spec.origin) if spec.origin and os.path.isfile(spec.origin) else None


def _prefixes(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(path if os.path.isfile(path) else path.rstrip(os.sep) + os.sep for path in paths)


def _framework_roots() -> tuple[str, ...]:
    """tvmdbg and the frameworks: never model code unless listed."""
    roots = [os.path.realpath(os.path.dirname(os.path.dirname(__file__)))]  # tvmdbg_tb
    for name in ("tvm", "tvm_ffi", "torch", "numpy"):
        path = _package_dir(name)
        if path:
            roots.append(path)
    return _prefixes(roots)


def _stdlib_roots() -> tuple[str, ...]:
    """The standard library (a venv's "platstdlib" is the venv's lib/, site-packages and all)."""
    roots = [os.path.realpath(os.path.dirname(os.__file__))]
    stdlib = sysconfig.get_paths().get("stdlib")
    if stdlib:
        roots.append(os.path.realpath(stdlib))
    return _prefixes(set(roots))


def _installed_roots() -> tuple[str, ...]:
    """Where installed packages live (site-packages, dist-packages, the user site)."""
    roots = []
    paths = sysconfig.get_paths()
    for key in ("purelib", "platlib"):
        if paths.get(key):
            roots.append(paths[key])
    try:
        roots.extend(site.getsitepackages())
    except AttributeError:  # some virtualenv versions' site module
        pass
    user_site = getattr(site, "USER_SITE", None)
    if user_site:
        roots.append(user_site)
    roots.extend(p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"))
    return _prefixes({os.path.realpath(root) for root in roots})


_FRAMEWORKS = _framework_roots()
_INSTALLED = _installed_roots()  # may lie inside the standard library's directory: tested first
_STDLIB = _stdlib_roots()
# None: every installed package outside the frameworks is model code (the default).
_MODEL_PLACES: tuple[str, ...] | None = None
_USER_CACHE: dict[str, bool] = {}
_MODEL_CACHE: dict[str, bool] = {}


def _place(entry: str) -> str:
    """The path prefix of one model_code entry: a path, or a module or package name."""
    text = os.path.expanduser(entry.strip())
    if os.sep in text or "/" in text or os.path.exists(text):
        if not os.path.exists(text):
            raise ValueError(f"model_code: no such file or directory: {entry!r}")
        return _prefixes([os.path.realpath(text)])[0]
    path = _package_dir(text)
    if path is None:
        raise ValueError(f"model_code: {entry!r} is neither a file, a directory nor an importable module")
    return _prefixes([path])[0]


def parse_model_code(value: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """model_code as given (None, a comma-separated string, or names/paths) -> path
    prefixes, or None for the default. Raises ValueError naming a place that is not found."""
    if value is None:
        return None
    entries = value.split(",") if isinstance(value, str) else list(value)
    if not all(isinstance(entry, str) for entry in entries):
        raise TypeError(f"model_code must be module names or paths, got {value!r}")
    return tuple(_place(entry) for entry in entries if entry.strip())


def set_model_code(places: tuple[str, ...] | None) -> None:
    """Which files are model code from now on (parse_model_code's result; None: default)."""
    global _MODEL_PLACES
    if places == _MODEL_PLACES:
        return
    _MODEL_PLACES = places
    _MODEL_CACHE.clear()
    _CALL_STACKS.clear()


def is_user_file(path: str) -> bool:
    """True for files of the user's own program (not an installed package, not the
    standard library, not generated code)."""
    known = _USER_CACHE.get(path)
    if known is not None:
        return known
    if path.startswith("<") or not path:
        user = False
    else:
        real = os.path.realpath(path)
        user = not real.startswith(_FRAMEWORKS + _INSTALLED + _STDLIB) and not real.endswith(os.sep + "tvmdbg.py")
    _USER_CACHE[path] = user
    return user


def is_model_file(path: str) -> bool:
    """True for files of model code (module doc): the frame to show may be there."""
    known = _MODEL_CACHE.get(path)
    if known is not None:
        return known
    if path.startswith("<") or not path:
        model = False
    else:
        real = os.path.realpath(path)
        places = _MODEL_PLACES
        if places and real.startswith(places):
            model = True
        elif real.startswith(_FRAMEWORKS):
            model = False
        elif real.startswith(_INSTALLED):
            model = places is None
        else:
            model = is_user_file(path)
    _MODEL_CACHE[path] = model
    return model


def user_index(frames: list[Frame]) -> int:
    """Index of the frame to show in frames (outermost first): the innermost frame of model
    code; -1 if none."""
    for i in range(len(frames) - 1, -1, -1):
        if is_model_file(frames[i][0]):
            return i
    return -1


def called_from_index(frames, shown: int) -> int | None:
    """Index of the user's own innermost frame outside the shown one, when the frame shown
    is library model code (a transformers model's forward) or there is none (an op of an
    ONNX file: its location is its node); None when the frame shown is the user's own."""
    if shown >= 0 and is_user_file(frames[shown][0]):
        return None
    for i in range((shown if shown >= 0 else len(frames)) - 1, -1, -1):
        if is_user_file(frames[i][0]):
            return i
    return None


def place(frames, shown: int) -> str:
    """'file:line' of the frame shown, with ', called from file:line' when the user's own
    frame is another (the words a note or message uses for an op's place); '' for none."""
    if not 0 <= shown < len(frames):
        return ""
    text = f"{frames[shown][0]}:{frames[shown][1]}"
    called = called_from_index(frames, shown)
    if called is not None:
        text += f", called from {frames[called][0]}:{frames[called][1]}"
    return text


def capture(skip: int = 0) -> tuple[list[Frame], int]:
    """The caller's stack (outermost first, innermost MAX_FRAMES kept) and its user index.

    skip: extra frames to drop above the caller of capture().
    """
    frame = sys._getframe(skip + 1)
    frames: list[Frame] = []
    while frame is not None and len(frames) < MAX_FRAMES:
        frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    frames.reverse()
    return frames, user_index(frames)


# Frames of the call point that key capture_call's cache (constant cost at any depth).
KEY_FRAMES = 8


class Stack(tuple):
    """A captured stack (outermost first) that hashes in O(1) and is shared by every call
    from the same call point, so location caches keyed on it cost a lookup by identity."""

    __slots__ = ()

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:
        return self is other

    def __ne__(self, other) -> bool:
        return self is not other


_CALL_STACKS: dict[tuple, tuple[Stack, int, tuple]] = {}


def capture_call(skip: int = 0) -> tuple[Stack, int]:
    """capture() for the per-VM-call hot path, at a cost that does not grow with the depth.

    The cache key is the innermost KEY_FRAMES frames (code object and bytecode offset); only
    a miss walks the whole stack (MAX_FRAMES). Rule: calls whose innermost KEY_FRAMES frames
    are the same share the outer frames recorded at the first such call (the user frame and
    its nearest callers are always exact unless they lie deeper than KEY_FRAMES frames).
    Code objects are keyed by address: hashing a code object reads its bytecode, names and
    constants, memory a training step has usually evicted by the next call. Each entry holds
    its code objects, so no other code object can take their addresses.
    """
    frame = sys._getframe(skip + 1)
    key = []
    walk = frame
    while walk is not None and len(key) < 2 * KEY_FRAMES:
        key.append(id(walk.f_code))
        key.append(walk.f_lasti)
        walk = walk.f_back
    key = tuple(key)
    found = _CALL_STACKS.get(key)
    if found is None:
        frames, index = capture(skip + 1)
        codes = []
        walk = frame
        while walk is not None and len(codes) < KEY_FRAMES:
            codes.append(walk.f_code)
            walk = walk.f_back
        found = (Stack(frames), index, tuple(codes))
        if len(_CALL_STACKS) < 10_000:
            _CALL_STACKS[key] = found
    return found[0], found[1]


_TRACE_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def parse_traceback(text: str) -> list[Frame]:
    """Frames of a formatted Python traceback (as torch.fx keeps in node.meta["stack_trace"])."""
    return [(path, int(line), function) for path, line, function in _TRACE_LINE.findall(text or "")]
