"""The Dagster code location (`workspace.yaml`): assembles what the other modules define.

    ingested_events -> bucket_assignment -> lsm_write -> postpone_compaction -> rescale -> snapshot_expiry
                                                      -> sorted_run_compaction ----------------^
"""

import dagster as dg

from pipelines.automation import JOBS, SCHEDULES, SENSORS
from pipelines.checks import ASSET_CHECKS
from pipelines.ingest import ingested_events
from pipelines.lsm import bucket_assignment, lsm_write, sorted_run_compaction
from pipelines.maintenance import postpone_compaction, rescale, snapshot_expiry
from pipelines.resources import resources_from_env

defs = dg.Definitions(
    assets=[ingested_events, bucket_assignment, lsm_write, sorted_run_compaction,
            postpone_compaction, rescale, snapshot_expiry],
    asset_checks=ASSET_CHECKS,
    jobs=JOBS,
    sensors=SENSORS,
    schedules=SCHEDULES,
    resources=resources_from_env(),
    executor=dg.in_process_executor,
)
