"""Services the code location's assets, checks, sensors and schedules share: plain modules, no
Dagster definitions (`pipelines/defs/` holds those)."""
