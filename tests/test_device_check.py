"""bench/gpu/device_check.py on this machine, which has no GPU: every check is skipped and says
why, no figure is printed or written, and the exit status is 0 (nothing failed, nothing was
claimed). Its checks run the day a CUDA device is there; the format is fixed here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "gpu" / "device_check.py"


def test_without_a_gpu_every_check_is_skipped_and_no_figure_is_claimed(tmp_path):
    out = tmp_path / "check.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(SCRIPT), "--json", str(out)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines == [
        f"{name}: skipped (no CUDA device)" for name in ("device_kernels", "planted_nan", "healthy", "overhead")
    ]
    results = json.loads(out.read_text())
    assert {r["verdict"] for r in results.values()} == {"skipped"}
    assert all(r["figures"] == {} for r in results.values())


def test_a_failed_check_sets_the_exit_status_and_keeps_the_others(monkeypatch, capsys):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import device_check
    finally:
        sys.path.remove(str(SCRIPT.parent))

    def broken(device):
        raise RuntimeError("cuda error: an illegal memory access")

    monkeypatch.setattr(device_check, "_device", lambda: object())
    monkeypatch.setattr(device_check, "RUNNERS", {**device_check.RUNNERS, "device_kernels": broken})
    for name in ("planted_nan", "healthy"):
        device_check.RUNNERS[name] = lambda device: (True, {})
    device_check.RUNNERS["overhead"] = lambda device: (True, {"added_us_per_kernel": 1.5})
    assert device_check.main([]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "device_kernels: FAIL (RuntimeError: cuda error: an illegal memory access)"
    assert lines[1:] == ["planted_nan: pass", "healthy: pass", "overhead: pass  added_us_per_kernel=1.500"]
