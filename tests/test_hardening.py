"""A user's bad day: the logdir cannot be created or written, and tvmdbg never kills the
program; the public names are all reachable from `import tvmdbg`."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tvmdbg

PUBLIC_MODULES = ["tvmdbg_tb", "tvmdbg_tb.debugger", "tvmdbg_tb.live.api", "tvmdbg_tb.events.reader"]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_is_reachable_from_import_tvmdbg(module_name):
    module = importlib.import_module(module_name)
    for name in module.__all__:
        assert getattr(tvmdbg, name) is getattr(module, name), name
    assert set(module.__all__) <= set(tvmdbg.__all__)


def test_check_numerics_error_can_be_caught_through_tvmdbg():
    from models import blockbuilder_planted

    model = blockbuilder_planted("log", fuse=False)
    tvmdbg.enable_check_numerics()
    try:
        with pytest.raises(tvmdbg.CheckNumericsError):
            model.run()
    finally:
        tvmdbg.disable_check_numerics()


def _unwritable_logdirs(tmp_path):
    """Logdirs that cannot be created, each with the reason a user would meet it."""
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    yield "a regular file", a_file
    yield "below a regular file", a_file / "logdir"
    yield "a name too long", tmp_path / ("x" * 300)
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(readonly)], capture_output=True)
    if mounted.returncode == 0:
        try:
            yield "a read-only file system", readonly / "logdir"
        finally:
            subprocess.run(["umount", str(readonly)], check=False)
    if os.geteuid() != 0:  # root ignores permission bits
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        yield "a directory without write permission", locked / "logdir"


def test_an_unwritable_logdir_warns_once_and_the_program_runs_on(tmp_path):
    from models import chain

    executable, inputs = chain(8)
    import tvm
    from tvm import relax

    def run():
        vm = relax.VirtualMachine(executable, tvm.cpu())
        return vm["main"](tvm.runtime.tensor(inputs[0])).numpy()

    expected = run()
    tried = []
    for why, logdir in _unwritable_logdirs(tmp_path):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            writer = tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH")
            try:
                np.testing.assert_array_equal(run(), expected)
                np.testing.assert_array_equal(run(), expected)
            finally:
                tvmdbg.disable_dump_debug_info()
        ours = [w for w in caught if "tvmdbg" in str(w.message)]
        assert len(ours) == 1, (why, [str(w.message) for w in caught])
        assert "could not create the dump directory" in str(ours[0].message), why
        assert writer.failed and str(logdir.parent) in writer.failed, why
        tried.append(why)
    assert "a regular file" in tried and "a name too long" in tried


def test_a_regular_file_as_logdir_in_a_fresh_process(tmp_path):
    """The user's report: a script with the logdir path taken by a file ran to its end."""
    logdir = tmp_path / "taken"
    logdir.write_text("x")
    script = tmp_path / "script.py"
    script.write_text(
        "import sys, numpy as np, tvm\n"
        "from tvm import relax\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "import tvmdbg\n"
        "from models import chain\n"
        f"tvmdbg.enable_dump_debug_info({str(logdir)!r}, tensor_debug_mode='FULL_HEALTH')\n"
        "executable, inputs = chain(4)\n"
        "vm = relax.VirtualMachine(executable, tvm.cpu())\n"
        "print('result', float(vm['main'](tvm.runtime.tensor(inputs[0])).numpy().sum()))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "result" in done.stdout
    assert done.stderr.count("tvmdbg: could not create the dump directory") == 1, done.stderr


def test_tvmdbg_run_with_an_unwritable_dump_dir_says_so(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("x")
    script = tmp_path / "script.py"
    script.write_text("print('script ran')\n")
    cli = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]
    done = subprocess.run(
        [*cli, "run", "--dump_dir", str(taken), "-x", "run", str(script)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"tvmdbg run: cannot dump to {taken}" in done.stderr and "Traceback" not in done.stderr
