"""The README as a user reads it: short, with its docs in place, and its tutorial true.

The slow test runs `bash scripts/demo.sh` as the README says (into a temporary LOGDIR, on a
free port), checks that TensorBoard serves the tab, then runs every `$ .venv/bin/tvmdbg ...`
command of the README's tutorial on the demo's logdir and compares what it prints with the
README, line for line (the README shortens the checkout's paths).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TUTORIAL_LOGDIR = "/tmp/tvmdbg_logdir"


def test_readme_is_short_and_its_documents_exist():
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, len(lines)
    for link in re.findall(r"\]\(((?:docs/|examples/|CHANGELOG)[^)#]*)", README.read_text()):
        assert (ROOT / link).exists(), link
    for doc in ("docs/performance.md", "docs/usage.md", "docs/live.md", "docs/compare.md", "CHANGELOG.md"):
        assert (ROOT / doc).is_file(), doc
    assert re.findall(r"^## .*$", (ROOT / "CHANGELOG.md").read_text(), re.M)[0] == "## Unreleased"
    performance = README.read_text().split("## Performance", 1)[1].split("\n## ", 1)[0]
    table = [line for line in performance.splitlines() if line.startswith("|")]
    assert 3 <= len(table) <= 25 and "bench/bench_overhead.py" in performance


def tutorial_commands() -> list[tuple[str, list[str]]]:
    """Each `$ ... tvmdbg ...` line of the README's indented blocks, with the lines it prints."""
    found: list[tuple[str, list[str]]] = []
    collecting = False
    for line in README.read_text().splitlines():
        if line.startswith("    $ "):
            found.append((line[len("    $ ") :], []))
            collecting = True
        elif collecting and line.startswith("    "):
            found[-1][1].append(line[4:])
        else:
            collecting = False
    return [(command, out) for command, out in found if "tvmdbg " in command]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_demo_and_the_tutorials_commands_give_the_tutorials_answers(tmp_path):
    logdir = tmp_path / "tvmdbg_logdir"
    port = _free_port()
    log = tmp_path / "demo.log"
    with open(log, "w") as out:
        demo = subprocess.Popen(
            ["bash", "scripts/demo.sh"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "LOGDIR": str(logdir), "PORT": str(port)},
            start_new_session=True,  # TensorBoard is exec'ed in its place: stopped with its group
        )
    try:
        deadline = time.time() + 900
        while True:
            assert demo.poll() is None, log.read_text()[-4000:]
            assert time.time() < deadline, log.read_text()[-4000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugins_listing", timeout=10) as answer:
                    if json.load(answer).get("tvmdbg", {}).get("tab_name") == "TVM Debugger":
                        break
            except OSError:
                pass
            time.sleep(0.5)
    finally:
        os.killpg(demo.pid, signal.SIGTERM)
        demo.wait(timeout=60)
    printed = log.read_text()
    assert f"Open http://127.0.0.1:{port}/#tvmdbg" in printed
    # Step 1's loss and accuracy lines, and the fixed run's accuracy, as the README shows them.
    text = README.read_text()
    for line in re.findall(r"^step +\d .*$", text, re.M):
        assert re.search(rf"^{re.escape(line)}$", printed, re.M), line
    assert "final test accuracy 0.953" in printed and "**95.3% test accuracy**" in text

    commands = tutorial_commands()
    assert [c.split()[:2] for c, _ in commands] == [[".venv/bin/tvmdbg", "alerts"]] + [
        [".venv/bin/tvmdbg", "check"]
    ] * 2
    tvmdbg = str(Path(sys.executable).parent / "tvmdbg")
    for command, expected in commands:
        shell = command.replace(".venv/bin/tvmdbg", tvmdbg).replace(TUTORIAL_LOGDIR, str(logdir))
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, cwd=ROOT, timeout=300)
        shown = done.stdout.replace(f"{ROOT}/", "").splitlines()
        assert shown[: len(expected)] == expected, f"{command}\n{done.stdout}\n{done.stderr}"
        if command.split()[1] == "alerts":  # it names the demo's two runs and shows the NaN one
            assert "holds 2 runs (digits_demo/fixed/" in done.stderr and "showing digits_demo/nan/" in done.stderr
