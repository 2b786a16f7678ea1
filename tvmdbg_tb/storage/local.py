"""A local directory: plain files, appended to in place by the writer."""

from __future__ import annotations

import os
import shutil

from tvmdbg_tb.storage import segments
from tvmdbg_tb.storage.base import Entry, Store


class LocalStore(Store):
    remote = False

    def join(self, *parts: str) -> str:
        return os.path.join(self.root, *[p for p in parts if p and p != "."])

    def relpath(self, path: str) -> str:
        return os.path.relpath(path, self.root)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def listdir(self, path: str) -> dict[str, Entry]:
        entries = {}
        try:
            scanned = list(os.scandir(path))
        except (FileNotFoundError, NotADirectoryError):
            return {}
        for entry in scanned:
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # removed meanwhile
            tag = f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
            entries[entry.name] = Entry(entry.name, st.st_size, tag, st.st_mtime)
        return entries

    def find_dirs_holding(self, names: tuple[str, ...], max_depth: int) -> list[str]:
        found = []
        stack = [(self.root, 0)]
        while stack:
            directory, depth = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if depth < max_depth:
                            stack.append((entry.path, depth + 1))
                    elif any(segments.is_stream_file(n, entry.name) for n in names) and entry.is_file():
                        found.append(os.path.relpath(directory, self.root))
                except OSError:
                    continue
        return sorted(set(found))

    def read(self, path: str, offset: int, length: int) -> bytes:
        with open(path, "rb") as f:
            return os.pread(f.fileno(), length, offset)

    def put_file(self, path: str, local_path: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".uploading"
        shutil.copyfile(local_path, tmp)
        os.replace(tmp, path)

    def put(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".uploading"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            with open(path, "xb") as f:
                f.write(data)
        except FileExistsError:
            return False
        return True

    def delete(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
