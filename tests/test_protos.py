"""The checked-in protobuf code is what protos/*.proto generate."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_is_fresh():
    result = subprocess.run(
        [sys.executable, str(ROOT / "protos" / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_public_modules_import_without_tvm():
    # The reader, CLI and plugin must not pay for (or depend on) importing TVM.
    code = "import sys, tvmdbg, tvmdbg_tb, tvmdbg_tb.plugin.loader, tvmdbg_tb.cli; assert 'tvm' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
