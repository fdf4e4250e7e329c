"""A table's changes in Spark: a range as a DataFrame, and a Structured Streaming source.

    spark.read.format("lakehouse-changes").option("warehouse", W)
         .option("start-snapshot", "3").option("end-snapshot", "7").load("db.t")
    spark.readStream.format("lakehouse-changes").option("warehouse", W)
         .option("consumer-id", "etl").load("db.t")

Rows are `_snapshot_id`, `_row_kind` (+I, -U, +U, -D), then the table's fields, read as stored
(`read.changes`): one input partition per (snapshot, partition, bucket). Option `mode` is
`delta`, `changelog` or `auto` (the table's: changelog when it has a producer); a batch read with
`merged` = true gives one row per changed key instead (Paimon's `incremental-between`).

The stream's offsets are snapshot ids: `{"next_snapshot": N}` means snapshots before N are read
(with `snapshot_millis`, the commit time of snapshot N-1, to tell a rewritten history).
It starts where the Python stream starts (read/stream_start.py): at its consumer's next snapshot
(`consumer-id`, a reader option or the table's), else as `scan.mode` says (the table's, or the
reader's `scan.*` options; the default `latest-full` reads the latest snapshot in full first);
`start-snapshot` N (exclusive, as in a batch range) is `scan.mode` from-snapshot at N + 1. A
consumer is moved forward when Spark commits a micro-batch, so snapshot expiry keeps what the
query has not read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from lakehouse_engine.errors import InvalidOptionError, LakehouseError, SnapshotNotExistError
from lakehouse_engine.read.changes import (
    CHANGELOG,
    DELTA,
    ROW_KIND,
    SNAPSHOT_ID,
    ChangeRead,
    ChangeScan,
    follow_up_kind,
)
from lakehouse_engine.read.incremental import IncrementalRange, IncrementalRead, IncrementalScan
from lakehouse_engine.read.split import DataSplit
from lakehouse_engine.read.stream_start import full_read_splits, stream_consumer_id, stream_start
from lakehouse_engine.read.streaming_scan import check_stream_options
from lakehouse_engine.spark.datasource import spark_schema
from lakehouse_engine.spark.stream_offsets import (
    CHANGES_FORMAT,
    UNDECIDED,
    batch_start,
    latest_offset_after,
)
from lakehouse_engine.spark.tables import TableRef, check_source_options
from lakehouse_engine.store.consumer_manager import Consumer
from lakehouse_engine.store.file_store import FileStore
from lakehouse_engine.table import FileStoreTable

#: The reader options a stream takes as the table's own (over its stored options): where it
#: starts and which consumer it reads with. The batch start options are named to be refused.
STREAM_START_OPTIONS = ("consumer-id", "consumer.ignore-progress", "scan.mode", "scan.snapshot-id",
                        "scan.timestamp-millis", "scan.tag-name", "incremental-between",
                        "incremental-between-timestamp")
#: Every option the source reads (a near miss of one is refused).
SOURCE_OPTIONS = ("warehouse", "start-snapshot", "end-snapshot", "mode", "merged", *STREAM_START_OPTIONS)
_BATCH_ROWS = 65_536


def changes_schema(table: FileStoreTable, merged: bool = False) -> StructType:
    """`_snapshot_id` (not for a merged read), `_row_kind`, then the table's fields."""
    head = [] if merged else [StructField(SNAPSHOT_ID, LongType(), False)]
    return StructType(head + [StructField(ROW_KIND, StringType(), False)] + list(spark_schema(table).fields))


@dataclass(frozen=True)
class _Settings:
    """What every reader of one DataFrame or query agrees on (picklable: it travels to tasks)."""

    ref: TableRef
    mode: str
    merged: bool
    #: (field id, name) of the table's columns when the DataFrame was loaded: a stream keeps
    #: reading those columns (by id, so a rename is followed) after the table's schema evolves.
    fields: tuple[tuple[int, str], ...] = ()

    def kind(self, table: FileStore) -> str:
        return follow_up_kind(table) if self.mode == "auto" else self.mode


def _loaded_columns(settings: _Settings, table: FileStore) -> tuple[list[str] | None, list[str]]:
    """The current names of the columns the DataFrame was loaded with (None: the schema is the
    same), and their names then; a column dropped since is a clear error, not a failed cast."""
    if not settings.fields:
        return None, []
    now = {f.id: f.name for f in table.schema.fields}
    missing = [name for fid, name in settings.fields if fid not in now]
    if missing:
        raise LakehouseError(f"format('{CHANGES_FORMAT}') of table {table.name}: column(s) {missing} were "
                             f"dropped after the query was started; restart it from a new checkpoint to "
                             f"read the table's current schema")
    current = [now[fid] for fid, _ in settings.fields]
    loaded = [name for _, name in settings.fields]
    if current == [f.name for f in table.schema.fields]:
        return None, loaded
    return current, loaded


def _read(settings: _Settings, split: DataSplit, arrow_schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    table = settings.ref.open().store
    projection, loaded = _loaded_columns(settings, table)
    if settings.merged:
        rows = IncrementalRead(table, projection, include_row_kind=True).read_split(split)
    else:
        rows = ChangeRead(table, projection, include_row_kind=True).read_split(split)
    if projection is not None:
        # Renamed columns keep the names the query was started with.
        rows = rows.rename_columns([ROW_KIND, *loaded])
    if not settings.merged:
        rows = rows.add_column(0, SNAPSHOT_ID, pa.array(np.full(rows.num_rows, split.snapshot_id, dtype=np.int64)))
    yield from rows.cast(arrow_schema, safe=False).to_batches(max_chunksize=_BATCH_ROWS)


class ChangesReader(DataSourceReader):
    """A batch range of changes: one input partition per change (or incremental) split."""

    def __init__(self, settings: _Settings, start: int, end: int, schema: StructType):
        self.settings = settings
        self.start = start
        self.end = end
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        table = self.settings.ref.open().store
        kind = self.settings.kind(table)
        if self.settings.merged:
            splits = IncrementalScan(table, None, IncrementalRange(self.start, self.end, kind)).plan().splits()
        else:
            splits = ChangeScan(table).plan_range(self.start, self.end, kind)
        return [InputPartition(s) for s in splits]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.settings, partition.value, self.arrow_schema)


class ChangesStreamReader(DataSourceStreamReader):
    """Structured Streaming over snapshots: offsets `{"next_snapshot": N}`, a micro-batch reads
    the changes of the snapshots between two offsets, a commit moves the consumer (if any).

    The initial offset is always `{"next_snapshot": 0}` (not decided yet): Spark asks for it again
    when it runs the first micro-batch and when a restarted query replays it. The `latestOffset`
    after it decides the start as the Python stream does (read/stream_start.py; `start_options`
    over the table's) and records it as `"start"` in the end offset, which Spark logs before it
    runs the micro-batch, so a replay reads from the same start: `{"next_snapshot": S,
    "scan_snapshot": true}` (Paimon's scanSnapshot: S in full, then its successors' changes) or
    `{"next_snapshot": N}`. While the snapshot a start needs is not committed, the latest offset
    stays `{"next_snapshot": 0}`. An older checkpoint's first micro-batch ends at its start (no
    `"start"`: it reads nothing) and its next one starts there, read as before."""

    def __init__(self, settings: _Settings, schema: StructType, start_options: dict[str, str],
                 start_snapshot: int | None = None):
        self.settings = settings
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.start_options = start_options
        self.start_snapshot = start_snapshot
        self.consumer_id = stream_consumer_id(self.start_table())
        self._last: dict | None = None  # the last offset returned (Spark before 4.2 passes no start)

    def start_table(self) -> FileStore:
        table = self.settings.ref.open()
        return (table.copy(self.start_options) if self.start_options else table).store

    def _decide_start(self) -> dict | None:
        """The offset the stream starts at now (None: not decided yet, the snapshot it needs is
        not committed); a consumer is recorded where the changes it starts with begin, so that
        expiry keeps them."""
        table = self.start_table()
        start = stream_start(table, self.consumer_id)
        latest = table.snapshot_manager().latest_snapshot_id() or 0
        if start is None:
            return None
        if start.consumer is not None:
            offset: dict[str, Any] = {"next_snapshot": start.next_snapshot}
            # With the commit time our streams record, `latestOffset` sees a rollback-and-rewrite
            # past the consumer's position.
            if start.consumer.last_snapshot_millis is not None and start.next_snapshot == start.consumer.next_snapshot:
                offset["snapshot_millis"] = start.consumer.last_snapshot_millis
            return offset
        if self.start_snapshot is not None and self.start_snapshot > latest:
            raise InvalidOptionError(f"format('{CHANGES_FORMAT}') of table {table.name}: option 'start-snapshot' "
                                     f"({self.start_snapshot}) is after the latest snapshot ({latest})")
        if start.full is not None:
            # The consumer is recorded when Spark commits the first micro-batch: recorded at S
            # now, a restart before that would read S's changes instead of S in full.
            return {"next_snapshot": start.full.id, "scan_snapshot": True}
        if start.next_snapshot > latest + 1:
            return None  # `scan.snapshot-id` not committed yet: wait for it
        if self.consumer_id is not None:
            # Recorded now, not at the first micro-batch commit (Spark commits a batch when it
            # plans the next one; an availableNow query never commits its last): until then
            # snapshot expiry would not know what the query still has to read.
            table.consumer_manager().reset_consumer(self.consumer_id, start.next_snapshot)
        return {"next_snapshot": start.next_snapshot}

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's name
        if self._last is None:
            self._last = dict(UNDECIDED)
        return dict(UNDECIDED)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:  # noqa: N802
        self._last = self._latest_offset(start if start is not None else self._last)
        return self._last

    def _latest_offset(self, start: dict | None) -> dict:
        if start is None or int(start["next_snapshot"]) == 0:
            decided = self._decide_start()
            if decided is None:
                return dict(UNDECIDED)  # still waiting
            end = dict(latest_offset_after(self.settings.ref.open(), decided))  # (may be `decided`)
            end["start"] = decided
            return end
        return latest_offset_after(self.settings.ref.open(), start)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        self._last = end  # where the next micro-batch starts (a replayed one's end, after a restart)
        start = batch_start(start, end)
        first, stop = int(start["next_snapshot"]), int(end["next_snapshot"])
        if first == 0:
            return []  # not decided yet, or (an older checkpoint's) up to where the stream starts
        table = self.settings.ref.open().store
        kind = self.settings.kind(table)
        splits: list[DataSplit] = []
        if start.get("scan_snapshot"):
            snapshot = table.snapshot_manager().get_snapshot_by_id(first)
            if snapshot is None:
                raise SnapshotNotExistError(
                    f"format('{CHANGES_FORMAT}') of table {table.name}: snapshot {first}, which the query "
                    f"starts by reading in full, has expired or was rolled back before it was read; "
                    f"start it again from a new checkpoint")
            splits = full_read_splits(table, snapshot, kind)
            first += 1
        if stop > first:
            splits += ChangeScan(table).plan_range(first - 1, stop - 1, kind)
        return [InputPartition(s) for s in splits]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.settings, partition.value, self.arrow_schema)

    def commit(self, end: dict) -> None:
        """Spark finished the micro-batch up to `end`: the consumer reads from there next."""
        if self.consumer_id is None or int(end["next_snapshot"]) == 0 or end.get("scan_snapshot"):
            return  # nothing read yet
        table = self.settings.ref.open()
        millis = end.get("snapshot_millis")
        table.consumer_manager().reset_consumer(
            self.consumer_id, Consumer(int(end["next_snapshot"]), int(millis) if millis is not None else None))


class ChangesDataSource(DataSource):
    """`format("lakehouse-changes")`: options `warehouse` (required), `start-snapshot` (exclusive),
    `end-snapshot`, `mode`, `merged` (batch), `consumer-id` (stream); the path is the table."""

    @classmethod
    def name(cls) -> str:
        return CHANGES_FORMAT

    def _ref(self) -> TableRef:
        check_source_options(self.options, SOURCE_OPTIONS, CHANGES_FORMAT)
        identifier, warehouse = self.options.get("path"), self.options.get("warehouse")
        if not identifier or not warehouse:
            raise LakehouseError(f"format('{CHANGES_FORMAT}') needs option 'warehouse' and the table: "
                                 f".load('database.table')")
        return TableRef.of(identifier, warehouse)

    def _int(self, key: str) -> int | None:
        text = self.options.get(key)
        if text is None or str(text).strip() == "":
            return None
        try:
            value = int(text)
        except ValueError:
            raise InvalidOptionError(f"option '{key}' must be a snapshot id, got {text!r}") from None
        if value < 0:
            raise InvalidOptionError(f"option '{key}' must be 0 or a snapshot id, got {value}")
        return value

    def _settings(self) -> _Settings:
        mode = (self.options.get("mode") or "auto").strip().lower()
        if mode not in ("auto", DELTA, CHANGELOG):
            raise InvalidOptionError(f"option 'mode' must be auto, delta or changelog, got {mode!r}")
        merged = (self.options.get("merged") or "false").strip().lower()
        if merged not in ("true", "false"):
            raise InvalidOptionError(f"option 'merged' must be true or false, got {merged!r}")
        fields = getattr(self, "_fields_at_load", ())
        return _Settings(self._ref(), mode, merged == "true", fields)

    def schema(self) -> StructType:
        # Called once when the DataFrame is loaded, before this object is pickled.
        settings = self._settings()
        table = settings.ref.open()
        self._fields_at_load = tuple((f.id, f.name) for f in table.schema.fields)
        return changes_schema(table, settings.merged)

    def reader(self, schema: StructType) -> DataSourceReader:
        settings = self._settings()
        start = self._int("start-snapshot")
        if start is None:
            raise InvalidOptionError(f"format('{CHANGES_FORMAT}') read as a batch needs option "
                                     f"'start-snapshot' (exclusive; 0 for every change)")
        end = self._int("end-snapshot")
        if end is None:
            end = settings.ref.open().snapshot_manager().latest_snapshot_id() or 0
        if end < start:
            raise InvalidOptionError(f"option 'end-snapshot' ({end}) is before 'start-snapshot' ({start})")
        return ChangesReader(settings, start, end, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        settings = self._settings()
        if settings.merged:
            raise InvalidOptionError(f"format('{CHANGES_FORMAT}'): option 'merged' is for batch reads")
        given = {key: str(self.options[key]) for key in STREAM_START_OPTIONS if self.options.get(key) is not None}
        start = self._int("start-snapshot")
        if start is not None:
            scan = sorted(k for k in given if k.startswith("scan.") or k.startswith("incremental-between"))
            if scan:
                raise InvalidOptionError(f"format('{CHANGES_FORMAT}'): option 'start-snapshot' and "
                                         f"{', '.join(repr(k) for k in scan)} both say where the stream starts: "
                                         f"give one of them")
            # The changes after `start-snapshot`: Paimon's from-snapshot at the snapshot after it.
            given.update({"scan.mode": "from-snapshot", "scan.snapshot-id": str(start + 1)})
        reader = ChangesStreamReader(settings, schema, given, start)
        # Refused as the Python stream refuses them, when the query is defined: conflicting start
        # options (by `copy`), options the stream would not apply.
        check_stream_options(reader.start_table())
        return reader


def register_changes_source(spark: SparkSession) -> None:
    """Register `format("lakehouse-changes")` on a session."""
    spark.dataSource.register(ChangesDataSource)


def read_changes(spark: SparkSession, table: FileStoreTable | str, start_snapshot: int,
                 end_snapshot: int | None = None, mode: str = "auto", merged: bool = False,
                 warehouse: str | None = None) -> DataFrame:
    """The changes of snapshots start_snapshot+1 .. end_snapshot (default: latest) as a DataFrame
    with `_snapshot_id` and `_row_kind`; `merged` gives one row per changed key instead."""
    ref = TableRef.of(table, warehouse)
    register_changes_source(spark)
    reader = (spark.read.format(CHANGES_FORMAT).option("warehouse", ref.warehouse)
              .option("start-snapshot", str(start_snapshot)).option("mode", mode)
              .option("merged", "true" if merged else "false"))
    if end_snapshot is not None:
        reader = reader.option("end-snapshot", str(end_snapshot))
    return reader.load(ref.identifier)
