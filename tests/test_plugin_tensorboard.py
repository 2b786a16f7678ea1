"""The plugin inside TensorBoard itself: found through the `tensorboard_plugins` entry point,
listed, and answering, both in-process and as a real `tensorboard` server process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest
from plugin_dumps import write_nan_chain
from tensorboard import program
from tensorboard.backend import application
from werkzeug.test import Client
from werkzeug.wrappers import Response


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tb")
    write_nan_chain(path, "run_a")
    return path


def test_whole_tensorboard_app_in_process(logdir):
    tb = program.TensorBoard()
    tb.configure(logdir=str(logdir), load_fast="false")
    provider, multiplexer = tb._make_data_provider()
    app = application.TensorBoardWSGIApp(tb.flags, tb.plugin_loaders, provider, tb.assets_zip_provider, multiplexer)
    client = Client(app, Response)
    listing = json.loads(client.get("/data/plugins_listing").get_data(as_text=True))
    assert listing["tvmdbg"]["enabled"] is True
    assert listing["tvmdbg"]["tab_name"] == "TVM Debugger"
    assert listing["tvmdbg"]["loading_mechanism"] == {"type": "IFRAME", "module_path": "/data/plugin/tvmdbg/index.js"}
    # The plugin's reader thread reads in the background: wait for the run.
    deadline = time.time() + 30
    while time.time() < deadline:
        runs = json.loads(client.get("/data/plugin/tvmdbg/runs").get_data(as_text=True))["runs"]
        if runs and runs[0]["num_traces"] == 16:
            break
        time.sleep(0.05)
    assert runs[0]["run"] == "run_a" and runs[0]["num_alerts"] == 7
    alerts = json.loads(client.get("/data/plugin/tvmdbg/alerts?run=run_a").get_data(as_text=True))
    assert alerts["alerts"][alerts["first_origin_index"]]["op_name"] == "lv1"
    r = client.get("/data/plugin/tvmdbg/index.js")
    assert r.status_code == 200 and r.mimetype == "application/javascript" and b"render" in r.get_data()
    r = client.get("/data/plugin/tvmdbg/graphs/op_info?run=run_a&op_id=x")
    assert r.status_code == 400 and json.loads(r.get_data())["error"]


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_real_tensorboard_process(logdir, tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    log = open(tmp_path / "tb.log", "w+")
    proc = subprocess.Popen(
        [exe, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", "0", "--load_fast", "false"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        base = None
        deadline = time.time() + 90
        while time.time() < deadline and base is None:
            assert proc.poll() is None, open(tmp_path / "tb.log").read()
            found = re.search(r"http://127\.0\.0\.1:(\d+)/", open(tmp_path / "tb.log").read())
            if found:
                base = f"http://127.0.0.1:{found.group(1)}"
            else:
                time.sleep(0.2)
        assert base, open(tmp_path / "tb.log").read()
        status, body = _get(base + "/data/plugins_listing")
        assert status == 200 and json.loads(body)["tvmdbg"]["enabled"] is True
        while time.time() < deadline:
            status, body = _get(base + "/data/plugin/tvmdbg/runs")
            runs = json.loads(body)["runs"]
            if runs and runs[0]["num_traces"] == 16:
                break
            time.sleep(0.1)
        assert runs[0]["run"] == "run_a"
        status, body = _get(base + "/data/plugin/tvmdbg/alerts?run=run_a&begin=0&end=1")
        assert status == 200 and json.loads(body)["alerts"][0]["origin"] is True
        status, body = _get(base + "/data/plugin/tvmdbg/graphs/graph_info?run=nope&graph_id=0")
        assert status == 404 and "error" in json.loads(body)
        status, body = _get(base + "/data/plugin/tvmdbg/index.js")
        assert status == 200 and b"render" in body
        assert "Traceback" not in open(tmp_path / "tb.log").read()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_path_prefix_and_bundle_files(logdir, tmp_path, monkeypatch):
    import tvmdbg_tb_frontend

    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.js").write_text("export function render() { /* bundle */ }\n")
    (dist / "index.css").write_text("body { margin: 0 }\n")
    monkeypatch.setattr(tvmdbg_tb_frontend, "DIST_DIR", dist)
    tb = program.TensorBoard()
    tb.configure(logdir=str(logdir), load_fast="false", path_prefix="/tb")
    provider, multiplexer = tb._make_data_provider()
    client = Client(
        application.TensorBoardWSGIApp(tb.flags, tb.plugin_loaders, provider, tb.assets_zip_provider, multiplexer),
        Response,
    )
    r = client.get("/tb/data/plugin/tvmdbg/index.js")
    assert r.status_code == 200 and b"/* bundle */" in r.get_data()
    r = client.get("/tb/data/plugin/tvmdbg/index.css")
    assert r.status_code == 200 and r.mimetype == "text/css"
    assert client.get("/tb/data/plugin/tvmdbg/../../index.css").status_code == 404
    assert client.get("/tb/data/plugin/tvmdbg/runs").status_code == 200


def test_missing_logdir_is_reported_then_picked_up(tmp_path):
    from tensorboard.plugins import base_plugin

    from tvmdbg_tb.plugin.plugin import TvmDebuggerPlugin

    logdir = tmp_path / "not_yet"
    plugin = TvmDebuggerPlugin(base_plugin.TBContext(logdir=str(logdir)), start_reader=False)
    plugin.poll()
    client = Client(application.TensorBoardWSGI([plugin]), Response)
    status = json.loads(client.get("/data/plugin/tvmdbg/status").get_data())
    assert status["runs"] == [] and any("does not exist" in p for p in status["problems"])
    assert not plugin.is_active()
    write_nan_chain(logdir, "late")
    plugin.poll()
    runs = json.loads(client.get("/data/plugin/tvmdbg/runs").get_data())["runs"]
    assert [r["run"] for r in runs] == ["late"] and plugin.is_active()


BROKEN_INSTALL = """
import json, sys
sys.modules["google_crc32c"] = None  # a dependency of the backend is missing
from tensorboard import program
from tensorboard.backend import application
from werkzeug.test import Client
from werkzeug.wrappers import Response
tb = program.TensorBoard()
tb.configure(logdir=sys.argv[1], load_fast="false")
provider, multiplexer = tb._make_data_provider()
app = application.TensorBoardWSGIApp(tb.flags, tb.plugin_loaders, provider, tb.assets_zip_provider, multiplexer)
client = Client(app, Response)
listing = json.loads(client.get("/data/plugins_listing").get_data())
assert listing["tvmdbg"]["enabled"] is True, listing["tvmdbg"]
index = client.get("/data/plugin/tvmdbg/index.js")
assert index.status_code == 200 and b"cannot start" in index.get_data() and b"google_crc32c" in index.get_data()
runs = client.get("/data/plugin/tvmdbg/runs")
assert runs.status_code == 503 and "google_crc32c" in json.loads(runs.get_data())["error"]
assert client.get("/data/plugins_listing").status_code == 200  # TensorBoard itself is fine
print("ok")
"""


def test_a_broken_install_never_takes_tensorboard_down(logdir):
    result = subprocess.run([sys.executable, "-c", BROKEN_INSTALL, str(logdir)], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
