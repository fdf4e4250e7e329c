"""`make run WAREHOUSE=s3://...`: the main job on an S3 warehouse (moto's server on 127.0.0.1). The
table and its data files live in the bucket; landing, staging and the ledger in the local pipeline
folder; credentials reach the Spark tasks through the session's configuration."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from lakehouse_engine import Catalog
from pipelines.lib.resources import LakehouseSparkResource
from pipelines.scripts.run_main import default_pipeline_dir, run
from tests.lakehouse_engine.object_store.conftest import (  # noqa: F401
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    S3Warehouse,
    s3_server,
    s3_warehouse,
)
from tests.pipelines.conftest import SPARK_MASTER

pytestmark = [pytest.mark.spark, pytest.mark.s3]
TABLE = "shop.orders"


@pytest.mark.slow  # two whole main_job runs on Spark (about 40 s on a quiet machine, minutes under load)
def test_main_run_on_an_s3_warehouse_keeps_the_table_in_the_bucket_and_continues_it(
        tmp_path: Path, spark_resource: LakehouseSparkResource, s3_warehouse: S3Warehouse,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    assert spark is not None
    # The shared session is already running: what `spark.executorEnv.*` does for a new one.
    spark.sparkContext.environment.update({"AWS_ACCESS_KEY_ID": ACCESS_KEY,
                                           "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION})
    instance = dg.DagsterInstance.ephemeral()
    pipeline_dir = tmp_path / "pipeline"

    def main_run() -> int:
        return run(s3_warehouse.uri, TABLE, days=1, rows_per_day=200, buckets=2, spark_master=SPARK_MASTER,
                   keep_spark=True, instance=instance, catalog_options=s3_warehouse.options,
                   pipeline_dir=str(pipeline_dir))

    start = s3_warehouse.server.log.mark()
    assert main_run() == 0
    out = capsys.readouterr().out
    assert "model check: OK" in out and f"in warehouse {s3_warehouse.uri}" in out
    assert "--option s3.endpoint=" in out and SECRET_KEY not in out  # next steps: no credentials
    table = Catalog(s3_warehouse.uri, s3_warehouse.options).get_table(TABLE)
    assert table.latest_snapshot() is not None and table.new_read_builder().new_read().to_arrow(
        table.new_read_builder().new_scan().plan().splits()).num_rows > 0
    data_puts = [r for r in s3_warehouse.server.log.since(start, s3_warehouse.bucket)
                 if r[0] == "PUT" and "/bucket-" in r[1]]
    assert data_puts  # the Spark tasks wrote the data files into the bucket
    assert (pipeline_dir / "ledger" / f"{TABLE}.json").is_file()
    assert any((pipeline_dir / "landing" / TABLE).glob("dt=*"))

    assert main_run() == 0  # again: the ledger has every file, the table continues
    assert "no new files" in capsys.readouterr().out


def test_an_object_store_warehouse_gets_a_pipeline_folder_of_its_own() -> None:
    assert default_pipeline_dir("./warehouse") is None
    assert str(default_pipeline_dir("s3://bucket/wh/")).endswith("/pipeline/s3/bucket/wh")
    assert default_pipeline_dir("s3://other/wh") != default_pipeline_dir("s3://bucket/wh")
