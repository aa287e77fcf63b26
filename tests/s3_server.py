"""A real S3 API for the tests: moto's standalone server (PyPI ``moto[server]``) on
127.0.0.1 at a free port, reached with s3fs. Not a mock object: every request the file
system makes goes over HTTP to a server that answers as S3 does (ranges, multipart
uploads, 404s, 416s)."""

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}
FSSPEC_FS = "ldpfuse_py.contrib.fsspec:FsspecFS"
_names = itertools.count()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    def __init__(self, tmp):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(tmp, "moto.log"), "wb")
        env = dict(os.environ, **CREDENTIALS)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=tmp,
            start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=2).read()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"moto server did not start (see {self.log.name})")
                time.sleep(0.2)

    def client(self):
        import s3fs
        for k, v in CREDENTIALS.items():
            os.environ.setdefault(k, v)
        return s3fs.S3FileSystem(endpoint_url=self.endpoint, key="testing", secret="testing",
                                 use_listings_cache=False, skip_instance_cache=True)

    def new_bucket(self):
        name = f"b{os.getpid()}-{next(_names)}"
        self.client().mkdir(name)
        return name

    def post(self, path):
        req = urllib.request.Request(self.endpoint + path, method="POST", data=b"")
        return urllib.request.urlopen(req, timeout=10).read()

    def get(self, path):
        return urllib.request.urlopen(self.endpoint + path, timeout=30).read()

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()
