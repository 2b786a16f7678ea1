"""A traced training loop run by an installed tvmdbg (tests/test_packaging.py runs it with a
wheel's venv, no compiler on PATH, an empty cache): the demo's model from
examples/debug_digits.py, whose directory is the first argument, dumped into the second.

Prints one JSON object: where each C++ helper was loaded from (or why it was not),
native_call's own counters (call points, plans, calls it recorded itself), the summary kernels
this process compiled (none: the wheel's library serves them) and that library's path.
"""

from __future__ import annotations

import json
import sys

sys.path.insert(0, sys.argv[1])

import debug_digits as demo  # noqa: E402
import tvm  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.relax.training import SetupTrainer, Trainer  # noqa: E402
from tvm.relax.training.optimizer import SGD  # noqa: E402

import tvmdbg  # noqa: E402
from tvmdbg_tb.capture import kernel_cache  # noqa: E402
from tvmdbg_tb.events import native_records  # noqa: E402
from tvmdbg_tb.tracing import native_call, native_filter, native_rows, vm_wrapper  # noqa: E402

STEPS = 20

tvmdbg.enable_dump_debug_info(sys.argv[2], tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
train_x, train_y, _, _ = demo.load_data(0)
setup = SetupTrainer(
    demo.CrossEntropyLoss(True),
    SGD(demo.FIXED_LR),
    [relax.TensorType((len(train_x), demo.NUM_CLASSES), "float32")] * 2,
    legalize=False,
)
train_mod = setup(demo.build_backbone(len(train_x)))
target = tvm.target.Target("llvm")
executable = tvm.compile(train_mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
trainer = Trainer(train_mod, relax.VirtualMachine(executable, tvm.cpu()), tvm.cpu(), zero_init_param_state=False)
trainer.load_params(demo.initial_params(0))
losses = [float(trainer.update(train_x, train_y).numpy()) for _ in range(STEPS)]
native = vm_wrapper.tracer_of(trainer.vm)._native
counts = list(native.counts()) if native else None
tvmdbg.disable_dump_debug_info()
native_filter.load()  # the VM instrument's filter (the fallback path): loaded, not built
libraries = {
    library.source.stem: str(library.path()) if library.loaded() is not None else f"unavailable: {library.failure()}"
    for library in (native_call.LIBRARY, native_rows.LIBRARY, native_records.LIBRARY, native_filter.LIBRARY)
}
kernels = {"compiled": kernel_cache.compiled(), "library": str(kernel_cache.packaged_library_path())}
summary = {"tvmdbg": tvmdbg.__file__, "steps": STEPS, "losses": losses, "counts": counts, "libraries": libraries}
print(json.dumps({**summary, "kernels": kernels}))
