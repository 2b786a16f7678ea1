#!/usr/bin/env bash
# Sets everything up (see setup.sh), lints, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
echo "== ruff"
.venv/bin/ruff check . && .venv/bin/ruff format --check .
echo "== pytest"
.venv/bin/python -m pytest "$@"
