"""Logdirs someone else wrote (tests/test_hostile_logdirs.py): each builder makes runs of one
kind of hostility, from real dumps rewritten the way a careless or malicious hand would.

- escapes: a real TVM model run from a file whose name holds terminal escapes, with escapes
  in its op (var) names and a NaN watchpoint whose hits name them; and a copy of it with
  escapes appended to every string field of every record (paths, names, run name, notes,
  devices, dtypes, source lines, hits), in run directories named with escapes (one not UTF-8).
- live files: a live file naming a hostile server's port, or holding garbage, 10 MiB,
  100,000 nested brackets, a port that is a string, a header in the token, port 0.
- file roles: every file of a run (and its live file) replaced by a FIFO, a link to
  /dev/zero, a directory, a symlink loop, a link to a FIFO, a link out of the run.
- declared lengths: a valid record header declaring 2**31 .. 2**64 - 1 bytes at the end of
  every file, the file extended (sparse: no disk used) as far as the file system allows; and
  an 8 MiB record of zeros whose CRCs hold (a hole) in the executions and traces files.
- values: FULL_TENSOR traces whose dtypes and shapes no tensor has, and a float64 tensor that
  spans finfo.min..finfo.max.
(The huge dumps, a 300,000-op graph and 8 MiB and 1M-line sources, are tests/big_dumps.py's.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import dump_records
import numpy as np
from models_hostile import ESCAPES
from plugin_dumps import write_graph, write_nan_chain, write_tensor_call

from tvmdbg_tb.events import layout, records
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.live.channel import LIVE_FILE

TESTS = Path(__file__).resolve().parent
FILES = [*dump_records.FILES, LIVE_FILE]
# What must never reach a terminal raw, as bytes of UTF-8 output: C0 controls but newline and
# tab, DEL, C1 controls, and the bidi and invisible format characters.
RAW_CONTROL = re.compile(
    rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\x8b-\x8f\xa8-\xae]|\xe2\x81[\xa0-\xaf]|\xd8\x9c|\xef\xbb\xbf"
)
SHOWN = rb"\x1b]0;pwned\x07"  # how the CLI shows the first of ESCAPES


# -- escapes in every string ---------------------------------------------------------------------


def real_escapes_run(logdir: Path) -> Path:
    """A real TVM model with ESCAPES in its op names, run from a file whose name holds them; its
    run directory."""
    script = logdir.parent / f"model{ESCAPES.replace('/', '')}.py"
    shutil.copy(TESTS / "models_hostile.py", script)
    subprocess.run([sys.executable, str(script), str(logdir), "--escapes"], check=True, timeout=300)
    (run_dir,) = logdir.iterdir()
    return run_dir


def _taint(message, evil: str) -> None:
    """Appends evil to every string field set in message and its sub-messages (map values too)."""
    for field, value in message.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            kind = field.message_type.fields_by_name["value"].type
            for key in list(value):
                if kind == field.TYPE_STRING:
                    value[key] = value[key] + evil
                elif kind == field.TYPE_MESSAGE:
                    _taint(value[key], evil)
        elif field.type == field.TYPE_STRING:
            if field.is_repeated:
                value[:] = [v + evil for v in value]
            else:
                setattr(message, field.name, value + evil)
        elif field.type == field.TYPE_MESSAGE:
            for item in value if field.is_repeated else [value]:
                _taint(item, evil)


def tainted_copy(run_dir: Path, dst: Path, evil: str = ESCAPES) -> Path:
    """A copy of run_dir with evil appended to every string field of every record."""
    shutil.copytree(run_dir, dst)
    for name in dump_records.FILES:
        path = dst / name
        framed = []
        for record in dump_records.read(path):
            event = dump_records.event(record)
            _taint(event, evil)
            framed.append(dump_records.frame(event))
        dump_records.write(path, framed)
    return dst


def escape_runs(logdir: Path) -> list[Path]:
    """The real run and its tainted copies, in directories of logdir/escapes named with escapes,
    one of them not UTF-8 (a byte that decodes to a lone surrogate)."""
    real = real_escapes_run(logdir / "escapes")
    return [
        real,
        tainted_copy(real, logdir / "escapes" / ("tainted" + ESCAPES)),
        tainted_copy(real, logdir / "escapes" / ("bytes\udcff" + ESCAPES)),
    ]


# -- live files ----------------------------------------------------------------------------------


def live_file_runs(logdir: Path, ports: dict[str, int]) -> list[Path]:
    """Runs whose live file holds what no program wrote: the port of a hostile server (ports:
    {kind: port}), garbage, a huge file, a wrong type."""
    runs = []
    contents = {f"server_{kind}": {"port": port, "token": "abc123", "pid": 1} for kind, port in ports.items()}
    contents.update(
        garbage=b"\x00\xff not json",
        huge=b"{" + b" " * (10 << 20) + b"}",
        nested=b"[" * 100_000,
        port_string={"port": "6006", "token": "x", "pid": 1},
        token_header={"port": 1, "token": "a\r\nX-Evil: 1", "pid": 1},
        port_zero={"port": 0, "token": "abc", "pid": 1},
    )
    for name, content in contents.items():
        run = logdir / "live" / name
        write_nan_chain(run.parent, run.name)
        data = content if isinstance(content, bytes) else json.dumps(content).encode()
        (run / LIVE_FILE).write_bytes(data)
        runs.append(run)
    return runs


# -- file roles ----------------------------------------------------------------------------------


FILE_KINDS = ("fifo", "dev_zero", "directory", "loop", "fifo_link", "outside")


def replace_file(path: Path, kind: str, outside: Path) -> None:
    """path made into something that is not a regular file of the run."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "fifo_link":
        fifo = path.with_name(path.name + ".fifo")
        os.mkfifo(fifo)
        path.symlink_to(fifo.name)
    elif kind == "outside":  # a file out of the run: another run's, or anything the reader may read
        path.symlink_to(outside)


def file_role_runs(logdir: Path) -> list[Path]:
    """One run per (file, kind): a NaN chain whose one file is replaced."""
    runs = []
    outside = logdir / "outside.bin"
    outside.write_bytes(os.urandom(1 << 16))
    for name in FILES:
        for kind in FILE_KINDS:
            run = logdir / "roles" / f"{name.removeprefix('tvmdbg.')}_{kind}"
            write_nan_chain(run.parent, run.name)
            replace_file(run / name, kind, outside)
            runs.append(run)
    return runs


# -- declared lengths ----------------------------------------------------------------------------

LENGTHS = (1 << 31, (1 << 32) + 5, 1 << 40, (1 << 62) + 1, (1 << 63) - 1, (1 << 64) - 1)
_MAX_SPARSE = 1 << 40  # as far as a file is extended (ext4 and tmpfs allow 16 TiB)


def declared_length_runs(logdir: Path) -> list[Path]:
    """One run per (file, length): a NaN chain whose file ends in a valid header declaring
    the length, extended with a hole to hold it (as far as the file system lets it)."""
    runs = []
    for name in dump_records.FILES:
        for length in LENGTHS:
            run = logdir / "lengths" / f"{name.removeprefix('tvmdbg.')}_{length}"
            write_nan_chain(run.parent, run.name)
            path = run / name
            header = struct.pack("<Q", length)
            with open(path, "ab") as f:
                f.write(header + struct.pack("<I", records.masked_crc32c(header)))
                end = f.tell()
            for size in (end + min(length, _MAX_SPARSE) + records.FOOTER_SIZE, end + (1 << 30)):
                try:
                    os.truncate(path, size)
                    break
                except OSError:  # larger than the file system allows
                    continue
            runs.append(run)
    for name in (layout.file_name(layout.EXECUTION), layout.file_name(layout.GRAPH_EXECUTION_TRACES)):
        run = logdir / "lengths" / f"{name.removeprefix('tvmdbg.')}_crafted"
        write_nan_chain(run.parent, run.name)
        _append_crafted_record(run / name, CRAFTED_BYTES)
        runs.append(run)
    return runs


CRAFTED_BYTES = 8 << 20


def _append_crafted_record(path: Path, length: int) -> None:
    """A record whose CRCs hold over `length` zero bytes that the file does not hold (a hole):
    whole as far as the framing can tell, 4 million empty protobuf fields inside."""
    header = struct.pack("<Q", length)
    crc = records.extend_zeros(0, length)
    footer = struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)
    with open(path, "r+b") as f:
        f.seek(0, os.SEEK_END)
        f.write(header + struct.pack("<I", records.masked_crc32c(header)))
        f.seek(length, os.SEEK_CUR)
        f.write(footer)


# -- values --------------------------------------------------------------------------------------

FLOAT64_SPAN = np.array([np.finfo(np.float64).min, -1.0, 0.0, 2.5, np.finfo(np.float64).max])
# (dtype, shape, content) of stored values no tensor has, but the first: a real float64 span.
VALUES = [
    ("float64", [5], FLOAT64_SPAN.tobytes()),
    ("O", [2], bytes(16)),
    ("V0", [2], b""),
    ("M8", [2], bytes(16)),
    ("<M8[ns]", [2], bytes(16)),
    ("U2", [1], bytes(8)),
    ("complex64", [2], bytes(16)),
    ("float32,float32", [2], bytes(16)),
    ("(2,3)f4", [1], bytes(24)),
    ("f" * 100, [1], b""),
    ("float32", [-1], bytes(8)),
    ("float32", [-(1 << 62), 2], bytes(8)),
    ("float32", [1 << 62, 1 << 62], bytes(8)),
    ("float32", [3], bytes(5)),
]


def values_run(logdir: Path) -> Path:
    """A FULL_TENSOR run, one trace per VALUES entry (trace k holds VALUES[k])."""
    w = DebugEventsWriter(
        logdir, DumpOptions(tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1), run_id="values"
    )
    write_graph(w)
    write_tensor_call(w, [(0, "lv0", "matmul", dtype, shape, content) for dtype, shape, content in VALUES])
    w.close()
    return logdir / "values"
