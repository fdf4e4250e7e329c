"""Table options: Paimon's names and defaults, typed and validated, each implemented or, with the
inventory of the Paimon options this engine does not act on (`options/inventory.py`), stored only
or refused. Unknown keys are kept as given, unless they are a near miss of a known one.

This module declares the options group by group and `CoreOptions`, the typed view of a table's
options (Paimon's CoreOptions); how an option is declared, parsed and registered is
`options/config_option.py` (Paimon's ConfigOption), whose names it re-exports."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.options.config_option import (  # noqa: F401  (the package's names)
    FALLBACK_KEYS,
    JAVA_LONG_MAX,
    OPTIONS,
    ConfigOption,
    OptionGroup,
    OptionKey,
    parse_duration_ms,
    parse_memory_size,
)
from lakehouse_engine.options.options_map import MergeEngine, Options  # noqa: F401  (pypaimon's names)

T = TypeVar("T")


def _between(low: int, high: int) -> Callable[[int], str | None]:
    """A check that a number lies in [low, high]."""
    def check(v: int) -> str | None:
        return None if low <= v <= high else f"must be between {low} and {high}"
    return check


def _positive(v: int) -> str | None:
    return None if v > 0 else "must be greater than 0"


def _non_negative(v: int) -> str | None:
    return None if v >= 0 else "must be 0 or greater"


def _max_buckets_check(v: int) -> str | None:
    return None if v > 0 or v == -1 else "must be a positive bucket count or -1 (unlimited)"


def _at_least_two_levels(v: int) -> str | None:
    return None if v >= 2 else "must be at least 2 (level 0 and one level below it)"


def _file_name_part(v: str) -> str | None:
    """A name that goes into a file or directory name: no separators, no '..', not empty."""
    if not v or "/" in v or "\\" in v or v in (".", "..") or any(ord(c) < 0x20 or c == "\x7f" for c in v):
        return "must be a non-empty file name part without '/', '\\', control characters, '.' or '..'"
    return None


def _bucket_check(v: int) -> str | None:
    if v > 0 or v in (-1, -2):
        return None
    return "must be a positive bucket count, -1 (dynamic bucket) or -2 (postpone bucket)"


_distribution = OptionGroup("Distribution")
BUCKET = _distribution.integer("bucket", -1, "Bucket number: > 0 fixed, -1 dynamic (or unaware for append tables), -2 postpone.", _bucket_check)
BUCKET_KEY = _distribution.string("bucket-key", None, "Comma-separated fields hashed to choose a bucket; defaults to the primary key minus partition fields.")
DYNAMIC_BUCKET_TARGET_ROW_NUM = _distribution.integer("dynamic-bucket.target-row-num", 2_000_000, "Dynamic bucket mode: target row count of one bucket.", _positive, java_long=True)
DYNAMIC_BUCKET_INITIAL_BUCKETS = _distribution.integer("dynamic-bucket.initial-buckets", None, "Dynamic bucket mode: initial buckets of a partition per assigner.", _positive)
DYNAMIC_BUCKET_MAX_BUCKETS = _distribution.integer("dynamic-bucket.max-buckets", -1, "Dynamic bucket mode: most buckets a partition may have (-1: unlimited).", _max_buckets_check)
DYNAMIC_BUCKET_ASSIGNER_PARALLELISM = _distribution.integer("dynamic-bucket.assigner-parallelism", None, "Dynamic bucket mode: number of parallel assigners.", _positive)
POSTPONE_DEFAULT_BUCKET_NUM = _distribution.integer("postpone.default-bucket-num", 1, "Postpone bucket mode: buckets given to a partition compacted for the first time.", _positive)
CROSS_PARTITION_UPSERT_INDEX_TTL = _distribution.duration("cross-partition-upsert.index-ttl", None, "Cross-partition upsert: how long a key stays in the global index.")

_files = OptionGroup("Files")
FILE_FORMAT = _files.enum("file.format", "parquet", "Format of data files (parquet, orc or avro); files of every format are read by their extension.", ("parquet", "orc", "avro"))
FILE_FORMAT_PER_LEVEL = _files.string("file.format.per.level", None, "Format of data files per LSM level, e.g. '0:avro,5:orc'; levels not listed use 'file.format'.")
FILE_COMPRESSION = _files.enum("file.compression", "zstd", "Compression of data files.", ("zstd", "snappy", "gzip", "lz4", "brotli", "none", "uncompressed"))
FILE_COMPRESSION_ZSTD_LEVEL = _files.integer("file.compression.zstd-level", 1, "zstd level of data files (1 to 22).", _between(1, 22))
PARQUET_ENABLE_DICTIONARY = _files.boolean("parquet.enable.dictionary", None, "Parquet files: dictionary-encode every column (true) or none (false); unset, a column is dictionary-encoded where a sample of its values says it pays. `parquet.enable.dictionary#<column>` decides one file column (by its name in the file, e.g. name or _KEY_id) and wins over both.")
MANIFEST_COMPRESSION = _files.enum("manifest.compression", "zstd", "Compression of manifest files.", ("zstd", "snappy", "deflate", "null", "none"))
TARGET_FILE_SIZE = _files.memory("target-file-size", None, "Target size of a data file: 128 mb for primary-key tables, 256 mb for append tables.", _positive)
WRITE_BUFFER_SIZE = _files.memory("write-buffer-size", 256 << 20, "Memory a writer buffers (all buckets together) before it flushes sorted runs.", _positive)
MANIFEST_TARGET_FILE_SIZE = _files.memory("manifest.target-file-size", 8 << 20, "Suggested size of a manifest file.", _positive)
MANIFEST_MERGE_MIN_COUNT = _files.integer("manifest.merge-min-count", 30, "Manifests in a snapshot's base list before they are merged into fewer.", _positive)
DATA_FILE_PREFIX = _files.string("data-file.prefix", "data-", "File name prefix of data files.", _file_name_part)
PARTITION_DEFAULT_NAME = _files.string("partition.default-name", "__DEFAULT_PARTITION__", "Directory name of a null or empty partition value.", _file_name_part)

_merging = OptionGroup("Merging")
MERGE_ENGINE = _merging.enum("merge-engine", "deduplicate", "How rows of the same primary key merge.", ("deduplicate", "partial-update", "aggregation", "first-row"))
IGNORE_DELETE = _merging.boolean("ignore-delete", False, "Ignore delete records.", fallback_keys=(
    "first-row.ignore-delete", "deduplicate.ignore-delete", "partial-update.ignore-delete"))
ROWKIND_FIELD = _merging.string("rowkind.field", None, "Field holding each row's kind (+I, -U, +U, -D).")
SEQUENCE_FIELD = _merging.string("sequence.field", None, "Field(s) ordering records of one key; the largest wins.")
SEQUENCE_FIELD_SORT_ORDER = _merging.enum("sequence.field.sort-order", "ascending", "Order of sequence.field.", ("ascending", "descending"))
PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE = _merging.boolean("partial-update.remove-record-on-delete", False, "Partial-update: a -D record removes the whole row.")
PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP = _merging.string("partial-update.remove-record-on-sequence-group", None, "Partial-update: a -D of these sequence groups removes the whole row.")
AGGREGATION_REMOVE_RECORD_ON_DELETE = _merging.boolean("aggregation.remove-record-on-delete", False, "Aggregation: a -D record removes the whole row.")
FIELDS_DEFAULT_AGG_FUNC = _merging.string("fields.default-aggregate-function", None, "Aggregation merge engine: function of fields without their own.")

_compaction = OptionGroup("Compaction")
NUM_SORTED_RUN_COMPACTION_TRIGGER = _compaction.integer("num-sorted-run.compaction-trigger", 5, "Sorted runs in a bucket that trigger compaction.", _positive)
NUM_SORTED_RUN_STOP_TRIGGER = _compaction.integer("num-sorted-run.stop-trigger", None, "Sorted runs in a bucket at which writes wait for compaction (default trigger + 3).", _positive)
NUM_LEVELS = _compaction.integer("num-levels", None, "Levels of the LSM tree (default trigger + 1).", _at_least_two_levels)
COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT = _compaction.integer("compaction.max-size-amplification-percent", 200, "Size amplification above which a full compaction runs.", _non_negative)
COMPACTION_SIZE_RATIO = _compaction.integer("compaction.size-ratio", 1, "Percentage flexibility when comparing sorted-run sizes.", _non_negative)
COMPACTION_MIN_FILE_NUM = _compaction.integer("compaction.min.file-num", 5, "Append tables: fewest files to compact together.", _positive)
COMPACTION_MAX_FILE_NUM = _compaction.integer("compaction.max.file-num", 50, "Append tables: most files to compact together.", _positive, fallback_keys=("compaction.early-max.file-num",))
COMPACTION_FILE_SIZE = _compaction.memory("compaction.file-size", None, "Files below this size are rewritten when compacted, larger ones only change level (default 70% of target-file-size).", _positive)
COMPACTION_TOTAL_SIZE_THRESHOLD = _compaction.memory("compaction.total-size-threshold", None, "Full compaction whenever a bucket holds less than this in total.", _positive)
COMPACTION_INCREMENTAL_SIZE_THRESHOLD = _compaction.memory("compaction.incremental-size-threshold", None, "Full compaction whenever a bucket holds more than this above its last level.", _positive)
FULL_COMPACTION_DELTA_COMMITS = _compaction.integer("full-compaction.delta-commits", None, "Run a full compaction every this many commits (a stream writer's commit identifiers; every batch commit). Unset with changelog-producer full-compaction: at every stream commit, as Paimon's Flink sink.", _positive)
SORT_SPILL_BUFFER_SIZE = _compaction.memory("sort-spill-buffer-size", 64 << 20, "Memory of decoded rows one merge of a bucket (merge-on-read, compaction, rescale) holds at once, per merging thread: overlapping files are read and merged key range by key range within it.", _positive)
WRITE_ONLY = _compaction.boolean("write-only", False, "Skip compaction and snapshot expiry after writes.", fallback_keys=("write.compaction-skip",))

_snapshots = OptionGroup("Snapshots and commits")
SNAPSHOT_NUM_RETAINED_MIN = _snapshots.integer("snapshot.num-retained.min", 10, "Fewest snapshots to keep.", _positive)
SNAPSHOT_NUM_RETAINED_MAX = _snapshots.integer("snapshot.num-retained.max", 2**31 - 1, "Most snapshots to keep.", _positive)
SNAPSHOT_TIME_RETAINED = _snapshots.duration("snapshot.time-retained", 3_600_000, "Longest time a snapshot is kept.")
CHANGELOG_NUM_RETAINED_MIN = _snapshots.integer("changelog.num-retained.min", None, "Fewest changelogs to keep (default: snapshot.num-retained.min); above it, a changelog outlives its snapshot.", _positive)
CHANGELOG_NUM_RETAINED_MAX = _snapshots.integer("changelog.num-retained.max", None, "Most changelogs to keep (default: snapshot.num-retained.max); above it, a changelog outlives its snapshot.", _positive)
CHANGELOG_TIME_RETAINED = _snapshots.duration("changelog.time-retained", None, "Longest time a changelog is kept (default: snapshot.time-retained); longer, it outlives its snapshot.")
SNAPSHOT_EXPIRE_LIMIT = _snapshots.integer("snapshot.expire.limit", 50, "Most snapshots expired in one go.", _positive)
COMMIT_MAX_RETRIES = _snapshots.integer("commit.max-retries", 10, "Retries of a commit that lost the race for a snapshot id.", _non_negative)
COMMIT_TIMEOUT = _snapshots.duration("commit.timeout", None, "Give up retrying a commit after this long (default: no limit).")
COMMIT_MIN_RETRY_WAIT = _snapshots.duration("commit.min-retry-wait", 10, "Shortest wait between commit retries.")
COMMIT_MAX_RETRY_WAIT = _snapshots.duration("commit.max-retry-wait", 10_000, "Longest wait between commit retries.")
COMMIT_USER_PREFIX = _snapshots.string("commit.user-prefix", None, "Prefix of generated commit users.")

_reading = OptionGroup("Reading")
SOURCE_SPLIT_TARGET_SIZE = _reading.memory("source.split.target-size", 128 << 20, "Target size of a read split.", _positive)
SOURCE_SPLIT_OPEN_FILE_COST = _reading.memory("source.split.open-file-cost", 4 << 20, "Cost of opening a file, counted when packing splits.", _non_negative)

_branches = OptionGroup("Branches")
BRANCH = _branches.string("branch", None, "The branch a table handle reads and writes (docs/branches.md); unset or 'main' is the main branch.")
SCAN_FALLBACK_BRANCH = _branches.string("scan.fallback-branch", None, "A batch read takes the partitions this table's branch lacks from this branch (Paimon's fallback read).")

_streaming = OptionGroup("Streaming and incremental reads")
SCAN_MODE = _streaming.enum("scan.mode", "default", "Where a streaming read starts (and which snapshot a batch read sees): default, latest-full (full), latest, from-snapshot, from-snapshot-full, from-timestamp, compacted-full, incremental.", ("default", "latest-full", "full", "latest", "from-snapshot", "from-snapshot-full", "from-timestamp", "compacted-full", "incremental"))
SCAN_TIMESTAMP_MILLIS = _streaming.integer("scan.timestamp-millis", None, "Scan mode from-timestamp: epoch milliseconds to start from.", _non_negative, java_long=True)
CONSUMER_ID = _streaming.string("consumer-id", None, "A streaming read records its progress in consumer/consumer-<id>, starts from it, and snapshot expiry keeps what it has not read.", _file_name_part)
CONSUMER_EXPIRATION_TIME = _streaming.duration("consumer.expiration-time", None, "A consumer whose file was not written for this long is removed (at commit).")
CONSUMER_IGNORE_PROGRESS = _streaming.boolean("consumer.ignore-progress", False, "A new streaming read ignores the consumer's recorded progress and starts as scan.mode says.")
INCREMENTAL_BETWEEN = _streaming.string("incremental-between", None, "Batch read of the changes between two snapshots (or tags): 'start,end', start exclusive.")
INCREMENTAL_BETWEEN_SCAN_MODE = _streaming.enum("incremental-between-scan-mode", "auto", "What an incremental read reads: auto (changelog when the table has a producer, else delta), delta (files of APPEND snapshots), changelog (changelog files), diff (the end snapshot against the start).", ("auto", "delta", "changelog", "diff"))
INCREMENTAL_BETWEEN_TIMESTAMP = _streaming.string("incremental-between-timestamp", None, "Batch read of the changes between two times: 'start,end' in epoch milliseconds, start exclusive.")

_changes = OptionGroup("Changelog and deletion vectors")
CHANGELOG_PRODUCER = _changes.enum(
    "changelog-producer", "none", "Which changelog files a write or compaction produces for streaming readers.",
    ("none", "input", "lookup", "full-compaction"))
CHANGELOG_PRODUCER_ROW_DEDUPLICATE = _changes.boolean(
    "changelog-producer.row-deduplicate", False, "Lookup and full-compaction producers: no -U/+U pair for an update that changes no field.")
FORCE_LOOKUP = _changes.boolean(
    "force-lookup", False, "A table that needs lookups without a lookup changelog (Paimon's force-lookup): with partial-update or aggregation its compactions write each key's merged value and its merges take the newest record above level 0 per key, as a changelog-producer lookup table's (docs/compaction.md).")
DELETION_VECTORS_ENABLED = _changes.boolean(
    "deletion-vectors.enabled", False, "Mark the rows a commit replaces or deletes in older files in deletion vectors, so reads need no merge; every commit compacts its level-0 files (invisible to readers) through a lookup (docs/deletion-vectors.md). Primary-key tables; not with the first-row merge engine or changelog-producer full-compaction.")
DELETION_VECTOR_INDEX_FILE_TARGET_SIZE = _changes.memory(
    "deletion-vector.index-file.target-size", 2 << 20, "Target size of a deletion-vector index file: a bucket's vectors roll into the next file past it.", _positive)
LOOKUP_CACHE_MAX_MEMORY_SIZE = _changes.memory(
    "lookup.cache-max-memory-size", 256 << 20, "The lookup at commit (changelog-producer lookup, deletion vectors): decoded columns of data files a writer process keeps between commits, per table (least recently used out; 0: no cache).", _non_negative)
LOOKUP_CACHE_MAX_DISK_SIZE = _changes.memory(
    "lookup.cache-max-disk-size", JAVA_LONG_MAX, "Disk the lookup cache may use: this engine's cache is in memory only and uses none.", _non_negative)
LOOKUP_CACHE_FILE_RETENTION = _changes.duration(
    "lookup.cache-file-retention", 3_600_000, "A data file's entry in the lookup cache is dropped when no lookup used it for this long.", _positive)


class CoreOptions:
    """A table's options: the raw string map (kept whole, as Paimon keeps it) with typed accessors."""

    def __init__(self, raw: Mapping[str, str]):
        self.raw: dict[str, str] = {str(k): str(v) for k, v in raw.items()}
        # Typed values parsed so far: each option is parsed once per CoreOptions (the raw map is
        # not changed after construction; a changed table gets a new schema and new options).
        self._parsed: dict[str, Any] = {}

    def get(self, option: ConfigOption[T]) -> T | None:
        """The typed value of `option`, or its default."""
        if option.key in self._parsed:
            value: T | None = self._parsed[option.key]
            return value
        value = option.value(self.raw)
        self._parsed[option.key] = value
        return value

    def require(self, option: ConfigOption[T]) -> T:
        """The typed value of an option that has a default."""
        v = self.get(option)
        assert v is not None, option.key
        return v

    def validate(self) -> None:
        """Parse every known option, raising InvalidOptionError naming the first bad one."""
        for key in self.raw:
            if key in OPTIONS:
                OPTIONS[key].value(self.raw)
            elif key in FALLBACK_KEYS:
                FALLBACK_KEYS[key].value({key: self.raw[key]})
        if CHANGELOG_NUM_RETAINED_MIN.key in self.raw or CHANGELOG_NUM_RETAINED_MAX.key in self.raw:
            # Paimon's SchemaValidation: each falls back to its snapshot option.
            low = self.get(CHANGELOG_NUM_RETAINED_MIN) or self.require(SNAPSHOT_NUM_RETAINED_MIN)
            high = self.get(CHANGELOG_NUM_RETAINED_MAX) or self.require(SNAPSHOT_NUM_RETAINED_MAX)
            if low > high:
                raise InvalidOptionError(
                    f"option 'changelog.num-retained.min' ({low}) must not exceed "
                    f"'changelog.num-retained.max' ({high}) (each defaults to its snapshot.* option)")
        from lakehouse_engine.options.startup import check_startup_options

        check_startup_options(self.raw)
        trigger = self.require(NUM_SORTED_RUN_COMPACTION_TRIGGER)
        if self.stop_trigger < trigger:
            raise InvalidOptionError(
                f"option 'num-sorted-run.stop-trigger' ({self.stop_trigger}) must not be below "
                f"'num-sorted-run.compaction-trigger' ({trigger})")

    # ---- derived values Paimon computes from several options ------------------
    @property
    def bucket(self) -> int:
        return self.require(BUCKET)

    def target_file_size(self, has_primary_key: bool) -> int:
        explicit = self.get(TARGET_FILE_SIZE)
        if explicit is not None:
            return explicit
        return (128 << 20) if has_primary_key else (256 << 20)

    @property
    def stop_trigger(self) -> int:
        v = self.get(NUM_SORTED_RUN_STOP_TRIGGER)
        return v if v is not None else self.require(NUM_SORTED_RUN_COMPACTION_TRIGGER) + 3

    @property
    def num_levels(self) -> int:
        v = self.get(NUM_LEVELS)
        return v if v is not None else self.require(NUM_SORTED_RUN_COMPACTION_TRIGGER) + 1

    @property
    def sequence_fields(self) -> list[str]:
        v = self.get(SEQUENCE_FIELD)
        return [f.strip() for f in v.split(",") if f.strip()] if v else []

    @property
    def bucket_keys(self) -> list[str]:
        v = self.get(BUCKET_KEY)
        return [f.strip() for f in v.split(",") if f.strip()] if v else []

    # ---- pypaimon's accessor methods (`options.merge_engine()`) -------------------------------
    def merge_engine(self) -> MergeEngine:
        """The table's merge engine, as pypaimon's `CoreOptions.merge_engine()`."""
        return MergeEngine(self.require(MERGE_ENGINE))

    def deletion_vectors_enabled(self) -> bool:
        """Whether the table marks replaced rows in deletion vectors (`deletion-vectors.enabled`)."""
        return self.require(DELETION_VECTORS_ENABLED)

    def type(self) -> str:
        """The table's type (`type`): this engine serves 'table' only."""
        return self.raw.get("type", "table")


# ---- pypaimon 2.1.0's options, accepted and typed here too ----------------------------------
_pypaimon = OptionGroup("Pypaimon 2.1.0's options, accepted and typed here too")


def _only_false(v: bool) -> str | None:
    return "only false is supported: primary key fields are NOT NULL" if v else None


DYNAMIC_PARTITION_OVERWRITE = _pypaimon.boolean("dynamic-partition-overwrite", True, "An overwrite without a static partition replaces only the partitions its data is in (partitioned tables).")
PRIMARY_KEY_NULLABLE = _pypaimon.boolean("primary-key.nullable", False, "Whether primary key fields may hold nulls; this engine supports only false (keys are NOT NULL, as in Paimon Java 0.9).", _only_false)
SCAN_SNAPSHOT_ID = _pypaimon.integer("scan.snapshot-id", None, "Read this snapshot (time travel).", java_long=True)
SCAN_TAG_NAME = _pypaimon.string("scan.tag-name", None, "Read the snapshot this tag keeps (time travel).")
READ_BATCH_SIZE = _pypaimon.integer("read.batch-size", 1024, "pypaimon's read batch size.", _positive,
                                   stored="how many rows pypaimon puts in one Arrow batch; the rows are the same (this engine sizes batches by file)")
READ_PARALLELISM = _pypaimon.integer("read.parallelism", None, "Threads a read uses (default: one per core, at most one per split, or per file of a split read without a merge).", _positive)
POSTPONE_BATCH_WRITE_FIXED_BUCKET = _pypaimon.boolean(
    "postpone.batch-write-fixed-bucket", True, "A write through new_postpone_fixed_bucket_write_builder() goes straight to fixed buckets (readable at once); false: to the postpone bucket, as every other write to a postpone table.")
POSTPONE_BATCH_WRITE_FIXED_BUCKET_MAX_PARALLELISM = _pypaimon.integer(
    "postpone.batch-write-fixed-bucket.max-parallelism", 2048, "Most buckets a postpone fixed-bucket write gives a partition it writes first.", _positive)
POSTPONE_TARGET_ROW_NUM_PER_BUCKET = _pypaimon.integer(
    "postpone.target-row-num-per-bucket", None, "Postpone fixed-bucket write: rows per bucket of a new partition (before 'postpone.target-size-per-bucket').", _positive, java_long=True)
POSTPONE_TARGET_SIZE_PER_BUCKET = _pypaimon.memory(
    "postpone.target-size-per-bucket", 1 << 30, "Postpone fixed-bucket write: input size (as Paimon's binary rows) per bucket of a new partition.", _positive)
SNAPSHOT_IGNORE_EMPTY_COMMIT = _pypaimon.boolean(
    "snapshot.ignore-empty-commit", None, "Skip a commit that changes nothing.",
    stored="this engine never writes an empty APPEND snapshot; an empty snapshot would change no row")


def _expose_on_core_options() -> None:
    """Every option as a CoreOptions class attribute, as pypaimon has them: `CoreOptions.BUCKET`."""
    for name, value in list(globals().items()):
        if isinstance(value, ConfigOption) and name.isupper():
            setattr(CoreOptions, name, value)


_expose_on_core_options()
