"""Which kernel a failed build could not compile, and which of the model's ops made it.

TVM's code generators report a failed check from C++ (`Check failed: (t.MatchesCode(
DLDataTypeCode::kDLFloat)) is false`) without naming the PrimFunc they were compiling, so the
user of a 500-kernel model cannot tell which op to change (GPT-2 imported without an
attention mask: a `cumsum` over booleans). When a recorded build fails after VM codegen,
tvmdbg compiles the module's PrimFuncs again in halves until it holds the ones that fail on
their own, and adds a note to the error naming each kernel, the Relax ops it computes and the
lines that built them. Only a failing build pays for it.
"""

from __future__ import annotations

import time

from tvmdbg_tb.capture import frames as frames_mod
from tvmdbg_tb.capture import graphs

# Seconds the search may spend building parts again (each part is an LLVM build).
SEARCH_SECONDS = 120.0
# Kernels named at most: the first few that fail alone are enough to act on.
MAX_NAMED = 3
# The prefix of the kernels tvmdbg itself adds to a build (compiled.py).
OWN_KERNEL_PREFIX = "tvmdbg_"


def failing_kernels(tir_mod, build_one, budget: float = SEARCH_SECONDS) -> tuple[list[str], bool]:
    """Names of PrimFuncs of `tir_mod` whose build fails on its own (at most MAX_NAMED), and
    whether the search finished. `build_one(module)` builds a module and raises on failure.

    Halves are tried in order; a part that fails while neither of its halves does (a failure
    that needs both) is named whole."""
    deadline = time.monotonic() + budget
    names = sorted(gvar.name_hint for gvar in tir_mod.get_global_vars())
    by_name = {gvar.name_hint: gvar for gvar in tir_mod.get_global_vars()}
    found: list[str] = []

    def fails(part: list[str]) -> bool:
        import tvm

        module = tvm.IRModule({by_name[name]: tir_mod[by_name[name]] for name in part}, attrs=tir_mod.attrs)
        try:
            build_one(module)
        except Exception:  # noqa: BLE001 - any failure of TVM's build counts
            return True
        return False

    def search(part: list[str]) -> bool:
        """Adds the failing kernels of `part` (known to fail) to found; False when out of time."""
        if len(found) >= MAX_NAMED:
            return True
        if len(part) == 1:
            found.append(part[0])
            return True
        half = len(part) // 2
        blamed = False
        for piece in (part[:half], part[half:]):
            if time.monotonic() > deadline:
                return False
            if fails(piece):
                blamed = True
                if not search(piece):
                    return False
        if not blamed:
            found.append(" + ".join(part))
        return True

    if not names or not fails(names):
        return [], True  # the failure is not in building the kernels (linking, the VM's code)
    complete = search(names)
    return found, complete


def note(kernels: list[str], complete: bool, info: graphs.ExecutableInfo | None) -> str:
    """The note added to the build's error: each failing kernel, its Relax ops and lines."""
    if not kernels:
        return ""
    sites = _sites_by_kernel(info)
    lines = ["tvmdbg: the build fails while compiling these kernels on their own:"]
    for kernel in kernels:
        lines.append(f"  kernel {kernel}")
        if kernel.startswith(OWN_KERNEL_PREFIX):
            lines.append(
                "    (a kernel tvmdbg adds to watch outputs: please report it; "
                "tensor_debug_mode='NO_TENSOR' builds without it)"
            )
        for origin in _origins(sites.get(kernel, ())):
            lines.append(f"    {_describe(origin)}")
    if not complete:
        lines.append(f"  (the search stopped after {SEARCH_SECONDS:.0f} s: other kernels may fail too)")
    return "\n".join(lines)


def _sites_by_kernel(info: graphs.ExecutableInfo | None) -> dict[str, list[graphs.SiteInfo]]:
    sites: dict[str, list[graphs.SiteInfo]] = {}
    for function in (info.functions if info is not None else {}).values():
        for site in function.sites:
            sites.setdefault(site.kernel, []).append(site)
    return sites


def _origins(sites) -> list[graphs.Origin]:
    """The distinct Relax ops computed by the kernel's calls, in the order they run."""
    seen: set[tuple] = set()
    result = []
    for site in sites:
        for origin in [o for o in site.member_origins if o is not None] or site.origins:
            key = (origin.op_type, frames_mod.place(origin.frames, origin.user_index))
            if key not in seen:
                seen.add(key)
                result.append(origin)
    return result


def _describe(origin: graphs.Origin) -> str:
    text = origin.op_type
    if origin.node is not None:
        text += f" (model node {origin.node.name}, {origin.node.op_type})"
    place = frames_mod.place(origin.frames, origin.user_index)
    return f"{text} at {place}" if place else text
