"""`read(spark, table)`: a table as a DataFrame, raw-convertible splits read by Spark's own parquet reader.

A split that needs no merge (`DataSplit.raw_convertible`: its files hold disjoint keys, no
retractions, no merge-engine work, and read as the scan's schema) holds exactly the rows a read
returns, less the rows its files' deletion vectors mark. Their files go to `spark.read.parquet`
with an explicit schema of the value columns (the `_KEY_*` and `_SEQUENCE_NUMBER` columns are
never read); rows a deletion vector marks are removed by their position in their file (Spark's
`_metadata.row_index`), by a JVM filter in the scan when the session has the engine's jar, by a
broadcast anti-join otherwise (`spark/deletion_vectors.py`). The other splits go through the
`lakehouse` data source (option `merge-only`), which merges them on executors with the engine.
Both halves read the snapshot pinned when `read` is called, planned with the same options.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pyarrow.fs as pafs
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType, StructField, StructType

from lakehouse_engine import types as t
from lakehouse_engine.catalog import Identifier
from lakehouse_engine.errors import InvalidArgumentError, InvalidOptionError, SchemaError
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.io import FileIO
from lakehouse_engine.io_object_store import GCS_SCHEMES, S3_SCHEMES, ObjectStoreFileIO
from lakehouse_engine.mergetree.merge import INSERT, UPDATE_AFTER
from lakehouse_engine.read.table_read import may_hold_retractions
from lakehouse_engine.schema import VALUE_KIND
from lakehouse_engine.spark.datasource import (
    FORMAT,
    OPTION_COLUMNS,
    OPTION_MERGE_ONLY,
    OPTION_PARTITIONS,
    OPTION_SNAPSHOT_ID,
    OPTION_WAREHOUSE,
    native_split,
    partition_filter,
)
from lakehouse_engine.spark.deletion_vectors import (
    FileVector,
    file_vectors,
    filtered_scan,
    jvm_filter_loaded,
    without_marked_rows,
)
from lakehouse_engine.spark.spark_types import spark_schema
from lakehouse_engine.spark.tables import TableRef
from lakehouse_engine.table import FileStoreTable

__all__ = ["native_columns_supported", "read"]

# Types whose parquet columns (as the engine and Paimon write them) Spark's parquet reader reads
# as the `lakehouse` source's Spark type, value for value. Not here, read by the engine:
# TIMESTAMP finer than microseconds (parquet nanoseconds), fixed-length BINARY(n), TIME and the
# nested types (parquet list/map layouts differ between writers).
_NATIVE_ROOTS = frozenset({t.BOOLEAN, t.TINYINT, t.SMALLINT, t.INT, t.BIGINT, t.FLOAT, t.DOUBLE, t.DECIMAL,
                           t.STRING, t.VARCHAR, t.CHAR, t.BYTES, t.VARBINARY, t.DATE})


def native_columns_supported(table: FileStoreTable, columns: Sequence[str]) -> bool:
    """Whether Spark's parquet reader reads every one of `columns` exactly as the engine does."""
    for name in columns:
        dtype = table.schema.field(name).type
        if dtype.root in _NATIVE_ROOTS:
            continue
        if dtype.root in (t.TIMESTAMP, t.TIMESTAMP_LTZ) and (dtype.precision is None or dtype.precision <= 6):
            continue
        return False
    return True


def read(spark: SparkSession, table: FileStoreTable | str | Identifier, warehouse: str | None = None, *,
         columns: Sequence[str] | None = None, snapshot_id: int | None = None, tag: str | None = None,
         partitions: str | None = None, native: bool | None = None) -> DataFrame:
    """One snapshot of a table as a DataFrame; splits that need no merge are read by Spark itself.

    Args:
        spark: the session (with the `lakehouse` data source registered, as `create_session` does).
        table: a table, or its `database.table` name (then `warehouse` is required).
        warehouse: the warehouse path or URI executors open the table from.
        columns: the columns to read, in that order (default: all).
        snapshot_id: read this snapshot (time travel); `tag`: the snapshot a tag keeps. Default:
            the latest snapshot when `read` is called. The snapshot is read with its own schema.
        partitions: read only these partitions, as the data source's `partitions` option
            (`dt=2026-11-21;dt=2026-11-22`).
        native: whether raw-convertible splits are read by Spark's parquet reader. None (default):
            on a local warehouse only; True: also on an object store, whose paths Spark's Hadoop
            configuration must then be able to read (`s3://` is read as `s3a://`: hadoop-aws on
            the classpath); False: never (every split through the data source).

    Raises:
        InvalidOptionError: `snapshot_id` and `tag` together, or a bad `partitions` spec.
        SnapshotNotExistError: the snapshot or tag does not exist.
        SchemaError: `columns` names columns the table lacks.
        InvalidArgumentError: `native=True` and Spark has no Hadoop filesystem for the files'
            scheme (the message names it).
    """
    if snapshot_id is not None and tag is not None:
        raise InvalidOptionError("read: snapshot_id and tag exclude each other")
    ref = TableRef.of(table, warehouse)
    opened = ref.open()
    snapshot = opened.resolve_snapshot(snapshot_id, tag)

    def source(**options: str) -> DataFrameReader:
        # Built only when a split needs it: each setting is a call into the JVM.
        reader = spark.read.format(FORMAT).options(**{OPTION_WAREHOUSE: ref.warehouse, **dict(ref.options)})
        if columns:
            reader = reader.option(OPTION_COLUMNS, ",".join(columns))
        if partitions:
            reader = reader.option(OPTION_PARTITIONS, partitions)
        return reader.options(**options)

    # The data source reads a snapshot named by id with that snapshot's schema: so does this half.
    read_table = opened.at_schema(snapshot.schema_id) if snapshot is not None else opened
    names = list(columns) if columns else read_table.schema.field_names
    unknown = [c for c in names if c not in read_table.schema.field_names]
    if unknown:
        raise SchemaError(f"read: columns {unknown} are not columns of table {read_table.name} (schema "
                          f"{read_table.schema.id}: {', '.join(read_table.schema.field_names)})")
    if snapshot is None:  # no snapshot yet: the data source returns the empty table
        return source().load(ref.identifier)
    pinned = {OPTION_SNAPSHOT_ID: str(snapshot.id)}
    schema = spark_schema(read_table, names)
    if native is None:  # the table's own FileIO knows whether its files are local
        native = isinstance(opened.file_io.fs, pafs.LocalFileSystem)
    if not native or not native_columns_supported(read_table, names):
        return source(**pinned).load(ref.identifier)
    rb = read_table.new_read_builder().with_snapshot(snapshot.id).with_table_schema().with_projection(names)
    if partitions:
        rb = rb.with_filter(partition_filter(read_table, partitions))
    splits = rb.new_scan().plan().splits()
    native_splits = [s for s in splits if native_split(s)]
    files = [(_spark_path(opened.file_io, f"{s.bucket_path}/{f.file_name}"), f) for s in native_splits for f in s.files]
    paths = [p for p, _ in files]
    if not paths:
        return source(**pinned, **{OPTION_MERGE_ONLY: "true"}).load(ref.identifier)
    _check_filesystems(spark, paths, read_table.name)
    vectors = file_vectors(read_table, native_splits)
    file_names = [f.file_name for s in native_splits for f in s.files]
    if vectors and len(set(file_names)) < len(file_names):
        # Spark names a row's file by its name alone: two files of one name in two buckets could
        # not tell their vectors apart. Paimon's names are unique per table; the engine reads any.
        return source(**pinned).load(ref.identifier)
    raw = _parquet(spark, files, schema, read_table.schema.has_primary_key, vectors)
    if all(native_split(s) for s in splits):
        return raw
    return raw.unionByName(source(**pinned, **{OPTION_MERGE_ONLY: "true"}).load(ref.identifier))


# Files of other writers than Spark carry no calendar metadata: their dates and timestamps are
# proleptic Gregorian, as Paimon's (Spark would refuse old ones by default).
_READER_OPTIONS = {"datetimeRebaseMode": "CORRECTED", "int96RebaseMode": "CORRECTED"}


def _parquet(spark: SparkSession, files: Sequence[tuple[str, DataFileMeta]], schema: StructType,
             primary_key: bool, vectors: Sequence[FileVector] = ()) -> DataFrame:
    """The rows of raw-convertible files (Spark's path of each, its meta): their value columns, by
    Spark's vectorized reader, less the rows `vectors` mark and, of a primary-key table, less the
    retractions.

    `_VALUE_KIND` is read and filtered on only when some file may hold retractions, as the engine's
    raw read decides per file (`may_hold_retractions`: a compaction-written file recording 0
    deletes is trusted; an APPEND-source file is not, since pypaimon 2.1.0 records 0 for files
    holding `-D` rows). One scan for all files: two scans unioned (the kind only where needed)
    cost Spark more than the column saves (measured: JVM CPU 1.34x against 1.15x of
    `spark.read.parquet`, docs/deletion-vectors.md)."""
    value_kind = primary_key and any(may_hold_retractions(meta) for _, meta in files)
    return _scan(spark, [p for p, _ in files], schema, value_kind, vectors)


def _scan(spark: SparkSession, paths: list[str], schema: StructType, value_kind: bool,
          vectors: Sequence[FileVector]) -> DataFrame:
    """`schema`'s columns of the parquet files `paths` less the rows `vectors` mark and, with
    `value_kind`, less the rows whose `_VALUE_KIND` is a retraction (`-U`, `-D`)."""
    read_schema, kinds = schema, tuple[int, ...]()
    if value_kind:
        read_schema = StructType([*schema.fields, StructField(VALUE_KIND, ByteType(), False)])
        kinds = (INSERT, UPDATE_AFTER)
    # A row's position is its position in its file, taken by the file scan before any filter.
    # (The JVM filter takes its lists as lines: a path or a column with a line break is joined.)
    if vectors and jvm_filter_loaded(spark) and not any("\n" in p for p in [*paths, *read_schema.fieldNames()]):
        return filtered_scan(spark, paths, read_schema, _READER_OPTIONS, schema.fieldNames(),
                             VALUE_KIND if kinds else None, kinds, vectors)
    df = spark.read.options(**_READER_OPTIONS).schema(read_schema).parquet(*paths)
    if vectors:
        df = without_marked_rows(spark, df, vectors)
    if kinds:
        df = df.where(F.col(VALUE_KIND).isin(*kinds))
    return df.select(*schema.fieldNames())


# The Hadoop filesystem class Spark needs per scheme, and where it comes from, for the error.
_FILESYSTEMS = {"s3a": "org.apache.hadoop.fs.s3a.S3AFileSystem, in hadoop-aws",
                "gs": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem, in the GCS connector",
                "abfs": "org.apache.hadoop.fs.azurebfs.AzureBlobFileSystem, in hadoop-azure",
                "abfss": "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem, in hadoop-azure"}


def _check_filesystems(spark: SparkSession, paths: Sequence[str], table: str) -> None:
    """Raise InvalidArgumentError naming the scheme and the missing filesystem when Spark's Hadoop
    configuration cannot open `paths` (pyspark ships no `hadoop-aws`): a clear error before Spark
    plans a scan, instead of Py4J's trace of `UnsupportedFileSystemException`."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: the server's classpath is not ours to ask
        return
    from py4j.protocol import Py4JJavaError

    conf = spark._jsc.hadoopConfiguration()
    for scheme in sorted({p.split("://", 1)[0] for p in paths} - {"file"}):
        try:
            jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
        except Py4JJavaError as e:
            needed = _FILESYSTEMS.get(scheme, "a Hadoop FileSystem for it")
            raise InvalidArgumentError(
                f"read(native=True) of table {table}: Spark's Hadoop configuration has no FileSystem for "
                f"scheme '{scheme}' (needs {needed}, on the session's classpath, e.g. spark.jars.packages; "
                f"pyspark ships none): read without native=True, and the `lakehouse` data source reads "
                f"the files with the engine ({e.java_exception})") from None


def _spark_path(file_io: FileIO, path: str) -> str:
    """A data file's path as Spark's Hadoop filesystem names it. An object store's FileIO names its
    files `bucket/key`, without the scheme: Spark gets the scheme of the Hadoop connector for that
    store (never a local path of the same name)."""
    if isinstance(file_io, ObjectStoreFileIO):
        bucket, _, key = path.partition("/")
        if file_io.scheme in S3_SCHEMES:
            return f"s3a://{bucket}/{key}"
        if file_io.scheme in GCS_SCHEMES:
            return f"gs://{bucket}/{key}"
        # Azure: the container and the account, as the abfs connector names them
        if file_io.azure_account is None:
            raise InvalidArgumentError(f"read(native=True): the Azure account of {path} is not in the "
                                       "warehouse URI (abfss://container@account.dfs.core.windows.net/...)")
        return f"abfss://{bucket}@{file_io.azure_account}.dfs.core.windows.net/{key}"
    if "://" not in path:
        return "file://" + os.path.abspath(path)
    if path.startswith("s3://"):
        return "s3a://" + path[len("s3://"):]
    return path
