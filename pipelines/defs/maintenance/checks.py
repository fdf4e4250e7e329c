"""Checks on the maintenance commits: row counts per bucket after a rescale, and nothing left in
bucket-postpone after postpone compaction."""

import dagster as dg

from pipelines.lib import keys
from pipelines.lib.bucket_report import bucket_rows
from pipelines.lib.resources import LakehouseResource
from pipelines.lib.table_checks import (
    latest_snapshot_of,
    passed_empty,
    postpone_empty_result,
    row_counts_check,
)

rescale_row_counts = row_counts_check(keys.RESCALE)


@dg.asset_check(asset=keys.POSTPONE_COMPACTION, blocking=True,
                description="Nothing is left in bucket-postpone after postpone compaction.")
def postpone_bucket_empty(lakehouse: LakehouseResource) -> dg.AssetCheckResult:
    latest = latest_snapshot_of(lakehouse)
    if latest is None:
        return passed_empty()
    return postpone_empty_result(bucket_rows(latest[0]))
