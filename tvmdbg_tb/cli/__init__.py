"""The `tvmdbg` command line: an interactive analyzer over dumps, one-shot reports for scripts
and CI (alerts, check, profile), and `tvmdbg run` to stop a live program at a chosen VM call."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from tvmdbg_tb.cli.main import main as _main

    return _main(argv)
