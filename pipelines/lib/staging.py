"""Reading landing files and staging validated events on Spark.

Spark reads a run's new landing files with the event contract, `pipelines.lib.contract` checks
every row (a `mapInArrow` function), valid rows go to `<staging>/batch=<run id>/` (parquet) and
the others, each with its reason and source file, to `<quarantine>/batch=<run id>/` (JSON lines).
The LSM write later reads the staged parts it has not committed (`read_staged`).
"""

from __future__ import annotations

import csv
import functools
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from pipelines.lib.contract import CORRUPT_RECORD, LANDING_DT, REASON, SOURCE_FILE, EventValidator
from pipelines.lib.events import CONTRACT_SCHEMA, EVENT_SCHEMA, EVOLUTION_COLUMNS, PARTITION_KEY
from pipelines.lib.landing import LandingFile
from pipelines.lib.ledger import Pending

EVENT_SPARK_SCHEMA = from_arrow_schema(EVENT_SCHEMA, prefer_timestamp_ntz=True)
# What landed events are read with: the event columns and the evolution columns (optional).
CONTRACT_SPARK_SCHEMA = from_arrow_schema(CONTRACT_SCHEMA, prefer_timestamp_ntz=True)


def _local_path(uri: str) -> str:
    """The real local path of a URI Spark reports for a file (`file:/a/b%20c` -> `/a/b c`)."""
    return os.path.realpath(unquote(urlparse(uri).path))


def csv_header(path: str) -> list[str]:
    """The column names in the first line of a CSV file."""
    with open(path, newline="") as f:
        return next(csv.reader(f), [])


def read_landing(spark: SparkSession, files: list[LandingFile]) -> DataFrame:
    """The files' rows with the contract's columns, `_corrupt_record`, `_source_file`, `_landing_dt`.

    JSON and CSV parse in PERMISSIVE mode: a record that does not fit the schema keeps its text
    in `_corrupt_record` instead of failing the read. Parquet files are typed already. Columns a
    file lacks read as null (an evolution column in older files); JSON fields and CSV columns
    outside the contract are ignored. CSV columns are matched by the header's names, not by
    position: files are read in groups of one header each.
    """
    contract = {f.name: f for f in CONTRACT_SPARK_SCHEMA.fields}
    columns = [*CONTRACT_SPARK_SCHEMA.fieldNames(), CORRUPT_RECORD]
    corrupt = StructField(CORRUPT_RECORD, StringType())
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for f in files:
        header = tuple(csv_header(f.path)) if f.format == "csv" else ()
        groups.setdefault((f.format, header), []).append(f.path)
    frames = []
    for (fmt, header), paths in sorted(groups.items()):
        if fmt == "parquet":
            df = spark.read.schema(CONTRACT_SPARK_SCHEMA).parquet(*paths)
            df = df.withColumn(CORRUPT_RECORD, F.lit(None).cast(StringType()))
        else:
            fields = ([contract.get(name, StructField(name, StringType())) for name in header]
                      if fmt == "csv" else list(CONTRACT_SPARK_SCHEMA.fields))
            reader = (spark.read.schema(StructType([*fields, corrupt])).option("mode", "PERMISSIVE")
                      .option("columnNameOfCorruptRecord", CORRUPT_RECORD))
            df = reader.option("header", True).csv(paths) if fmt == "csv" else reader.json(paths)
        present = set(df.columns)
        frames.append(df.select(
            *[F.col(c) if c in present else F.lit(None).cast(contract[c].dataType).alias(c) for c in columns],
            F.col("_metadata.file_path").alias(SOURCE_FILE)))
    return union_all(frames).withColumn(LANDING_DT, F.regexp_extract(SOURCE_FILE, rf"/{PARTITION_KEY}=([^/]+)/[^/]+$", 1))


@dataclass
class StageResult:
    """What one ingestion staged: rows per file (valid, quarantined) and per day, and the reasons."""

    per_file: dict[str, tuple[int, int]]
    per_day: dict[str, int]
    reasons: Counter[str]
    columns: list[str] = field(default_factory=list)  # evolution columns with values in valid rows

    @property
    def valid(self) -> int:
        return sum(v for v, _ in self.per_file.values())

    @property
    def quarantined(self) -> int:
        return sum(q for _, q in self.per_file.values())


def stage(spark: SparkSession, files: list[LandingFile], staging: Path, quarantine: Path) -> StageResult:
    """Validate the files' rows on Spark; write valid rows to `staging`, the others to `quarantine`."""
    raw = read_landing(spark, files)
    checked_schema = StructType([*raw.schema.fields, StructField(REASON, StringType())])
    checked = raw.mapInArrow(EventValidator(), checked_schema).persist()
    try:
        counts = (checked.groupBy(SOURCE_FILE, PARTITION_KEY, REASON)
                  .agg(F.count(F.lit(1)).alias("count"),
                       *[F.count(c).alias(f"_values_{c}") for c in EVOLUTION_COLUMNS]).collect())
        by_path = {os.path.realpath(f.path): f.relpath for f in files}
        per_file: dict[str, tuple[int, int]] = {f.relpath: (0, 0) for f in files}
        per_day: Counter[str] = Counter()
        reasons: Counter[str] = Counter()
        carried: set[str] = set()
        for row in counts:
            relpath = by_path[_local_path(row[SOURCE_FILE])]
            valid, bad = per_file[relpath]
            n = int(row["count"])
            if row[REASON] is None:
                per_file[relpath] = (valid + n, bad)
                per_day[row[PARTITION_KEY]] += n
                carried.update(c for c in EVOLUTION_COLUMNS if row[f"_values_{c}"])
            else:
                per_file[relpath] = (valid, bad + n)
                reasons[row[REASON]] += n
        is_valid = F.col(REASON).isNull()
        if reasons:
            checked.where(~is_valid).drop(LANDING_DT).write.mode("overwrite").json(str(quarantine))
        # The staged batch carries the evolution columns that have values, and only those: a
        # batch of older events does not ask the table to gain a column it has no value for.
        columns = [c for c in EVOLUTION_COLUMNS if c in carried]
        if per_day:
            (checked.where(is_valid).select(*EVENT_SCHEMA.names, *columns)
             .write.mode("overwrite").parquet(str(staging)))
        return StageResult(per_file, dict(per_day), reasons, columns)
    finally:
        checked.unpersist()


def read_staged(spark: SparkSession, staging: Path, pending: list[Pending],
                extra_columns: Iterable[str] = ()) -> DataFrame:
    """The staged rows of these (batch, dt) pairs, with the event columns and `extra_columns`
    (evolution columns; null in batches staged without them)."""
    schema = StructType([f for f in CONTRACT_SPARK_SCHEMA.fields
                         if f.name in EVENT_SCHEMA.names or f.name in set(extra_columns)])
    frames = []
    for batch in sorted({b for b, _, _ in pending}):
        dts = sorted({dt for b, dt, _ in pending if b == batch})
        df = spark.read.schema(schema).parquet(str(staging / f"batch={batch}"))
        frames.append(df.where(F.col(PARTITION_KEY).isin(dts)))
    return union_all(frames)


def union_all(frames: list[DataFrame]) -> DataFrame:
    """The rows of every DataFrame (columns matched by name)."""
    return functools.reduce(DataFrame.unionByName, frames)
