#!/usr/bin/env bash
# Builds tvmdbg's sdist and wheel into dist/ with the C++ helpers and the dashboard bundle built
# in (python -m build, setup.py), then the manylinux wheel of this machine (auditwheel repair;
# libtvm_ffi is apache-tvm-ffi's, a dependency, so it is not copied in). Sets up .venv first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
rm -f dist/tvmdbg-*
.venv/bin/python -m build --outdir dist .
PATH="$PWD/.venv/bin:$PATH" .venv/bin/auditwheel repair --exclude libtvm_ffi.so --wheel-dir dist dist/tvmdbg-*-linux_x86_64.whl
ls -l dist/tvmdbg-*
