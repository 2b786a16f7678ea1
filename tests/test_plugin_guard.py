"""The plugin's request guard inside TensorBoard itself (tvmdbg_tb.plugin.guard): which Host and
Origin headers each way of starting TensorBoard answers (default, --host, --bind_all,
--tvmdbg_allowed_hosts), on a real dump, through the whole TensorBoard WSGI app with the flags
TensorBoard parsed."""

from __future__ import annotations

import json
import socket
import time

import pytest
from plugin_dumps import write_nan_chain
from tensorboard import program
from tensorboard.backend import application
from werkzeug.test import Client
from werkzeug.wrappers import Response

from tvmdbg_tb.plugin.guard import DASHBOARD_HEADER, split_host

ROUTES = ("runs", "alerts?run=run_a", "live/state?run=run_a", "index.js")


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    path = tmp_path_factory.mktemp("guard")
    write_nan_chain(path, "run_a")
    return path


def _client(logdir, **flags) -> Client:
    tb = program.TensorBoard()
    tb.configure(logdir=str(logdir), load_fast="false", **flags)
    provider, multiplexer = tb._make_data_provider()
    app = application.TensorBoardWSGIApp(tb.flags, tb.plugin_loaders, provider, tb.assets_zip_provider, multiplexer)
    client = Client(app, Response)
    deadline = time.time() + 30
    while not json.loads(client.get("/data/plugin/tvmdbg/runs").get_data())["runs"]:
        assert time.time() < deadline
        time.sleep(0.05)
    return client


def _status(client: Client, route: str, host: str, **headers) -> int:
    response = client.get(f"/data/plugin/tvmdbg/{route}", headers={"Host": host, **headers})
    if response.status_code >= 400:
        assert json.loads(response.get_data())["error"].startswith("refused: ") or response.status_code < 403
    return response.status_code


def test_split_host():
    assert split_host("LocalHost.:6006") == ("localhost", "6006")
    assert split_host("[::1]:6006") == ("::1", "6006")
    assert split_host("::1") == ("::1", "")
    assert split_host("127.0.0.1") == ("127.0.0.1", "")
    assert split_host("[::1]x") == ("", "")
    assert split_host("a:b") == ("", "")


def test_default_answers_loopback_only(logdir):
    client = _client(logdir)
    for route in ROUTES:
        for host in ("localhost:6006", "127.0.0.1:6006", "127.1.2.3", "[::1]:6006", "app.localhost:6006"):
            assert _status(client, route, host) == 200, (route, host)
        machine = socket.gethostname() if socket.gethostname() != "localhost" else "evil.example"
        for host in ("evil.example:6006", "10.0.0.7:6006", machine, "", "localhost.evil.example"):
            assert _status(client, route, host) == 403, (route, host)
    # Origin: the request's own, or none
    assert _status(client, "runs", "localhost:6006", Origin="http://localhost:6006") == 200
    assert _status(client, "runs", "localhost:6006", Origin="http://localhost:7007") == 403
    assert _status(client, "runs", "localhost:6006", Origin="null") == 403


def test_host_flag_adds_that_name(logdir):
    client = _client(logdir, host="myhost.example")
    assert _status(client, "runs", "myhost.example:6006") == 200
    assert _status(client, "runs", "MyHost.Example.:6006") == 200
    assert _status(client, "runs", "localhost:6006") == 200
    assert _status(client, "runs", "other.example:6006") == 403
    assert _status(client, "runs", "10.0.0.7:6006") == 403  # an address it is not bound to


def test_bind_all_adds_this_machines_names_and_addresses(logdir):
    client = _client(logdir, bind_all=True)
    name = socket.gethostname()
    assert _status(client, "runs", f"{name}:6006") == 200
    assert _status(client, "runs", f"{socket.getfqdn()}:6006") == 200
    assert _status(client, "runs", "10.0.0.7:6006") == 200  # an address cannot be rebound
    assert _status(client, "runs", "[fe80::1]:6006") == 200
    assert _status(client, "runs", "evil.example:6006") == 403
    assert _status(client, "runs", f"{name}.evil.example:6006") == 403


def test_allowed_hosts_flag_for_a_reverse_proxy(logdir):
    client = _client(logdir, tvmdbg_allowed_hosts="tb.proxy.example, other.proxy.example")
    assert _status(client, "runs", "tb.proxy.example") == 200
    assert _status(client, "runs", "other.proxy.example:443") == 200
    assert _status(client, "runs", "localhost:6006", Origin="https://tb.proxy.example") == 200
    assert _status(client, "runs", "evil.example") == 403
    # a POST through the proxy: still JSON with the dashboard's header only
    response = client.post(
        "/data/plugin/tvmdbg/live/command?run=run_a",
        data=json.dumps({"action": "pause"}),
        headers={"Host": "tb.proxy.example", "Origin": "https://tb.proxy.example", "Content-Type": "text/plain"},
    )
    assert response.status_code == 415
    response = client.post(
        "/data/plugin/tvmdbg/live/command?run=run_a",
        data=json.dumps({"action": "pause"}),
        headers={"Host": "tb.proxy.example", "Content-Type": "application/json", DASHBOARD_HEADER: "1"},
    )
    assert response.status_code == 404 and "no live program" in json.loads(response.get_data())["error"]


def test_methods_other_than_get_and_post_are_refused(logdir):
    client = _client(logdir)
    for method in ("PUT", "DELETE", "PATCH", "OPTIONS"):
        response = client.open("/data/plugin/tvmdbg/live/command?run=run_a", method=method)
        assert response.status_code == 405, method
        assert "Access-Control-Allow-Origin" not in response.headers  # no CORS preflight is ever answered
