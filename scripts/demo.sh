#!/usr/bin/env bash
# The demo: a TVM training loop that goes NaN (examples/debug_digits.py), dumped by tvmdbg,
# then served in TensorBoard's "TVM Debugger" tab. Sets up .venv first (scripts/setup.sh).
#
#   bash scripts/demo.sh              # then open the printed URL
#   PORT=6007 bash scripts/demo.sh    # another port
#
# Two runs land in $LOGDIR/digits_demo (cleared first, nothing else in $LOGDIR is touched):
# nan/ (the naive loss: alerts) and fixed/ (examples/debug_digits.py --fix: no alerts).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
LOGDIR=${LOGDIR:-/tmp/tvmdbg_logdir}
PORT=${PORT:-6006}
DEMO_DIR="$LOGDIR/digits_demo"

bash scripts/setup.sh

echo "== clearing the previous demo runs in $DEMO_DIR"
rm -rf "$DEMO_DIR"

echo "== the bug: naive cross-entropy, dumped to $DEMO_DIR/nan"
.venv/bin/python examples/debug_digits.py --debug --dump_dir "$DEMO_DIR/nan"
echo "== the fix: log_softmax loss, dumped to $DEMO_DIR/fixed"
.venv/bin/python examples/debug_digits.py --fix --debug --dump_dir "$DEMO_DIR/fixed"

url="http://127.0.0.1:$PORT/#tvmdbg"
echo
echo "== starting TensorBoard on $LOGDIR"
echo "   Open $url  (the \"TVM Debugger\" tab; Ctrl-C stops TensorBoard)"
echo
exec .venv/bin/tensorboard --logdir "$LOGDIR" --host 127.0.0.1 --port "$PORT"
