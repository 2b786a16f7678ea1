"""The `tvmdbg` CLI on dumps written through the real writer: every analyzer command driven
through a stdin pipe and a pseudo-terminal, the one-shot subcommands and their exit codes."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import terminal
from plugin_dumps import float32_tensor, write_tensor_call

from tvmdbg_tb import analysis
from tvmdbg_tb.cli import filters
from tvmdbg_tb.cli.analyzer import Analyzer
from tvmdbg_tb.cli.runner import BreakController
from tvmdbg_tb.cli.shell import run_commands
from tvmdbg_tb.events.options import DumpOptions
from tvmdbg_tb.events.reader import DebugDataReader
from tvmdbg_tb.events.writer import DebugEventsWriter
from tvmdbg_tb.proto import debug_event_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
TVMDBG = [sys.executable, "-c", "import sys; from tvmdbg_tb.cli import main; sys.exit(main())"]

MODEL = textwrap.dedent(
    """\
    import numpy as np


    def forward(a, w, b):
        x = np.matmul(a, w)
        y = np.log(x)
        z = y + b
        return np.maximum(z, 0)


    for step in range(4):
        forward(1, 2, 3)
    """
)
# op name, kernel, [(relax op, var, line)], inputs
OPS = [
    ("mm_out", "matmul", [("relax.matmul", "x", 5)]),
    ("logadd", "fused_log_add", [("relax.log", "y", 6), ("relax.add", "z", 7)]),
    ("relu_out", "relu", [("relax.maximum", "r", 8)]),
]


def health(size: int, nan: int = 0, neg_inf: int = 0) -> list[float]:
    return [0, pb.FLOAT32, 2, size, neg_inf, 0, nan, 0, size - nan - neg_inf, 0]


def write_dump(
    logdir: Path,
    nan_at: int | None = 2,
    mode: str = "FULL_HEALTH",
    executions: int = 4,
    run_id="run",
    run_name: str | None = None,
):
    """main(a, w, b) = relu(log(a @ w) + b), called `executions` times; from execution nan_at
    on, the fused log+add makes 6 NaN and 2 -Inf that relu passes on."""
    logdir.parent.mkdir(parents=True, exist_ok=True)
    model = logdir.parent / "model.py"
    model.write_text(MODEL)
    src = str(model)
    w = DebugEventsWriter(
        logdir, DumpOptions(tensor_debug_mode=mode, circular_buffer_size=-1, run_name=run_name), run_id=run_id
    )
    spec = pb.TensorSpec(dtype="float32", shape=[2, 4], shape_expr="(2, 4)")

    def loc(line):
        return w.code_location([(src, 12, "<module>"), (src, line, "forward")], user_frame_index=1)

    w.write_graph(
        pb.DebuggedGraph(
            graph_id=0,
            name="main",
            source_mapped=True,
            instrumentation="compiled",
            param_names=["a", "w", "b"],
            target="llvm",
            code_location=loc(11),
        )
    )
    inputs = [
        [
            pb.OpInput(kind=pb.OpInput.PARAM, name="a", param_index=0),
            pb.OpInput(kind=pb.OpInput.PARAM, name="w", param_index=1),
        ],
        [
            pb.OpInput(kind=pb.OpInput.OP_OUTPUT, name="x", producer_op_id=0, spec=spec),
            pb.OpInput(kind=pb.OpInput.PARAM, name="b", param_index=2),
        ],
        [pb.OpInput(kind=pb.OpInput.OP_OUTPUT, name="z", producer_op_id=1, spec=spec)],
    ]
    for op_id, (name, kernel, originals) in enumerate(OPS):
        w.write_graph_op_creation(
            pb.GraphOpCreation(
                op_id=op_id,
                graph_id=0,
                op_name=name,
                kernel=kernel,
                call_type="call_tir",
                original_ops=[
                    pb.OriginalOp(op_type=t, var_name=v, code_location=loc(line)) for t, v, line in originals
                ],
                inputs=inputs[op_id],
                outputs=[spec],
                output_names=[name],
                device="cpu:0",
                position=op_id,
                code_location=loc(originals[0][2]),
            )
        )
    mode_value = pb.TensorDebugMode.Value(mode)
    for _ in range(executions):
        index = w.allocate_execution_index()
        bad = nan_at is not None and index >= nan_at
        traces = []
        for op_id, (name, kernel, _) in enumerate(OPS):
            nan, neg = (6, 2) if bad and op_id >= 1 else (0, 0)
            if mode == "FULL_HEALTH":
                values = health(8, nan, neg)
            elif mode == "CURT_HEALTH":
                values = [1.0 if nan or neg else 0.0]
            else:
                values = []
            traces.append(
                pb.GraphExecutionTrace(
                    op_id=op_id,
                    execution_index=index,
                    op_name=name,
                    kernel=kernel,
                    graph_id=0,
                    tensor_debug_mode=mode_value,
                    debug_values=values,
                    duration_us=float(10 * (op_id + 1)),
                    dtype="float32",
                    shape=[2, 4],
                )
            )
        w.write_graph_execution_traces(traces)
        out = health(8, 6 if bad else 0) if mode == "FULL_HEALTH" else []
        w.write_execution(
            pb.Execution(
                index=index,
                function_name="main",
                graph_id=0,
                tensor_debug_mode=mode_value,
                inputs=[pb.TensorSummary(debug_values=health(8) if mode == "FULL_HEALTH" else [], dtype="float32")] * 3,
                outputs=[pb.TensorSummary(debug_values=out, dtype="float32")],
                duration_us=100.0,
                num_traces=3,
                code_location=loc(12),
            )
        )
    w.close()
    return model


def write_full_tensor(logdir: Path) -> np.ndarray:
    w = DebugEventsWriter(logdir, DumpOptions(tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1), run_id="ft")
    w.write_graph(pb.DebuggedGraph(graph_id=0, name="main"))
    w.write_graph_op_creation(pb.GraphOpCreation(op_id=0, graph_id=0, op_name="val", kernel="exp"))
    value = np.arange(24, dtype=np.float32).reshape(4, 6) - 5
    value[1, 2] = np.nan
    value[3, 5] = np.inf
    write_tensor_call(w, [float32_tensor(0, "val", "exp", value)])
    w.close()
    return value


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    base = tmp_path_factory.mktemp("cli")
    nan = base / "nan" / "logdir"
    clean = base / "clean" / "logdir"
    write_dump(nan)
    write_dump(clean, nan_at=None)
    full = base / "full" / "logdir"
    full.parent.mkdir()
    value = write_full_tensor(full)
    return {"nan": nan, "clean": clean, "full": full, "value": value, "model": nan.parent / "model.py"}


def tvmdbg(*args, stdin: str | None = None, env=None):
    return subprocess.run(
        [*TVMDBG, *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "TVMDBG_HISTORY": "", **(env or {})},
    )


def cells(line: str) -> list[str]:
    """A table row's cells (columns are two or more spaces apart)."""
    return re.split(r"\s{2,}", line.strip())


def rows_of(text: str, skip: int = 2) -> list[list[str]]:
    return [cells(ln) for ln in text.strip().splitlines()[skip:]]


def transcript(output: str) -> dict[str, str]:
    """A piped analyzer session's output split per command (each echoed after the prompt)."""
    parts = re.split(r"^tvmdbg> (.*)$", output, flags=re.M)
    return {parts[i]: parts[i + 1].removeprefix("\n") for i in range(1, len(parts) - 1, 2)}


# -- the analyzer through a pipe -------------------------------------------------------------


@pytest.fixture(scope="module")
def session(dumps):
    commands = [
        "ri",
        "lt",
        "lt -f has_inf_or_nan",
        "lt -n ^relu -s duration",
        "lt -t fused -e 3",
        "le",
        "pt logadd",
        "pt logadd -e 1",
        "pt nosuch",
        "ni logadd",
        "ni -t logadd",
        "ni logadd -e 1",
        "ni logadd -e 9",
        "li -r relu_out",
        "lo mm_out",
        "lo -r mm_out",
        "ls",
        "ps model.py",
        "alerts",
        "profile",
        "help",
        "help lt",
        "frobnicate",
    ]
    result = tvmdbg("analyze", dumps["nan"], stdin="\n".join(commands) + "\n")
    assert result.returncode == 0, result.stderr
    return transcript(result.stdout)


def test_intro_points_at_the_first_origin(dumps):
    out = tvmdbg("analyze", dumps["nan"], stdin="").stdout
    assert out.startswith(
        "tvmdbg analyzer: run run, 4 executions, 12 kernel outputs, 4 NaN/Inf alerts; the first origin is logadd"
    )


def test_ri_describes_the_run(session):
    out = session["ri"]
    assert "Run run" in out
    assert "tensor mode    FULL_HEALTH" in out
    assert "executions     4 (main x4)" in out
    assert "traces         12 kernel outputs, 4 with NaN/Inf, 0 kernel errors" in out
    assert "#0 main: 3 kernel calls, compiled, source-mapped, llvm" in out
    assert "corruptions    none" in out


def test_lt_lists_filters_and_sorts(session):
    rows = rows_of(session["lt"])
    assert session["lt"].startswith("12 of 12 kernel outputs, by time:")
    assert [r[3] for r in rows[:3]] == ["mm_out:0", "logadd:0", "relu_out:0"]
    assert [int(r[0]) for r in rows] == list(range(12))
    assert rows[7][3:8] == ["logadd:0", "fused_log_add", "float32", "(2, 4)", "nan:6 -inf:2"]  # execution 2
    assert rows[6][7] == "finite"

    bad = rows_of(session["lt -f has_inf_or_nan"])
    assert {(r[1], r[3]) for r in bad} == {
        ("2", "logadd:0"),
        ("2", "relu_out:0"),
        ("3", "logadd:0"),
        ("3", "relu_out:0"),
    }

    relu = session["lt -n ^relu -s duration"]
    assert relu.startswith("4 of 12 kernel outputs (op name ~ ^relu), by duration:")
    fused = rows_of(session["lt -t fused -e 3"])
    assert [(r[0], r[1], r[4]) for r in fused] == [("10", "3", "fused_log_add")]


def test_le_lists_executions(session):
    rows = rows_of(session["le"])
    assert [r[:1] + r[2:] for r in rows] == [
        ["0", "main", "3", "0", "finite out", "100.0"],
        ["1", "main", "3", "0", "finite out", "100.0"],
        ["2", "main", "3", "2", "inf/nan out", "100.0"],
        ["3", "main", "3", "2", "inf/nan out", "100.0"],
    ]


def test_pt_prints_the_latest_or_chosen_summary(session):
    latest = session["pt logadd"]
    assert "Tensor logadd:0  (kernel fused_log_add, execution 3, trace 10)" in latest
    assert "nan=6" in latest and "neg_inf=2" in latest
    assert "non-finite: nan:6 -inf:2" in latest
    assert "4 executions of this output" in latest
    early = session["pt logadd -e 1"]
    assert "execution 1, trace 4" in early and "nan=0" in early and "non-finite" not in early
    assert session["pt nosuch"].strip() == "error: no op named 'nosuch' (see `lt`)"


def test_ni_shows_kernel_fused_ops_inputs_and_stack(session, dumps):
    out = session["ni logadd"]
    model = str(dumps["model"])
    assert "Op logadd  (op #1 in function main)" in out
    assert "kernel        fused_log_add" in out
    assert f"created at    {model}:6 (forward)" in out
    assert re.search(rf"y\s+relax.log\s+{re.escape(model)}:6 \(forward\)", out)
    assert re.search(rf"z\s+relax.add\s+{re.escape(model)}:7 \(forward\)", out)
    assert "Inputs (2), health in execution 3:" in out
    assert cells(out.split("Inputs (2)")[1].splitlines()[2]) == ["0", "x", "mm_out:0", "float32 (2, 4)", "finite"]
    assert cells(out.split("Inputs (2)")[1].splitlines()[3]) == ["1", "b", "parameter 2", "-", "finite"]
    assert "Consumers: relu_out (input 0)" in out
    assert re.search(r"0\s+logadd\s+float32 \(2, 4\)\s+4\s+nan:6 -inf:2", out)
    assert re.search(r"0\s+logadd\s+float32 \(2, 4\)\s+4\s+finite", session["ni logadd -e 1"])
    assert session["ni logadd -e 9"].strip() == "error: op logadd has no trace in execution 9"
    stack = session["ni -t logadd"]
    assert f"  > {model}:6 in forward\n      y = np.log(x)" in stack
    assert f"    {model}:12 in <module>\n      forward(1, 2, 3)" in stack


def test_li_lo_walk_the_graph(session):
    assert session["li -r relu_out"].strip().splitlines() == [
        "Inputs of relu_out (relu):",
        "  |- (1) (input 0) logadd:0 [fused_log_add]",
        "  |  |- (2) (input 0) mm_out:0 [matmul]",
        "  |  |  |- (3) (input 0) a: parameter 0",
        "  |  |  |- (3) (input 1) w: parameter 1",
        "  |  |- (2) (input 1) b: parameter 2",
    ]
    assert session["lo mm_out"].strip().splitlines() == [
        "Consumers of mm_out (matmul):",
        "  |- (1) (output 0 -> input 0) logadd [fused_log_add]",
    ]
    assert "  |  |- (2) (output 0 -> input 0) relu_out [relu]" in session["lo -r mm_out"]


def test_ls_ps_annotate_source(session, dumps):
    assert re.search(rf"0\s+{re.escape(str(dumps['model']))}\s+12\s+3", session["ls"])
    ps = session["ps model.py"]
    assert "(12 lines, 5 with ops; * marks them)" in ps
    lines = ps.splitlines()
    at = lines.index("*  6      y = np.log(x)")
    assert lines[at + 1].strip() == "^ logadd [fused_log_add] relax.log y"
    assert not lines[at + 2].strip().startswith("^")
    # the call site of the model code is in every op's creation stack
    at = lines.index("* 12      forward(1, 2, 3)")
    assert [ln.strip() for ln in lines[at + 1 :]] == [
        "^ mm_out [matmul] relax.matmul x",
        "^ logadd [fused_log_add] relax.log y",
        "^ logadd [fused_log_add] relax.add z",
        "^ relu_out [relu] relax.maximum r",
    ]
    assert "   1  import numpy as np" in lines


def test_alerts_and_profile_in_the_analyzer(session):
    alerts = session["alerts"]
    assert "4 NaN/Inf alerts. The first origin (an op whose inputs were finite) is logadd:0" in alerts
    rows = [cells(ln) for ln in alerts.splitlines() if re.match(r"\s+(yes\s+)?\d+\s+\d+\s", ln)]
    assert rows[0][:6] == ["yes", "2", "7", "logadd:0", "fused_log_add", "6 NaN, 2 -Inf of 8"]
    assert [r[:4] for r in rows[1:]] == [
        ["2", "8", "relu_out:0", "relu"],
        ["yes", "3", "10", "logadd:0"],  # finite inputs again: logadd makes NaN anew
        ["3", "11", "relu_out:0", "relu"],
    ]
    profile = session["profile"].strip().splitlines()
    assert profile[0] == "3 ops, 12 kernel calls in 4 executions, 240.0 us of kernel time"
    assert cells(profile[1]) == [
        "node",
        "kernel",
        "calls",
        "time (us)",
        "mean (us)",
        "time (%)",
        "shape",
        "inputs",
        "outputs",
    ]
    assert cells(profile[2]) == ["relu_out", "relu", "4", "120.0", "30.0", "50.00", "float32 (2, 4)", "1", "1"]
    assert profile[-1] == "total: 240.0 us"


def test_help_and_errors(session):
    assert "lt       List the kernel outputs recorded" in session["help"]
    assert "usage: lt [-n REGEX]" in session["help lt"] and "examples:" in session["help lt"]
    assert session["frobnicate"].strip() == "error: unknown command 'frobnicate'; type `help` for the list"


def test_pt_values_slicing_ranges_and_save(dumps, tmp_path):
    out_file = tmp_path / "pt.txt"
    npy = tmp_path / "v.npy"
    commands = [
        "pt val",
        "pt val[1:3, ::2]",
        "pt val -r [-inf,-3],[15,inf]",
        "pt val[7]",
        "pt val[1:x]",
        f"pt val[0] -w {npy} > {out_file}",
        "lt -f has_inf_or_nan",
    ]
    result = tvmdbg("analyze", dumps["full"], stdin="\n".join(commands))
    out = transcript(result.stdout)
    value = dumps["value"]
    assert "values: size=24  nan=1  -inf=0  +inf=1  min=-5  max=17" in out["pt val"]
    assert np.array2string(value, separator=", ", max_line_width=110) in out["pt val"]
    assert np.array2string(value[1:3, ::2], separator=", ", max_line_width=110) in out["pt val[1:3, ::2]"]
    ranged = out["pt val -r [-inf,-3],[15,inf]"]
    assert "7 of 24 values in [-inf, -3], [15, inf] (marked *)" in ranged  # -5, -4, -3, 15, 16, 17, inf
    assert ranged.count("*") == 7 + 1  # the marks and the legend
    assert "[[ -5*,  -4*,  -3*,  -2 ," in ranged
    assert "index 7 is out of bounds" in out["pt val[7]"]
    assert "error: bad slice part '1:x'" in out["pt val[1:x]"]
    assert out[f"pt val[0] -w {npy} > {out_file}"].strip() == f"(output written to {out_file})"
    assert f"saved (6,) float32 to {npy}" in out_file.read_text()
    np.testing.assert_array_equal(np.load(npy), value[0])
    assert "val:0" in out["lt -f has_inf_or_nan"] and "nan:1 +inf:1" in out["lt -f has_inf_or_nan"]


def test_user_tensor_filter_in_lt(dumps, capsys):

    filters.register_tensor_filter("test_wide", lambda trace, value: trace.duration_us >= 20)
    reader = DebugDataReader(dumps["nan"])
    reader.update()
    import io

    out = io.StringIO()
    run_commands(Analyzer(reader.run(), stdin=io.StringIO(), stdout=out), ["lt -f test_wide", "lt -f nosuch"])
    text = transcript(out.getvalue())
    assert text["lt -f test_wide"].startswith("8 of 12 kernel outputs (filter test_wide)")
    assert "error: no tensor filter 'nosuch'; known: has_inf_or_nan" in text["lt -f nosuch"]
    with pytest.raises(ValueError):
        filters.register_tensor_filter("has_inf_or_nan", lambda t, v: True)


def test_redirect_and_append(dumps, tmp_path):
    target = tmp_path / "out.txt"
    tvmdbg("analyze", dumps["nan"], "-x", f"lt > {target}", "-x", f"le >> {target}")
    text = target.read_text()
    assert text.startswith("12 of 12 kernel outputs, by time:") and "4 of 4 executions" in text
    assert "\033[" not in text


# -- the analyzer in a terminal ------------------------------------------------------------


def _read_until(fd: int, needle: bytes, timeout: float = 90.0, until_eof: bool = False) -> bytes:
    data = b""
    deadline = time.time() + timeout
    while needle not in data:
        left = deadline - time.time()
        if left <= 0:
            raise AssertionError(f"timed out waiting for {needle!r}; got {data[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                chunk = b""
            if not chunk:
                if until_eof:
                    return data
                raise AssertionError(f"the terminal closed before {needle!r}; got {data[-2000:]!r}")
            data += chunk
    return data


def test_analyzer_in_a_pseudo_terminal_completes_and_keeps_history(dumps, tmp_path):
    history = tmp_path / "history"
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"TVMDBG_HISTORY": str(history), "TERM": "xterm"}
    args = [*TVMDBG, "analyze", str(dumps["nan"])]
    child, fd = terminal.spawn(args, env)  # no Python between fork and exec: see tests/terminal.py
    try:
        _read_until(fd, b"tvmdbg> ")
        os.write(fd, b"ni relu_o\t\r")  # completes the op name
        out = _read_until(fd, b"tvmdbg> ")
        assert b"Op relu_out" in out and b"kernel        relu" in out
        os.write(fd, b"lt -f has_inf_or_nan\r")
        out = _read_until(fd, b"tvmdbg> ")
        assert b"\033[31mnan:6 -inf:2\033[0m" in out  # colour on a terminal
        os.write(fd, b"\x1b[A\x1b[A\r")  # history: the command before last
        out = _read_until(fd, b"tvmdbg> ")
        assert b"Op relu_out" in out
        os.write(fd, b"lt -l 1")
        _read_until(fd, b"lt -l 1")
        # Let readline finish with those keys: a SIGINT that lands while it processes keys is
        # deferred by readline and then waits for the next key (CPython's readline loop). On a
        # loaded machine no pause is surely long enough, so press Ctrl-C again, as a user would,
        # until the prompt comes back.
        time.sleep(0.5)
        for attempt in range(6):
            os.write(fd, b"\x03")  # Ctrl-C drops the line, not the session
            try:
                out = _read_until(fd, b"tvmdbg> ", timeout=15.0)
                break
            except AssertionError:
                if attempt == 5:
                    raise
        assert b"^C (type quit to leave)" in out and b"kernel outputs" not in out
        os.write(fd, b"qui\t\r")
        _read_until(fd, b"\0", until_eof=True)
        status = child.wait(timeout=90)
    except BaseException:
        child.kill()
        child.wait()
        raise
    finally:
        os.close(fd)
    assert status == 0
    assert "ni relu_out" in history.read_text()


# -- one-shot subcommands ------------------------------------------------------------------


def test_check_exit_codes_and_diagnosis(dumps, tmp_path):
    clean = tvmdbg("check", dumps["clean"])
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "all finite (12 kernel outputs in 4 executions, mode FULL_HEALTH)" in clean.stdout
    assert tvmdbg("check", dumps["clean"], "-q").stdout == ""

    bad = tvmdbg("check", dumps["nan"])
    assert bad.returncode == 1
    text = bad.stdout.strip()
    assert "\n" not in text  # one paragraph
    model = str(dumps["model"])
    assert text.startswith("run run: 4 of 12 kernel outputs in 4 executions hold NaN or Inf")
    assert (
        "The first origin is op logadd (kernel fused_log_add; Relax ops relax.log y at line 6, relax.add z at line 7) in execution 2"
        in text
    )
    assert "6 NaN, 2 -Inf of 8, from inputs mm_out:0 finite, b (parameter 2) finite" in text
    assert f"created at {model}:6 (forward)" in text

    notensor = tmp_path / "nt" / "logdir"
    write_dump(notensor, mode="NO_TENSOR")
    cannot = tvmdbg("check", notensor)
    assert cannot.returncode == 2 and "records no NaN/Inf counts" in cannot.stderr

    curt = tmp_path / "curt" / "logdir"
    write_dump(curt, mode="CURT_HEALTH")
    assert tvmdbg("check", curt).returncode == 1

    missing = tvmdbg("check", tmp_path / "nowhere")
    assert missing.returncode == 2 and "no such directory" in missing.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no tvmdbg dump" in tvmdbg("check", empty).stderr


def test_check_looks_at_every_run(dumps, tmp_path):
    logdir = tmp_path / "two" / "logdir"
    write_dump(logdir, nan_at=None, run_id="a_clean")
    write_dump(logdir, nan_at=3, run_id="b_nan")
    both = tvmdbg("check", logdir)
    assert both.returncode == 1
    assert "run a_clean: all finite" in both.stdout and "run b_nan: 2 of 12" in both.stdout
    assert tvmdbg("check", logdir, "--run", "a_clean").returncode == 0
    assert "no run 'zzz'" in tvmdbg("check", logdir, "--run", "zzz").stderr


def test_alerts_subcommand_text_and_json(dumps):
    text = tvmdbg("alerts", dumps["nan"])
    assert text.returncode == 0
    assert "first origin (an op whose inputs were finite) is logadd:0" in text.stdout
    as_json = tvmdbg("alerts", dumps["nan"], "--json")
    got = json.loads(as_json.stdout)
    reader = DebugDataReader(dumps["nan"])
    reader.update()
    assert got == json.loads(analysis.dumps(analysis.alerts(reader.run())))
    first = got["alerts"][got["first_origin_index"]]
    assert (first["op_name"], first["origin"], first["location"]["line"]) == ("logadd", True, 6)
    assert [a["origin"] for a in got["alerts"]] == [True, False, True, False]
    # written a page at a time: the same answer whatever the page size; -l keeps the first N
    import io

    from tvmdbg_tb.cli import reports

    paged = io.StringIO()
    reports.write_alerts_json(reader.run(), paged, page=3)
    assert json.loads(paged.getvalue()) == got
    first_two = json.loads(tvmdbg("alerts", dumps["nan"], "--json", "-l", "2").stdout)
    assert first_two == json.loads(analysis.dumps(analysis.alerts(reader.run(), 0, 2)))


def test_profile_subcommand(dumps):
    out = tvmdbg("profile", dumps["nan"], "-l", "2")
    lines = out.stdout.strip().splitlines()
    assert [ln.split()[0] for ln in lines[2:4]] == ["relu_out", "logadd"]
    assert lines[4] == "... 1 more ops (-l 0 lists all)"
    data = json.loads(tvmdbg("profile", dumps["nan"], "--json").stdout)
    assert [r["op_name"] for r in data["rows"]] == ["relu_out", "logadd", "mm_out"]


def test_help_reads_like_a_mature_tool():
    top = tvmdbg("--help")
    assert top.returncode == 0
    for command in ("analyze", "alerts", "check", "profile", "run"):
        assert re.search(rf"^\s+{command}\s+\S", top.stdout, re.M), command
        sub = tvmdbg(command, "--help")
        assert sub.returncode == 0 and "examples:" in sub.stdout and f"usage: tvmdbg {command}" in sub.stdout
    assert tvmdbg().returncode == 2
    assert tvmdbg("--version").stdout.startswith("tvmdbg ")
    assert tvmdbg("analyze").returncode == 2


def test_cli_startup_does_not_import_tvm(dumps):
    code = (
        "import sys\nfrom tvmdbg_tb.cli import main\n"
        f"rc = main(['check', {str(dumps['nan'])!r}, '-q'])\n"
        f"main(['analyze', {str(dumps['nan'])!r}, '-x', 'alerts', '-x', 'profile', '-x', 'ni logadd'])\n"
        "assert 'tvm' not in sys.modules, sorted(m for m in sys.modules if m.startswith('tvm'))\n"
        "sys.exit(rc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 1, result.stderr


# -- conditional breaking (the controller, fed calls as the instrumentation feeds them) ------


def _call(index: int, nan: bool):
    traces = [
        pb.GraphExecutionTrace(
            op_id=op_id,
            execution_index=index,
            op_name=name,
            kernel=kernel,
            tensor_debug_mode=pb.FULL_HEALTH,
            debug_values=health(8, 6 if nan and op_id else 0),
        )
        for op_id, (name, kernel, _) in enumerate(OPS)
    ]
    return pb.Execution(index=index, function_name="main"), traces


def test_break_controller_stops_at_the_first_nan_call_and_resumes(dumps, tmp_path):
    import io

    out = io.StringIO()
    logdir = dumps["nan"]
    controller = BreakController(
        str(logdir),
        "run",
        tensor_filter="has_inf_or_nan",
        commands=["le", "run -t 2"],
        stdin=io.StringIO(""),
        stdout=out,
    )
    for i in range(6):
        controller.on_call(*_call(i, nan=i >= 2))
    # stops at the third call (index 2), then after 2 more calls (index 4), then the commands'
    # `run -t 2` again would stop at 6: not reached.
    assert controller.stops == [2, 4]
    text = out.getvalue()
    assert (
        "stopped after VM call 3 (main, execution 2): 2 of its 3 kernel outputs pass filter has_inf_or_nan, the first logadd:0"
        in text
    )
    assert "Continuing for 2 VM calls." in text

    quitter = BreakController(str(logdir), "run", commands=["quit"], stdin=io.StringIO(""), stdout=io.StringIO())
    with pytest.raises(SystemExit):
        quitter.on_call(*_call(0, nan=False))  # no filter: stops after the first call
    assert quitter.stops == [0]


# -- live dumps, damaged dumps, several runs, pipes ----------------------------------------


def test_analyzer_reads_new_records_before_each_command(tmp_path):
    import io

    w = DebugEventsWriter(
        tmp_path, DumpOptions(tensor_debug_mode="FULL_HEALTH", circular_buffer_size=-1), run_id="live"
    )
    w.write_graph(pb.DebuggedGraph(graph_id=0, name="main"))
    w.write_graph_op_creation(pb.GraphOpCreation(op_id=0, graph_id=0, op_name="only", kernel="k"))

    def call(nan: int) -> None:
        index = w.allocate_execution_index()
        w.write_graph_execution_traces(
            [
                pb.GraphExecutionTrace(
                    op_id=0,
                    execution_index=index,
                    kernel="k",
                    tensor_debug_mode=pb.FULL_HEALTH,
                    debug_values=health(8, nan),
                )
            ]
        )
        w.write_execution(pb.Execution(index=index, function_name="main", num_traces=1))
        w.flush()

    call(0)
    reader = DebugDataReader(tmp_path)
    reader.update()
    out = io.StringIO()
    analyzer = Analyzer(reader.run(), stdin=io.StringIO(), stdout=out)
    run_commands(analyzer, ["le", "alerts"])
    call(3)  # the program goes on while the analyzer is open
    run_commands(analyzer, ["le", "alerts"])
    w.close()
    text = out.getvalue()
    assert "1 of 1 executions" in text and "No NaN/Inf alerts in 1 kernel outputs." in text
    assert "2 of 2 executions" in text and "1 NaN/Inf alerts. The first origin" in text


def test_damaged_dump_is_reported(dumps, tmp_path):
    import shutil

    logdir = tmp_path / "logdir"
    shutil.copytree(dumps["nan"], logdir)
    path = logdir / "run" / "tvmdbg.graph_execution_traces"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one bad byte in a record in the middle
    path.write_bytes(bytes(data))
    info = tvmdbg("analyze", logdir, "-x", "ri")
    assert "corruptions    1 damaged records skipped:" in info.stdout
    assert "tvmdbg.graph_execution_traces@" in info.stdout
    check = tvmdbg("check", logdir)
    assert check.returncode == 1  # the other NaN traces are still found
    assert "warning: 1 damaged records in run were skipped" in check.stderr


def test_several_runs_one_rule_for_every_command(dumps, tmp_path):
    """Of several runs, every command shows the one whose first NaN/Inf came first (else the
    newest), names the runs found (with the name the user gave a run), and never calls a
    logdir clean where a run is not."""
    logdir = tmp_path / "multi" / "logdir"
    write_dump(logdir, nan_at=1, run_id="first", run_name="lr=0.1 fp16")
    time.sleep(0.05)
    write_dump(logdir, nan_at=None, run_id="second")  # newer, and clean
    note = (
        'holds 2 runs (first "lr=0.1 fp16", second); showing first "lr=0.1 fp16", '
        "the run whose first NaN/Inf was recorded first"
    )
    info = tvmdbg("analyze", logdir, "-x", "ri")
    assert note in info.stderr and "Run first" in info.stdout
    alerts = tvmdbg("alerts", logdir)
    assert note in alerts.stderr and "The first origin" in alerts.stdout
    assert "No NaN/Inf alerts" not in alerts.stdout
    profile = tvmdbg("profile", logdir)
    assert note in profile.stderr
    check = tvmdbg("check", logdir)  # every run is judged
    assert check.returncode == 1 and 'run first "lr=0.1 fp16":' in check.stdout
    assert "run second: all finite" in check.stdout
    reader = DebugDataReader(logdir)
    reader.update()
    assert reader.run().name == "first" and reader.choose()[1] == "the run whose first NaN/Inf was recorded first"
    chosen = tvmdbg("alerts", logdir, "--run", "second")
    assert chosen.stdout.strip() == "No NaN/Inf alerts in 12 kernel outputs." and chosen.stderr == ""

    clean = tmp_path / "clean" / "logdir"
    write_dump(clean, nan_at=None, run_id="old", run_name='say "old"')
    time.sleep(0.05)
    write_dump(clean, nan_at=None, run_id="new")
    newest = tvmdbg("alerts", clean)
    assert "showing new, the newest run (no run recorded a NaN/Inf)" in newest.stderr
    unknown = tvmdbg("alerts", clean, "--run", "nope")
    assert (
        unknown.returncode == 2
        and "no run 'nope'" in unknown.stderr
        and r'runs: new, old "say \"old\""' in unknown.stderr
    )


def test_check_lists_the_runs_in_the_order_every_command_shows_them(tmp_path):
    """check judges every run, listed as alerts and the tab order them: the run whose first
    NaN/Inf came first, then the later ones, then the clean ones (not by name)."""
    logdir = tmp_path / "logdir"
    write_dump(logdir, nan_at=None, run_id="clean")
    time.sleep(0.05)
    write_dump(logdir, nan_at=1, run_id="earlier")
    time.sleep(0.05)
    write_dump(logdir, nan_at=1, run_id="a_later")  # sorts first by name
    check = tvmdbg("check", logdir)
    out = check.stdout
    assert check.returncode == 1 and out.index("run earlier") < out.index("run a_later") < out.index("run clean"), out
    assert "showing earlier" in tvmdbg("alerts", logdir).stderr


def test_limits_and_plain_text_in_pipes(dumps):
    alerts = tvmdbg("alerts", dumps["nan"], "-l", "1")
    lines = alerts.stdout.strip().splitlines()
    assert lines[-2].split()[:4] == ["yes", "2", "7", "logadd:0"]
    assert lines[-1] == "  ... 3 more (-l 0 lists all)"
    out = tvmdbg("analyze", dumps["nan"], "-x", "lt -s size -l 2", "-x", "lt -s name -r -l 3", "-x", "alerts")
    text = transcript(out.stdout)
    assert "\033[" not in out.stdout  # no colour outside a terminal
    assert text["lt -s size -l 2"].strip().endswith("... 10 more (use -l 0 to list all)")
    assert [r[3] for r in rows_of(text["lt -s name -r -l 3"])[:3]] == ["relu_out:0"] * 3
    piped = subprocess.run(
        f"{sys.executable} -c 'import sys; from tvmdbg_tb.cli import main; sys.exit(main())' analyze {dumps['nan']} "
        + " -x 'lt -l 0'" * 100  # more than a pipe holds: the writer meets a closed pipe
        + " | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert piped.stdout == "tvmdbg> lt -l 0\n" and "Traceback" not in piped.stderr


def test_empty_dump_and_a_kernel_that_raised(tmp_path):
    empty = tmp_path / "empty"
    DebugEventsWriter(empty, DumpOptions(tensor_debug_mode="FULL_HEALTH"), run_id="e").close()
    out = transcript(
        tvmdbg("analyze", empty, "-x", "lt", "-x", "le", "-x", "alerts", "-x", "profile", "-x", "ps x").stdout
    )
    assert out == {
        "lt": "0 of 0 kernel outputs, by time.\n",
        "le": "0 of 0 executions (top-level VM calls).\n",
        "alerts": "No NaN/Inf alerts in 0 kernel outputs.\n",
        "profile": "No kernel executions recorded: nothing to profile.\n",
        "ps x": "error: no source files in this dump\n",
    }
    check = tvmdbg("check", empty)  # nothing recorded is not "all finite"
    assert check.returncode == 2 and "cannot check, no VM call was recorded" in check.stderr

    failed = tmp_path / "failed"
    w = DebugEventsWriter(failed, DumpOptions(tensor_debug_mode="FULL_HEALTH"), run_id="f")
    w.write_graph(pb.DebuggedGraph(graph_id=0, name="main"))
    w.write_graph_op_creation(pb.GraphOpCreation(op_id=0, graph_id=0, op_name="shaped", kernel="reshape"))
    index = w.allocate_execution_index()
    error = "InternalError: cannot reshape (4,) to (5,)"
    w.write_graph_execution_traces(
        [
            pb.GraphExecutionTrace(
                op_id=0, execution_index=index, kernel="reshape", tensor_debug_mode=pb.FULL_HEALTH, error=error
            )
        ]
    )
    w.write_execution(pb.Execution(index=index, function_name="main", error=error, num_traces=1))
    w.close()
    out = transcript(tvmdbg("analyze", failed, "-x", "lt", "-x", "le", "-x", "pt shaped").stdout)
    assert rows_of(out["lt"])[0][3:] == ["shaped:0", "reshape", "-", "-", "error", "0.0"]
    assert rows_of(out["le"])[0][5] == "error"
    assert f"the kernel raised: {error}" in out["pt shaped"]
    check = tvmdbg("check", failed)
    assert check.returncode == 0 and "1 kernel call raised an error (see lt)." in check.stdout
