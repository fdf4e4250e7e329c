"""Paimon's table options this engine does not act on, each classified: *stored only* (kept in the
schema; it changes no byte this engine writes and no row it returns, and says why) or *refused*
(`create_table`, `alter_table` and `table.copy` raise `InvalidOptionError` unless the value asks for
what this engine does anyway, and say what to do instead).

The inventory is every key of pypaimon 2.1.0's `CoreOptions` and of Paimon's option reference
(0.9 and master) that `lakehouse_engine.options` does not declare. Implementing an option means
declaring it in `lakehouse_engine.options` and deleting its line here (a test checks that no key is
in both). docs/options.md renders both.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Status(str, Enum):
    """What this engine does with an option."""

    IMPLEMENTED = "implemented"
    STORED = "stored only"
    REFUSED = "refused"


@dataclass(frozen=True)
class InventoryEntry:
    """One Paimon option this engine does not implement: its status and why (stored only) or what
    to do instead (refused); `accepted` are the values a refused option may still take because
    they ask for what this engine does anyway (compared lower-case)."""

    key: str
    status: Status
    why: str
    accepted: tuple[str, ...] = ()


INVENTORY: dict[str, InventoryEntry] = {}


def _stored(why: str, *keys: str) -> None:
    for key in keys:
        INVENTORY[key] = InventoryEntry(key, Status.STORED, why)


def _refused(key: str, accepted: tuple[str, ...], instead: str) -> None:
    INVENTORY[key] = InventoryEntry(key, Status.REFUSED, instead, accepted)


# ---- stored only: why each changes no byte we write and no row we return ---------------------
_RUNTIME = ("tunes a Java, Flink or pypaimon job's memory, threads, caches, spilling or I/O; no "
            "file and no row depends on it")
_NATIVE = "switches pypaimon or Java to a native implementation of the same thing; results are the same"
_LOOKUP = ("tunes Java's lookup (lookup joins, lookup compaction, its local files); no file and no "
           "row depends on it")
_STREAMING = ("configures a Flink streaming job or its checkpointing; no file and no row a read "
              "returns depends on it")
_INDEX = ("an optional index that only prunes reads; a table written without it reads the same "
          "rows in every engine")
_MAINTENANCE = ("a maintenance action a Java or Flink job schedules (tags, partition expiry, "
                "done-marks, callbacks); this engine runs maintenance only when asked (its procedures)")
_CATALOG = "read by a catalog, metastore or SQL front end, not by the table's files"
_LAYOUT = ("decides how Java sizes, sorts, clusters or compacts files; every layout holds the same "
           "rows, and this engine's own layout is read right by every engine")
_ENCODING = "an encoding choice inside a data file; every reader decodes either"
_STATS = ("how much min/max statistics a writer keeps; readers accept any amount, and this engine "
          "keeps them for every column")
_DDL = ("guards SQL DDL in Java engines; this engine's schema changes follow Paimon's rules "
        "(docs/schema-evolution.md)")
_SYSTEM = "applies to system tables ($audit_log, $binlog), which this engine does not serve"
_CHANGELOG = ("applies to changelog files, which this engine writes in the data files' format and "
              "compression; a write that produces a changelog refuses any other value "
              "(mergetree/changelog.py, docs/changelog.md)")
_DV = ("tunes how Java writes or keeps deletion vectors (its 64-bit bitmap format, merge-on-read "
       "fallbacks); readers tell the bitmap formats apart by their magic number, and the vectors this "
       "engine writes (32-bit, as Paimon 0.9) are read the same by every engine")
_BLOB = ("applies to BLOB and vector columns, which this engine does not create ('blob-field' and "
         "'vector-field' are refused)")
_VARIANT = "applies to VARIANT columns, which this engine does not support"
_FORMAT_TABLE = "applies to format tables ('type' = 'format-table'), which this engine refuses"
_MOSAIC = "applies to the 'mosaic' file format, which 'file.format' refuses"
_CHAIN = "applies only to chain tables ('chain-table.enabled' is refused)"
_DATA_EVOLUTION = "applies only with 'data-evolution.enabled', which is refused"
_ROW_TRACKING = "applies only with 'row-tracking.enabled', which is refused"
_EXTERNAL = "applies only with 'data-file.external-paths', which is refused"
_INCREMENTAL = ("maps tags of Java's auto-tagging to snapshots for incremental reads; this engine "
                "reads a tag's own snapshot")
_FALLBACK = ("whether a Java read of a fallback branch stops at the first failing partition; this "
             "engine's fallback read raises on any error")

_stored(_RUNTIME, "async-file-write", "cache-page-size", "page-size", "delete-file.thread-num",
        "file-operation.thread-num", "file-reader-async-threshold", "local-merge-buffer-size",
        "local-sort.max-num-file-handles", "local-cache.enabled", "local-cache.dir",
        "local-cache.max-size", "local-cache.block-size", "local-cache.whitelist",
        "local-kv-db.block-size", "spill-compression", "spill-compression.zstd-level",
        "sort-spill-threshold", "sort-engine", "write-buffer-for-append",
        "write-buffer-spill.max-disk-size", "write-buffer-spillable", "write-manifest-cache",
        "write-max-writers-to-spill", "write.batch-memory", "write.batch-size",
        "scan.manifest.parallelism", "scan.max-splits-per-task", "scan.plan-sort-partition",
        "cross-partition-upsert.bootstrap-parallelism", "parquet.filter.columnindex.enabled",
        "postpone.batch-write-fixed-bucket.rescale-load-factor", "partition.sink-strategy",
        "file.block-size")
_stored(_NATIVE, "read.native.enabled", "write.native.enabled", "commit.native.enabled",
        "scan.native-plan.enabled")
_stored(_LOOKUP, "lookup-wait", "lookup-compact", "lookup-compact.max-interval",
        "lookup.cache-rows", "lookup.cache-spill-compression", "lookup.cache.bloom.filter.enabled",
        "lookup.cache.bloom.filter.fpp", "lookup.cache.high-priority-pool-ratio",
        "lookup.hash-load-factor", "lookup.local-file-type", "lookup.merge-buffer-size",
        "lookup.merge-records-threshold", "lookup.remote-file.enabled",
        "lookup.remote-file.level-threshold")
_stored(_STREAMING, "consumer.mode", "consumer.changelog-only", "continuous.discovery-interval",
        "lookup.continuous.discovery-interval", "streaming-read-mode", "streaming-read-overwrite",
        "streaming-read-append-overwrite", "streaming.read.snapshot.delay", "scan.bounded.watermark",
        "snapshot.watermark-idle-timeout", "sink.watermark-time-zone", "sink.process-time-zone")
_stored(_INDEX, "file-index.in-manifest-threshold", "file-index.read.enabled", "global-index.enabled",
        "global-index.search-mode", "scalar-index.search-mode", "vector-index.search-mode",
        "full-text-index.search-mode", "global-index.external-path",
        "global-index.filter.refine-from-data", "global-index.thread-num",
        "global-index.row-count-per-shard", "global-index.build.parallelism",
        "global-index.build.max-parallelism", "global-index.build.max-shard",
        "global-index.column-update-action", "pk-vector.index.columns", "pk-btree.index.columns",
        "pk-bitmap.index.columns", "pk-full-text.index.columns", "pk-multivalue.index.columns",
        "btree-index.fallback-scan-max-size", "btree-index.block-size",
        "btree-index.bloom-filter.enabled", "btree-index.records-per-range",
        "sorted-index.records-per-file", "bitmap-index.fallback-scan-max-size",
        "bitmap-index.dictionary-block-size", "bitmap-index.compression",
        "bitmap-index.compression-level", "vector-search.distribute.enabled",
        "vector-search.lateral-join.batch-size")
_stored(_MAINTENANCE, "commit.callbacks", "commit.callback.#.param", "tag.callbacks",
        "tag.callback.#.param", "tag.automatic-completion", "tag.automatic-creation",
        "tag.batch.customized-name", "tag.create-success-file", "tag.creation-delay",
        "tag.creation-period", "tag.creation-period-duration", "tag.default-time-retained",
        "tag.num-retained-max", "tag.period-formatter", "tag.time-expire-enabled",
        "partition.expiration-batch-size", "partition.expiration-check-interval",
        "partition.expiration-max-num", "partition.expiration-strategy", "partition.expiration-time",
        "partition.mark-done-action", "partition.mark-done-action.custom.class",
        "partition.mark-done-action.http.params", "partition.mark-done-action.http.url",
        "partition.end-input-to-done", "partition.idle-time-to-report-statistic",
        "partition.timestamp-formatter", "partition.timestamp-pattern",
        "partition.timestamp-format.strict", "end-input.check-partition-expire",
        "snapshot.clean-empty-directories", "snapshot.expire.execution-mode",
        "scan.plan-auto-tag-for-read.time-retained", "visibility-callback.enabled",
        "visibility-callback.check-interval", "visibility-callback.timeout")
_stored(_CATALOG, "auto-create", "path", "query-auth.enabled", "metastore.partitioned-table",
        "metastore.tag-to-partition", "metastore.tag-to-partition.preview")
_stored(_LAYOUT, "target-file-row-num", "overwrite-upgrade", "commit.force-compact",
        "compaction.delete-ratio-threshold", "compaction.file-num-limit",
        "compaction.force-rewrite-all-files", "compaction.force-up-level-0", "compaction.offpeak-ratio",
        "compaction.offpeak.end.hour", "compaction.offpeak.start.hour",
        "compaction.optimization-interval", "compaction.skip-expired-partitions",
        "compaction.small-file-ratio", "clustering.columns",
        "clustering.history-partition.idle-to-full-sort", "clustering.history-partition.limit",
        "clustering.incremental", "clustering.incremental.mode",
        "clustering.incremental.optimize-write", "clustering.strategy",
        "sort-compaction.local-sample.magnification", "sort-compaction.range-strategy",
        "zorder.var-length-contribution", "manifest.full-compaction-threshold-size",
        "manifest.merge-optimize.enabled", "manifest-sort.enabled", "manifest-sort.max-rewrite-size",
        "manifest-sort.partition-field")
_stored(_ENCODING, "parquet.write-page-index.enabled")
_stored(_STATS, "metadata.stats-mode", "metadata.stats-mode.per.level", "metadata.stats-dense-store",
        "metadata.stats-keep-first-n-columns", "manifest.delete-file-drop-stats")
_stored(_DDL, "add-column-before-partition", "alter-column-null-to-not-null.disabled",
        "disable-explicit-type-casting", "deletion-vectors.modifiable")
_stored(_SYSTEM, "table-read.sequence-number.enabled")
_stored(_CHANGELOG, "changelog-producer.row-deduplicate-ignore-fields", "changelog-file.format",
        "changelog-file.compression", "changelog-file.prefix", "changelog-file.stats-mode",
        "delete.force-produce-changelog")
_stored(_DV, "deletion-vectors.bitmap64", "deletion-vectors.merge-on-read")
_stored(_BLOB, "blob-as-descriptor", "blob-compaction.enabled", "blob-descriptor.source-table",
        "blob-view.resolve.enabled", "blob-write-null-on-fetch-failure",
        "blob-write-null-on-missing-file", "blob.copy-buffer-size", "blob.split-by-file-size",
        "blob.target-file-size", "lookup.blob-as-descriptor", "vector.file.format",
        "vector.target-file-size")
_stored(_VARIANT, "variant.inferShreddingSchema", "variant.shredding.adaptive.maxInferBufferRow",
        "variant.shredding.adaptive.retentionRatio", "variant.shredding.inferenceMode",
        "variant.shredding.maxInferBufferRow", "variant.shredding.maxSchemaDepth",
        "variant.shredding.maxSchemaWidth", "variant.shredding.minFieldCardinalityRatio",
        "variant.shreddingSchema")
_stored(_FORMAT_TABLE, "format-table.commit-hive-sync-url", "format-table.file.compression",
        "format-table.implementation", "format-table.partition-path-only-value",
        "format-table.scan.list-parallelism")
_stored(_MOSAIC, "mosaic.num-buckets", "mosaic.stats-columns")
_stored(_CHAIN, "chain-table.chain-partition-keys", "chain-table.split.key-range-enabled",
        "chain-table.streaming.merge-snapshot")
_stored(_DATA_EVOLUTION, "data-evolution.compaction.rewrite-row-ids",
        "data-evolution.merge-into.file-pruning", "data-evolution.merge-into.source-persist",
        "data-evolution.reassign.skip-contiguous-row-count",
        "data-evolution.row-id-conflict-rewrite.max-size", "data-evolution.row-sidecar.enabled",
        "data-evolution.row-sidecar.max-selected-rows",
        "data-evolution.row-sidecar.max-selection-ratio",
        "data-evolution.write-cols-optimization.enabled")
_stored(_ROW_TRACKING, "row-tracking.partition-group-on-commit")
_stored(_EXTERNAL, "data-file.external-paths.strategy", "data-file.external-paths.specific-fs",
        "data-file.external-paths.weights")
_stored(_INCREMENTAL, "incremental-between-tag-to-snapshot")
_stored(_FALLBACK, "scan.fallback-branch.read-fail-fast")
_stored("whether a Java commit that changes nothing still writes a snapshot; an empty snapshot "
        "changes no row", "commit.force-create-snapshot")
_stored("Java's guard against committing the same file twice; this engine's commit recognises a "
        "retried commit that already landed (write/commit_retry.py)", "commit.discard-duplicate-files")
_stored("an extra conflict check of Java writers against a snapshot they name; it changes no file",
        "commit.strict-mode.last-safe-snapshot")
_stored("the order Java hands an append table's buckets to a reader; the rows are the same",
        "bucket-append-ordered")
_stored("only the names of the files a Java writer makes ('.zstd.parquet'); every reader takes the "
        "format from the name's last extension", "file.suffix.include.compression")

# Paimon's Flink and Spark connector options: a job's settings, kept in the table's options too.
_FLINK_JOB = "a Flink job's setting, read by Paimon's Flink connector; it changes no file of the table"
_SPARK_JOB = "a Spark job's setting, read by Paimon's Spark connector; it changes no file of the table"
_stored(_FLINK_JOB, "compaction.bucket-distribution-strategy", "changelog.precommit-compact.thread-num",
        "commit.custom-listeners", "end-input.watermark", "filesystem.job-level-settings.enabled",
        "lookup.async", "lookup.async-thread-number", "lookup.bootstrap-parallelism",
        "lookup.cache", "lookup.dynamic-partition.refresh-interval",
        "lookup.dynamic-partition.refresh.async", "lookup.refresh.async",
        "lookup.refresh.async.pending-snapshot-count", "lookup.refresh.full-load-threshold",
        "lookup.refresh.time-periods-blacklist", "partition.idle-time-to-done",
        "partition.mark-done-action.mode", "partition.mark-done.recover-from-state",
        "partition.time-interval", "precommit-compact", "read.shuffle-bucket-with-partition",
        "scan.bounded", "scan.dedicated-split-generation", "scan.infer-parallelism",
        "scan.infer-parallelism.max", "scan.max-snapshot.count", "scan.parallelism",
        "scan.partitions", "scan.remove-normalize", "scan.split-enumerator.batch-size",
        "scan.split-enumerator.mode", "scan.watermark.alignment.group",
        "scan.watermark.alignment.max-drift", "scan.watermark.alignment.update-interval",
        "scan.watermark.emit.strategy", "scan.watermark.idle-timeout",
        "sink.clustering.sample-factor", "sink.clustering.sort-in-cluster", "sink.committer-cpu",
        "sink.committer-memory", "sink.committer-operator-chaining",
        "sink.coordinator-commit.enabled", "sink.cross-partition.managed-memory",
        "sink.key-only-deletes.enabled", "sink.managed.writer-buffer-memory",
        "sink.operator-uid.suffix", "sink.parallelism", "sink.savepoint.auto-tag",
        "sink.use-managed-memory-allocator", "sink.writer-coordinator.cache-expire-after-access",
        "sink.writer-coordinator.cache-memory", "sink.writer-coordinator.cache-soft-values",
        "sink.writer-coordinator.enabled", "sink.writer-coordinator.page-size",
        "sink.writer-coordinator.prefetch-manifests", "sink.writer-cpu", "sink.writer-memory",
        "sink.writer-refresh-detectors", "source.checkpoint-align.enabled",
        "source.checkpoint-align.timeout", "source.operator-uid.suffix",
        "unaware-bucket.compaction.parallelism", "unaware-bucket.no-shuffle")
_stored(_SPARK_JOB, "format-table.repair.collect-statistics", "format-table.statistics.parallelism",
        "legacy-timestamp-mapping.enabled", "read.allow.fullScan", "read.changelog",
        "read.stream.maxBytesPerTrigger", "read.stream.maxFilesPerTrigger",
        "read.stream.maxRowsPerTrigger", "read.stream.maxTriggerDelayMs",
        "read.stream.minRowsPerTrigger", "requiredSparkConfsCheck.enabled",
        "source.split.target-size-with-column-pruning", "vector-search.lateral-join.parallelism",
        "write.data-evolution.update-conflict-retry.max-attempts",
        "write.data-evolution.update-conflict-retry.wait-ms",
        "write.hive-style-dynamic-partition.enabled", "write.merge-schema",
        "write.merge-schema.explicit-cast", "write.merge-schema.type-widening", "write.use-v2-write")

# ---- refused: each changes bytes or rows in a way this engine does not (yet) -----------------
_TIME_TRAVEL = "time travel by snapshot id or tag: set 'scan.snapshot-id' or 'scan.tag-name' instead"
_refused("primary-key", (), "give the primary key as Schema(..., primary_keys=[...])")
_refused("partition", (), "give the partition fields as Schema(..., partition_keys=[...])")
_refused("type", ("table",), "this engine reads and writes normal Paimon tables ('table') only")
_refused("bucket-function.type", ("default",),
         "this engine assigns buckets with Paimon's default hash; leave it 'default' (a "
         "postpone-bucket table, 'bucket' = -2, may name 'mod' or 'hive': its writes hash nothing)")
_refused("partition.legacy-name", ("true",),
         "this engine names partition directories the legacy way; leave it 'true'")
_refused("file.compression.per.level", ("",), "set 'file.compression' for every level")
_refused("manifest.format", ("avro",), "this engine writes and reads Avro manifests; leave it 'avro'")
_refused("manifest.sidecar.enabled", ("false",), "this engine writes no sidecar manifests")
_refused("index-file-in-data-file-dir", ("false",), "this engine writes index files under 'index/'")
_refused("data-file.path-directory", ("",),
         "this engine writes data files under the partition and bucket directories")
_refused("data-file.external-paths", ("",), "this engine writes data files under the table path only")
_refused("data-file.thin-mode", ("false",), "this engine writes the key columns into every data file")
_refused("row-tracking.enabled", ("false",), "this engine assigns no row ids")
_refused("data-evolution.enabled", ("false",),
         "this engine writes whole rows; change columns with alter_table and write full rows")
_refused("record-level.expire-time", ("",),
         "this engine keeps every row; delete expired rows with a write of -D rows")
_refused("record-level.time-field", ("",), "applies only with 'record-level.expire-time', which is refused")
_refused("record-level.time-field-type", ("",), "applies only with 'record-level.expire-time', which is refused")
for _key in ("scan.timestamp", "scan.watermark", "scan.version",
             "scan.file-creation-time-millis", "scan.creation-time-millis"):
    _refused(_key, ("",), _TIME_TRAVEL)
_refused("scan.bucket", ("",), "read every bucket and filter the rows")
# Paimon's older spellings of 'scan.mode' and 'scan.timestamp-millis' (Java reads them when the
# new key is absent; a timestamp alone makes its reads start from it); this engine's start options
# read only the new keys. The modes that read what the default reads are accepted.
_refused("log.scan", ("default", "latest-full", "full"), "spell it 'scan.mode'")
_refused("log.scan.timestamp-millis", (), "spell it 'scan.timestamp-millis'")
for _key in ("scan.fallback-delta-branch", "scan.fallback-snapshot-branch", "scan.primary-branch"):
    _refused(_key, ("",), "this engine's fallback read is 'scan.fallback-branch'; set that instead")
_refused("scan.ignore-corrupt-files", ("false",),
         "this engine raises on a corrupt data file rather than return fewer rows")
_refused("scan.ignore-lost-files", ("false",),
         "this engine raises on a missing data file rather than return fewer rows")
for _key in ("incremental-to-auto-tag",):
    _refused(_key, ("",), "read both snapshots ('scan.snapshot-id') and compare them")
_refused("ignore-update-before", ("false",), "drop the -U rows before writing them")
_refused("sequence.snapshot-ordering", ("false",), "order rows of one key with 'sequence.field'")
_refused("write.sequence-number-init-mode", ("scan",),
         "this engine's snapshots do not record the largest sequence number; leave it 'scan'")
_refused("postpone.merge-on-read", ("false",),
         "rows in the postpone bucket are read once compacted; run table.compact()")
_refused("metadata.iceberg-compatible", ("false",), "this engine writes no Iceberg metadata")
for _key in ("blob-field", "blob-descriptor-field", "blob-view-field", "vector-field",
             "video-frame-field"):
    _refused(_key, ("",), "this engine has no BLOB or vector columns; store the bytes in a BYTES column")
_refused("chain-table.enabled", ("false",), "this engine reads and writes normal tables only")
_refused("pk-clustering-override", ("false",), "this engine sorts data files by primary key")
