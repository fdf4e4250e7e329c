"""The `lakehouse` Spark data source (Spark's Python data source API, Spark 4.0+).

    spark.read.format("lakehouse").option("warehouse", W).load("db.table")
    df.write.format("lakehouse").mode("append").option("warehouse", W).save("db.table")

A read's input partitions are the engine's splits; the snapshot is fixed when the DataFrame is
loaded, so every query on it reads the same data. Spark filters become engine predicates only on
a Spark that keeps pushdown state per scan (`filter_pushdown_is_safe`): Spark 4.1 to 4.3 store it
on the relation, shared by every scan of a DataFrame, so a second query (or the other side of a
self-union) would read the first one's pruned splits. There, filters stay with Spark and the
`partitions` and `columns` options prune instead: options belong to the relation, not to a query.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from lakehouse_engine import types as t
from lakehouse_engine.errors import (
    InvalidOptionError,
    LakehouseError,
    SchemaError,
)
from lakehouse_engine.read.predicate import Predicate, PredicateBuilder
from lakehouse_engine.read.read_builder import ReadBuilder
from lakehouse_engine.read.split import DataSplit
from lakehouse_engine.spark.spark_types import spark_schema
from lakehouse_engine.spark.tables import (
    STORAGE_PREFIXES,
    TableRef,
    check_source_options,
    check_writable,
)
from lakehouse_engine.spark.write import check_columns, commit_messages, new_commit, write_batches
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.commit_message import CommitMessage

FORMAT = "lakehouse"
OPTION_WAREHOUSE = "warehouse"
OPTION_SNAPSHOT_ID = "snapshot-id"
OPTION_TAG = "tag"
OPTION_COLUMNS = "columns"
OPTION_PARTITIONS = "partitions"
OPTION_MERGE_ONLY = "merge-only"
#: The reader and writer options `format("lakehouse")` reads (a near miss of one is refused).
SOURCE_OPTIONS = (OPTION_WAREHOUSE, OPTION_SNAPSHOT_ID, OPTION_TAG, OPTION_COLUMNS, OPTION_PARTITIONS,
                  OPTION_MERGE_ONLY, "write.merge-schema")
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_READ_BATCH_ROWS = 65_536

# Types whose Spark filter literals compare the same way in Arrow (not floats: NaN; not LTZ).
_PUSHABLE_ROOTS = frozenset({t.BOOLEAN, t.TINYINT, t.SMALLINT, t.INT, t.BIGINT, t.DECIMAL, t.STRING,
                             t.VARCHAR, t.CHAR, t.DATE, t.TIMESTAMP})
_COMPARISONS: dict[type, str] = {
    EqualTo: "equal", GreaterThan: "greater_than", GreaterThanOrEqual: "greater_or_equal",
    LessThan: "less_than", LessThanOrEqual: "less_or_equal",
}


# ---- options --------------------------------------------------------------------------------
def partition_filter(table: FileStoreTable, spec: str) -> Predicate | None:
    """The predicate of a Paimon partition spec: `k=v,k2=v2` (AND), alternatives joined by `;` (OR).

    The default partition name (`__DEFAULT_PARTITION__`) stands for null.
    """
    keys = list(table.schema.partition_keys)
    builder = PredicateBuilder(table.schema.field_names)
    default_name = table.store.partition_codec().default_name
    alternatives = []
    for part in (p.strip() for p in spec.split(";")):
        if not part:
            continue
        conditions = []
        for pair in part.split(","):
            key, sep, text = (s.strip() for s in pair.partition("="))
            if not sep or key not in keys:
                raise InvalidOptionError(
                    f"option '{OPTION_PARTITIONS}' = {spec!r}: {pair.strip()!r} is not "
                    f"<partition key>=<value>; the partition keys of table {table.name} are {keys}")
            if text == default_name:
                conditions.append(builder.is_null(key))
            else:
                conditions.append(builder.equal(key, _typed(table, key, text, spec)))
        alternatives.append(builder.and_predicates(conditions))
    return builder.or_predicates(alternatives) if alternatives else None


def _typed(table: FileStoreTable, key: str, text: str, spec: str) -> Any:
    arrow_type = table.schema.field(key).type.to_arrow()
    try:
        return pc.cast(pa.array([text]), arrow_type)[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise InvalidOptionError(f"option '{OPTION_PARTITIONS}' = {spec!r}: {text!r} is not a value "
                                 f"of partition key '{key}' ({arrow_type})") from None


def to_predicate(f: Filter, builder: PredicateBuilder, pushable: frozenset[str]) -> Predicate | None:
    """The engine predicate equal to a Spark filter, or None when it has to stay with Spark."""
    negated = isinstance(f, Not)
    inner = f.child if isinstance(f, Not) else f
    path: tuple[str, ...] = getattr(inner, "attribute", ())
    if len(path) != 1 or path[0] not in pushable:
        return None
    name = path[0]
    if isinstance(inner, IsNull | IsNotNull):
        return builder.is_null(name) if isinstance(inner, IsNull) != negated else builder.is_not_null(name)
    value: Any = getattr(inner, "value", None)
    if isinstance(inner, In):
        values = [v for v in value if v is not None]
        if not negated:
            return builder.is_in(name, values)  # `x IN (1, NULL)` keeps the rows where x = 1
        return builder.is_not_in(name, values) if len(values) == len(value) else None
    if isinstance(inner, EqualNullSafe) and not negated:
        return builder.is_null(name) if value is None else builder.equal(name, value)
    if type(inner) in _COMPARISONS and value is not None:
        if not negated:
            leaf: Predicate = getattr(builder, _COMPARISONS[type(inner)])(name, value)
            return leaf
        return builder.not_equal(name, value) if isinstance(inner, EqualTo) else None
    if isinstance(inner, StringStartsWith) and not negated:
        return builder.startswith(name, value)
    return None


# ---- reading --------------------------------------------------------------------------------
# Hadoop expands these in a path as a glob pattern: Spark's parquet reader would not take it literally.
_GLOB_CHARS = frozenset("{}[]*?\\")


def native_split(split: DataSplit) -> bool:
    """Whether Spark's own parquet reader reads this split (`lakehouse_engine.spark.read`): a
    raw-convertible split whose file paths Spark takes literally. Option `merge-only` reads the others."""
    return split.raw_convertible and not any(_GLOB_CHARS & set(p) for p in split.file_paths)


class LakehouseReader(DataSourceReader):
    """Reads one snapshot of a table: one input partition per engine split."""

    def __init__(self, ref: TableRef, snapshot_id: int | None, schema: StructType,
                 predicate: Predicate | None, schema_id: int | None = None, merge_only: bool = False):
        self.ref = ref
        self.merge_only = merge_only
        self.snapshot_id = snapshot_id
        self.schema_id = schema_id
        self.columns = schema.fieldNames()
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.predicate = predicate

    def _read_builder(self, table: FileStoreTable) -> ReadBuilder:
        if self.schema_id is not None:  # the schema the driver reported, even if altered since
            table = table.at_schema(self.schema_id)
        rb = table.new_read_builder()
        if self.snapshot_id is not None:
            rb = rb.with_snapshot(self.snapshot_id).with_table_schema()
        rb = rb.with_projection(self.columns)
        return rb.with_filter(self.predicate) if self.predicate is not None else rb

    def partitions(self) -> list[InputPartition]:
        if self.snapshot_id is None:
            return []  # the table had no snapshot when the DataFrame was loaded
        splits = self._read_builder(self.ref.open()).new_scan().plan().splits()
        return [InputPartition(split) for split in splits if not (self.merge_only and native_split(split))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:
            return
        read = self._read_builder(self.ref.open()).new_read()
        # One merged key range at a time (`sort-spill-buffer-size`): an executor's memory does not
        # grow with the bucket. Spark's types exactly; timestamps finer than microseconds are
        # truncated as Spark must.
        for rows in read.read_split_ranges(partition.value):
            yield from rows.cast(self.arrow_schema, safe=False).to_batches(max_chunksize=_READ_BATCH_ROWS)


class PushdownReader(LakehouseReader):
    """A reader that also turns Spark filters into engine predicates (prunes splits, filters rows)."""

    def __init__(self, ref: TableRef, snapshot_id: int | None, schema: StructType,
                 predicate: Predicate | None, field_names: Sequence[str], pushable: frozenset[str],
                 schema_id: int | None = None, merge_only: bool = False):
        super().__init__(ref, snapshot_id, schema, predicate, schema_id, merge_only)
        self.field_names = list(field_names)
        self.pushable = pushable

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:  # noqa: N802 - Spark's name
        if self.merge_only:
            # The splits left out are the ones `spark.read.read` planned without these filters:
            # planned with them, splits would be packed differently.
            return filters
        builder = PredicateBuilder(self.field_names)
        pushed, rest = [], []
        for f in filters:
            predicate = to_predicate(f, builder, self.pushable)
            if predicate is None:
                rest.append(f)
            else:
                pushed.append(predicate)
        if pushed:
            self.predicate = builder.and_predicates([p for p in [self.predicate, *pushed] if p])
        return rest


# ---- writing --------------------------------------------------------------------------------
@dataclass
class LakehouseCommitMessage(WriterCommitMessage):
    """What one write task hands to the driver: the engine's CommitMessages of its files."""

    messages: list[CommitMessage] = field(default_factory=list)


class LakehouseWriter(DataSourceArrowWriter):
    """Each task writes its rows with TableWrite (write-only); the driver commits all messages once."""

    def __init__(self, ref: TableRef, overwrite: bool):
        self.ref = ref
        self.overwrite = overwrite

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakehouseCommitMessage:
        # Tasks here are not one per bucket: two compacting the same bucket would both rewrite it.
        return LakehouseCommitMessage(write_batches(self.ref.open(), iterator, write_only=True))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        table = self.ref.open()
        static_partition: dict[str, Any] | None = {} if self.overwrite else None
        commit = new_commit(table, static_partition)
        own = _flatten(messages)
        for m in own:  # this job's tasks wrote them: not a retry, no search for their files
            m.commit_user = commit.commit_user
        commit_messages(table, commit, own, static_partition)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # The job failed before committing: no snapshot can reference these files.
        table = self.ref.open()
        table.new_batch_write_builder().new_commit().abort(_flatten(messages))


def _flatten(messages: Sequence[WriterCommitMessage | None]) -> list[CommitMessage]:
    return [m for batch in messages if isinstance(batch, LakehouseCommitMessage) for m in batch.messages]


# ---- the data source ------------------------------------------------------------------------
class LakehouseDataSource(DataSource):
    """`format("lakehouse")`: options `warehouse` (required), `snapshot-id` or `tag`, `columns`,
    `partitions`, `merge-only`; the path is the table's `database.table`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _ref(self) -> TableRef:
        check_source_options(self.options, SOURCE_OPTIONS, FORMAT)
        identifier = self.options.get("path")
        warehouse = self.options.get(OPTION_WAREHOUSE)
        if not identifier:
            raise LakehouseError(f"format('{FORMAT}') needs the table: .load('database.table')")
        if not warehouse:
            raise LakehouseError(f"format('{FORMAT}') needs option '{OPTION_WAREHOUSE}' (a path or URI)")
        # Storage options (`s3.endpoint`, `s3.path.style.access`, credentials, `lock.*`) given to
        # the reader or writer are session configuration Spark already carries to every task.
        storage = {k: str(v) for k, v in self.options.items() if k.lower().startswith(STORAGE_PREFIXES)}
        return replace(TableRef.of(identifier, warehouse), options=tuple(sorted(storage.items())))

    def _pin_snapshot(self, table: FileStoreTable) -> int | None:
        """The snapshot this DataFrame reads: `snapshot-id`, `tag`, else the latest (fixed once)."""
        if not hasattr(self, "_snapshot_id"):
            text, tag = self.options.get(OPTION_SNAPSHOT_ID), self.options.get(OPTION_TAG)
            if text and tag:
                raise InvalidOptionError(f"options '{OPTION_SNAPSHOT_ID}' and '{OPTION_TAG}' exclude each other")
            try:
                snapshot_id = int(text) if text else None
            except ValueError:
                raise InvalidOptionError(f"option '{OPTION_SNAPSHOT_ID}' must be an integer, got {text!r}") from None
            snapshot = table.resolve_snapshot(snapshot_id, tag or None)
            self._snapshot_id = snapshot.id if snapshot is not None else None
            # Time travel reads a snapshot with its own schema; the latest with the latest schema.
            time_travel = snapshot is not None and (snapshot_id is not None or bool(tag))
            self._schema_id = snapshot.schema_id if time_travel and snapshot else table.schema.id
        return self._snapshot_id

    def _read_table(self, table: FileStoreTable) -> FileStoreTable:
        """`table` as the pinned schema version sees it."""
        self._pin_snapshot(table)
        return table.at_schema(self._schema_id)

    def schema(self) -> StructType:
        # Called once when the DataFrame is loaded, before this object is pickled: pin here.
        table = self._read_table(self._ref().open())
        columns = [c.strip() for c in (self.options.get(OPTION_COLUMNS) or "").split(",") if c.strip()]
        return spark_schema(table, columns)

    def _reader_args(self, schema: StructType) -> tuple[TableRef, FileStoreTable, int | None, Predicate | None]:
        ref = self._ref()
        table = self._read_table(ref.open())
        expected = spark_schema(table, [f.name for f in schema.fields if f.name in table.schema.field_names])
        wrong = [f.name for f in schema.fields
                 if f.name not in expected.fieldNames() or expected[f.name].dataType != f.dataType]
        if wrong:
            raise SchemaError(f"columns {wrong} are not columns of table {table.name} with these types; "
                              f"its schema is {spark_schema(table).simpleString()}")
        spec = self.options.get(OPTION_PARTITIONS)
        return ref, table, self._pin_snapshot(table), partition_filter(table, spec) if spec else None

    def _merge_only(self) -> bool:
        text = (self.options.get(OPTION_MERGE_ONLY) or "false").strip().lower()
        if text not in ("true", "false"):
            raise InvalidOptionError(f"option '{OPTION_MERGE_ONLY}' must be true or false, got {text!r}")
        return text == "true"

    def reader(self, schema: StructType) -> DataSourceReader:
        ref, _, snapshot_id, predicate = self._reader_args(schema)
        return LakehouseReader(ref, snapshot_id, schema, predicate, self._schema_id, self._merge_only())

    def writer(self, schema: StructType, overwrite: bool) -> LakehouseWriter:
        ref = self._ref()
        table = ref.open()
        check_writable(table)
        from lakehouse_engine.spark.merge_schema import add_new_columns, merge_schema_requested

        if merge_schema_requested(table, self.options):
            arrow = to_arrow_schema(schema, timezone="UTC")
            table = add_new_columns(schema.fieldNames(), {f.name: f.type for f in arrow}, ref, table)
        check_columns(schema.fieldNames(), table)
        return LakehouseWriter(ref, overwrite)


class PushdownDataSource(LakehouseDataSource):
    """The same data source with Spark filter pushdown, for a Spark that keeps it per scan."""

    def reader(self, schema: StructType) -> DataSourceReader:
        ref, table, snapshot_id, predicate = self._reader_args(schema)
        pushable = frozenset(f.name for f in table.schema.fields if f.type.root in _PUSHABLE_ROOTS)
        return PushdownReader(ref, snapshot_id, schema, predicate, table.schema.field_names, pushable,
                              self._schema_id, self._merge_only())


def filter_pushdown_is_safe(spark: SparkSession) -> bool:
    """True when this Spark keeps a Python data source's pushdown result per scan.

    Spark 4.1 to 4.3 keep it on the relation's provider (`PythonDataSourceV2.setReadInfo`), which
    every later scan of the DataFrame reuses; the fix keeps it on the scan builder, as a field
    `readInfo`. Without a JVM to ask (Spark Connect), assume the old behaviour.
    """
    try:
        jvm: Any = spark.sparkContext._jvm
        builder = jvm.java.lang.Class.forName(
            "org.apache.spark.sql.execution.datasources.v2.python.PythonScanBuilder")
        return any(f.getName() == "readInfo" for f in builder.getDeclaredFields())
    except Exception:  # no JVM gateway, or a Spark without the class: no pushdown
        return False


def register_data_source(spark: SparkSession) -> bool:
    """Register `format("lakehouse")` on a session; returns whether Spark filters are pushed down."""
    pushdown = filter_pushdown_is_safe(spark)
    if pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(PushdownDataSource if pushdown else LakehouseDataSource)
    return pushdown
