# A model whose op names and this source file hold markup: <img src=x onerror=alert(11)> </script><script>alert(12)</script>
"""Run as a script: dumps one VM call of a model whose Relax var (op) names are HTML that runs
script if a front end ever inserts it as markup (tests/test_dashboard_hardening.py), or, with
--escapes, terminal escape sequences that a terminal would obey if the CLI printed them as
they are (tests/test_hostile_logdirs.py; run from a file whose name holds them too)."""

import sys

import numpy as np
import tvm
from tvm import relax

EVIL = "<img src=x onerror=alert(1)></script><script>alert(2)</script>"
# Retitle the window (OSC 0), write the clipboard (OSC 52), clear the screen (CSI 2J), ring the
# bell, the same as C1 controls (CSI, OSC, ST), a carriage return, a right-to-left override.
ESCAPES = "\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[H\x07\x9b2J\x9d0;t\x9c\r\u202e\u2066x\x7f"


def build(evil: str = EVIL):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(relax.op.log(x), name_hint="op" + evil)  # <img src=x onerror=alert(3)>
            out = bb.emit_output(relax.op.add(lv, x), name_hint="out" + evil)
        bb.emit_func_output(out)
    return bb.get()


if __name__ == "__main__":
    import tvmdbg

    escapes = "--escapes" in sys.argv
    evil = ESCAPES if escapes else EVIL
    mode = "FULL_STATS" if escapes else "FULL_HEALTH"  # statistics: `tvmdbg compare` shows them too
    tvmdbg.enable_dump_debug_info(sys.argv[1], tensor_debug_mode=mode, circular_buffer_size=-1)
    if escapes:
        tvmdbg.add_watchpoint("nan_or_inf")  # its hits name the op
    vm = relax.VirtualMachine(tvm.compile(build(evil), "llvm"), tvm.cpu())
    vm["main"](tvm.runtime.tensor(np.array([-1, 0, 1, 2], dtype="float32")))
