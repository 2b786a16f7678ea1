"""Per-rank dumps of a TVM disco session.

`tvmdbg.disco.ProcessSession(num_workers, ...)` is a drop-in for
`tvm.runtime.disco.ProcessSession`: when dumping is enabled in the controller, every worker
process records its own run under `<logdir>/rank<k>/` (the controller's own run is rank 0:
worker 0 runs in its process), each with the job's id, its rank and the world size
(DiscoWorker, in its metadata stream). The worker side is a disco entrypoint,
`python -m tvmdbg_tb.disco.worker`, usable on its own as
`tvm.runtime.disco.ProcessSession(n, entrypoint="tvmdbg_tb.disco.worker")`: it carries the
TVM 0.27 import fix (`from tvm.runtime import disco` gives None on the CPU wheel) and
registers what executables compiled with tvmdbg call ("tvmdbg.stats", the summary kernels).

`ProcessSession` and `disco_module` import TVM when first used; the rest does not.
"""

from __future__ import annotations

from tvmdbg_tb.disco.job import DISCO_ENV, rank_logdir


def __getattr__(name: str):
    if name == "ProcessSession":
        from tvmdbg_tb.disco.session import ProcessSession

        return ProcessSession
    if name == "disco_module":
        from tvmdbg_tb.disco.fix import disco_module

        return disco_module
    raise AttributeError(name)


__all__ = ["DISCO_ENV", "ProcessSession", "disco_module", "rank_logdir"]
