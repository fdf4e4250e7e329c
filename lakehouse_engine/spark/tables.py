"""What Spark jobs share about a table: how executors re-open it (`TableRef`), its bucket mode,
which modes a Spark job writes, and the shape of Spark's Arrow batches (timestamp alignment,
re-chunking the batches Spark hands to Python)."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.catalog import Catalog, Identifier
from lakehouse_engine.errors import LakehouseError, UnsupportedError
from lakehouse_engine.options.support import check_option_keys
from lakehouse_engine.schema import BucketMode  # (re-exported: it was defined here)
from lakehouse_engine.table import FileStoreTable

# Catalog options that never travel to executors inside a task: credentials reach them through
# the session's configuration instead (`spark.executorEnv.AWS_ACCESS_KEY_ID`, instance roles).
_SECRET_WORDS = ("access-key", "access.key", "accesskey", "account-key", "account.key", "secret", "token",
                 "sas", "password")


#: Storage options a reader or writer may give a data source (`s3.endpoint`, `lock.enabled`, ...):
#: the catalog's, not the table's.
STORAGE_PREFIXES = ("s3.", "s3a.", "fs.", "gs.", "azure.", "lock.")
#: The option keys Spark itself gives a data source: the table of `.load(path)` / `.save(path)`.
_SPARK_KEYS = ("path", "paths")


def check_source_options(options: Mapping[str, str], own: Collection[str], source: str) -> None:
    """Refuse a near miss of a known key among the options a reader or writer gave `source`:
    of its `own` keys or of Paimon's table options (InvalidOptionError naming both), before
    anything is read; Spark's keys, storage options and other keys are left alone."""
    keys = [k for k in options if not k.lower().startswith(STORAGE_PREFIXES)]
    check_option_keys(keys, (*own, *_SPARK_KEYS), ignore_case=True, where=f"format('{source}'): ")


def shippable_options(options: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The catalog options a task may carry (endpoint, region, path style, lock): no credentials."""
    return tuple(sorted((k, v) for k, v in options.items()
                        if k != "warehouse" and not any(w in k.lower() for w in _SECRET_WORDS)))


@dataclass(frozen=True)
class TableRef:
    """Where an executor re-opens a table: the warehouse (a path or URI), `database.table` and the
    catalog options without credentials (see `shippable_options`)."""

    warehouse: str
    identifier: str
    options: tuple[tuple[str, str], ...] = ()
    # The driver's own catalog options (credentials included); dropped when a task is pickled.
    driver_options: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)

    def catalog(self) -> Catalog:
        """The table's catalog, with the driver's options on the driver and the shipped ones in a task."""
        return Catalog(self.warehouse, dict(self.driver_options or self.options))

    def open(self) -> FileStoreTable:
        """The table, opened through `catalog()`."""
        return self.catalog().get_table(self.identifier)

    def __reduce__(self) -> tuple[type, tuple[str, str, tuple[tuple[str, str], ...]]]:
        return (TableRef, (self.warehouse, self.identifier, self.options))

    @staticmethod
    def of(table_or_identifier: FileStoreTable | str | Identifier,
           warehouse: str | None = None) -> TableRef:
        """The reference of a table object or name; a table on a local disk knows its warehouse.

        Raises:
            LakehouseError: the table is named without a warehouse, or lives on a remote
                filesystem and no warehouse URI was given.
        """
        if isinstance(table_or_identifier, FileStoreTable):
            table = table_or_identifier
            if warehouse is None:
                warehouse = _warehouse_of(table)
            options = table.file_io.options
            return TableRef(warehouse, table.name, shippable_options(options), tuple(sorted(options.items())))
        ident = Identifier.parse(table_or_identifier)
        if warehouse is None:
            raise LakehouseError(f"table {ident} is given by name: pass warehouse= (a path or URI)")
        return TableRef(warehouse, ident.quoted_full_name())


def _warehouse_of(table: FileStoreTable) -> str:
    # A table lives at <warehouse>/<database>.db/<table>.
    root = os.path.dirname(os.path.dirname(table.path))
    scheme = getattr(table.file_io, "scheme", None)
    if scheme is not None:  # an object store: root is `bucket/prefix`
        return f"{scheme}://{root}"
    if not table.file_io.is_local or Catalog(root).table_path(table.name) != table.path:
        raise LakehouseError(
            f"cannot tell the warehouse of table {table.name} at {table.path}: pass warehouse= "
            f"(the URI executors open the catalog with)")
    return root


def check_writable(table: FileStoreTable) -> BucketMode:
    """The table's bucket mode, or UnsupportedError when `df.write.format("lakehouse")` cannot
    write it: its tasks write whatever rows they hold, so only fixed-bucket and append tables; a
    dynamic bucket assigner must see every key of its slice, and postpone bucket tables are left
    to `write` too. (`write` routes the rows first, `route_rows`, and takes every mode.)
    """
    mode = table.bucket_mode()
    if mode.assigns_dynamically:
        raise UnsupportedError(
            f"table {table.name}: df.write.format('lakehouse') cannot write {mode.value} bucket "
            f"mode ('bucket' = -1 with a primary key), whose keys must reach their assigner's task; "
            f"use lakehouse_engine.spark.write(df, table)")
    if mode is BucketMode.POSTPONE:
        raise UnsupportedError(
            f"table {table.name}: df.write.format('lakehouse') does not write postpone bucket "
            f"mode ('bucket' = -2); use lakehouse_engine.spark.write(df, table)")
    return mode


def align_timestamps(data: pa.Table, arrow_schema: pa.Schema) -> pa.Table:
    """Spark TIMESTAMP (with a time zone) into Paimon TIMESTAMP (without) as Spark casts it.

    Spark's Arrow batches carry the session time zone in the type; the wall-clock time in that
    zone is what Spark's own `CAST(ts AS TIMESTAMP_NTZ)` gives. Other types are TableWrite's.
    """
    for i, name in enumerate(data.column_names):
        target = arrow_schema.field(name).type if name in arrow_schema.names else None
        actual = data.schema.field(i).type
        if (target is not None and pa.types.is_timestamp(target) and target.tz is None
                and pa.types.is_timestamp(actual) and actual.tz is not None):
            data = data.set_column(i, name, pc.local_timestamp(data.column(i)))
    return data


def rechunk(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """The rows of `batches` in their order, as tables of `rows` rows (the last may have fewer):
    small batches are combined, large ones sliced (zero-copy); empty batches are dropped.

    Spark hands Python Arrow batches of `spark.sql.execution.arrow.maxRecordsPerBatch` rows
    (10,000 by default): per-batch work (hashing, sorting, encoding) costs less on larger
    chunks, and a bounded chunk bounds what one step holds in memory.
    """
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        count += batch.num_rows
        if count < rows:
            continue
        data = pa.Table.from_batches(pending)
        start = 0
        while count - start >= rows:
            yield data.slice(start, rows)
            start += rows
        pending, count = data.slice(start).to_batches(), count - start
    if count:
        yield pa.Table.from_batches(pending)


def partition_bucket_counts(table: FileStoreTable) -> dict[bytes, int]:
    """Bucket count of each partition that has files (a rescaled partition keeps its own)."""
    latest = table.latest_snapshot()
    if latest is None:
        return {}
    return {e.partition: e.total_buckets
            for e in table.store.manifest_io().live_entries(latest) if e.total_buckets > 0}
