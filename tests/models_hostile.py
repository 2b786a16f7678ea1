# A model whose op names and this source file hold markup: <img src=x onerror=alert(11)> </script><script>alert(12)</script>
"""Run as a script: dumps one VM call of a model whose Relax var (op) names are HTML that runs
script if a front end ever inserts it as markup (tests/test_dashboard_hardening.py)."""

import sys

import numpy as np
import tvm
from tvm import relax

EVIL = "<img src=x onerror=alert(1)></script><script>alert(2)</script>"


def build():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(relax.op.log(x), name_hint="op" + EVIL)  # <img src=x onerror=alert(3)>
            out = bb.emit_output(relax.op.add(lv, x), name_hint="out" + EVIL)
        bb.emit_func_output(out)
    return bb.get()


if __name__ == "__main__":
    import tvmdbg

    tvmdbg.enable_dump_debug_info(sys.argv[1], tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    vm = relax.VirtualMachine(tvm.compile(build(), "llvm"), tvm.cpu())
    vm["main"](tvm.runtime.tensor(np.array([-1, 0, 1, 2], dtype="float32")))
