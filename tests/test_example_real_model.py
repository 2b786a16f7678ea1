"""examples/debug_real_model.py as a user runs it (docs/tutorial-real-model.md): transformers'
ResNet from a config passes `tvmdbg check`, the planted inf weight is the first origin at its
line in transformers' modeling_resnet.py (called from the example), and `tvmdbg compare`
against PyTorch eager is within tolerance."""

from __future__ import annotations

import linecache
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.slow  # exports and compiles ResNet three times in a fresh process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "debug_real_model.py")


def _tvmdbg(*args):
    code = "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300)


def test_the_tutorials_commands_give_its_answers(tmp_path):
    env = {**os.environ, "TVM_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    made = subprocess.run(
        [sys.executable, EXAMPLE, str(tmp_path)], capture_output=True, text=True, timeout=900, env=env
    )
    assert made.returncode == 0, made.stderr[-3000:]
    assert f"tvmdbg compare {tmp_path}/tvm_stats {tmp_path}/torch" in made.stdout

    healthy = _tvmdbg("check", tmp_path / "healthy")
    assert healthy.returncode == 0 and "all finite" in healthy.stdout, healthy.stdout + healthy.stderr

    planted = _tvmdbg("check", tmp_path / "planted")
    assert planted.returncode == 1, planted.stdout + planted.stderr
    found = re.search(
        r"created at (\S+modeling_resnet\.py):(\d+) \(forward\)(?: in \S+)?, called from (\S+):(\d+)", planted.stdout
    )
    assert found, planted.stdout
    assert "self.convolution(" in linecache.getline(found[1], int(found[2]))
    assert found[3] == EXAMPLE and "from_exported_program(" in linecache.getline(found[3], int(found[4]))
    assert "relax.nn.conv2d" in planted.stdout

    compared = _tvmdbg("compare", tmp_path / "tvm_stats", tmp_path / "torch")
    assert compared.returncode == 0 and "Within tolerance." in compared.stdout, compared.stdout + compared.stderr
    assert "0 beyond tolerance" in compared.stdout
