"""A SparkSession with the settings the engine's Spark jobs expect, on loopback."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from lakehouse_engine.spark.datasource import register_data_source
from lakehouse_engine.spark.deletion_vectors import JAR

# The most rows and bytes of one Arrow batch Spark hands to Python in the sessions made here.
ARROW_BATCH_ROWS = 131_072
ARROW_BATCH_BYTES = 16 << 20


def credentials_conf(catalog_options: Mapping[str, str]) -> dict[str, str]:
    """Spark settings that hand the S3 credentials named in `catalog_options` (`s3.access-key`,
    `s3.secret-key`, `s3.session-token`) to the executors as their environment
    (`spark.executorEnv.AWS_*`): credentials reach tasks through the session's configuration,
    never inside a task. Pass the result as `create_session(conf=...)`."""
    from lakehouse_engine.io_object_store import s3_settings

    given = s3_settings(catalog_options, env={})
    return {f"spark.executorEnv.{var}": given[name] for name, var in (
        ("access_key", "AWS_ACCESS_KEY_ID"), ("secret_key", "AWS_SECRET_ACCESS_KEY"),
        ("session_token", "AWS_SESSION_TOKEN")) if name in given}


def create_session(master: str = "local[2]", *, app_name: str = "lakehouse",
                   shuffle_partitions: int = 4, driver_memory: str = "2g",
                   conf: Mapping[str, str] | None = None) -> SparkSession:
    """Start (or get) a session on `master` with the `lakehouse` data source registered.

    Binds to `SPARK_LOCAL_IP` (127.0.0.1 unless set), runs Python workers on this interpreter,
    uses UTC as the session time zone, `shuffle_partitions` shuffle partitions and Arrow batches
    of up to `ARROW_BATCH_ROWS` rows / `ARROW_BATCH_BYTES` bytes, with the engine's jar (built by
    `make`: Spark's read of deletion-vector tables filters rows in the JVM with it) added to
    `spark.jars`; `conf` adds or overrides settings. `driver_memory` and the jar apply only when
    this call starts the JVM. An
    active session is returned as it is (with the data source registered), whatever `master`.

    Args:
        master: `local[n]`, `local[n,maxFailures]` or `spark://host:port`.
        app_name: the application name shown by Spark.
        shuffle_partitions: `spark.sql.shuffle.partitions` (Spark's default 200 is for clusters).
        driver_memory: `spark.driver.memory`.
        conf: further Spark settings.
    """
    local_ip = os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {
        "spark.driver.host": local_ip,
        "spark.driver.bindAddress": local_ip,
        "spark.driver.memory": driver_memory,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Arrow batches into Python of up to 128Ki rows or 16 MiB instead of 10,000 rows: the
        # engine's per-batch work costs less on larger batches (a 5M-row write on local[2]:
        # median 8.0 s -> 6.6 s, docs/spark.md), and the byte bound keeps wide rows' batches small.
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(ARROW_BATCH_ROWS),
        "spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_BATCH_BYTES),
        # PySpark needs one str hash seed shared by the driver and its Python workers.
        "spark.executorEnv.PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0"),
    }
    settings.update(conf or {})
    if JAR.is_file():  # without it (not built) the read of DV tables joins instead: still exact
        settings["spark.jars"] = ",".join(j for j in (settings.get("spark.jars"), str(JAR)) if j)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register_data_source(spark)
    return spark
