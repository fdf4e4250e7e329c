"""StreamReadBuilder: pypaimon 2.1.0's entry point for streaming reads of a table's changes."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.read.changes import ChangeRead, as_store
from lakehouse_engine.read.nested_projection import projection_path
from lakehouse_engine.read.predicate import Predicate, PredicateBuilder
from lakehouse_engine.read.read_builder import ReadBuilder
from lakehouse_engine.read.streaming_scan import StreamingTableScan
from lakehouse_engine.schema import DataField
from lakehouse_engine.store.consumer_manager import check_consumer_id

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore
    from lakehouse_engine.table import FileStoreTable


class StreamReadBuilder:
    """Collects streaming read settings, then builds a StreamingTableScan and a ChangeRead that
    agree on them (pypaimon's StreamReadBuilder)."""

    def __init__(self, table: FileStore | FileStoreTable):
        self.table = table = as_store(table)
        self._predicate: Predicate | None = None
        self._projection: list[str] | None = None
        self._poll_interval_ms = 1000
        self._include_row_kind = False
        self._bucket_filter: Callable[[int], bool] | None = None
        self._consumer_id: str | None = None

    def with_filter(self, predicate: Predicate | None) -> StreamReadBuilder:
        """Read only rows that match (partitions and files are pruned by it too)."""
        self._predicate = predicate
        return self

    def with_projection(self, projection: Sequence[str]) -> StreamReadBuilder:
        """Read only these columns; `col.field` reads one field of a ROW column (as `col_field`),
        as a batch read does (an unknown plain name raises, an unknown dotted one is skipped)."""
        ReadBuilder(self.table).with_projection(projection)  # names unknown fields, as a batch read
        self._projection = [p for p in projection if projection_path(self.table.schema, p) is not None]
        return self

    def with_poll_interval_ms(self, poll_interval_ms: int) -> StreamReadBuilder:
        """How long `stream()` waits before looking for a new snapshot again (default 1000)."""
        if isinstance(poll_interval_ms, bool) or not isinstance(poll_interval_ms, int) or poll_interval_ms < 0:
            raise InvalidOptionError(f"poll interval must be a number of milliseconds >= 0, got {poll_interval_ms!r}")
        self._poll_interval_ms = poll_interval_ms
        return self

    def with_include_row_kind(self, include: bool = True) -> StreamReadBuilder:
        """Put a `_row_kind` column (+I, -U, +U, -D) first in what `new_read()` returns."""
        self._include_row_kind = bool(include)
        return self

    def with_consumer_id(self, consumer_id: str) -> StreamReadBuilder:
        """Start from and record progress in consumer `consumer_id` (consumer/consumer-<id>)."""
        self._consumer_id = check_consumer_id(consumer_id)
        return self

    def with_bucket_filter(self, bucket_filter: Callable[[int], bool]) -> StreamReadBuilder:
        """Read only buckets for which `bucket_filter(bucket)` is true (parallel consumers)."""
        if bucket_filter is not None and not callable(bucket_filter):
            raise InvalidOptionError(f"a bucket filter is a function of the bucket id, got {bucket_filter!r} "
                                     f"(use with_buckets for a list of ids)")
        self._bucket_filter = bucket_filter
        return self

    def with_buckets(self, bucket_ids: Sequence[int]) -> StreamReadBuilder:
        """Read only these buckets."""
        try:
            wanted = {operator.index(b) for b in bucket_ids}
        except TypeError:
            raise InvalidOptionError(f"with_buckets takes a list of bucket ids (integers), "
                                     f"got {bucket_ids!r}") from None
        return self.with_bucket_filter(lambda bucket: bucket in wanted)

    def new_streaming_scan(self) -> StreamingTableScan:
        return StreamingTableScan(self.table, self._predicate, self._poll_interval_ms,
                                  self._bucket_filter, self._consumer_id)

    def new_read(self) -> ChangeRead:
        return ChangeRead(self.table, self._projection, self._predicate, self._include_row_kind)

    def new_predicate_builder(self) -> PredicateBuilder:
        return ReadBuilder(self.table).new_predicate_builder()

    def read_type(self) -> list[DataField]:
        """The fields a read returns (without `_row_kind`), in order."""
        builder = ReadBuilder(self.table)
        if self._projection is not None:
            builder.with_projection(self._projection)
        return builder.read_type()
