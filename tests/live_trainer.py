"""A child program for the live trust tests: the digits MLP trained (fused build, live control)
until its standard input closes.

    python tests/live_trainer.py LOGDIR

Prints "READY <run dir>" when live, then "STEP <n>" after each training step, and "DONE" at
the end. Started with subprocess.Popen by tests/test_live_trust.py.
"""

import sys
import threading

import models

import tvmdbg

logdir = sys.argv[1]
writer = tvmdbg.enable_dump_debug_info(logdir, "FULL_HEALTH", live=True, live_timeout=5.0)
training = models.digits_training(lr=0.05, fuse=True)  # finite for thousands of steps
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
print("READY", writer.run_dir, flush=True)
step = 0
while not stop.is_set():
    training.trainer.update(training.inputs, training.targets)
    step += 1
    print("STEP", step, flush=True)
tvmdbg.disable_dump_debug_info()
print("DONE", flush=True)
