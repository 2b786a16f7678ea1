#!/usr/bin/env bash
# Builds the dashboard bundle into tvmdbg_tb_frontend/dist/index.js. Idempotent and quick: a
# bundle whose stamp matches the sources is kept without touching Node.js (so an sdist, which
# ships both, builds with no npm); otherwise installs node modules when package-lock.json
# changed and rebuilds. `--dev` (scripts/setup.sh) also installs the node modules when the
# bundle is current, for `npm test`. Any failure (npm missing, type errors, bundling) stops
# with a non-zero status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
install_modules() {
    command -v npm >/dev/null || { echo "build.sh: npm (Node.js >= 20) is required to build the dashboard" >&2; exit 1; }
    if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
        echo "== installing the dashboard's node modules (npm ci)"
        npm ci --no-audit --no-fund --loglevel=error
    fi
}
if [ "${1:-}" = "--dev" ]; then
    install_modules
fi
inputs=$(cat package-lock.json build.mjs tsconfig.json $(find src -type f | LC_ALL=C sort) | sha256sum | cut -d' ' -f1)
stamp=dist/.build-stamp
if [ -f dist/index.js ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$inputs" ]; then
    exit 0
fi
install_modules
echo "== building the dashboard bundle"
npx --no-install tsc --noEmit
rm -f "$stamp"
node build.mjs
echo "$inputs" > "$stamp"
