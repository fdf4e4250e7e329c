"""Resources of the code location: a PySpark session and the lakehouse table the pipelines keep.

The same assets run on a laptop (`local[*]`, a warehouse under `./warehouse`) or a cluster
(`spark://host:port`) by configuration only: every field here can be set in the launchpad's
run config, and `resources_from_env` reads the defaults from `LAKEHOUSE_*` variables.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import dagster as dg
from pydantic import Field, PrivateAttr

from lakehouse_engine import Catalog, FileStoreTable, Schema, TableNotExistError
from pipelines.sample_data import EVENT_SCHEMA, PARTITION_KEY, PRIMARY_KEY, ROWKIND

DEFAULT_TABLE = "shop.orders"
DEFAULT_BUCKETS = 4
DEFAULT_MASTER = "local[*]"

# Options every table the pipelines create carries, under the resource's own `table_options`:
# row kinds come with each event; `updated_at` orders the events of one key, because a Spark
# shuffle does not keep the order in which rows arrived; and writers never compact, since
# compaction is the sensor's and the nightly schedule's job (Paimon's dedicated compaction).
PIPELINE_TABLE_OPTIONS = {
    "rowkind.field": ROWKIND,
    "sequence.field": "updated_at",
    "write-only": "true",
}


class SparkResource(dg.ConfigurableResource):
    """A lazy SparkSession: started on first use of `spark_session` by the engine's
    `create_session` (loopback, UTC, the `lakehouse` data source registered), so assets and checks
    that never touch Spark never start it, and stopped when the run ends. Dagster's public
    resource API only (dagster-pyspark's LazyPySparkResource builds its session itself)."""

    master: str = Field(default=DEFAULT_MASTER, description="`local[*]`, `local[n]` or `spark://host:port`.")
    app_name: str = Field(default="lakehouse-pipelines", description="Spark application name.")
    shuffle_partitions: int = Field(default=4, description="`spark.sql.shuffle.partitions`.")
    driver_memory: str = Field(default="2g", description="`spark.driver.memory` (when this run starts the JVM).")
    spark_config: dict[str, Any] = Field(default_factory=dict, description="Further Spark settings.")
    stop_on_teardown: bool = Field(
        default=True,
        description="Stop the session at the end of the run. Tests sharing one session turn it off.")

    _spark_session: Any = PrivateAttr(default=None)

    @property
    def spark_session(self) -> Any:
        """The run's SparkSession (pyspark.sql.SparkSession), created on first use."""
        if self._spark_session is None:
            from lakehouse_engine.spark import create_session

            self._spark_session = create_session(
                self.master, app_name=self.app_name, shuffle_partitions=self.shuffle_partitions,
                driver_memory=self.driver_memory,
                conf={"spark.ui.showConsoleProgress": "false",  # no progress bars over the run's log
                      **{str(k): str(v) for k, v in self.spark_config.items()}})
            self._spark_session.sparkContext.setLogLevel("ERROR")  # Spark's WARN lines drown the run's
        return self._spark_session

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._spark_session is not None and self.stop_on_teardown:
            self._spark_session.stop()
        self._spark_session = None


class LakehouseResource(dg.ConfigurableResource):
    """The primary-key table the pipelines write (warehouse, `database.table`, bucket mode, options)
    and the pipeline's own folders beside it: landing, staging, quarantine and the ingestion ledger."""

    warehouse: str = Field(description="Warehouse root: a local path, a file:// URI or an object store "
                                       "(s3://bucket/path; endpoint and the like in `catalog_options`).")
    table: str = Field(default=DEFAULT_TABLE, description="`database.table`.")
    bucket: int = Field(
        default=DEFAULT_BUCKETS,
        description="Bucket mode of a new table: a count > 0 (fixed), -1 (dynamic) or -2 (postpone).")
    table_options: dict[str, str] = Field(
        default_factory=dict, description="Further Paimon options of a new table (over the pipeline's).")
    landing_dir: str | None = Field(
        default=None, description="Where new files land; default `<warehouse>/landing/<table>`.")
    pipeline_dir: str | None = Field(
        default=None,
        description="Local folder of the pipeline's landing, staging, quarantine and ledger folders; "
                    "default: the warehouse itself when it is local. Required with an object-store "
                    "warehouse (on a cluster: a mount every Spark worker sees).")
    catalog_options: dict[str, str] = Field(
        default_factory=dict,
        description="Catalog options of an object-store warehouse (s3.endpoint, s3.path.style.access, "
                    "lock.*); credentials best come from the environment (AWS_ACCESS_KEY_ID, ...).")
    evolve_schema: bool = Field(
        default=True,
        description="When staged events carry an evolution column the table lacks (e.g. coupon_code), "
                    "the LSM write adds it to the table first (Paimon's write.merge-schema). Off: "
                    "that write fails with an error naming the column, and nothing is written.")

    # ---- the table ---------------------------------------------------------------------------
    def catalog(self) -> Catalog:
        return Catalog(self.warehouse, self.catalog_options)

    def options(self) -> dict[str, str]:
        """The options a new table is created with."""
        return {**PIPELINE_TABLE_OPTIONS, **self.table_options, "bucket": str(self.bucket)}

    def table_exists(self) -> bool:
        return self.catalog().table_exists(self.table)

    def get_table(self) -> FileStoreTable:
        """The table at its latest schema; TableNotExistError before the first write."""
        return self.catalog().get_table(self.table)

    def get_or_create_table(self) -> FileStoreTable:
        """The table, created first (order events, keyed by (order_id, dt), partitioned by dt)."""
        catalog = self.catalog()
        try:
            return catalog.get_table(self.table)
        except TableNotExistError:
            catalog.create_database(self.table.split(".", 1)[0], ignore_if_exists=True)
            catalog.create_table(self.table, Schema.from_pyarrow_schema(
                EVENT_SCHEMA, primary_keys=list(PRIMARY_KEY), partition_keys=[PARTITION_KEY],
                options=self.options()), ignore_if_exists=True)
            return catalog.get_table(self.table)

    # ---- the pipeline's folders (a filesystem: Spark reads them, the ledger locks a file) ------
    @property
    def root(self) -> Path:
        """The folder holding landing, staging, quarantine and the ledger: `pipeline_dir`, else the
        warehouse when it is on local disk. They stay on a filesystem with an object-store
        warehouse: Spark reads landing files and writes staged batches there without the Hadoop
        S3 connector (not part of pyspark), and the ledger is changed under a file lock."""
        if self.pipeline_dir:
            return Path(self.pipeline_dir).absolute()
        parsed = urlparse(self.warehouse)
        if parsed.scheme in ("", "file"):
            return Path(parsed.path if parsed.scheme else self.warehouse).absolute()
        raise dg.DagsterInvariantViolationError(
            f"warehouse {self.warehouse!r} is an object store: set the lakehouse resource's "
            f"pipeline_dir (LAKEHOUSE_PIPELINE_DIR) to a local folder for the landing, staging and "
            f"quarantine folders and the ingestion ledger")

    @property
    def landing_path(self) -> Path:
        return Path(self.landing_dir).absolute() if self.landing_dir else self.root / "landing" / self.table

    @property
    def staging_path(self) -> Path:
        return self.root / "staging" / self.table

    @property
    def quarantine_path(self) -> Path:
        return self.root / "quarantine" / self.table

    @property
    def ledger_path(self) -> Path:
        return self.root / "ledger" / f"{self.table}.json"


def resources_from_env() -> dict[str, Any]:
    """The resources of the code location, configured from `LAKEHOUSE_WAREHOUSE` (./warehouse),
    `LAKEHOUSE_TABLE`, `LAKEHOUSE_BUCKET`, `LAKEHOUSE_SPARK_MASTER` (local[*]),
    `LAKEHOUSE_CATALOG_OPTIONS` (a JSON object, e.g. `{"s3.endpoint": "..."}`) and
    `LAKEHOUSE_PIPELINE_DIR` (the pipeline's local folders; needed with an object-store warehouse)
    and `LAKEHOUSE_EVOLVE_SCHEMA` (`false` keeps the table's columns fixed; default `true`)."""
    warehouse = os.environ.get("LAKEHOUSE_WAREHOUSE", "./warehouse")
    if "://" not in warehouse:
        warehouse = os.path.abspath(warehouse)
    catalog_options = json.loads(os.environ.get("LAKEHOUSE_CATALOG_OPTIONS") or "{}")
    return {
        "spark": SparkResource(master=os.environ.get("LAKEHOUSE_SPARK_MASTER", DEFAULT_MASTER)),
        "lakehouse": LakehouseResource(
            warehouse=warehouse,
            table=os.environ.get("LAKEHOUSE_TABLE", DEFAULT_TABLE),
            bucket=int(os.environ.get("LAKEHOUSE_BUCKET", str(DEFAULT_BUCKETS))),
            catalog_options={str(k): str(v) for k, v in catalog_options.items()},
            pipeline_dir=os.environ.get("LAKEHOUSE_PIPELINE_DIR") or None,
            evolve_schema=os.environ.get("LAKEHOUSE_EVOLVE_SCHEMA", "true").strip().lower() != "false"),
    }
