"""A TableWrite's bucket assignment, output role and flush lookup are values it is given."""

from __future__ import annotations

import pyarrow as pa

from lakehouse_engine import Catalog
from lakehouse_engine.format.manifest_entries import DataFileMeta, FileKind, IndexManifestEntry
from lakehouse_engine.partition import Partition
from lakehouse_engine.write.table_write import TableWrite
from lakehouse_engine.write.write_roles import (
    DynamicAssigner,
    FixedBuckets,
    LookupResult,
    assigner_of,
)
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])


def _rows(ids: range, v: int) -> pa.Table:
    return pa.table({"id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


class _RecordingLookup:
    """A flush lookup that records what it was given and makes one index file per flush."""

    takes_run = False  # (given the written files after the flush)

    def __init__(self) -> None:
        self.calls: list[tuple[int, list[str], list[str]]] = []

    def lookup(self, partition: Partition, bucket: int, flushed: list[DataFileMeta],
               older: list[DataFileMeta]) -> LookupResult:
        self.calls.append((bucket, [f.file_name for f in flushed], [f.file_name for f in older]))
        entry = IndexManifestEntry(FileKind.ADD, partition.binary, bucket, "DELETION_VECTORS",
                                   f"index-test-{len(self.calls)}", 0, 0)
        return LookupResult(index_files=[entry])


def test_the_flush_lookup_sees_each_flushed_run_and_the_older_files_of_its_bucket(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": 1})
    write(table, _rows(range(10), 1))
    committed = {e.file.file_name for e in table.store.manifest_io().live_entries(table.latest_snapshot())}
    lookup = _RecordingLookup()
    writer = TableWrite(table.store, "user", flush_lookup=lookup)
    writer.write_arrow(_rows(range(5), 2))
    (message,) = writer.prepare_commit()
    (bucket, flushed, older) = lookup.calls[0]
    assert bucket == 0 and flushed == [f.file_name for f in message.new_files]
    assert set(older) == committed  # what the bucket held before this run
    assert [e.file_name for e in message.new_index_files] == ["index-test-1"]
    writer.close()


def test_a_postpone_compaction_writer_hands_its_files_over_as_compaction_output(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": 1})
    writer = TableWrite.for_postpone_compaction(table.store, "user", {}, 2)
    writer.write_arrow(_rows(range(20), 1))
    messages = writer.prepare_commit()
    assert {m.bucket for m in messages} == {0, 1} and all(m.total_buckets == 2 for m in messages)
    assert all(not m.new_files and m.compact_after for m in messages)
    writer.close()


def _three_runs(writer: TableWrite) -> list:
    for v in range(3):
        writer.write_arrow(_rows(range(30), v))
        writer._flush_all(list(writer._writers.values()))
    messages = writer.prepare_commit()
    writer.close()
    return messages


def test_a_rescale_writer_writes_fixed_buckets_without_compacting(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={
        "bucket": 1, "num-sorted-run.stop-trigger": 2, "num-sorted-run.compaction-trigger": 2})
    messages = _three_runs(TableWrite.for_rescale(table.store, "user", {}, 3))
    assert {m.bucket for m in messages} == {0, 1, 2}
    assert all(not m.compact_before and not m.compact_after for m in messages)
    # The same rows as new data in the same buckets: the writer compacts them.
    new_data = _three_runs(TableWrite(table.store, "user", FixedBuckets({}, 3)))
    assert all(m.compact_after for m in new_data)


def test_one_assigner_of_one_is_the_table_default() -> None:
    assert assigner_of(0, 1) == assigner_of()
    assert assigner_of(1, 3) == DynamicAssigner(1, 3)
