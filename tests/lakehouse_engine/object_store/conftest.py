"""An S3-compatible server (moto's ThreadedMotoServer) on 127.0.0.1 for the `s3` tests, started once
per session and stopped by its handle; each test gets a bucket of its own and a request counter."""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

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


_ERROR_CODES = {500: "InternalError", 503: "SlowDown"}
_SIGNER = re.compile(r"Credential=([^/]+)/")  # SigV4: the access key of the signer


@dataclass
class _Fault:
    method: str
    path: re.Pattern[str]
    status: int
    times: int
    after: bool


class FaultInjector:
    """WSGI middleware in front of moto: answers the next requests that match a rule with an error
    status, either instead of moto (the store never saw the request) or after moto applied it (the
    object landed, the client hears an error)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]):
        self.app = app
        self._faults: list[_Fault] = []
        self._mutex = threading.Lock()
        # (method, path, access key that signed it) of every request: who wrote what
        self.signed: list[tuple[str, str, str]] = []

    def fail(self, method: str, path: str, status: int = 503, times: int = 1, after: bool = False) -> None:
        """Answer the next `times` `method` requests whose path (with `?query`) matches the regex
        `path` with `status`."""
        with self._mutex:
            self._faults.append(_Fault(method, re.compile(path), status, times, after))

    def clear(self) -> None:
        with self._mutex:
            self._faults.clear()

    def _take(self, method: str, path: str) -> _Fault | None:
        with self._mutex:
            for fault in self._faults:
                if fault.method == method and fault.path.search(path) and fault.times > 0:
                    fault.times -= 1
                    return fault
        return None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        query = environ.get("QUERY_STRING", "")
        signer = _SIGNER.search(environ.get("HTTP_AUTHORIZATION", ""))
        with self._mutex:
            self.signed.append((environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""),
                                signer.group(1) if signer else ""))
        fault = self._take(environ["REQUEST_METHOD"], environ.get("PATH_INFO", "") + (f"?{query}" if query else ""))
        if fault is None:
            return self.app(environ, start_response)
        if fault.after:
            answer = self.app(environ, lambda *args, **kwargs: None)
            b"".join(answer)  # moto applied the request; its answer is lost
        else:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            if length:
                environ["wsgi.input"].read(length)  # drained, so the connection stays usable
        code = _ERROR_CODES.get(fault.status, "InternalError")
        body = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
        start_response(f"{fault.status} {code}", [("Content-Type", "application/xml"),
                                                  ("Content-Length", str(len(body)))])
        return [body]


@dataclass
class S3Server:
    """The running server: its endpoint and the log of the requests it answered."""

    endpoint: str
    log: RequestLog
    faults: FaultInjector
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
    faults = FaultInjector(server._server.app)
    server._server.app = faults
    log = RequestLog()
    werkzeug = logging.getLogger("werkzeug")
    werkzeug.addHandler(log)
    werkzeug.setLevel(logging.INFO)
    served = S3Server(f"http://127.0.0.1:{port}", log, faults)
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
def s3_warehouse(s3_server: S3Server) -> Iterator[S3Warehouse]:
    bucket = s3_server.new_bucket()
    warehouse = S3Warehouse(f"s3://{bucket}/warehouse", bucket, s3_server.options(), s3_server)
    warehouse.catalog().create_database("db")
    yield warehouse
    s3_server.faults.clear()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/lakehouse_engine/object_store" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.s3)
