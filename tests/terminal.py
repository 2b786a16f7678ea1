"""A child process on a pseudo-terminal, started without running Python after fork.

`pty.fork()` runs Python code in the child between fork and exec; if the test process has
live threads (a DebugEventsWriter's flusher, TensorBoard's), a lock held by one of them at
fork time is held forever in the child, which then hangs before printing anything. Here the
child is started by subprocess (fork + exec in C, `setsid()` included) and only the freshly
exec'd Python makes the terminal its controlling terminal (so Ctrl-C sends SIGINT), then
execs the real command.
"""

from __future__ import annotations

import os
import subprocess
import sys

# SIGINT back to its default first: a test run started in the background by a non-interactive
# shell (as CI may be) ignores SIGINT, an ignored signal survives exec, and a Python started
# with SIGINT ignored never raises KeyboardInterrupt, so Ctrl-C on the terminal would do nothing.
_TAKE_TERMINAL = (
    "import fcntl, os, signal, sys, termios; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execvpe(sys.argv[1], sys.argv[1:], os.environ)"
)


def spawn(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    """Starts args on a new pseudo-terminal; returns (process, master fd). Close the fd."""
    master, slave = os.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _TAKE_TERMINAL, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    return process, master
