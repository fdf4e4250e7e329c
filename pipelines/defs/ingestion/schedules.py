"""The hourly ingestion schedule: one run over the days that have landing files not yet ingested
(reads the landing folder and the ledger only; never starts Spark)."""

import dagster as dg

from pipelines.defs.jobs import ingest_job
from pipelines.lib.landing import list_landing_files
from pipelines.lib.ledger import Ledger
from pipelines.lib.partitions import DAILY_PARTITIONS
from pipelines.lib.resources import LakehouseResource

# Dagster's documented run tags of a single-run backfill over a partition range (a RunRequest
# has no public argument for a range; `RunRequest.partition_key_range` reads these tags).
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"


@dg.schedule(job=ingest_job, cron_schedule="0 * * * *", execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.STOPPED,
             description="Every hour: one run over the days that have landing files not yet ingested.")
def hourly_ingestion(context: dg.ScheduleEvaluationContext,
                     lakehouse: LakehouseResource) -> dg.RunRequest | dg.SkipReason:
    known = set(DAILY_PARTITIONS.get_partition_keys(current_time=context.scheduled_execution_time))
    new = Ledger(lakehouse.ledger_path).read().new_files(list_landing_files(lakehouse.landing_path, known))
    days = sorted({f.dt for f in new})
    if not days:
        return dg.SkipReason(f"no new landing files under {lakehouse.landing_path}")
    if len(days) == 1:
        return dg.RunRequest(partition_key=days[0])
    # One run for the whole range (the assets' single-run backfill policy): one Spark session.
    return dg.RunRequest(tags={ASSET_PARTITION_RANGE_START_TAG: days[0], ASSET_PARTITION_RANGE_END_TAG: days[-1]})
