"""The `tvmdbg` CLI on real TVM programs: dumps written by running a compiled Relax model,
and `tvmdbg run` stopping a live program at the VM call that went NaN."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("tvm")

import models  # noqa: E402

from tvmdbg_tb.events.reader import DebugDataReader  # noqa: E402

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]

# The planted model (tests/models.py: log of x - y, fused) called five times; the call at
# NAN_STEP gets a y that makes x - y hold a zero and negatives, the others stay finite.
SCRIPT = textwrap.dedent(
    f"""\
    import sys

    sys.path.insert(0, {str(TESTS)!r})
    import numpy as np
    import tvm
    from tvm import relax

    import models
    import tvmdbg

    logdir, nan_step = sys.argv[1], int(sys.argv[2])
    tvmdbg.enable_dump_debug_info(logdir, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1)
    # FULL_HEALTH values: [device, dtype, rank, size, -inf, +inf, nan, negative, zero, positive]
    tvmdbg.register_tensor_filter(
        "log_all_positive", lambda trace, value: "log" in trace.kernel and trace.debug_values[9] == trace.debug_values[3]
    )
    planted = models.blockbuilder_planted("log", fuse=True)
    vm = relax.VirtualMachine(planted.executable, tvm.cpu())
    x, y, w = models.INPUTS
    for step in range(5):
        y_step = y if step == nan_step else x - 0.5 * (step + 1)
        out = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(y_step), tvm.runtime.tensor(w))
        print(f"step {{step}}: finite={{bool(np.isfinite(out.numpy()).all())}}", flush=True)
    """
)
FAULT_LINE = models.line_of(models.__file__, "bad, line = bb.emit(_fault_expr(fault, h, x))")


def cli(*args, stdin: str = "", cwd=None, timeout=180):
    return subprocess.run(
        [*TVMDBG, *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or ROOT,
        env={**os.environ, "TVMDBG_HISTORY": ""},
    )


def transcript(output: str) -> dict[str, str]:
    parts = re.split(r"^tvmdbg> (.*)$", output, flags=re.M)
    return {parts[i]: parts[i + 1].removeprefix("\n") for i in range(1, len(parts) - 1, 2)}


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("script") / "train.py"
    path.write_text(SCRIPT)
    return path


@pytest.fixture(scope="module")
def dumps(script, tmp_path_factory):
    """Real dumps of the script: NaN at the third call, and never."""
    base = tmp_path_factory.mktemp("dumps")
    out = {}
    for name, nan_step in (("nan", 2), ("clean", 99)):
        logdir = base / name
        result = subprocess.run(
            [sys.executable, str(script), str(logdir), str(nan_step)], capture_output=True, text=True, timeout=180
        )
        assert result.returncode == 0, result.stderr
        out[name] = logdir
    return out


def test_analyzer_on_a_real_dump(dumps):
    commands = [
        "lt",
        "lt -f has_inf_or_nan",
        "le",
        "alerts",
        "ni -t lv",
        "ni lv -e 2",
        "li lv",
        "lo -r lv",
        "pt lv -e 2",
        "ps models.py",
    ]
    result = cli("analyze", dumps["nan"], stdin="\n".join(commands))
    assert result.returncode == 0, result.stderr
    out = transcript(result.stdout)

    assert out["lt"].startswith("10 of 10 kernel outputs, by time:")  # 5 calls x 2 fused kernels
    bad = out["lt -f has_inf_or_nan"].strip().splitlines()
    assert bad[0].startswith("1 of 10 kernel outputs (filter has_inf_or_nan)")
    assert re.search(
        r"\b4\s+2\s+[\d.]+\s+lv:0\s+fused_subtract_tir_log_multiply\s+float32\s+\(1, 8\)\s+nan:2 -inf:1", bad[2]
    )
    executions = out["le"].strip().splitlines()[2:]
    assert [ln.split()[0] for ln in executions] == ["0", "1", "2", "3", "4"]
    assert [ln.split()[4] for ln in executions] == ["0", "0", "1", "0", "0"]

    alerts = out["alerts"]
    # The NaN, and the kernel after it whose matmul read it and whose maximum hid it from its
    # output (the inner-op check; not an origin: it came in).
    assert "2 NaN/Inf alerts. The first origin (an op whose inputs were finite) is lv:0" in alerts
    assert re.search(r"fused_matmul_maximum_add\s+8 NaN of 8", alerts)
    assert f"fused Relax op relax.log lv1 at {models.__file__}:{FAULT_LINE} (blockbuilder_planted)" in alerts

    info = out["ni -t lv"]
    assert "kernel        fused_subtract_tir_log_multiply" in info
    assert re.search(rf"relax.log\s+{re.escape(models.__file__)}:{FAULT_LINE} \(blockbuilder_planted\)", info)
    assert re.search(r"0\s+x\s+parameter 0\s+float32 \(1, 8\)\s+finite", info)
    # At the NaN call: finite inputs, a non-finite output: this kernel made the bad value.
    at_nan = out["ni lv -e 2"]
    assert re.search(r"0\s+x\s+parameter 0\s+float32 \(1, 8\)\s+finite", at_nan)
    assert re.search(r"1\s+y\s+parameter 1\s+float32 \(1, 8\)\s+finite", at_nan)
    assert re.search(r"0\s+lv\s+float32 \(1, 8\)\s+5\s+nan:2 -inf:1", at_nan)
    assert "bad, line = bb.emit(_fault_expr(fault, h, x)), _line()" in info  # the creation stack shows the line
    assert "Consumers: gv (input 0)" in info
    assert re.search(r"\(input 1\) y: parameter 1", out["li lv"])
    assert "(output 0 -> input 0) gv [fused_matmul_maximum_add]" in out["lo -r lv"]

    value = out["pt lv -e 2"]
    assert "Tensor lv:0  (kernel fused_subtract_tir_log_multiply, execution 2, trace 4)" in value
    assert "nan=2" in value and "neg_inf=1" in value

    source = out["ps models.py"].splitlines()
    at = next(i for i, ln in enumerate(source) if re.match(rf"\* +{FAULT_LINE}  ", ln))
    assert "^ lv [fused_subtract_tir_log_multiply] relax.log lv1" in [ln.strip() for ln in source[at + 1 : at + 4]]


def test_check_alerts_profile_on_real_dumps(dumps):
    clean = cli("check", dumps["clean"])
    assert clean.returncode == 0 and "all finite (10 kernel outputs in 5 executions" in clean.stdout
    bad = cli("check", dumps["nan"])
    assert bad.returncode == 1
    assert "1 of 10 kernel outputs in 5 executions hold NaN or Inf" in bad.stdout
    assert f"created at {models.__file__}:" in bad.stdout
    assert "from inputs x (parameter 0) finite, y (parameter 1) finite" in bad.stdout
    assert f"relax.log lv1 at line {FAULT_LINE}" in bad.stdout  # the fused op that made the NaN, by line

    alerts = json.loads(cli("alerts", dumps["nan"], "--json").stdout)
    first = alerts["alerts"][alerts["first_origin_index"]]
    assert first["kernel"] == "fused_subtract_tir_log_multiply" and first["execution_index"] == 2
    assert any(o["op_type"] == "relax.log" and o["location"]["line"] == FAULT_LINE for o in first["original_ops"])

    profile = cli("profile", dumps["nan"]).stdout.strip().splitlines()
    assert profile[0].startswith("2 ops, 10 kernel calls in 5 executions")
    kernels = {ln.split()[1]: ln.split() for ln in profile[2:-1]}
    assert set(kernels) == {"fused_subtract_tir_log_multiply", "fused_matmul_maximum_add"}
    assert kernels["fused_matmul_maximum_add"][2] == "5"  # calls


def test_run_stops_at_the_call_that_goes_nan(script, tmp_path):
    dump = tmp_path / "dump"
    result = cli(
        "run",
        "-f",
        "has_inf_or_nan",
        "--dump_dir",
        dump,
        "-x",
        "le",
        "-x",
        "ni -t lv",
        "-x",
        "ni lv",
        "-x",
        "run -f has_inf_or_nan",
        script,
        "-",
        2,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("tvmdbg run: stopped after") == 1
    # The stop comes after the call's records and its replay: the origin's inner ops are there.
    inner = transcript(out)["ni lv"]
    assert "not replayed" not in inner
    assert re.search(r"Inner ops of fused_subtract_tir_log_multiply replayed op by op in execution 2", inner)
    assert re.search(r"relax\.log .*<- made it", inner), inner
    assert (
        "stopped after VM call 3 (main, execution 2): 1 of its 2 kernel outputs pass filter has_inf_or_nan, "
        "the first lv:0 (kernel fused_subtract_tir_log_multiply)" in out
    )
    # The program paused inside the third call: steps 0 and 1 printed before, 2..4 after (the
    # model's maximum hides the NaN from its output: only the kernel trace shows it).
    stop = out.index("stopped after")
    assert out.index("step 1: finite=True") < stop < out.index("step 2: finite=True") < out.index("step 4")
    # The analyzer saw the live dump: three executions, the third with one bad trace.
    live = transcript(out)["le"].strip().splitlines()
    assert live[0] == "3 of 3 executions (top-level VM calls):"
    assert live[-1].split()[:5] == ["2", live[-1].split()[1], "main", "2", "1"]
    # The creation stack starts at the script: the frames of `tvmdbg run` launching it are hidden.
    stack = transcript(out)["ni -t lv"]
    assert "frames of the tvmdbg launcher hidden)" in stack and "runpy" not in stack
    assert re.search(r"train.py:\d+ in <module>\n +planted = models.blockbuilder_planted", stack)
    assert "the script's enable_dump_debug_info call uses the dump tvmdbg run started" in result.stderr
    assert "finished after 5 VM calls (1 stops)" in result.stderr
    # The dump holds the whole run, readable afterwards.
    assert cli("check", dump).returncode == 1


def test_run_steps_with_run_t_and_quits(script, tmp_path):
    stdin = "run -t 2\nlt -f has_inf_or_nan\nquit\n"
    result = cli("run", "--dump_dir", tmp_path / "d", script, "-", 2, stdin=stdin)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # no filter: stops after the first call, then after two more (the NaN call), then quits.
    assert "stopped after VM call 1 (main, execution 0): 2 kernel outputs recorded." in out
    assert "Continuing for 2 VM calls." in out
    assert "stopped after VM call 3 (main, execution 2)" in out
    assert "1 of 6 kernel outputs (filter has_inf_or_nan)" in transcript(out)["lt -f has_inf_or_nan"]
    assert "step 2" not in out  # quit ended the program inside the third call
    assert "was ended from the analyzer after 3 VM calls (2 stops)" in result.stderr


def test_run_with_a_user_filter(script, tmp_path):
    # 2 * log(x - y) with x - y = 0.5 * (step + 1): negative, zero, (NaN call), then positive at
    # the fourth call: the filter the script registered stops there.
    result = cli("run", "-f", "log_all_positive", "-x", "run --no_break", "--dump_dir", tmp_path / "d", script, "-", 2)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("stopped after") == 1
    assert "stopped after VM call 4 (main, execution 3): 1 of its 2 kernel outputs pass filter log_all_positive" in (
        result.stdout
    )
    assert "finished after 5 VM calls (1 stops)" in result.stderr


def test_run_rejects_bad_arguments(script, tmp_path):
    missing = cli("run", tmp_path / "nope.py")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    mode = cli("run", "--tensor_debug_mode", "LOUD", script)
    assert mode.returncode == 2 and "unknown tensor_debug_mode 'LOUD'" in mode.stderr
    blind = cli("run", "-f", "has_inf_or_nan", "--tensor_debug_mode", "SHAPE", script)
    assert blind.returncode == 2 and "needs NaN/Inf counts" in blind.stderr


def test_run_bounds_the_ring_in_bytes(script, tmp_path):
    """--circular_buffer_bytes is enable_dump_debug_info's byte bound of each ring file: the
    dump's metadata records it, the ring drops the oldest calls and still keeps the NaN call."""
    dump = tmp_path / "d"
    args = ("--circular_buffer_size", 100, "--circular_buffer_bytes", 1024, "-x", "run --no_break")
    result = cli("run", *args, "--dump_dir", dump, script, "-", 2)
    assert result.returncode == 0, result.stderr
    reader = DebugDataReader(str(dump))
    reader.update()
    run = reader.run()
    assert (run.metadata.circular_buffer_size, run.metadata.circular_buffer_bytes) == (100, 1024)
    assert run.completeness().dropped, "1 KiB per ring file holds fewer than the 5 calls"
    reader.close()
    assert cli("check", dump).returncode == 1  # the NaN call is kept whole
    bad = cli("run", "--circular_buffer_bytes", -1, script)
    assert bad.returncode == 2 and "circular_buffer_bytes must be >= 0" in bad.stderr


def test_run_reports_a_failing_script(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nprint('args', sys.argv[1:])\nraise RuntimeError('the model diverged')\n")
    result = cli("run", "--dump_dir", tmp_path / "d", script, "--lr", "7")
    assert result.returncode == 1
    assert result.stdout == "args ['--lr', '7']\n"
    assert "RuntimeError: the model diverged" in result.stderr
    assert "fails.py raised an exception (above) after 0 VM calls (0 stops)" in result.stderr
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(3)\n")
    assert cli("run", "--dump_dir", tmp_path / "e", exits).returncode == 3


def test_run_full_tensor_values_of_the_nan_call(script, tmp_path):
    import numpy as np

    saved = tmp_path / "lv.npy"
    result = cli(
        "run",
        "-f",
        "has_inf_or_nan",
        "--tensor_debug_mode",
        "FULL_TENSOR",
        "--dump_dir",
        tmp_path / "d",
        "-x",
        f"pt lv[0, :4] -w {saved}",
        "-x",
        "run --no_break",
        script,
        "-",
        2,
    )
    assert result.returncode == 0, result.stderr
    assert "stopped after VM call 3 (main, execution 2)" in result.stdout  # found from the values themselves
    x, y, _ = models.INPUTS
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = (np.log(x - y) * np.float32(2))[0, :4]  # the planted kernel: 2 * log(x - y)
    np.testing.assert_array_equal(np.load(saved), expected)
    shown = transcript(result.stdout)[f"pt lv[0, :4] -w {saved}"]
    assert "mode: FULL_TENSOR" in shown and "values: size=4  nan=1  -inf=1  +inf=0" in shown


def test_run_in_a_terminal(script, tmp_path):
    """The interactive path: readline input at the stop, while the program waits."""
    import select
    import time

    import terminal

    def read_until(fd, needle: bytes | None, timeout: float = 120.0) -> bytes:
        """Output up to needle, or (needle None) up to the end."""
        data, deadline = b"", time.time() + timeout
        while needle is None or needle not in data:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.time()))
            if not ready:
                raise AssertionError(f"timed out waiting for {needle!r}; got {data[-1500:]!r}")
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                if needle is None:
                    return data
                raise AssertionError(f"the terminal closed before {needle!r}; got {data[-1500:]!r}")
            data += chunk
        return data

    env = {**os.environ, "TVMDBG_HISTORY": "", "TERM": "xterm"}
    args = [*TVMDBG, "run", "-f", "has_inf_or_nan", "--dump_dir", str(tmp_path), str(script), "-", "2"]
    child, fd = terminal.spawn(args, env)  # no Python between fork and exec: see tests/terminal.py
    try:
        out = read_until(fd, b"tvmdbg> ")
        assert b"stopped after VM call 3 (main, execution 2)" in out and b"step 2" not in out
        os.write(fd, b"ni l\t -e 2\r")  # completes to the only op named l...: lv
        out = read_until(fd, b"tvmdbg> ")
        assert b"Op lv" in out and b"nan:2 -inf:1" in out
        os.write(fd, b"run --no_break\r")
        out = read_until(fd, None)
        assert b"step 4: finite=True" in out and b"finished after 5 VM calls (1 stops)" in out
        status = child.wait(timeout=120)
    except BaseException:
        child.kill()
        child.wait()
        raise
    finally:
        os.close(fd)
    assert status == 0
