"""Where a dump lives: one directory per run, six record streams in each (a file each on a
local disk, sealed segments on an object store: tvmdbg_tb/storage).

Shared by the writer (which creates them) and the reader (which finds them), so the two
can never disagree on a name. The names avoid `tfevents`, which TensorBoard would ingest.
"""

from __future__ import annotations

import os
import socket
import time

from tvmdbg_tb import storage

METADATA = "metadata"
SOURCE_FILES = "source_files"
STACK_FRAMES = "stack_frames"
GRAPHS = "graphs"
EXECUTION = "execution"
GRAPH_EXECUTION_TRACES = "graph_execution_traces"

STREAMS = (METADATA, SOURCE_FILES, STACK_FRAMES, GRAPHS, EXECUTION, GRAPH_EXECUTION_TRACES)
# The order the writer moves records to their files: what a record refers to is on disk
# before the record (a frame's source file, an op's frames, a trace's op, a call's traces
# before its Execution). A reader that takes the files' sizes in the reverse order and reads
# them in this one never shows a record whose references are not read (events/reader.py).
WRITE_ORDER = (METADATA, SOURCE_FILES, STACK_FRAMES, GRAPHS, GRAPH_EXECUTION_TRACES, EXECUTION)
# Streams held in the circular buffer; the others are kept whole.
RING_STREAMS = (EXECUTION, GRAPH_EXECUTION_TRACES)
# The input_refs of an operand inside a fused kernel that is neither a kernel input nor an
# earlier op's output (a constant): InnerOpResult, FusedMember.
NO_INPUT = -1_000_000

# The first calls that held a NaN or an Inf, kept whole by the circular buffer whatever
# follows: the origin's call, and a few more to compare it with.
KEPT_NONFINITE_CALLS = 3

FILE_PREFIX = "tvmdbg."
FILE_VERSION = "tvmdbg.DebugEvent:1"


# A graph note saying that ops inside control flow were run as one node and not recorded
# (record_torch_reference writes it; compare reads it): made and recognised here only.
_CONTROL_FLOW = "control flow: "


def control_flow_note(nodes: list[str], text: str) -> str:
    """The graph note naming the control-flow nodes, then text."""
    return f"{_CONTROL_FLOW}{', '.join(nodes)} {text}"


def is_control_flow_note(note: str) -> bool:
    return note.startswith(_CONTROL_FLOW)


def file_name(stream: str) -> str:
    return FILE_PREFIX + stream


def new_run_id(now: float | None = None) -> str:
    """A readable, sortable, unique-per-process run directory name: time, host and pid."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    host = "".join(c if c.isalnum() or c in "-_." else "_" for c in socket.gethostname()) or "host"
    return f"{stamp}_{host}_pid{os.getpid()}"


def find_run_dirs(logdir: str | os.PathLike | storage.Store, max_depth: int = 32) -> list[str]:
    """Run directories at or under logdir (a path, a URL or a Store; hidden directories and
    symlinks skipped), as paths relative to logdir ("." when logdir itself is a run), sorted.
    A run directory is one holding a metadata file (or its segments). A run inside another
    run's directory, or below a stray metadata file, is found too."""
    store = logdir if isinstance(logdir, storage.Store) else storage.open_store(logdir)
    return store.find_dirs_holding((file_name(METADATA),), max_depth)
