"""A program serving a library compiled without tvmdbg, for tests/test_served_library.py: it
loads LIBRARY in this process with tvmdbg enabled and runs it as the test says.

    python library_child.py LOGDIR LIBRARY symbolic      # main(x: (n, 4), w): a NaN in the data of call 2 (n=16)
    python library_child.py LOGDIR LIBRARY generate      # the paged-KV decoder, its embedding row planted
"""

from __future__ import annotations

import json
import sys

import numpy as np


def main() -> None:
    logdir, library, scenario = sys.argv[1:4]
    import tvmdbg

    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    import tvm

    executable = tvm.runtime.load_module(library)
    try:
        if scenario == "symbolic":
            symbolic(executable)
        else:
            generate(executable, json.loads(sys.argv[4]))
    finally:
        tvmdbg.disable_dump_debug_info()


def symbolic(executable) -> None:
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(executable, tvm.cpu())
    w = tvm.runtime.tensor(np.eye(4, dtype="float32"))
    vm["main"](tvm.runtime.tensor(np.ones((40, 4), "float32")), w)
    x = np.ones((16, 4), "float32")
    x[3, 1] = np.nan
    for _ in range(2):
        vm["main"](tvm.runtime.tensor(x), w)


def generate(executable, names: list[str]) -> None:
    sys.path.insert(0, sys.argv[5])  # the examples folder
    import generate_paged_kv as example

    generator = example.Generator(executable, example.weights(executable, names, plant=True))
    generator.generate(example.PROMPT, 6)


if __name__ == "__main__":
    main()
