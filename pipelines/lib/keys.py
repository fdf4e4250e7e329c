"""The asset keys of the code location, named once: assets of one concern name the assets of
another by key (`deps=`, `asset=`, job selections), never by importing their module."""

from __future__ import annotations

import dagster as dg

INGESTED_EVENTS = dg.AssetKey("ingested_events")
BUCKET_ASSIGNMENT = dg.AssetKey("bucket_assignment")
LSM_WRITE = dg.AssetKey("lsm_write")
LSM_PUBLISH = dg.AssetKey("lsm_publish")
DAILY_REVENUE = dg.AssetKey("daily_revenue")
DAILY_REVENUE_PUBLISH = dg.AssetKey("daily_revenue_publish")
SORTED_RUN_COMPACTION = dg.AssetKey("sorted_run_compaction")
FULL_COMPACTION = dg.AssetKey("full_compaction")
POSTPONE_COMPACTION = dg.AssetKey("postpone_compaction")
RESCALE = dg.AssetKey("rescale")
SNAPSHOT_EXPIRY = dg.AssetKey("snapshot_expiry")
