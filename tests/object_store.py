"""Real object stores for the tests, started by the tests themselves on 127.0.0.1: moto's S3
server (in process, a free port) and, where it runs, the GCS emulator."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from unittest import mock


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """A moto S3 server and the environment that points boto3, s3fs and TensorBoard at it: a
    thread of this process, or (process=True: the benchmarks, whose CPU time must not count
    the server's) a process of its own."""

    def __init__(self, process: bool = False):
        port = free_port()
        self._process = self._server = None
        if process:
            cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
            self._process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.time() > deadline or self._process.poll() is not None:
                        self.stop()
                        raise RuntimeError("moto_server did not start") from None
                    time.sleep(0.1)
        else:
            from moto.server import ThreadedMotoServer

            logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
            self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
            self._server.start()
        self.endpoint = f"http://127.0.0.1:{port}"
        self.env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "S3_ENDPOINT": self.endpoint,  # TensorBoard's own S3 reader
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }

    def bucket(self) -> str:
        """A new empty bucket's URL."""
        import boto3

        name = f"tvmdbg-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.endpoint).create_bucket(Bucket=name)
        return f"s3://{name}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


@contextlib.contextmanager
def s3_server(process: bool = False):
    """A running S3Server with its environment set in this process (restored after)."""
    server = S3Server(process)
    try:
        with mock.patch.dict(os.environ, server.env):
            yield server
    finally:
        server.stop()


@contextlib.contextmanager
def gcs_emulator():
    """gcp-storage-emulator on a free port, in memory, with the environment gcsfs reads; yields
    a bucket's URL. It ignores ifGenerationMatch: exclusive create is not checked there."""
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket="tvmdbg-gcs")
    server.start()
    env = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    try:
        with mock.patch.dict(os.environ, env):
            yield "gs://tvmdbg-gcs"
    finally:
        server.stop()
