"""Python stacks as (file, line, function) tuples, with the user's own frame marked.

"User code" is any file outside TVM, tvm_ffi, torch, tvmdbg and the standard library: the
frame a person would want to jump to from a kernel.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import sysconfig

Frame = tuple[str, int, str]

# Innermost frames kept per stack (deep framework stacks add nothing past this).
MAX_FRAMES = 40


def _package_dir(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def _library_roots() -> tuple[str, ...]:
    roots = [os.path.realpath(os.path.dirname(os.path.dirname(__file__)))]  # tvmdbg_tb
    for name in ("tvm", "tvm_ffi", "torch", "numpy"):
        path = _package_dir(name)
        if path:
            roots.append(path)
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib"):
        if paths.get(key):
            roots.append(os.path.realpath(paths[key]))
    return tuple(root.rstrip(os.sep) + os.sep for root in roots)


_ROOTS = _library_roots()
_USER_CACHE: dict[str, bool] = {}


def is_user_file(path: str) -> bool:
    """True for files of the user's program (not a library, not generated code)."""
    known = _USER_CACHE.get(path)
    if known is not None:
        return known
    if path.startswith("<") or not path:
        user = False
    else:
        real = os.path.realpath(path)
        user = not real.startswith(_ROOTS) and not real.endswith(os.sep + "tvmdbg.py")
    _USER_CACHE[path] = user
    return user


def user_index(frames: list[Frame]) -> int:
    """Index of the innermost user frame in frames (outermost first); -1 if none."""
    for i in range(len(frames) - 1, -1, -1):
        if is_user_file(frames[i][0]):
            return i
    return -1


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
