"""Resources of the code location: a PySpark session and the lakehouse table the pipelines keep.

The same assets run on a laptop (`local[*]`, a warehouse under `./warehouse`) or a cluster
(`spark://host:port`) by configuration only: every field here can be set in the launchpad's
run config; `pipelines.defs.resources` binds the deployment's settings to `LAKEHOUSE_*`
environment variables with `dg.EnvVar`, resolved when a run starts, never at import.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from dagster_spark.utils import flatten_dict
from pydantic import Field

from lakehouse_engine import (
    POSTPONE_BUCKET,
    Catalog,
    FileStoreTable,
    Schema,
    SchemaChange,
    TableNotExistError,
)
from pipelines.lib.events import EVENT_SCHEMA, PARTITION_KEY, PRIMARY_KEY, ROWKIND

DEFAULT_TABLE = "shop.orders"
REVENUE_TABLE = "shop.daily_revenue"
CHANGELOG_PRODUCER = "changelog-producer"
CHANGELOG_LOOKUP = "lookup"
DEFAULT_BUCKETS = 4
DEFAULT_MASTER = "local[*]"


def table_pool(table: str) -> str:
    """The Dagster pool of every asset that commits to `table`: one step at a time holds it
    (`concurrency.pools.default_limit: 1` in dagster.yaml), so a rescale's OVERWRITE, a compaction
    and an LSM write of the same table never run at once, in one run or in several."""
    return f"paimon-{table}"

# Options every table the pipelines create carries, under the resource's own `table_options`:
# row kinds come with each event; `updated_at` orders the events of one key, because a Spark
# shuffle does not keep the order in which rows arrived; and writers never compact, since
# compaction is the sensor's and the nightly schedule's job (Paimon's dedicated compaction).
PIPELINE_TABLE_OPTIONS = {
    "rowkind.field": ROWKIND,
    "sequence.field": "updated_at",
    "write-only": "true",
}


class LakehouseSparkResource(LazyPySparkResource):
    """dagster-pyspark's lazy SparkSession resource, started by the engine's `create_session`.

    dagster-pyspark gives the resource: its `spark_config` (Spark settings, nested dicts
    flattened as dagster-pyspark flattens them), a session started only when an asset first asks
    for `spark_session` (a run that finds nothing to do never starts a JVM) and `spark_context`.
    The engine gives the session: bound to loopback (`SPARK_LOCAL_IP`), Python workers on this
    interpreter, UTC, Arrow batch sizes, the `lakehouse` data source registered. This resource
    adds the master and the session's sizes as fields (so `LAKEHOUSE_SPARK_MASTER` can reach them
    through `dg.EnvVar`) and stops the session when the run ends.
    """

    spark_config: dict[str, Any] = Field(default_factory=dict, description="Further Spark settings.")
    master: str = Field(default=DEFAULT_MASTER, description="`local[*]`, `local[n]` or `spark://host:port`.")
    app_name: str = Field(default="lakehouse-pipelines", description="Spark application name.")
    shuffle_partitions: int = Field(default=4, description="`spark.sql.shuffle.partitions`.")
    driver_memory: str = Field(default="2g", description="`spark.driver.memory` (when this run starts the JVM).")
    stop_on_teardown: bool = Field(
        default=True,
        description="Stop the session at the end of the run. Tests sharing one session turn it off.")

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        return False  # ours, on dagster-pyspark's class

    def session_conf(self) -> dict[str, str]:
        """The Spark settings this resource starts the session with (over the engine's defaults)."""
        return {"spark.ui.showConsoleProgress": "false",  # no progress bars over the run's log
                **{key: str(value) for key, value in flatten_dict(self.spark_config)}}

    @property
    def spark_session(self) -> Any:
        """The run's SparkSession (pyspark.sql.SparkSession), created on first use."""
        if self._spark_session is None:
            from lakehouse_engine.spark import create_session

            session = create_session(self.master, app_name=self.app_name,
                                     shuffle_partitions=self.shuffle_partitions,
                                     driver_memory=self.driver_memory, conf=self.session_conf())
            session.sparkContext.setLogLevel("ERROR")  # Spark's WARN lines drown the run's
            self._spark_session = session
        return self._spark_session

    @property
    def spark_context(self) -> Any:
        """The session's SparkContext (starts the session on first use)."""
        return self.spark_session.sparkContext

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
    catalog_options_json: str = Field(
        default="",
        description="More catalog options as a JSON object (how `LAKEHOUSE_CATALOG_OPTIONS` reaches "
                    "the resource through dg.EnvVar); `catalog_options` win over them.")
    evolve_schema: bool = Field(
        default=True,
        description="When staged events carry an evolution column the table lacks (e.g. coupon_code), "
                    "the LSM write adds it to the table first (Paimon's write.merge-schema). Off: "
                    "that write fails with an error naming the column, and nothing is written.")

    # ---- the table ---------------------------------------------------------------------------
    @property
    def warehouse_root(self) -> str:
        """The warehouse as the engine and Spark are given it: a local path made absolute (runs and
        Spark workers may start elsewhere), a URI as it is."""
        return self.warehouse if "://" in self.warehouse else os.path.abspath(self.warehouse)

    @property
    def all_catalog_options(self) -> dict[str, str]:
        """`catalog_options_json` under `catalog_options`. DagsterInvariantViolationError naming the
        setting when the JSON is not an object."""
        try:
            parsed = json.loads(self.catalog_options_json) if self.catalog_options_json.strip() else {}
        except json.JSONDecodeError as exc:
            raise dg.DagsterInvariantViolationError(
                f"catalog_options_json (LAKEHOUSE_CATALOG_OPTIONS) is not JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise dg.DagsterInvariantViolationError(
                "catalog_options_json (LAKEHOUSE_CATALOG_OPTIONS) must be a JSON object, "
                "e.g. {\"s3.endpoint\": \"...\"}")
        return {**{str(k): str(v) for k, v in parsed.items()}, **self.catalog_options}

    def catalog(self) -> Catalog:
        return Catalog(self.warehouse_root, self.all_catalog_options)

    def options(self) -> dict[str, str]:
        """The options a new table is created with: with the lookup changelog (every commit writes
        what it changed, the row before and after: daily_revenue reads it), except on a
        postpone-bucket table, whose rows reach their buckets only at compaction (no producer)."""
        producer = {} if self.bucket == POSTPONE_BUCKET else {CHANGELOG_PRODUCER: CHANGELOG_LOOKUP}
        return {**PIPELINE_TABLE_OPTIONS, **producer, **self.table_options, "bucket": str(self.bucket)}

    def table_exists(self) -> bool:
        return self.catalog().table_exists(self.table)

    def get_table(self) -> FileStoreTable:
        """The table at its latest schema; TableNotExistError before the first write."""
        return self.catalog().get_table(self.table)

    def get_or_create_table(self) -> FileStoreTable:
        """The table, created first (order events, keyed by (order_id, dt), partitioned by dt)."""
        catalog = self.catalog()
        try:
            table = catalog.get_table(self.table)
        except TableNotExistError:
            catalog.create_database(self.table.split(".", 1)[0], ignore_if_exists=True)
            catalog.create_table(self.table, Schema.from_pyarrow_schema(
                EVENT_SCHEMA, primary_keys=list(PRIMARY_KEY), partition_keys=[PARTITION_KEY],
                options=self.options()), ignore_if_exists=True)
            return catalog.get_table(self.table)
        if CHANGELOG_PRODUCER not in table.schema.options and table.options.bucket != POSTPONE_BUCKET:
            # A warehouse made before the table had a producer: the option changes what later
            # commits write (changelog files beside the data), never the rows already stored.
            catalog.alter_table(self.table, [SchemaChange.set_option(CHANGELOG_PRODUCER, CHANGELOG_LOOKUP)])
            table = catalog.get_table(self.table)
        return table

    # ---- the pipeline's folders (a filesystem: Spark reads them, the ledger locks a file) ------
    @property
    def root(self) -> Path:
        """The folder holding landing, staging, quarantine and the ledger: `pipeline_dir`, else the
        warehouse when it is on local disk. They stay on a filesystem with an object-store
        warehouse: Spark reads landing files and writes staged batches there without the Hadoop
        S3 connector (not part of pyspark), and the ledger is changed under a file lock."""
        if self.pipeline_dir:
            return Path(self.pipeline_dir).absolute()
        parsed = urlparse(self.warehouse_root)
        if parsed.scheme in ("", "file"):
            return Path(parsed.path if parsed.scheme else self.warehouse_root).absolute()
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
