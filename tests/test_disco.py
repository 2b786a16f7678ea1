"""Per-rank dumps of a TVM disco session: a 2-worker tvmdbg.disco.ProcessSession on CPU whose
rank 1 makes the NaN. The module is compiled with tvmdbg enabled in the controller (its
kernels call tvmdbg's summary functions, which the workers register), exported and loaded in
every worker; each rank writes its own run with the job's id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plugin import Server  # noqa: E402

from tvmdbg_tb.events.reader import DebugDataReader  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).resolve().parent / "disco_child.py"
TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """(logdir, line of the log op) of the disco program's dump."""
    base = tmp_path_factory.mktemp("disco")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "TVM_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(CHILD), str(base / "logs"), str(base / "model.so")],
        capture_output=True, text=True, timeout=300, env=env, cwd=base,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return base / "logs", int(done.stdout.split("LINE", 1)[1].split()[0])


def test_tvms_own_session_with_the_worker_hook_runs_a_module_built_with_tvmdbg(tmp_path):
    """The hook registers tvmdbg.stats and the summary kernels in each worker."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "TVM_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(CHILD), str(tmp_path / "logs"), str(tmp_path / "model.so"), "--plain"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0 and "PLAIN ok" in done.stdout, done.stderr[-3000:]


def test_each_rank_writes_its_own_run_of_one_job(job):
    logdir, _ = job
    with DebugDataReader(logdir) as reader:
        reader.update()
        runs = [reader.run(name) for name in reader.runs()]
        assert len(runs) == 2 and all(run.disco is not None for run in runs)
        (job_id,) = {run.disco.job_id for run in runs}
        ranks = reader.job(job_id)
        assert [run.disco.rank for run in ranks] == [0, 1] and all(run.disco.world_size == 2 for run in ranks)
        assert ranks[1].name.startswith("rank1/") and not ranks[0].name.startswith("rank")
        assert ranks[1].metadata.run_name == "rank 1 of 2"
        for run in ranks:
            assert run.completeness().state == "complete" and run.num_executions() == 2, run.name
        assert ranks[0].first_nonfinite_time() is None and ranks[1].first_nonfinite_time() is not None
        chosen, why = reader.choose()
        assert chosen is ranks[1] and "rank 1" in why


def test_alerts_name_rank_1s_op_and_line(job):
    logdir, line = job
    out = subprocess.run([*TVMDBG, "alerts", str(logdir)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "showing rank1/" in out.stderr and "rank 1 of 2" in out.stderr, out.stderr
    first = out.stdout.split("\n", 2)[1]  # the first origin's line
    assert "kernel tir_log" in out.stdout.split("\n", 1)[0] and f"disco_child.py:{line}" in first, out.stdout
    check = subprocess.run([*TVMDBG, "check", str(logdir)], capture_output=True, text=True, cwd=ROOT)
    assert check.returncode == 1, check.stdout + check.stderr


def test_the_runs_route_lists_both_ranks(job):
    logdir, _ = job
    server = Server(logdir)
    answer = server.json("runs")
    ranks = sorted((run["disco"]["rank"], run["run"]) for run in answer["runs"])
    assert [rank for rank, _ in ranks] == [0, 1]
    assert answer["default_run"] == ranks[1][1] and "rank 1" in answer["default_run_reason"]
    assert len({run["disco"]["job_id"] for run in answer["runs"]}) == 1
    json.dumps(answer)
