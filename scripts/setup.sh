#!/usr/bin/env bash
# Sets up a development environment in .venv: tvmdbg (editable) with its test extras, and
# the dashboard bundle. Idempotent: a second run only installs what changed. Sourced by
# scripts/test.sh and scripts/demo.sh; run it alone to prepare a checkout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "== creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.tvmdbg-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "== installing tvmdbg and its test dependencies into .venv"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[test]"
    touch "$stamp"
fi
if [ -f tvmdbg_tb_frontend/package.json ]; then
    bash tvmdbg_tb_frontend/build.sh --dev
fi
# The fallback path's native pre-filter (tvmdbg_tb/tracing/native_filter.py) is built with
# the system C++ compiler; without one tvmdbg traces in pure Python and its tests skip.
if ! command -v c++ >/dev/null && ! command -v g++ >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing g++ for the native VM filter"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null
fi
# The dashboard's browser tests drive Debian's Chromium (playwright cannot download a browser
# here). Installed only when missing and only as root (CI); elsewhere those tests skip.
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing chromium for the dashboard's browser tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
