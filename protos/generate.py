"""Regenerate tvmdbg_tb/proto/*_pb2.py(i) from protos/tvmdbg/*.proto.

Run `python protos/generate.py` after editing a .proto; `--check` exits 1 when the
checked-in code differs from what the protos generate (tests/test_protos.py runs it).
The generator is grpcio-tools 1.74 (protobuf 6.31 gencode), whose output imports on
protobuf runtimes 6.31+ and 7.x alike.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
OUT_DIR = ROOT / "tvmdbg_tb" / "proto"


def generate(out_dir: Path) -> list[Path]:
    """Runs protoc on every .proto under protos/tvmdbg, writing flat modules to out_dir."""
    from grpc_tools import protoc  # dev dependency, imported only here

    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for proto in sorted((PROTO_ROOT / "tvmdbg").glob("*.proto")):
            rel = proto.relative_to(PROTO_ROOT)
            status = protoc.main(["protoc", f"-I{PROTO_ROOT}", f"--python_out={tmp}", f"--pyi_out={tmp}", str(rel)])
            if status != 0:
                raise SystemExit(f"protoc failed on {rel} (exit {status})")
        for produced in sorted((Path(tmp) / "tvmdbg").iterdir()):
            target = out_dir / produced.name
            target.write_text(produced.read_text())
            written.append(target)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="only compare, write nothing")
    args = parser.parse_args()
    if not args.check:
        for path in generate(OUT_DIR):
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        stale = False
        for fresh in generate(Path(tmp)):
            current = OUT_DIR / fresh.name
            old = current.read_text().splitlines() if current.exists() else []
            diff = list(
                difflib.unified_diff(old, fresh.read_text().splitlines(), str(current), "generated", lineterm="")
            )
            if diff:
                stale = True
                print("\n".join(diff[:40]))
        if stale:
            print("generated protobuf code is stale: run `python protos/generate.py`", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
