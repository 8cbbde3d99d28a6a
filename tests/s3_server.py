"""A real S3-compatible server on localhost for the tests (moto's ThreadedMotoServer).

Not a mock of pyarrow: pyarrow's own S3FileSystem talks HTTP to the server.  The server runs in
a thread of the test process; credentials are dummy values set in the environment (so that
``s3://`` URIs and Dask worker processes started afterwards find them too).
"""
from __future__ import annotations

import contextlib
import logging
import os

import pytest

_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


class S3Server:
    def __init__(self, host: str, port: int):
        self.endpoint = f"{host}:{port}"

    def filesystem(self):
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(endpoint_override=self.endpoint, scheme="http",
                                 allow_bucket_creation=True, access_key="testing",
                                 secret_key="testing", region="us-east-1")

    def uri(self, path: str) -> str:
        """``s3://path`` with the query options that point pyarrow at this server."""
        return f"s3://{path}?endpoint_override={self.endpoint}&scheme=http&region=us-east-1"

    def keys(self, prefix: str) -> list[str]:
        import pyarrow.fs as pafs

        infos = self.filesystem().get_file_info(
            pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
        return sorted(i.path for i in infos if i.type == pafs.FileType.File)


@contextlib.contextmanager
def s3_server():
    moto_server = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    saved = {k: os.environ.get(k) for k in _ENV}
    os.environ.update(_ENV)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        # moto keeps its buckets in process-wide state, shared by every server of the process:
        # start from an empty store
        import urllib.request
        urllib.request.urlopen(urllib.request.Request(
            f"http://{host}:{port}/moto-api/reset", method="POST"), timeout=10).close()
        yield S3Server(host, port)
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
