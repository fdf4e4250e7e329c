"""A real standalone cluster on loopback (a master and one 1-core worker started from the pyspark
package's jars): a write, a compaction and a read give the same result as on local[2].

The cluster's driver needs its own SparkSession, so it runs in a subprocess; the processes of
the cluster are started here, bounded in time, and stopped by their pids when the module ends.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, rows
from tests.lakehouse_engine.spark.conftest import ORDERS, key_buckets, orders

# A standalone master and worker take over a minute to start on 2 cores: `make soak` runs it, as
# it runs the same cluster over S3 (object_store/test_s3_spark_standalone.py).
pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 90
RUN_TIMEOUT_S = 300


def scenario(spark: Any, warehouse: str) -> dict[str, Any]:
    """Two Spark writes, a full compaction if the engine has it, and a read through the data source."""
    from lakehouse_engine.spark import compact, write

    catalog = Catalog(warehouse)
    catalog.create_database("db", ignore_if_exists=True)
    table = create_table(catalog, "orders", ORDERS, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": 2})
    write(spark.createDataFrame(orders(120)), table)
    write(spark.createDataFrame(orders(60, start=90, tag="v2")), table)
    try:
        compacted = compact(spark, table, full=True)
    except ImportError:  # compaction not in the engine yet
        compacted = []
    df = spark.read.format("lakehouse").option("warehouse", warehouse).load("db.orders")
    return {
        "rows": [{k: None if v is None else str(v) for k, v in r.items()} for r in rows(df.toArrow(), "id")],
        "kinds": [s.commit_kind for s in catalog.get_table("db.orders").snapshots()],
        "compacted": len(compacted),
        "buckets": sorted([k, list(v[0]), v[1]] for k, v in key_buckets(table).items()),
    }


def _main() -> None:
    """The cluster's driver: run `scenario` on the master given in argv, print the result as JSON."""
    from lakehouse_engine.spark.session import create_session

    args = json.loads(sys.argv[1])
    spark = create_session(args["master"], app_name="lakehouse-cluster-test", driver_memory="1g",
                           conf={"spark.executor.memory": "512m", "spark.cores.max": "1"})
    try:
        print("@@RESULT@@" + json.dumps(scenario(spark, args["warehouse"])))
    finally:
        spark.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{text!r} did not appear in {log}:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`spark://127.0.0.1:<port>` of a master with one worker (1 core, 1 GB), stopped at the end."""
    import pyspark

    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH")
    spark_home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("standalone")
    # What bin/load-spark-env.sh would export: the worker builds executor commands from these.
    scala = next((spark_home / "jars").glob("spark-core_*.jar")).name.split("_")[1].split("-")[0]
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_SCALA_VERSION": scala,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    base = [java, "-Xmx256m", "-cp", f"{spark_home / 'jars'}/*"]
    port = _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    commands = {
        "master": base + ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                          "--port", str(port), "--webui-port", str(_free_port())],
        "worker": base + ["org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                          "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
                          "--work-dir", str(work / "work")],
    }
    ready = {"master": "I have been elected leader", "worker": "Successfully registered with master"}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        for name, command in commands.items():
            log = work / f"{name}.log"
            with log.open("wb") as out:
                procs.append(subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT))
            _wait_for(log, ready[name], procs[-1], deadline)
        yield master_url
    finally:
        for proc in reversed(procs):  # the worker first: it stops its executors
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def test_standalone_cluster_gives_the_same_result_as_local(
        spark: Any, standalone_master: str, tmp_path: Path) -> None:
    args = {"master": standalone_master, "warehouse": str(tmp_path / "cluster")}
    code = ("import sys; sys.path.insert(0, sys.argv[2]); "
            "from tests.lakehouse_engine.spark.test_spark_cluster import _main; _main()")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(args), str(ROOT)], cwd=ROOT,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    on_cluster = json.loads(proc.stdout[proc.stdout.rindex("@@RESULT@@") + len("@@RESULT@@"):])

    local = json.loads(json.dumps(scenario(spark, str(tmp_path / "local"))))

    assert on_cluster == local
    assert len(local["rows"]) == 150
    assert local["kinds"][:2] == ["APPEND", "APPEND"]
