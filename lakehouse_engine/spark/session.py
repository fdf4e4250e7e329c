"""A SparkSession with the settings the engine's Spark jobs expect, on loopback."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from lakehouse_engine.spark.datasource import register_data_source


def create_session(master: str = "local[2]", *, app_name: str = "lakehouse",
                   shuffle_partitions: int = 4, driver_memory: str = "2g",
                   conf: Mapping[str, str] | None = None) -> SparkSession:
    """Start (or get) a session on `master` with the `lakehouse` data source registered.

    Binds to `SPARK_LOCAL_IP` (127.0.0.1 unless set), runs Python workers on this interpreter,
    uses UTC as the session time zone and `shuffle_partitions` shuffle partitions; `conf` adds
    or overrides settings. `driver_memory` applies only when this call starts the JVM. An
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
        # PySpark needs one str hash seed shared by the driver and its Python workers.
        "spark.executorEnv.PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0"),
    }
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register_data_source(spark)
    return spark
