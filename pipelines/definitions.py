"""The Dagster code location (`workspace.yaml`): assembles `pipelines/defs/`, defines nothing itself.

    ingested_events -> bucket_assignment -> lsm_write -> lsm_publish -> postpone_compaction -> rescale -> snapshot_expiry
                       (audit branch; blocking checks)  (fast-forward) -> sorted_run_compaction (sensor) -----^
                                                                       -> full_compaction (on_cron 02:00) ----^
                                                                       -> daily_revenue -> daily_revenue_publish ^
                                                     (eager; changelog into an audit branch) (fast-forward; consumer)

`dg.load_from_defs_folder` finds every asset, check, job, sensor, schedule and resource under
`pipelines/defs/` (the `[tool.dg.project]` of pyproject.toml names the folder); the executor is
the one setting of the whole location: one process and at most one Spark session per run.
"""

from pathlib import Path

import dagster as dg

defs = dg.Definitions.merge(
    dg.load_from_defs_folder(path_within_project=Path(__file__).parent),
    dg.Definitions(executor=dg.in_process_executor),
)
