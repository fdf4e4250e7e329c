"""Jobs (each runs the checks of its assets too). Selections name assets by key, so that a
concern's assets can move without touching the jobs that include them."""

import dagster as dg

from pipelines.lib import keys

main_job = dg.define_asset_job(
    "main_job", selection=dg.AssetSelection.all(),
    description="Everything, for the days of the run: ingest, assign buckets, write, compact, rescale, expire.")
ingest_job = dg.define_asset_job(
    "ingest_job", selection=dg.AssetSelection.assets(keys.INGESTED_EVENTS, keys.BUCKET_ASSIGNMENT, keys.LSM_WRITE,
                                                       keys.LSM_PUBLISH),
    description="New landing files of the run's days into the table.")
compaction_job = dg.define_asset_job(
    "compaction_job", selection=dg.AssetSelection.assets(keys.SORTED_RUN_COMPACTION),
    description="Compact the buckets named in the run config (the sorted-run sensor's request).")
maintenance_job = dg.define_asset_job(
    "maintenance_job", selection=dg.AssetSelection.assets(keys.POSTPONE_COMPACTION, keys.RESCALE,
                                                          keys.SNAPSHOT_EXPIRY),
    description="Postpone-bucket compaction, rescale (advice, or the configured target), snapshot expiry.")
snapshot_expiry_job = dg.define_asset_job(
    "snapshot_expiry_job", selection=dg.AssetSelection.assets(keys.SNAPSHOT_EXPIRY),
    description="Expire snapshots and remove orphan files.")

defs = dg.Definitions(jobs=[main_job, ingest_job, compaction_job, maintenance_job, snapshot_expiry_job])
