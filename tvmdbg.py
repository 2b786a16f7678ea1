"""`import tvmdbg`: the public API of tvmdbg, a thin alias of tvmdbg_tb's public names.

Names that need TVM resolve lazily (through tvmdbg_tb), so importing this stays fast.
"""

import tvmdbg_tb as _impl
from tvmdbg_tb import (  # noqa: F401
    MODE_NAMES,
    DebugDataReader,
    DebugEventsWriter,
    RunReader,
    StaleRecordError,
    __version__,
)

__all__ = _impl.__all__


def __getattr__(name: str):
    return getattr(_impl, name)
