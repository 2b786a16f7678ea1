"""A logdir someone else wrote: hostile dumps never hurt the terminal, TensorBoard or the tab.

Fuzz-style: tests/hostile_dumps.py builds the logdirs once for the module (escapes in every
string field of a real TVM dump, symlinks and FIFOs in every file role, record headers
declaring up to 2**64 - 1 bytes in sparse files, dtypes and shapes no tensor has). Then:
every CLI command prints no raw control character; TensorBoard (a process of its own, its
plugin crawled route by route, four requests at a time) answers every route without a 5xx,
each answer within a "no hang" deadline, and stays under a memory bound; a `check` over every
run stays under the same bound; every route asked with fuzzed parameters on these runs answers
a 2xx or a 4xx that says why.
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import dump_records
import hostile_dumps as hd
import pytest
import route_fuzz
from big_dumps import write_big_graph, write_sources
from plugin_dumps import write_nan_chain
from tensorboard_process import TensorBoardProcess
from test_plugin import Server

from tvmdbg_tb.cli.main import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# The CLI, saying its peak resident memory (VmHWM, KB: unlike ru_maxrss, not the forking
# test process's) on its last stderr line.
TVMDBG = [
    sys.executable,
    "-c",
    "import re, sys; from tvmdbg_tb.cli import main; code = main(); "
    "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
    "sys.stderr.write(f'\\nPEAK_RSS_KB {hwm}\\n'); sys.exit(code)",
]
RSS_BOUND_MB = 400  # TensorBoard's and the CLI's peak resident memory under these logdirs
# "No hang": a request unanswered this long fails (urlopen's timeout). How fast routes answer is
# measured in bench/, never asserted here (a busy machine is slow, not wrong).
ANSWER_SECONDS = 120
OP = "#0"  # the escapes model's first op (a var name holding ESCAPES), by id: its name differs per run


def _cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]), "TVMDBG_HISTORY": ""}
    return subprocess.run([*TVMDBG, *map(os.fsencode, args)], capture_output=True, timeout=timeout, env=env, cwd=ROOT)


def _peak_rss_mb(result: subprocess.CompletedProcess) -> float:
    return int(result.stderr.rsplit(b"PEAK_RSS_KB ", 1)[1].split()[0]) / 1024


# -- hostile programs behind a live file -----------------------------------------------------------


class _HostileServer:
    """A local port that answers live requests badly: `flood` sends 300 MB, `trickle` one
    byte every 2 s, `silent` accepts and never answers, `html` is a web page."""

    def __init__(self, kind: str):
        self.kind = kind
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            if self.kind == "flood":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
                chunk = b" " * (1 << 20)
                for _ in range(300):
                    conn.sendall(chunk)
            elif self.kind == "trickle":
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}":
                    if self.stop.wait(2):
                        break
                    conn.sendall(bytes([byte]))
            elif self.kind == "silent":
                self.stop.wait(120)
            else:
                conn.sendall(b"HTTP/1.1 500 Oops\r\nContent-Type: text/html\r\n\r\n<html>not tvmdbg</html>")
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


# -- the logdirs -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("hostile")
    servers = {kind: _HostileServer(kind) for kind in ("flood", "trickle", "silent", "html")}
    built = {
        "logdir": logdir,
        "escapes": hd.escape_runs(logdir),
        "roles": hd.file_role_runs(logdir),
        "lengths": hd.declared_length_runs(logdir),
        "values": hd.values_run(logdir),
        "live": hd.live_file_runs(logdir, {kind: s.port for kind, s in servers.items()}),
    }
    yield built
    for server in servers.values():
        server.close()


def _assert_shown_as_text(result: subprocess.CompletedProcess, what: str) -> None:
    for name, stream in (("stdout", result.stdout), ("stderr", result.stderr)):
        raw = hd.RAW_CONTROL.search(stream)
        assert raw is None, (what, name, stream[max(0, raw.start() - 80) : raw.end() + 80])
    assert b"Traceback" not in result.stderr, (what, result.stderr[-2000:])


def _cli_here(*args) -> subprocess.CompletedProcess:
    """The CLI's main() in this process, its stdout and stderr the UTF-8 bytes a terminal gets
    (a process per command costs seconds of imports each)."""
    saved = sys.stdout, sys.stderr
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True) for _ in range(2))
    sys.stdout, sys.stderr = out, err
    try:
        code = main([os.fsdecode(a) if isinstance(a, (bytes, Path)) else a for a in args])
    except SystemExit as exit_:
        code = exit_.code
    finally:
        sys.stdout, sys.stderr = saved
    return subprocess.CompletedProcess(args, code, out.buffer.getvalue(), err.buffer.getvalue())


# -- the terminal ----------------------------------------------------------------------------------


def test_every_cli_command_shows_a_dumps_escapes_as_text(hostile):
    """Escapes in file paths, op and var names, run names, notes, devices, dtypes, source
    lines and watchpoint hits: every command shows them escaped (`\\x1b]0;pwned\\x07`)."""
    logdir = hostile["logdir"] / "escapes"  # its three runs only: every command reads them all
    real, tainted, not_utf8 = hostile["escapes"]
    shown = 0
    for run_dir in (real, tainted, not_utf8):
        run = os.path.relpath(run_dir, logdir)
        commands = [
            ("alerts", logdir, "--run", run),
            ("alerts", logdir, "--run", run, "--json"),
            ("check", logdir, "--run", run),
            ("profile", logdir, "--run", run),
            ("replay", logdir, "--run", run, "--execution", "0", "--op", OP),
            (
                "analyze", logdir, "--run", run, "-x", "ri", "-x", "le", "-x", "lt", "-x", "alerts", "-x", "profile",
                "-x", f"ni {OP}", "-x", f"li {OP}", "-x", f"lo {OP}", "-x", f"pt {OP}:0", "-x", "ls", "-x", "ps 0",
            ),
        ]  # fmt: skip
        for args in commands:
            result = _cli_here(*args)
            assert result.returncode in (0, 1, 2), (args, result.stderr[-2000:])
            _assert_shown_as_text(result, args)
            shown += hd.SHOWN in result.stdout + result.stderr
    # The run lists (every run named on stderr, with its run_name) and a comparison.
    for args in (("alerts", logdir), ("compare", tainted, not_utf8)):  # two copies: the ops align
        result = _cli_here(*args)
        _assert_shown_as_text(result, args)
        shown += hd.SHOWN in result.stdout + result.stderr
    assert shown >= 15, shown  # the escapes are shown, not dropped
    # In a process of its own, as a user runs it: the same bytes reach the terminal.
    result = _cli("alerts", logdir, "--run", os.path.relpath(tainted, logdir))
    _assert_shown_as_text(result, "alerts")
    assert result.returncode == 0 and hd.SHOWN in result.stdout


def test_tvmdbg_run_shows_a_models_escapes_as_text(hostile, tmp_path):
    """`tvmdbg run` on a real model whose op names hold escapes: the stop message (a watchpoint
    hit naming the op) and the analyzer at the stop show them as text."""
    script = next(hostile["logdir"].glob("model*.py"))
    result = _cli(
        "run", "--watch", "nan_or_inf", "-x", "lt", "-x", f"ni {OP}", "-x", "run --no_break",
        "--dump_dir", tmp_path / "dump", script, tmp_path / "own", "--escapes",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    _assert_shown_as_text(result, "run")
    assert b"stopped after VM call" in result.stdout and hd.SHOWN in result.stdout


def test_check_on_every_hostile_run_is_bounded_and_says_what_is_wrong(hostile):
    """Every run of the logdir, FIFOs, devices and declared lengths of 2**63 included: `check`
    ends, within the memory bound, and names the damage; no raw control character."""
    started = time.monotonic()
    result = _cli("check", hostile["logdir"], timeout=600)
    elapsed, rss, out, err = time.monotonic() - started, _peak_rss_mb(result), result.stdout, result.stderr
    assert result.returncode in (1, 2), err[-3000:]
    assert b"Traceback" not in err, err[-3000:]
    assert rss < RSS_BOUND_MB, rss
    assert hd.RAW_CONTROL.search(out + err) is None
    text = (out + err).decode(errors="replace")
    assert "a FIFO" in text and "a character device" in text and "a directory" in text
    assert "corrupt record" in text  # the declared lengths, reported as damage
    print(f"check over {len(hostile['roles']) + len(hostile['lengths'])} hostile runs: {elapsed:.1f} s, {rss:.0f} MB")


# -- TensorBoard -----------------------------------------------------------------------------------


def _get(url: str) -> tuple[int, bytes, float]:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=ANSWER_SECONDS) as response:
            return response.status, response.read(), time.monotonic() - started
    except urllib.error.HTTPError as error:
        return error.code, error.read(), time.monotonic() - started


def _vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _browser_form(name: str) -> str:
    """A run name as a browser sends it: a name that is not UTF-8 has lone surrogates, which
    URLSearchParams turns into U+FFFD."""
    return re.sub("[\ud800-\udfff]", "\ufffd", name)


def _route_urls(tb: TensorBoardProcess, run: str, other: str) -> list[str]:
    """Every GET route of one run, with the parameters the dashboard sends."""
    run, other = _browser_form(run), _browser_form(other)
    q = lambda **p: urllib.parse.urlencode({"run": run, **p})  # noqa: E731
    routes = [
        f"alerts?{q()}", f"replays?{q()}", f"execution/digests?{q()}", f"execution/data?{q()}",
        f"graph_execution/digests?{q()}", f"graph_execution/data?{q()}", f"graphs/list?{q()}",
        f"graphs/graph_info?{q(graph_id=0)}", f"graphs/op_info?{q(op_id=0)}", f"graph_execution/op_traces?{q(op_id=1)}",
        f"graph_execution/op_stats?{q(op_id=1)}", f"source_files/list?{q()}", f"source_files/file?{q(index=0)}",
        f"stack_frames/stack_frames?{q(stack_frame_ids='0,1,2')}", f"profile?{q()}", f"live/state?{q()}",
        f"live/hits?{q()}", f"live/watchpoints?{q()}", f"status?{q()}",
    ]  # fmt: skip
    routes += [f"tensor/value?{q(trace=k)}" for k in range(len(hd.VALUES))]
    routes += [f"tensor/histogram?{q(trace=k)}" for k in range(len(hd.VALUES))]
    routes.append(f"compare?{urllib.parse.urlencode({'run_a': run, 'run_b': other})}")
    return [f"{tb.url}/data/plugin/tvmdbg/{route}" for route in routes]


def test_tensorboard_answers_every_route_without_5xx_within_bounds(hostile, tmp_path):
    """Four requests at a time over every route of every hostile run: no 5xx, every answer
    within ANSWER_SECONDS, TensorBoard's peak RSS under RSS_BOUND_MB."""
    logdir = hostile["logdir"]
    tb = TensorBoardProcess(logdir, tmp_path / "tensorboard.log")
    try:
        deadline = time.monotonic() + 300
        expected = 3 + len(hostile["roles"]) + len(hostile["lengths"]) + 1 + len(hostile["live"])
        while True:  # the plugin lists every run (a run whose metadata is not a file is not one)
            runs = [r["run"] for r in json.loads(_get(f"{tb.url}/data/plugin/tvmdbg/runs")[1])["runs"]]
            if len(runs) >= expected - 2 * len(hd.FILE_KINDS) or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert len(runs) >= expected - 2 * len(hd.FILE_KINDS), (len(runs), expected)
        urls = [f"{tb.url}/data/plugin/tvmdbg/runs", f"{tb.url}/data/plugin/tvmdbg/status"]
        for run in runs:
            urls += _route_urls(tb, run, runs[0])
        with ThreadPoolExecutor(4) as pool:
            answers = list(zip(urls, pool.map(_get, urls)))
        failures = [(url, status, body[:300]) for url, (status, body, _) in answers if status >= 500]
        # A port that never answers in time is what a frozen program is: the relay's documented
        # 504 (the only 5xx), once the deadline passed.
        silent = [f for f in failures if f[1] == 504 and re.search(r"/live/.*run=live%2Fserver_(silent|trickle)", f[0])]
        assert failures == silent, [f for f in failures if f not in silent][:10]
        slow = sorted(((seconds, url) for url, (_, _, seconds) in answers), reverse=True)
        print(f"slowest answers: {slow[:3]}")  # a hang fails in _get; speed is bench/'s
        rss = _vm_hwm_mb(tb.proc.pid)
        assert rss < RSS_BOUND_MB, rss
        print(
            f"{len(urls)} answers over {len(runs)} runs; slowest {slow[0][0]:.1f} s ({slow[0][1]}); peak RSS {rss:.0f} MB"
        )
    finally:
        tb.close()


# -- every route, fuzzed parameters, hostile runs ----------------------------------------------------


def test_every_route_answers_fuzzed_parameters_on_hostile_runs_with_4xx_never_5xx(hostile):
    """Every GET route of the plugin (taken from get_plugin_apps, so a new route is in), every
    parameter any route reads, fuzzed values, on the hostile runs (dtypes and shapes no tensor
    has, escapes in every field, declared lengths of 2**63, FIFOs): each answer is a 2xx or a
    4xx whose JSON says what is wrong, never a 5xx or a traceback."""
    s = Server(hostile["logdir"])
    try:
        listed = [r["run"] for r in s.json("runs")["runs"]]
        runs = [_browser_form(r) for r in listed if not r.startswith("live/server_")]  # those relay for 5 s
        assert "values" in runs and len(runs) > 20, listed
        routes, params = route_fuzz.get_routes(s.plugin), route_fuzz.plugin_params()
        assert {"run", "trace", "slice", "bins", "op_id", "q", "max_ops", "stack_frame_ids", "run_b"} <= set(params)
        assert {"tensor/histogram", "graphs/neighborhood", "source_files/op_lines", "live/state"} <= set(routes)
        seen = route_fuzz.fuzz_every_route(
            s, ["values"] * len(runs) + runs, seed=34, per_route=40, traces=len(hd.VALUES)
        )
        assert seen.get(200, 0) > len(routes) and seen.get(400, 0) and seen.get(404, 0), seen
        print(f"{sum(seen.values())} fuzzed requests over {len(routes)} routes and {len(params)} parameters: {seen}")
    finally:
        s.plugin.stop()


# -- values no tensor has; rows damaged after they were indexed --------------------------------------


def test_values_no_tensor_has_answer_4xx_and_any_finite_range_has_a_histogram(hostile):
    s = Server(hostile["values"])
    (run,) = [r["run"] for r in s.json("runs")["runs"]]
    histogram = s.json("tensor/histogram", run=run, trace=0, bins=7)  # float64 finfo.min .. finfo.max
    assert histogram["finite"] == 5 and sum(histogram["counts"]) == 5, histogram
    assert histogram["min"] == hd.FLOAT64_SPAN[0] and histogram["max"] == hd.FLOAT64_SPAN[-1]
    assert histogram["edges"][0] == hd.FLOAT64_SPAN[0] and histogram["edges"][-1] == hd.FLOAT64_SPAN[-1]
    assert s.json("tensor/value", run=run, trace=0)["values"] == hd.FLOAT64_SPAN.tolist()
    for k, (dtype, shape, _) in enumerate(hd.VALUES[1:-1], start=1):
        for route in ("tensor/value", "tensor/histogram"):
            error = s.json(route, 404, run=run, trace=k)["error"]
            assert "cannot be shown" in error or "shape" in error, (dtype, shape, error)
    page = s.json("graph_execution/data", run=run)["graph_executions"]
    assert len(page) == len(hd.VALUES) and all("unreadable" not in row for row in page)
    s.plugin.stop()


def test_a_row_damaged_after_it_was_read_is_marked_and_the_page_served(tmp_path):
    write_nan_chain(tmp_path, "run")
    s = Server(tmp_path)
    traces = tmp_path / "run" / "tvmdbg.graph_execution_traces"
    framed = dump_records.read(traces)
    data = bytearray(traces.read_bytes())
    data[len(framed[0]) + 20] ^= 0xFF  # the second trace's data, in place: same file, same size
    traces.write_bytes(bytes(data))
    rows = s.json("graph_execution/data", run="run")["graph_executions"]
    assert len(rows) == 16 and "no valid record" in rows[1]["unreadable"], rows[1]
    assert all("unreadable" not in row and row["summary"] for k, row in enumerate(rows) if k != 1)
    s.plugin.stop()


# -- the framing: what a header declares costs nothing until the file holds it -----------------


def test_checking_a_record_reads_only_what_the_file_holds(tmp_path):
    """records.check_record on sparse files declaring 2 GiB: a damaged record and a crafted one
    whose CRCs hold are told apart reading a few bytes (the holes by arithmetic, google_crc32c's
    CRC), and a length beyond any record (1 TiB) is refused before any of its data is read."""
    import google_crc32c

    from tvmdbg_tb.events import records
    from tvmdbg_tb.storage import files

    for size in (0, 1, 7, 4096, 5 << 20):
        for crc in (0, 0x12345678):
            assert records.extend_zeros(crc, size) == google_crc32c.extend(crc, bytes(size))
    length = records.MAX_RECORD_BYTES
    header = struct.pack("<Q", length)
    header += struct.pack("<I", records.masked_crc32c(header))
    crc = records.extend_zeros(0, length)
    footers = {
        "damaged": b"\0\0\0\0",
        "whole": struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF),
    }
    for name, footer in footers.items():
        path = tmp_path / name
        with open(path, "wb") as f:
            f.write(header)
            f.seek(records.HEADER_SIZE + length)
            f.write(footer)
        fd = files.open_regular(str(path))
        try:
            read = []
            state, declared = records.check_record(_counted(fd, read), 0, path.stat().st_size, partial(files.holes, fd))
        finally:
            os.close(fd)
        assert (state, declared) == (records.WHOLE if name == "whole" else records.BAD_DATA, length)
        assert sum(read) < 1 << 20, sum(read)  # the header and the footer, not 2 GiB of holes
    big = tmp_path / "too_large"
    header = struct.pack("<Q", 1 << 40)
    big.write_bytes(header + struct.pack("<I", records.masked_crc32c(header)))
    os.truncate(big, (1 << 40) + 64)
    fd = files.open_regular(str(big))
    try:
        read = []
        assert records.check_record(_counted(fd, read), 0, big.stat().st_size) == (records.TOO_LARGE, 1 << 40)
        assert sum(read) == records.HEADER_SIZE
    finally:
        os.close(fd)


def _counted(fd: int, read: list[int]):
    def pread(offset: int, n: int) -> bytes:
        read.append(n)
        return os.pread(fd, n, offset)

    return pread


# -- huge but legitimate: the bounded routes of the dashboard's big-dump work -------------------------

HUGE_OPS = 300_000
# TensorBoard's peak on the huge run with every route asked four times at once at its largest
# page: the reader ~140 MB, the op index (analysis/graph_index.py) ~150 MB, four maximal answers
# being built ~250 MB (measured 496-499 MB at load 9; 961 MB before the reader kept ops compact).
HUGE_RSS_BOUND_MB = 700


@pytest.fixture(scope="module")
def huge(tmp_path_factory):
    """A 300,000-op graph whose ops were created at lines of a million-line file, an 8 MiB source
    (one line of 4 MiB), a call whose op 1000 made a NaN (tests/big_dumps.py)."""
    logdir = tmp_path_factory.mktemp("huge")
    sources = write_sources(tmp_path_factory.mktemp("huge_sources"))
    return logdir, write_big_graph(logdir, HUGE_OPS, sources, lines=3_000), sources


def _huge_urls(tb: TensorBoardProcess, run: str, files: list[dict]) -> list[str]:
    q = lambda **p: urllib.parse.urlencode({"run": run, **p})  # noqa: E731
    middle, last = HUGE_OPS // 2, HUGE_OPS - 1
    routes = [
        f"graphs/list?{q()}", f"graphs/graph_info?{q(graph_id=0)}", f"graphs/graph_info?{q(graph_id=0, begin=0, end=5000)}",
        f"graphs/graph_info?{q(graph_id=0, begin=middle, end=middle + 5000)}",
        f"graphs/graph_info?{q(graph_id=0, begin=last - 4999, end=HUGE_OPS)}",
        f"graphs/neighborhood?{q(op_id=1000, max_ops=2000, depth=1000, execution_index=0)}",
        f"graphs/neighborhood?{q(op_id=middle, max_ops=2000, depth=1000)}",
        f"graphs/overview?{q(graph_id=0, max_groups=1000, execution_index=0)}",
        f"graphs/overview?{q(graph_id=0, begin=middle, end=middle + 3000)}",
        f"graphs/search?{q(q=f'lv{last}')}", f"graphs/search?{q(q='relax.log', limit=200)}", f"graphs/search?{q(q=':7')}",
        f"graphs/op_info?{q(op_id=last)}", f"graphs/op_info?{q(op_id=1000, execution_index=0)}",
        f"graph_execution/op_traces?{q(op_id=1000)}", f"alerts?{q()}", f"graph_execution/digests?{q()}",
        f"graph_execution/data?{q(begin=0, end=1000)}", f"profile?{q()}", f"source_files/list?{q()}", f"status?{q()}",
    ]  # fmt: skip
    for f in files:
        n = f["num_lines"]
        for begin in (0, n // 2, max(0, n - 10_000)):
            routes.append(f"source_files/file?{q(index=f['index'], begin=begin, end=begin + 10_000)}")
            routes.append(f"source_files/op_lines?{q(index=f['index'], begin=begin, end=begin + 10_000)}")
        routes.append(f"source_files/file?{q(index=f['index'])}")  # a long file without a range: 400
    return [f"{tb.url}/data/plugin/tvmdbg/{route}" for route in routes]


def test_tensorboard_serves_a_300k_op_graph_and_huge_sources_within_bounds(huge, tmp_path):
    """Every route of the huge run, each asked four times at once (four tabs): no 5xx, every
    answer within ANSWER_SECONDS and under 16 MiB, TensorBoard's peak RSS under HUGE_RSS_BOUND_MB.
    (The tab's own responsiveness on this dump: tests/test_dashboard_big_dumps.py.)"""
    logdir, dump, _ = huge
    tb = TensorBoardProcess(logdir, tmp_path / "tensorboard.log")
    try:
        deadline = time.monotonic() + 300
        while True:  # the first read of 300,000 op records holds the runs answer back a while
            status, body, _ = _get(f"{tb.url}/data/plugin/tvmdbg/runs")
            runs = json.loads(body)["runs"] if status == 200 else []
            if [r for r in runs if r["num_ops"] == HUGE_OPS and r["num_alerts"]]:
                break
            assert time.monotonic() < deadline, runs
            time.sleep(1)
        files = json.loads(_get(f"{tb.url}/data/plugin/tvmdbg/source_files/list?run={dump['run']}")[1])["source_files"]
        assert max(f["num_lines"] for f in files) >= 1_000_000
        urls = [url for url in _huge_urls(tb, dump["run"], files) for _ in range(4)]
        with ThreadPoolExecutor(4) as pool:
            answers = list(zip(urls, pool.map(_get, urls)))
        failures = [(url, status, body[:300]) for url, (status, body, _) in answers if status >= 500]
        assert not failures, failures[:5]
        refused = {url for url, (status, _, _) in answers if status >= 400}
        assert all("source_files/file" in url or "graph_info?run" in url for url in refused), refused
        slowest = max((seconds, url) for url, (_, _, seconds) in answers)
        largest = max((len(body), url) for url, (_, body, _) in answers)
        print(f"slowest answer: {slowest}")  # a hang fails in _get; speed is bench/'s
        assert largest[0] < 16 << 20, largest
        rss = _vm_hwm_mb(tb.proc.pid)
        assert rss < HUGE_RSS_BOUND_MB, rss
        print(
            f"huge: {len(urls)} answers; slowest {slowest[0]:.1f} s ({slowest[1]}); largest {largest[0] >> 10} KiB "
            f"({largest[1]}); peak RSS {rss:.0f} MB"
        )
    finally:
        tb.close()
