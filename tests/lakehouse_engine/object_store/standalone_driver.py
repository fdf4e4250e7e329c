"""The driver of the standalone-cluster test, in a process of its own (one SparkContext per
process): writes, compacts and reads an S3 table with the engine's Spark helpers on `--master`,
signing its own requests with the driver's key while the executors get theirs from the session's
configuration. Prints one JSON line with what happened."""

from __future__ import annotations

import argparse
import json
import os
import sys

import pyarrow as pa


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("master", "warehouse", "endpoint", "driver-key", "executor-key", "secret", "region"):
        parser.add_argument(f"--{name}", required=True)
    args = parser.parse_args()

    from lakehouse_engine import Catalog, Schema
    from lakehouse_engine.spark import compact, write
    from lakehouse_engine.spark.session import create_session

    spark = create_session(args.master, app_name="standalone-s3", shuffle_partitions=2, driver_memory="512m", conf={
        # Credentials reach the executors through the session's configuration, never in a task.
        "spark.executorEnv.AWS_ACCESS_KEY_ID": args.executor_key,
        "spark.executorEnv.AWS_SECRET_ACCESS_KEY": args.secret,
        "spark.executorEnv.AWS_REGION": args.region,
        "spark.executorEnv.AWS_EC2_METADATA_DISABLED": "true",
        "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "1",
    })
    storage = {"s3.endpoint": args.endpoint, "s3.path.style.access": "true", "s3.region": args.region}
    catalog = Catalog(args.warehouse, {**storage, "s3.access-key": args.driver_key, "s3.secret-key": args.secret})
    catalog.create_database("db", ignore_if_exists=True)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                        pa.field("v", pa.string())])
    catalog.create_table("db.t", Schema.from_pyarrow_schema(schema, primary_keys=["id", "dt"], partition_keys=["dt"],
                                                            options={"bucket": "2"}))
    table = catalog.get_table("db.t")
    first = write(spark.createDataFrame([(i, f"2026-11-0{1 + i % 2}", f"a{i}") for i in range(100)],
                                        "id long, dt string, v string"), table)
    second = write(spark.createDataFrame([(i, f"2026-11-0{1 + i % 2}", f"b{i}") for i in range(50, 150)],
                                         "id long, dt string, v string"), table)
    compacted = compact(spark, table, full=True)
    df = spark.read.format("lakehouse").option("warehouse", args.warehouse).options(**storage).load("db.t")
    rows = {r["id"]: r["v"] for r in df.collect()}
    print(json.dumps({"snapshots": [first, second, compacted], "rows": len(rows),
                      "v": [rows.get(0), rows.get(99), rows.get(149)],
                      "master": spark.sparkContext.master}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
