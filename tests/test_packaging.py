"""tvmdbg installed the way users install it: an sdist and a wheel built from a clean copy of
the tree (made manylinux by auditwheel), the wheel installed into a new venv with no compiler
on PATH, a traced training loop served by the C++ call path from the wheel, the dashboard
served by a real TensorBoard.

The slow test needs the package registries (pip installs tvmdbg's dependencies into the new
venv; npm installs the dashboard's build tools) and reuses pip's and npm's caches.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRAINING = Path(__file__).with_name("installed_training.py")


def native_sources() -> dict[str, str]:
    """setup.py's NATIVE_SOURCES, read without running setup()."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "NATIVE_SOURCES" for t in targets):
                return ast.literal_eval(node.value)
    raise AssertionError("setup.py defines no NATIVE_SOURCES")


def test_the_build_compiles_every_native_library_of_the_package():
    """Every C++ source in the package is built into the wheel, as the kind its module loads.
    The rule for where they live: all in tvmdbg_tb/native/, each loaded by the one module of
    its stem elsewhere in the package."""
    import importlib

    from tvmdbg_tb import native

    sources = native_sources()
    assert sorted(sources) == sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tvmdbg_tb").rglob("*.cc"))
    assert all(source.startswith("tvmdbg_tb/native/") for source in sources)
    for source, kind in sources.items():
        stem = Path(source).stem
        loaders = [p for p in (ROOT / "tvmdbg_tb").rglob(f"{stem}.py") if p.parent.name != "native"]
        assert len(loaders) == 1, (source, loaders)
        name = ".".join(loaders[0].relative_to(ROOT).with_suffix("").parts)
        module = importlib.import_module(name)
        assert type(module.LIBRARY) is getattr(native, kind), source
        assert module.LIBRARY.source == ROOT / source


def test_a_library_in_the_package_is_loaded_before_the_cache(tmp_path, monkeypatch):
    """The file a wheel ships (same versioned name as a first-use build) is what load() opens,
    at once, with no compiler; without one, the message says what is missing."""
    from tvmdbg_tb import native
    from tvmdbg_tb.events import native_records

    built = native_records.LIBRARY.load()
    assert built is not None, native_records.LIBRARY.failure()
    packaged = tmp_path / "package"
    packaged.mkdir()
    shutil.copy(native_records.LIBRARY.path(), packaged / native_records.LIBRARY.file_name())
    monkeypatch.setattr(native, "PACKAGE_DIR", packaged)
    # A second copy of the extension in this process takes sys.modules["native_records"]
    # (CPython's single-phase init): restored afterwards, so other tests keep theirs.
    monkeypatch.delitem(sys.modules, "native_records", raising=False)
    monkeypatch.setenv("TVMDBG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", "/bin/false")
    library = native.PythonExtension(native_records.LIBRARY.source, "TVMDBG_TEST_SWITCH", "test framing")
    assert library.path() == packaged / library.file_name()
    library.start_loading()  # built already: loaded now, in this thread
    assert library.loaded() is not None and library.loaded().frame_traces(b"", [b"a", b"b"], 0)
    assert not (tmp_path / "cache").exists()

    (packaged / library.file_name()).rename(packaged / "native_records-0000000000000000.so")
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler
    monkeypatch.delenv("CXX")
    missing = native.PythonExtension(native_records.LIBRARY.source, "TVMDBG_TEST_SWITCH", "test framing")
    assert missing.load() is None
    message = str(missing.failure())
    assert "prebuilt native_records-0000000000000000.so is for other versions" in message
    assert "no C++ compiler was found" in message


def _clean_copy(destination: Path) -> Path:
    """The tree as a fresh clone has it (tracked and new files; no .venv, node_modules, dist)."""
    if not (ROOT / ".git").exists():
        pytest.fail("test_packaging builds from a git checkout (git ls-files)")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    for absent in (".venv", "tvmdbg_tb_frontend/node_modules", "tvmdbg_tb_frontend/dist", "build"):
        assert not (destination / absent).exists(), absent
    return destination


def _no_compiler_env(venv: Path, cache: Path) -> dict[str, str]:
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": str(venv / "bin"), "TVM_NUM_THREADS": "1"}
    env["TVMDBG_CACHE_DIR"] = str(cache)
    env.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})
    for compiler in ("c++", "g++", "gcc", "cc", "clang++"):
        assert shutil.which(compiler, path=env["PATH"]) is None, compiler
    return env


@pytest.mark.slow
def test_wheel_from_a_clean_tree_installs_and_runs_natively_without_a_compiler(tmp_path):
    source = _clean_copy(tmp_path / "src")
    out = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    (sdist,) = out.glob("tvmdbg-*.tar.gz")
    (wheel,) = out.glob("tvmdbg-*.whl")
    bundle = (source / "tvmdbg_tb_frontend" / "dist" / "index.js").read_bytes()

    with tarfile.open(sdist) as archive:
        in_sdist = archive.getnames()
    assert any(n.endswith("tvmdbg_tb_frontend/dist/index.js") for n in in_sdist)
    assert not [n for n in in_sdist if "node_modules" in n or n.endswith(".so")]
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = archive.namelist()
        assert archive.read("tvmdbg_tb_frontend/dist/index.js") == bundle
    assert not [n for n in in_wheel if "node_modules" in n or n.startswith("tvmdbg_tb_frontend/src")]
    stems = sorted(re.sub(r"-[0-9a-f]{16}\.so$", "", n.rsplit("/", 1)[1]) for n in in_wheel if n.endswith(".so"))
    assert stems == sorted([*(Path(s).stem for s in native_sources()), "tvmdbg_kernels"]), in_wheel
    assert re.search(r"-cp\d+-cp\d+-linux_x86_64\.whl$", wheel.name), wheel.name

    # The manylinux wheel of this machine (scripts/wheel.sh): libtvm_ffi is a dependency's.
    tools = Path(sys.executable).parent
    repaired = subprocess.run(
        [str(tools / "auditwheel"), "repair", "--exclude", "libtvm_ffi.so", "--wheel-dir", str(out), str(wheel)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"},
        timeout=600,
    )
    assert repaired.returncode == 0, repaired.stdout[-3000:] + repaired.stderr[-3000:]
    (wheel,) = out.glob("tvmdbg-*manylinux*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert sorted(n for n in archive.namelist() if n.endswith(".so")) == sorted(
            n for n in in_wheel if n.endswith(".so")
        ), "auditwheel grafted a library"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = _no_compiler_env(venv, tmp_path / "cache")
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{wheel}[examples]"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]

    run_dir = tmp_path / "run"  # not the source tree: tvmdbg is imported from the venv
    run_dir.mkdir()
    logdir = tmp_path / "logdir"
    trained = subprocess.run(
        [str(venv / "bin" / "python"), str(TRAINING), str(source / "examples"), str(logdir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=run_dir,
        timeout=600,
    )
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    assert "tvmdbg:" not in trained.stderr, trained.stderr  # no warning of tvmdbg's
    assert "unavailable" not in trained.stderr, trained.stderr
    result = json.loads(trained.stdout.strip().splitlines()[-1])
    site = Path(result["tvmdbg"]).parent
    assert site.is_relative_to(venv)
    points, plans, recorded = result["counts"]
    assert recorded == 2 * result["steps"] and points >= 1  # every update's two VM calls, in C++
    for stem, path in result["libraries"].items():
        assert Path(path).parent == site / "tvmdbg_tb" / "native", (stem, path)
    # The summary kernels came from the wheel's library: none compiled, nothing cached.
    assert result["kernels"]["compiled"] == [], result["kernels"]
    assert Path(result["kernels"]["library"]).parent == site / "tvmdbg_tb" / "native"
    assert Path(result["kernels"]["library"]).is_file()
    assert not list((tmp_path / "cache").glob("**/*.so"))  # nothing was built

    version = subprocess.run([str(venv / "bin" / "tvmdbg"), "--version"], capture_output=True, text=True, env=env)
    assert re.fullmatch(r"tvmdbg \d+\.\d+\.\d+\S*\n", version.stdout), version
    check = subprocess.run(
        [str(venv / "bin" / "tvmdbg"), "check", str(logdir)], capture_output=True, text=True, env=env
    )
    assert check.returncode == 0, check.stdout + check.stderr

    log = tmp_path / "tensorboard.log"
    with open(log, "w") as log_file:
        tensorboard = subprocess.Popen(
            [str(venv / "bin" / "tensorboard"), "--logdir", str(logdir), "--host", "127.0.0.1", "--port", "0"],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=run_dir,
        )
    try:
        deadline = time.time() + 120
        while not (found := re.search(r"at (http://127\.0\.0\.1:\d+)/", log.read_text())):
            assert tensorboard.poll() is None and time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        url = found.group(1)
        with urllib.request.urlopen(f"{url}/data/plugins_listing", timeout=60) as answer:
            listing = json.load(answer)
        assert listing["tvmdbg"]["tab_name"] == "TVM Debugger"
        assert listing["tvmdbg"]["loading_mechanism"]["module_path"].endswith("/index.js")
        with urllib.request.urlopen(f"{url}/data/plugin/tvmdbg/index.js", timeout=60) as answer:
            served = answer.read()
            assert answer.headers["Content-Type"].startswith("application/javascript")
        assert served == bundle and b"is not built" not in served and b"render" in served
        while True:  # the plugin's reader finds the run in the background
            with urllib.request.urlopen(f"{url}/data/plugin/tvmdbg/runs", timeout=60) as answer:
                runs = json.load(answer)["runs"]
            if runs or time.time() > deadline:
                break
            time.sleep(0.3)
        assert len(runs) == 1, runs
    finally:
        tensorboard.terminate()
        tensorboard.wait(timeout=30)


def test_the_bundle_builds_without_node_only_when_it_is_built_already(tmp_path):
    """build.sh, which setup.py runs before packaging: a bundle whose stamp matches its sources
    (an sdist ships both) needs no Node.js; without one and without npm it fails, saying so."""
    frontend = ROOT / "tvmdbg_tb_frontend"
    copy = tmp_path / "tvmdbg_tb_frontend"
    shutil.copytree(frontend, copy, ignore=shutil.ignore_patterns("node_modules", "dist"))
    tools = tmp_path / "bin"  # the shell tools build.sh needs, and no node or npm
    tools.mkdir()
    for tool in ("bash", "cat", "cut", "dirname", "find", "sort", "sha256sum", "rm"):
        (tools / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(tools), "HOME": str(tmp_path)}
    missing = subprocess.run(["bash", str(copy / "build.sh")], capture_output=True, text=True, env=env)
    assert missing.returncode == 1 and "npm (Node.js >= 20) is required" in missing.stderr
    assert not (copy / "dist" / "index.js").exists()
    here = subprocess.run(["bash", str(frontend / "build.sh")], capture_output=True, text=True, env=env)
    if here.returncode != 0:  # read-only: without npm, build.sh only compares the stamp
        pytest.skip("this checkout's dashboard bundle is older than its sources (bash scripts/setup.sh builds it)")
    shutil.copytree(frontend / "dist", copy / "dist")
    kept = subprocess.run(["bash", str(copy / "build.sh")], capture_output=True, text=True, env=env)
    assert kept.returncode == 0, kept.stderr
    (copy / "src" / "index.ts").write_text((copy / "src" / "index.ts").read_text() + "\n// changed\n")
    stale = subprocess.run(["bash", str(copy / "build.sh")], capture_output=True, text=True, env=env)
    assert stale.returncode == 1 and "npm (Node.js >= 20) is required" in stale.stderr
