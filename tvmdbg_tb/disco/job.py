"""What a disco controller hands its workers: the job's dump settings, and where each rank writes."""

from __future__ import annotations

from tvmdbg_tb import storage

# The environment variable holding the controller's dump settings (JSON: job_id, world_size,
# logdir, options), set while the workers start; a worker without it does not record.
DISCO_ENV = "TVMDBG_DISCO_JOB"


def rank_logdir(logdir: str, rank: int) -> str:
    """Where rank k >= 1 of a job writes its run: <logdir>/rank<k> (rank 0, the controller's
    process, writes where the controller's dump was enabled)."""
    return storage.join(logdir, f"rank{rank}")
