"""Ingestion: new landing files (JSON lines, CSV, parquet) -> validated, staged order events.

Landing layout: `<landing>/dt=YYYY-MM-DD/<any name>.{jsonl,json,ndjson,csv,parquet}`. A daily
partition `YYYY-MM-DD` of the assets is the folder `dt=YYYY-MM-DD` and the table partition
`dt=YYYY-MM-DD`. One run (a partition, or a range of them in a single run) ingests the files of
its days that the ledger has not seen: Spark reads them with the event schema, pandera checks
every row (`pipelines.validation`), valid rows go to `<staging>/batch=<run id>/` (parquet) and
the others, each with its reason and source file, to `<quarantine>/batch=<run id>/` (JSON lines).

The ledger (`<warehouse>/ledger/<table>.json`) records each ingested file and each staged batch
per day, and whether the LSM write has committed it. A file is ingested once: a second run finds
it in the ledger and adds nothing. A write that failed after its commit but before the ledger
said so is retried on the next run; that re-applies the same events, which a primary-key table
with a sequence field merges to the same result.
"""

import csv
import fcntl
import functools
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import dagster as dg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from pipelines.resources import LakehouseResource, SparkResource
from pipelines.sample_data import CONTRACT_SCHEMA, EVENT_SCHEMA, EVOLUTION_FIELDS, PARTITION_KEY
from pipelines.validation import (
    CORRUPT_RECORD,
    LANDING_DT,
    REASON,
    SOURCE_FILE,
    EventValidator,
)

PARTITIONS_START = os.environ.get("LAKEHOUSE_PARTITIONS_START", "2026-11-01")
# end_offset=1: today is a partition too, so the hourly schedule can ingest today's files.
DAILY_PARTITIONS = dg.DailyPartitionsDefinition(start_date=PARTITIONS_START, end_offset=1)
SINGLE_RUN = dg.BackfillPolicy.single_run()

FORMATS = {".jsonl": "json", ".json": "json", ".ndjson": "json", ".csv": "csv", ".parquet": "parquet"}
EVENT_SPARK_SCHEMA = from_arrow_schema(EVENT_SCHEMA, prefer_timestamp_ntz=True)
# What landed events are read with: the event columns and the evolution columns (optional).
CONTRACT_SPARK_SCHEMA = from_arrow_schema(CONTRACT_SCHEMA, prefer_timestamp_ntz=True)
EVOLUTION_COLUMNS = tuple(f.name for f in EVOLUTION_FIELDS)


# ---- landing ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class LandingFile:
    """A file in a `dt=` folder of the landing area."""

    relpath: str   # relative to the landing folder: the ledger's key
    path: str
    dt: str
    format: str
    size: int


def list_landing_files(landing: Path, dts: Iterable[str] | None = None) -> list[LandingFile]:
    """Files of a known format in the `dt=` folders of `landing` (of `dts` only, when given)."""
    wanted = set(dts) if dts is not None else None
    found = []
    for folder in sorted(landing.glob(f"{PARTITION_KEY}=*")):
        dt = folder.name.split("=", 1)[1]
        if not folder.is_dir() or (wanted is not None and dt not in wanted):
            continue
        for path in sorted(folder.iterdir()):
            fmt = FORMATS.get(path.suffix.lower())
            if fmt is None or not path.is_file() or path.name.startswith((".", "_")):
                continue
            found.append(LandingFile(str(path.relative_to(landing)), str(path), dt, fmt,
                                     path.stat().st_size))
    return found


# ---- the ledger ------------------------------------------------------------------------------
@dataclass
class LedgerState:
    """Ingested files, and per staged batch and day: rows and the snapshot that committed them."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)

    def new_files(self, files: Iterable[LandingFile]) -> list[LandingFile]:
        return [f for f in files if f.relpath not in self.files]

    def pending(self, dts: Iterable[str]) -> list[tuple[str, str, int]]:
        """(batch, dt, rows) staged for these days and not committed yet, oldest batch first."""
        wanted = set(dts)
        out = []
        for batch, entry in sorted(self.batches.items(), key=lambda kv: kv[1]["created_at"]):
            for dt, part in sorted(entry["partitions"].items()):
                if dt in wanted and part.get("snapshot_id") is None and part["rows"] > 0:
                    out.append((batch, dt, int(part["rows"])))
        return out

    def columns_of(self, pending: Iterable[tuple[str, str, int]]) -> list[str]:
        """The evolution columns the staged batches of these rows carry (values in some row)."""
        carried = {c for batch, _, _ in pending for c in self.batches[batch].get("columns", [])}
        return [c for c in EVOLUTION_COLUMNS if c in carried]

    def mark_committing(self, pending: Iterable[tuple[str, str, int]], commit_user: str) -> None:
        """Record the commit user about to commit these rows: a run that dies before it records
        the snapshot leaves it, and the next run asks the table whether that commit landed."""
        for batch, dt, _ in pending:
            self.batches[batch]["partitions"][dt]["commit_user"] = commit_user

    def committing_users(self, pending: Iterable[tuple[str, str, int]]) -> dict[str, list[tuple[str, str, int]]]:
        """Commit users recorded by earlier runs for these pending rows, with the rows of each."""
        out: dict[str, list[tuple[str, str, int]]] = {}
        for entry in pending:
            user = self.batches[entry[0]]["partitions"][entry[1]].get("commit_user")
            if user is not None:
                out.setdefault(user, []).append(entry)
        return out

    def mark_written(self, pending: Iterable[tuple[str, str, int]], snapshot_id: int) -> list[str]:
        """Record the snapshot that committed these rows; returns the batches now fully written."""
        batches = set()
        for batch, dt, _ in pending:
            self.batches[batch]["partitions"][dt]["snapshot_id"] = snapshot_id
            batches.add(batch)
        return sorted(b for b in batches if all(
            p.get("snapshot_id") is not None or p["rows"] == 0 for p in self.batches[b]["partitions"].values()))


class Ledger:
    """The ingestion ledger: one JSON file, changed under an exclusive lock and replaced atomically."""

    def __init__(self, path: Path):
        self.path = path

    def read(self) -> LedgerState:
        if not self.path.exists():
            return LedgerState()
        data = json.loads(self.path.read_text())
        return LedgerState(files=data.get("files", {}), batches=data.get("batches", {}))

    @contextmanager
    def update(self) -> Iterator[LedgerState]:
        """The state to change; saved when the block ends without an error. The lock is held
        throughout, so two runs never ingest or commit the same files."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{self.path}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.read()
            yield state
            self.save(state)

    def save(self, state: LedgerState) -> None:
        """Replace the ledger with `state` atomically (inside `update`, which holds the lock)."""
        payload = json.dumps({"files": state.files, "batches": state.batches}, indent=1, sort_keys=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        with os.fdopen(fd, "w") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)


# ---- reading and staging on Spark -------------------------------------------------------------
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


def read_staged(spark: SparkSession, staging: Path, pending: list[tuple[str, str, int]],
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


def per_day_metadata(context: dg.AssetExecutionContext, per_day: dict[str, dict[str, Any]]) -> None:
    """Give each day's materialization that day's figures, over the run's figures for all its days."""
    for dt in context.partition_keys:
        if dt in per_day:
            context.add_asset_metadata(per_day[dt], partition_key=dt)


# ---- the asset -------------------------------------------------------------------------------
FILES_TABLE_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("file", "string"), dg.TableColumn("format", "string"), dg.TableColumn("bytes", "int"),
    dg.TableColumn("valid_rows", "int"), dg.TableColumn("quarantined_rows", "int")])


def _by_count(reasons: Counter[str]) -> list[tuple[str, int]]:
    """Most frequent first; ties by reason, so the order is the same every run."""
    return sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))


def _reasons_markdown(reasons: Counter[str]) -> str:
    if not reasons:
        return "No row was quarantined."
    lines = ["| reason | rows |", "|---|---:|"]
    lines += [f"| {reason} | {n:,} |" for reason, n in _by_count(reasons)]
    return "\n".join(lines)


@dg.asset(
    partitions_def=DAILY_PARTITIONS,
    backfill_policy=SINGLE_RUN,
    group_name="ingestion",
    kinds={"spark", "pandera", "parquet"},
    description="Order events from new landing files, validated with pandera and staged for the "
                "LSM write; invalid rows go to quarantine with their reason.",
)
def ingested_events(context: dg.AssetExecutionContext, spark: SparkResource,
                    lakehouse: LakehouseResource) -> dg.MaterializeResult:
    """Stage the not yet ingested landing files of the run's days (a file is ingested once)."""
    dts = list(context.partition_keys)
    batch = context.run.run_id
    ledger = Ledger(lakehouse.ledger_path)
    with ledger.update() as state:
        seen = list_landing_files(lakehouse.landing_path, dts)
        files = state.new_files(seen)
        if not files:
            context.log.info(f"no new landing files for {', '.join(dts)} ({len(seen)} already ingested)")
            return dg.MaterializeResult(metadata={
                "new_files": 0, "files_already_ingested": len(seen), "rows_staged": 0,
                "rows_quarantined": 0, "dagster/row_count": 0,
                "landing": dg.MetadataValue.path(str(lakehouse.landing_path))})
        staging = lakehouse.staging_path / f"batch={batch}"
        quarantine = lakehouse.quarantine_path / f"batch={batch}"
        result = stage(spark.spark_session, files, staging, quarantine)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for f in files:
            valid, bad = result.per_file[f.relpath]
            state.files[f.relpath] = {"batch": batch, "dt": f.dt, "format": f.format, "bytes": f.size,
                                      "valid_rows": valid, "quarantined_rows": bad, "ingested_at": now}
        state.batches[batch] = {
            "created_at": time.time(), "staging": str(staging), "columns": result.columns,
            "partitions": {dt: {"rows": result.per_day.get(dt, 0), "snapshot_id": None} for dt in dts}}
    context.log.info(f"staged {result.valid:,} rows from {len(files)} files, "
                     f"quarantined {result.quarantined:,}")
    def figures(day_files: list[LandingFile]) -> dict[str, Any]:
        valid = sum(result.per_file[f.relpath][0] for f in day_files)
        bad = sum(result.per_file[f.relpath][1] for f in day_files)
        return {"new_files": len(day_files), "rows_read": valid + bad, "rows_staged": valid,
                "rows_quarantined": bad, "dagster/row_count": valid,
                "files": dg.MetadataValue.table(
                    [dg.TableRecord({"file": f.relpath, "format": f.format, "bytes": f.size,
                                     "valid_rows": result.per_file[f.relpath][0],
                                     "quarantined_rows": result.per_file[f.relpath][1]}) for f in day_files],
                    schema=FILES_TABLE_SCHEMA)}

    per_day_metadata(context, {dt: figures([f for f in files if f.dt == dt]) for dt in dts})
    metadata: dict[str, Any] = {
        **figures(files),
        "files_already_ingested": len(seen) - len(files),
        "quarantine_reasons": dg.MetadataValue.md(_reasons_markdown(result.reasons)),
        "quarantine_reason_counts": dg.MetadataValue.json(dict(_by_count(result.reasons))),
        # Not a path link: lsm_write deletes the staged batch once it is committed; the ledger stays.
        "staged_batch": f"{staging} (removed once lsm_write commits it)",
        "ledger": dg.MetadataValue.path(str(lakehouse.ledger_path)),
        "batch": batch,
        "evolution_columns": ", ".join(result.columns) or "none",
    }
    if result.quarantined:
        metadata["quarantine"] = dg.MetadataValue.path(str(quarantine))
    return dg.MaterializeResult(metadata=metadata)
