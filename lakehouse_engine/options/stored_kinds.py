"""The types Paimon declares for the options this engine stores only (`options/inventory.py`), so a
value no engine could read is refused when it is set (`options/support.py::check_supported`):
`create_table`, `alter_table` and `table.copy` raise `InvalidOptionError` naming the option and the
value, and nothing is written.

The types are Paimon's (CoreOptions of 0.9 and master, its Flink and Spark connector options) and,
for pypaimon's own options, pypaimon 2.1.0's; an option whose type differs between them is not
checked. The parsers accept every value Paimon (Java) or pypaimon 2.1.0 reads: Java's
`TimeUtils.parseDuration` and `MemorySize.parse` (`1 h`, `64 mb`, `1gb`, `10 µs`, `2 mebibytes`),
booleans as either reads them (`true`/`false` in any case, and pypaimon's `yes`/`no`/`on`/`off`/
`1`/`0`), numbers as Java's `parseInt`/`parseLong`/`parseDouble` and Python's `int`/`float`, enums
by their value or constant name in any case. Only keys being set are checked: a table another
engine wrote opens whatever it holds.
"""

from __future__ import annotations

from collections.abc import Callable

from lakehouse_engine.options import parse_duration_ms, parse_memory_size

# bool: 108
_BOOL = (
    "add-column-before-partition", "alter-column-null-to-not-null.disabled", "async-file-write",
    "auto-create", "blob-as-descriptor", "blob-compaction.enabled", "blob-view.resolve.enabled",
    "blob-write-null-on-fetch-failure", "blob-write-null-on-missing-file",
    "blob.split-by-file-size", "btree-index.bloom-filter.enabled", "bucket-append-ordered",
    "chain-table.split.key-range-enabled", "chain-table.streaming.merge-snapshot",
    "clustering.incremental", "clustering.incremental.optimize-write",
    "commit.discard-duplicate-files", "commit.force-compact", "commit.force-create-snapshot",
    "commit.native.enabled", "compaction.force-rewrite-all-files", "compaction.force-up-level-0",
    "compaction.skip-expired-partitions", "consumer.changelog-only",
    "data-evolution.compaction.rewrite-row-ids", "data-evolution.merge-into.file-pruning",
    "data-evolution.merge-into.source-persist", "data-evolution.row-sidecar.enabled",
    "data-evolution.write-cols-optimization.enabled", "delete.force-produce-changelog",
    "deletion-vectors.bitmap64", "deletion-vectors.merge-on-read", "deletion-vectors.modifiable",
    "disable-explicit-type-casting", "end-input.check-partition-expire", "file-index.read.enabled",
    "file.suffix.include.compression", "filesystem.job-level-settings.enabled",
    "format-table.partition-path-only-value", "format-table.repair.collect-statistics",
    "global-index.enabled", "global-index.filter.refine-from-data",
    "incremental-between-tag-to-snapshot", "legacy-timestamp-mapping.enabled",
    "local-cache.enabled", "lookup-wait", "lookup.async", "lookup.blob-as-descriptor",
    "lookup.cache.bloom.filter.enabled", "lookup.dynamic-partition.refresh.async",
    "lookup.refresh.async", "lookup.remote-file.enabled", "manifest-sort.enabled",
    "manifest.delete-file-drop-stats", "manifest.merge-optimize.enabled",
    "metadata.stats-dense-store", "metastore.partitioned-table", "overwrite-upgrade",
    "parquet.filter.columnindex.enabled", "parquet.write-page-index.enabled",
    "partition.end-input-to-done", "partition.mark-done.recover-from-state",
    "partition.timestamp-format.strict", "precommit-compact", "query-auth.enabled",
    "read.allow.fullScan", "read.changelog", "read.native.enabled",
    "read.shuffle-bucket-with-partition", "requiredSparkConfsCheck.enabled",
    "row-tracking.partition-group-on-commit", "scan.bounded", "scan.dedicated-split-generation",
    "scan.fallback-branch.read-fail-fast", "scan.infer-parallelism", "scan.native-plan.enabled",
    "scan.plan-sort-partition", "scan.remove-normalize", "sink.clustering.sort-in-cluster",
    "sink.committer-operator-chaining", "sink.coordinator-commit.enabled",
    "sink.key-only-deletes.enabled", "sink.savepoint.auto-tag", "sink.use-managed-memory-allocator",
    "sink.writer-coordinator.cache-soft-values", "sink.writer-coordinator.enabled",
    "sink.writer-coordinator.prefetch-manifests", "snapshot.clean-empty-directories",
    "source.checkpoint-align.enabled", "source.split.target-size-with-column-pruning",
    "streaming-read-append-overwrite", "streaming-read-overwrite",
    "table-read.sequence-number.enabled", "tag.automatic-completion", "tag.create-success-file",
    "tag.time-expire-enabled", "unaware-bucket.no-shuffle", "variant.inferShreddingSchema",
    "vector-search.distribute.enabled", "visibility-callback.enabled", "write-buffer-for-append",
    "write-buffer-spillable", "write.hive-style-dynamic-partition.enabled", "write.merge-schema",
    "write.merge-schema.explicit-cast", "write.merge-schema.type-widening", "write.native.enabled",
    "write.use-v2-write",
)

# int: 53
_INT = (
    "bitmap-index.compression-level", "changelog.precommit-compact.thread-num",
    "clustering.history-partition.limit", "compaction.file-num-limit", "compaction.offpeak-ratio",
    "compaction.offpeak.end.hour", "compaction.offpeak.start.hour",
    "cross-partition-upsert.bootstrap-parallelism", "delete-file.thread-num",
    "file-operation.thread-num", "format-table.scan.list-parallelism",
    "format-table.statistics.parallelism", "global-index.build.max-parallelism",
    "global-index.build.max-shard", "global-index.build.parallelism", "global-index.thread-num",
    "local-sort.max-num-file-handles", "lookup-compact.max-interval", "lookup.async-thread-number",
    "lookup.bootstrap-parallelism", "lookup.merge-records-threshold",
    "lookup.refresh.async.pending-snapshot-count", "lookup.refresh.full-load-threshold",
    "lookup.remote-file.level-threshold", "metadata.stats-keep-first-n-columns",
    "mosaic.num-buckets", "partition.expiration-batch-size", "partition.expiration-max-num",
    "postpone.batch-write-fixed-bucket.rescale-load-factor", "read.stream.maxFilesPerTrigger",
    "scan.infer-parallelism.max", "scan.manifest.parallelism", "scan.max-snapshot.count",
    "scan.max-splits-per-task", "scan.parallelism", "scan.split-enumerator.batch-size",
    "sink.clustering.sample-factor", "sink.parallelism",
    "sort-compaction.local-sample.magnification", "sort-spill-threshold",
    "spill-compression.zstd-level", "tag.num-retained-max", "unaware-bucket.compaction.parallelism",
    "variant.shredding.adaptive.maxInferBufferRow", "variant.shredding.maxInferBufferRow",
    "variant.shredding.maxSchemaDepth", "variant.shredding.maxSchemaWidth",
    "vector-search.lateral-join.batch-size", "vector-search.lateral-join.parallelism",
    "write-max-writers-to-spill", "write.batch-size",
    "write.data-evolution.update-conflict-retry.max-attempts", "zorder.var-length-contribution",
)

# long: 15
_LONG = (
    "btree-index.records-per-range", "commit.strict-mode.last-safe-snapshot",
    "data-evolution.reassign.skip-contiguous-row-count",
    "data-evolution.row-sidecar.max-selected-rows", "end-input.watermark",
    "global-index.row-count-per-shard", "lookup.cache-rows", "read.stream.maxBytesPerTrigger",
    "read.stream.maxRowsPerTrigger", "read.stream.maxTriggerDelayMs",
    "read.stream.minRowsPerTrigger", "scan.bounded.watermark", "sorted-index.records-per-file",
    "target-file-row-num", "write.data-evolution.update-conflict-retry.wait-ms",
)

# float: 1
_FLOAT = (
    "lookup.hash-load-factor",
)

# double: 9
_DOUBLE = (
    "compaction.delete-ratio-threshold", "compaction.small-file-ratio",
    "data-evolution.row-sidecar.max-selection-ratio", "lookup.cache.bloom.filter.fpp",
    "lookup.cache.high-priority-pool-ratio", "sink.committer-cpu", "sink.writer-cpu",
    "variant.shredding.adaptive.retentionRatio", "variant.shredding.minFieldCardinalityRatio",
)

# memory: 29
_MEMORY = (
    "bitmap-index.dictionary-block-size", "bitmap-index.fallback-scan-max-size",
    "blob.copy-buffer-size", "blob.target-file-size", "btree-index.block-size",
    "btree-index.fallback-scan-max-size", "cache-page-size",
    "data-evolution.row-id-conflict-rewrite.max-size", "file-index.in-manifest-threshold",
    "file-reader-async-threshold", "file.block-size", "local-cache.block-size",
    "local-cache.max-size", "local-kv-db.block-size", "local-merge-buffer-size",
    "lookup.merge-buffer-size", "manifest-sort.max-rewrite-size",
    "manifest.full-compaction-threshold-size", "page-size", "sink.committer-memory",
    "sink.cross-partition.managed-memory", "sink.managed.writer-buffer-memory",
    "sink.writer-coordinator.cache-memory", "sink.writer-coordinator.page-size",
    "sink.writer-memory", "vector.target-file-size", "write-buffer-spill.max-disk-size",
    "write-manifest-cache", "write.batch-memory",
)

# duration: 23
_DURATION = (
    "clustering.history-partition.idle-to-full-sort", "compaction.optimization-interval",
    "continuous.discovery-interval", "lookup.continuous.discovery-interval",
    "lookup.dynamic-partition.refresh-interval", "partition.expiration-check-interval",
    "partition.expiration-time", "partition.idle-time-to-done",
    "partition.idle-time-to-report-statistic", "partition.time-interval",
    "scan.plan-auto-tag-for-read.time-retained", "scan.watermark.alignment.max-drift",
    "scan.watermark.alignment.update-interval", "scan.watermark.idle-timeout",
    "sink.writer-coordinator.cache-expire-after-access", "snapshot.watermark-idle-timeout",
    "source.checkpoint-align.timeout", "streaming.read.snapshot.delay", "tag.creation-delay",
    "tag.creation-period-duration", "tag.default-time-retained",
    "visibility-callback.check-interval", "visibility-callback.timeout",
)

_ENUMS = {
    "clustering.incremental.mode": ('GLOBAL_SORT', 'global-sort', 'LOCAL_SORT', 'local-sort'),
    "compaction.bucket-distribution-strategy": ('LINEAR', 'SIZE_AWARE_BATCH', 'size-aware-batch'),
    "consumer.mode": ('exactly-once', 'EXACTLY_ONCE', 'at-least-once', 'AT_LEAST_ONCE'),
    "data-file.external-paths.strategy": ('NONE', 'SPECIFIC_FS', 'specific-fs', 'ROUND_ROBIN', 'round-robin', 'ENTROPY_INJECT', 'entropy-inject', 'WEIGHTED', 'weight-robin'),
    "format-table.implementation": ('PAIMON', 'ENGINE'),
    "full-text-index.search-mode": ('FAST', 'FULL', 'DETAIL'),
    "global-index.column-update-action": ('THROW_ERROR', 'DROP_PARTITION_INDEX', 'IGNORE'),
    "global-index.search-mode": ('FAST', 'FULL', 'DETAIL'),
    "lookup-compact": ('RADICAL', 'GENTLE'),
    "lookup.cache": ('AUTO', 'FULL', 'MEMORY'),
    "lookup.local-file-type": ('sort', 'hash'),
    "metastore.tag-to-partition.preview": ('none', 'process-time', 'PROCESS_TIME', 'watermark', 'batch'),
    "partition.mark-done-action.mode": ('PROCESS_TIME', 'process-time', 'WATERMARK'),
    "partition.sink-strategy": ('NONE', 'HASH', 'PARTITION_DYNAMIC'),
    "scalar-index.search-mode": ('FAST', 'FULL', 'DETAIL'),
    "scan.split-enumerator.mode": ('FAIR', 'PREEMPTIVE'),
    "scan.watermark.emit.strategy": ('ON_PERIODIC', 'on-periodic', 'ON_EVENT', 'on-event'),
    "snapshot.expire.execution-mode": ('sync', 'async'),
    "sort-compaction.range-strategy": ('SIZE', 'QUANTITY'),
    "sort-engine": ('min-heap', 'MIN_HEAP', 'loser-tree', 'LOSER_TREE'),
    "streaming-read-mode": ('log', 'file'),
    "tag.automatic-creation": ('none', 'process-time', 'PROCESS_TIME', 'watermark', 'batch'),
    "tag.creation-period": ('daily', 'hourly', 'two-hours', 'TWO_HOURS'),
    "tag.period-formatter": ('with_dashes', 'without_dashes', 'WITHOUT_DASHES_AND_SPACES'),
    "variant.shredding.inferenceMode": ('PER_FILE', 'per-file', 'ADAPTIVE'),
    "vector-index.search-mode": ('FAST', 'FULL', 'DETAIL'),
}

#: Paimon's older spellings of inventory options (its withFallbackKeys), read when the key itself is
#: absent: each has the status and type of the option it spells.
PAIMON_FALLBACKS = {
    "blob.stored-descriptor-fields": "blob-descriptor-field",
    "changelog-producer.lookup-wait": "lookup-wait",
    "changelog.precommit-compact": "precommit-compact",
    "log.scan.remove-normalize": "scan.remove-normalize",
    "lookup.dynamic-partition": "scan.partitions",
    "orc.write.batch-size": "write.batch-size",
    "parquet.variant.shreddingSchema": "variant.shreddingSchema",
    "sink.clustering.by-columns": "clustering.columns",
    "sink.clustering.strategy": "clustering.strategy",
    "snapshot.expire.clean-empty-directories": "snapshot.clean-empty-directories",
    "streaming-read.shuffle-bucket-with-partition": "read.shuffle-bucket-with-partition",
}

_JAVA_INT = 2**31
_JAVA_LONG = 2**63
_BOOLEAN_TEXTS = ("true", "false", "yes", "no", "on", "off", "1", "0")


def _integer(bound: int) -> Callable[[str], str | None]:
    def check(text: str) -> str | None:
        try:
            value = int(text.strip())
        except ValueError:
            return "not an integer"
        return None if -bound <= value < bound else f"out of range (Paimon reads it as a {bound.bit_length()}-bit integer)"
    return check


def _boolean(text: str) -> str | None:
    return None if text.strip().lower() in _BOOLEAN_TEXTS else "not a boolean (expected 'true' or 'false')"


def _number(text: str) -> str | None:
    # Java's parseDouble takes a trailing type letter ('0.5d', '2f'); Python's float does not.
    body = text.strip()
    body = body[:-1] if body[-1:] in ("d", "D", "f", "F") and len(body) > 1 else body
    try:
        float(body)
    except ValueError:
        return "not a number"
    return None


def _parsed(parse: Callable[[str], int], what: str) -> Callable[[str], str | None]:
    def check(text: str) -> str | None:
        try:
            value = parse(text)
        except ValueError:
            return f"not a {what}"
        return None if value < _JAVA_LONG else f"out of range (Paimon reads it as a {what} in a Java long)"
    return check


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str | None]:
    lowered = {c.lower() for c in choices}

    def check(text: str) -> str | None:
        return None if text.strip().lower() in lowered else f"expected one of {', '.join(choices)}"
    return check


#: Option key (or an older spelling Paimon still reads) -> (Paimon's type, as a phrase; its check).
STORED_KINDS: dict[str, tuple[str, Callable[[str], str | None]]] = {}
for _keys, _kind, _check in (
        (_BOOL, "a boolean", _boolean), (_INT, "an int", _integer(_JAVA_INT)),
        (_LONG, "a long", _integer(_JAVA_LONG)), (_FLOAT, "a float", _number), (_DOUBLE, "a double", _number),
        (_MEMORY, "a memory size", _parsed(parse_memory_size, "memory size")),
        (_DURATION, "a duration", _parsed(parse_duration_ms, "duration"))):
    for _key in _keys:
        STORED_KINDS[_key] = (_kind, _check)
for _key, _choices in _ENUMS.items():
    STORED_KINDS[_key] = ("an enum", _one_of(_choices))
for _old, _key in PAIMON_FALLBACKS.items():
    if _key in STORED_KINDS:
        STORED_KINDS[_old] = STORED_KINDS[_key]


def stored_value_problem(key: str, text: str) -> str | None:
    """What is wrong with `text` as the value of the stored-only option `key` (None: Paimon or
    pypaimon reads it, or the option has no declared type here)."""
    found = STORED_KINDS.get(key)
    if found is None:
        return None
    kind, check = found
    problem = check(str(text))
    return f"{problem} (Paimon reads '{key}' as {kind})" if problem else None
