#!/usr/bin/env bash
# Sets everything up (see setup.sh), lints, and runs the whole test suite; arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# The PyTorch importer's tests need torch, an optional extra (never a default dependency).
if [ -z "${TVMDBG_SKIP_TORCH:-}" ] && ! .venv/bin/python -c "import torch" 2>/dev/null; then
    echo "== installing torch (CPU) for the PyTorch importer tests; TVMDBG_SKIP_TORCH=1 skips them"
    .venv/bin/python -m pip install --quiet "torch==2.13.0" || echo "!! torch could not be installed: its tests will be skipped"
fi
echo "== ruff"
.venv/bin/ruff check . && .venv/bin/ruff format --check .
# On every core: one worker per core, each module whole in one worker (its shared fixtures
# built once), the modules with slow tests first (tests/conftest.py). `-n 0` runs in one process.
# One TVM thread per worker: the workers already use the cores.
echo "== pytest"
export TVM_NUM_THREADS=${TVM_NUM_THREADS:-1}
.venv/bin/python -m pytest -n auto --dist loadscope --no-loadscope-reorder "$@"
