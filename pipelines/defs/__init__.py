"""The code location's definitions, one folder per concern (`dg` project layout):

    resources.py   the Spark and lakehouse resources, settings bound with dg.EnvVar
    jobs.py        jobs that cut across concerns (main_job, ingest_job, ...)
    ingestion/     landing files -> validated, staged events; the hourly schedule
    lsm/           bucket assignment and the LSM write; the checks on what a write committed
    compaction/    sorted-run compaction (sensor-driven) and the nightly full compaction
    maintenance/   postpone compaction, rescale, snapshot expiry

`pipelines.definitions` loads this folder; nothing here imports another concern's module: assets
name each other by key (`pipelines.lib.keys`) and share code through `pipelines.lib`.
"""
