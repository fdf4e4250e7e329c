"""Spark on a standalone cluster (a master and one worker on 127.0.0.1, started from pyspark's own
classes) over the S3 warehouse: the executors write and read the data files with credentials from
the session's configuration; the driver writes only the commit (manifests, snapshots)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.lakehouse_engine.object_store.conftest import REGION, SECRET_KEY, S3Warehouse

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # three JVMs: over a minute on two cores

DRIVER_KEY, EXECUTOR_KEY = "driver-key", "executor-key"
ROOT = Path(__file__).resolve().parents[3]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, ready: Callable[[], bool], procs: list[subprocess.Popen[bytes]], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            pytest.fail(f"the standalone cluster's {what} did not come up")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`spark://127.0.0.1:<port>` with one registered worker; both stopped by their pids."""
    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    work = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work / "worker")}
    port, ui = _port(), _port()
    master_url = f"spark://127.0.0.1:{port}"
    spark_class = os.path.join(spark_home, "bin", "spark-class")
    procs: list[subprocess.Popen[bytes]] = []
    logs = [open(work / name, "wb") for name in ("master.log", "worker.log")]  # noqa: SIM115
    try:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], env=env, stdout=logs[0], stderr=subprocess.STDOUT))

        def workers() -> int:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    return int(json.load(r).get("aliveworkers", 0))
            except OSError:
                return -1

        _wait("master", lambda: workers() >= 0, procs)
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
             "--cores", "1", "--memory", "1g", "--webui-port", str(_port()), "--work-dir", str(work / "worker")],
            env=env, stdout=logs[1], stderr=subprocess.STDOUT))
        _wait("worker", lambda: workers() >= 1, procs)
        yield master_url
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in logs:
            log.close()


def test_executors_of_a_standalone_cluster_write_the_data_files_and_the_driver_commits(
        standalone_master: str, s3_warehouse: S3Warehouse) -> None:
    faults = s3_warehouse.server.faults
    start = len(faults.signed)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONHASHSEED": "0"}
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        env.pop(var, None)  # the driver knows only its options; executors only the session's conf
    done = subprocess.run(
        [sys.executable, "-m", "tests.lakehouse_engine.object_store.standalone_driver",
         "--master", standalone_master, "--warehouse", s3_warehouse.uri, "--endpoint", s3_warehouse.server.endpoint,
         "--driver-key", DRIVER_KEY, "--executor-key", EXECUTOR_KEY, "--secret", SECRET_KEY, "--region", REGION],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["master"] == standalone_master
    assert [len(ids) for ids in result["snapshots"]] == [1, 1, 1]  # one commit per job
    assert result["rows"] == 150 and result["v"] == ["a0", "b99", "b149"]

    requests = [r for r in faults.signed[start:] if r[1].startswith(f"/{s3_warehouse.bucket}/")]
    data_writes = {r[2] for r in requests if r[0] in ("PUT", "POST") and "/bucket-" in r[1]}
    data_reads = {r[2] for r in requests if r[0] == "GET" and "/bucket-" in r[1]}
    commits = {r[2] for r in requests if r[0] == "PUT" and ("/snapshot/" in r[1] or "/manifest/" in r[1])}
    assert data_writes == {EXECUTOR_KEY}  # every data file went up from an executor
    assert EXECUTOR_KEY in data_reads     # and the read's tasks fetched them there
    assert commits == {DRIVER_KEY}        # the driver wrote manifests and snapshots only
