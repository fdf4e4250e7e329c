"""An S3-compatible server (moto's ThreadedMotoServer) on 127.0.0.1 for the `s3` tests, started once
per session and stopped by its handle; each test gets a bucket of its own and a request counter."""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from lakehouse_engine import Catalog

moto_server = pytest.importorskip("moto.server", reason="moto[server] (dev extra) runs the S3 tests")
pytest.importorskip("obstore", reason="obstore (the [s3] extra) publishes snapshots on S3")

ACCESS_KEY, SECRET_KEY, REGION = "testing-key", "testing-secret", "us-east-1"
# werkzeug's access log line: "PUT /bucket/key?query HTTP/1.1" 200 - (colour codes around non-2xx)
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_REQUEST_LINE = re.compile(r'"(GET|PUT|HEAD|POST|DELETE) (/[^ ?]*)(\?[^ ]*)? HTTP/[\d.]+" (\d+)')


class RequestLog(logging.Handler):
    """Every request the server answered: (method, path, query, status), in order."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str, str, int]] = []
        self._mutex = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        found = _REQUEST_LINE.search(_COLOUR.sub("", record.getMessage()))
        if found:
            with self._mutex:
                self.requests.append((found.group(1), found.group(2), found.group(3) or "",
                                      int(found.group(4))))

    def since(self, start: int, bucket: str) -> list[tuple[str, str, str, int]]:
        """The requests on `bucket` after the first `start` ones."""
        with self._mutex:
            return [r for r in self.requests[start:] if r[1].startswith(f"/{bucket}")]

    def mark(self) -> int:
        with self._mutex:
            return len(self.requests)


@dataclass
class S3Server:
    """The running server: its endpoint and the log of the requests it answered."""

    endpoint: str
    log: RequestLog
    report: dict[str, int] = field(default_factory=dict)  # numbers a test measured, printed at the end

    def options(self, **extra: str) -> dict[str, str]:
        """Catalog options (Paimon's names) that reach this server."""
        return {"s3.endpoint": self.endpoint, "s3.access-key": ACCESS_KEY, "s3.secret-key": SECRET_KEY,
                "s3.region": REGION, "s3.path.style.access": "true", **extra}

    def new_bucket(self) -> str:
        import boto3

        name = f"lake-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                     aws_secret_access_key=SECRET_KEY, region_name=REGION).create_bucket(Bucket=name)
        return name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=True)
    server.start()
    log = RequestLog()
    werkzeug = logging.getLogger("werkzeug")
    werkzeug.addHandler(log)
    werkzeug.setLevel(logging.INFO)
    served = S3Server(f"http://127.0.0.1:{port}", log)
    try:
        yield served
    finally:
        if served.report:
            print(f"\nS3 requests measured: {served.report}")
        werkzeug.removeHandler(log)
        server.stop()


@dataclass
class S3Warehouse:
    """A warehouse in a fresh bucket: its URI, the catalog options and the server behind it."""

    uri: str
    bucket: str
    options: dict[str, str]
    server: S3Server

    def catalog(self, **extra: str) -> Catalog:
        return Catalog(self.uri, {**self.options, **extra})


@pytest.fixture
def s3_warehouse(s3_server: S3Server) -> S3Warehouse:
    bucket = s3_server.new_bucket()
    warehouse = S3Warehouse(f"s3://{bucket}/warehouse", bucket, s3_server.options(), s3_server)
    warehouse.catalog().create_database("db")
    return warehouse


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/lakehouse_engine/object_store" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.s3)
