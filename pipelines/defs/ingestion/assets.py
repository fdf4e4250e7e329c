"""`ingested_events`: new landing files (JSON lines, CSV, parquet) -> validated, staged order events.

One run (a partition, or a range of them in a single run) ingests the files of its days that the
ledger has not seen: Spark reads them with the event contract, pandera checks every row, valid
rows are staged and the others quarantined with their reason (`pipelines.lib.staging`). A file is
ingested once: a second run finds it in the ledger (`pipelines.lib.ledger`) and adds nothing.
"""

import time
from collections import Counter
from typing import Any

import dagster as dg

from pipelines.lib.landing import LandingFile, list_landing_files
from pipelines.lib.ledger import Ledger
from pipelines.lib.partitions import DAILY_PARTITIONS, SINGLE_RUN, per_day_metadata
from pipelines.lib.resources import LakehouseResource, LakehouseSparkResource
from pipelines.lib.staging import stage

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
    # Writes staged files and the ledger, no table commit: no pool.
    kinds={"spark", "pandera", "parquet"},
    description="Order events from new landing files, validated with pandera and staged for the "
                "LSM write; invalid rows go to quarantine with their reason.",
)
def ingested_events(context: dg.AssetExecutionContext, spark: LakehouseSparkResource,
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
