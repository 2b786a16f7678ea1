"""The `tvmdbg` command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("tvmdbg: the command line is not implemented yet", file=sys.stderr)
    return 2
