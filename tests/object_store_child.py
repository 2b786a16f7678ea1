"""A traced program for the object-storage tests: dumps the planted log model's calls (in
TVMDBG_TEST_MODE, FULL_HEALTH by default) to the
logdir given (an s3:// URL), then exits, or kills itself once its segments are uploaded.

    python object_store_child.py LOGDIR CALLS [--kill] [--rank-pause SECONDS]
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    logdir, calls = sys.argv[1], int(sys.argv[2])
    kill = "--kill" in sys.argv
    import tvmdbg

    mode = os.environ.get("TVMDBG_TEST_MODE", "FULL_HEALTH")
    writer = tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode=mode, circular_buffer_size=-1)
    from models import blockbuilder_planted

    planted = blockbuilder_planted("log")
    for _ in range(calls):
        planted.run()
    print("LINE", planted.fault_line, flush=True)
    if kill:
        writer.flush()
        deadline = time.time() + 30  # every segment sealed so far uploaded, then killed mid-run
        while writer._segments.uploader.pending and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(float(os.environ.get("TVMDBG_SEAL_SECONDS", "5")) + 1.5)
        while writer._segments.uploader.pending and time.time() < deadline:
            time.sleep(0.1)
        print("KILLING", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
