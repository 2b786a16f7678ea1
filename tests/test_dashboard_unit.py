"""Runs the dashboard's own unit tests (node --test: paging, virtual scroll mapping, formatting,
state, API errors) and its type check, so that the project's single pytest command covers them."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

FRONTEND = Path(__file__).resolve().parent.parent / "tvmdbg_tb_frontend"


def test_frontend_unit_tests_pass():
    if shutil.which("npm") is None:
        pytest.skip("npm (Node.js) is not installed: the dashboard's unit tests need it")
    if not (FRONTEND / "node_modules").is_dir():
        pytest.skip("the dashboard's node modules are not installed: run bash scripts/setup.sh")
    proc = subprocess.run(
        ["npm", "test", "--silent"],
        cwd=FRONTEND,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"npm test failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    passed = re.search(r"^# pass (\d+)$", proc.stdout, re.M)
    failed = re.search(r"^# fail (\d+)$", proc.stdout, re.M)
    assert passed and int(passed.group(1)) >= 30, proc.stdout[-3000:]
    assert failed and int(failed.group(1)) == 0, proc.stdout[-6000:]
