"""The disco worker entrypoint of tvmdbg: `python -m tvmdbg_tb.disco.worker <worker_id>
<num_workers> <num_groups> <read_fd> <write_fd>`, as TVM's own tvm.exec.disco_worker.

Before serving the controller it imports tvm.runtime.disco (fix.py), registers tvmdbg's
global functions (functions.py: what an executable compiled with tvmdbg calls, and the
traced module loading), and, when the controller dumps (TVMDBG_DISCO_JOB), enables dumping
under <logdir>/rank<worker_id> with the controller's options and the job's id.
"""

from __future__ import annotations

import json
import os
import sys


def start_recording(rank: int) -> None:
    """Enables dumping as the controller described in TVMDBG_DISCO_JOB (nothing without it)."""
    from tvmdbg_tb.disco.job import DISCO_ENV, rank_logdir

    text = os.environ.get(DISCO_ENV)
    if not text:
        return
    job = json.loads(text)
    import tvmdbg_tb.debugger as debugger

    options = dict(job["options"])
    # Named after its rank in the run pickers (its command line is the worker's, fds and all).
    given = options.get("run_name")
    options["run_name"] = f"{given[:180]} (rank {rank})" if given else f"rank {rank} of {job['world_size']}"
    writer = debugger.enable_dump_debug_info(rank_logdir(job["logdir"], rank), **options)
    writer.write_disco_worker(job["job_id"], rank, int(job["world_size"]))


def main() -> None:
    from tvmdbg_tb.disco.fix import disco_module

    disco_module()
    import tvm

    from tvmdbg_tb.disco import functions  # registers tvmdbg's global functions

    # In a worker process only: TVM's own loader too makes its VM through relax.VirtualMachine
    # with the summary kernels registered, so that TVM's own ProcessSession given this
    # entrypoint runs a module compiled with tvmdbg enabled (traced with tvmdbg.disco's).
    tvm.register_global_func("runtime.disco.load_vm_module", functions.load_vm_module, override=True)

    if len(sys.argv) == 6:
        start_recording(int(sys.argv[1]))
    from tvm.exec import disco_worker

    disco_worker.main()


if __name__ == "__main__":
    try:
        main()
    except (OSError, KeyboardInterrupt):
        pass
