"""`spark.read` of a deletion-vector table: every split by Spark's parquet reader, the rows the
vectors mark removed by their position in their file, by the JVM filter when the session has the
engine's jar (`make spark-jar`) and by a broadcast anti-join when it has not; both read exactly
the engine's rows."""

from __future__ import annotations

import dataclasses
import importlib
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.mergetree.data_file import FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT
from lakehouse_engine.read.read_builder import ReadBuilder
from lakehouse_engine.read.split import DataSplit
from lakehouse_engine.read.table_read import may_hold_retractions
from lakehouse_engine.schema import VALUE_KIND
from lakehouse_engine.spark import read
from lakehouse_engine.spark.deletion_vectors import JAR, jvm_filter_loaded
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, write
from tests.lakehouse_engine.conftest import read as engine_read
from tests.lakehouse_engine.read.dv_fixture import JAVA_READS, copy_table

pytestmark = pytest.mark.spark

spark_read = importlib.import_module("lakehouse_engine.spark.read")

JVM, JOIN = "jvm filter", "anti-join"


def _require_jar() -> None:
    """Skip without the jar, except under `make test`, which builds it and must test the JVM path."""
    if not JAR.is_file():
        if os.environ.get("LAKEHOUSE_REQUIRE_SPARK_JAR") == "1":
            pytest.fail(f"{JAR} is not built: `make test` builds it (make spark-jar) and needs javac")
        pytest.skip(f"{JAR} is not built (make spark-jar)")


@pytest.fixture(params=[JVM, JOIN])
def removal(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, spark: Any) -> str:
    """How the marked rows are removed: the JVM filter (needs the jar `make spark-jar` builds), or
    the anti-join a session without the jar uses."""
    if request.param == JVM:
        _require_jar()
        assert jvm_filter_loaded(spark), "create_session puts the built jar on the classpath"
    else:
        monkeypatch.setattr(spark_read, "jvm_filter_loaded", lambda session: False)
    return str(request.param)


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def _assert_removed_by(df: Any, removal: str) -> None:
    plan = _plan(df)
    assert "PythonDataSource" not in plan and "BatchScan lakehouse" not in plan, plan
    if removal == JVM:
        assert "lakehouse_live_row" in plan and "Join" not in plan, plan
    else:
        assert "LeftAnti" in plan and "lakehouse_live_row" not in plan, plan


@pytest.mark.parametrize("snapshot", [6, 9])
def test_a_dv_table_reads_through_sparks_parquet_reader_without_the_marked_rows(
        spark: Any, tmp_path: Path, snapshot: int, removal: str) -> None:
    copy_table(tmp_path)
    table = Catalog(str(tmp_path)).get_table("db.t")
    splits = table.new_read_builder().with_snapshot(snapshot).new_scan().plan().splits()
    assert all(s.raw_convertible for s in splits)
    assert any(d is not None for s in splits for d in s.data_deletion_files or [])
    df = read(spark, table, snapshot_id=snapshot)
    _assert_removed_by(df, removal)
    got = sorted(tuple(r) for r in df.collect())
    assert got == sorted(tuple(r[1:]) for r in JAVA_READS[snapshot])
    # A projection and a filter on top of the removal keep the positions right.
    ids = sorted(r[0] for r in read(spark, table, snapshot_id=snapshot, columns=["id"]).where("id > 100").collect())
    assert ids == sorted(r[1] for r in JAVA_READS[snapshot] if r[1] > 100)


def test_the_lakehouse_data_source_applies_the_vectors_on_executors(spark: Any, tmp_path: Path) -> None:
    copy_table(tmp_path)
    table = Catalog(str(tmp_path)).get_table("db.t")
    df = read(spark, table, snapshot_id=6, native=False)
    assert "BatchScan lakehouse" in _plan(df)
    assert sorted(tuple(r) for r in df.collect()) == sorted(tuple(r[1:]) for r in JAVA_READS[6])


_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                     pa.field("v", pa.string()), pa.field("kind", pa.string())])


def _batch(ids: range | list[int], tag: str, kind: str = "+I") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "dt": [f"d{i % 3}" for i in ids], "v": [f"{tag}{i}" for i in ids],
                     "kind": [kind] * len(ids)}, schema=_SCHEMA)


def _expected(table: FileStoreTable, snapshot_id: int | None = None) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in engine_read(table, snapshot_id).to_pylist())


def test_a_dv_table_we_wrote_reads_through_spark_as_the_engine_reads_it(
        spark: Any, tmp_path: Path, removal: str) -> None:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    # Partitions, two buckets, several files per bucket (small target files), updates and deletes.
    table = create_table(catalog, "w", _SCHEMA, ["id", "dt"], partition_keys=["dt"], options={
        "bucket": "2", "deletion-vectors.enabled": "true", "rowkind.field": "kind", "target-file-size": "4kb"})
    write(table, _batch(range(0, 900), "a"))
    write(table, _batch(range(100, 300), "b"))
    older = table.latest_snapshot().id
    write(table, _batch(range(250, 1200, 3), "c"))
    write(table, _batch(range(0, 900, 7), "x", "-D"))
    splits = table.new_read_builder().new_scan().plan().splits()
    assert any(len(s.files) > 1 for s in splits), "several files in a bucket"
    marked = [d for s in splits for d in s.data_deletion_files or [] if d is not None]
    assert len(marked) > 2, "vectors on several files"
    expected = _expected(table)
    assert len(expected) == 900 + len(range(901, 1200, 3)) - len(range(0, 900, 7))
    df = read(spark, table)
    _assert_removed_by(df, removal)
    assert sorted(tuple(r) for r in df.collect()) == expected
    assert sorted(tuple(r) for r in read(spark, table, native=False).collect()) == expected
    # Time travel: the older snapshot read with its own vectors, not the latest ones.
    old = read(spark, table, snapshot_id=older)
    _assert_removed_by(old, removal)
    assert sorted(tuple(r) for r in old.collect()) == _expected(table, older) != expected
    # One partition, some columns.
    part = read(spark, table, partitions="dt=d1", columns=["v", "id"])
    assert sorted(tuple(r) for r in part.collect()) == sorted((r[2], r[0]) for r in expected if r[1] == "d1")


def test_a_flipped_vector_byte_is_a_corrupt_file_naming_the_index_file(
        spark: Any, tmp_path: Path, removal: str) -> None:
    copy_table(tmp_path)
    table = Catalog(str(tmp_path)).get_table("db.t")
    splits = table.new_read_builder().with_snapshot(9).new_scan().plan().splits()
    deletion = next(d for s in splits for d in s.data_deletion_files or [] if d is not None)
    path = Path(deletion.dv_index_path)
    data = bytearray(path.read_bytes())
    data[deletion.offset + 12] ^= 0x01  # a byte of the bitmap
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=path.name):
        read(spark, table, snapshot_id=9)


def test_a_missing_index_file_is_a_corrupt_file_naming_it(spark: Any, tmp_path: Path) -> None:
    copy_table(tmp_path)
    table = Catalog(str(tmp_path)).get_table("db.t")
    splits = table.new_read_builder().with_snapshot(9).new_scan().plan().splits()
    deletion = next(d for s in splits for d in s.data_deletion_files or [] if d is not None)
    Path(deletion.dv_index_path).unlink()
    with pytest.raises(CorruptFileError, match=Path(deletion.dv_index_path).name):
        read(spark, table, snapshot_id=9)


def test_create_session_puts_the_built_jar_on_the_classpath(spark: Any) -> None:
    _require_jar()
    assert str(JAR) in spark.sparkContext.getConf().get("spark.jars", "").split(",")


def test_a_table_without_vectors_reads_as_a_plain_parquet_scan(spark: Any, tmp_path: Path) -> None:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    table = create_table(catalog, "p", _SCHEMA, ["id", "dt"], partition_keys=["dt"],
                         options={"bucket": "2", "rowkind.field": "kind"})
    write(table, _batch(range(0, 60), "a"))
    df = read(spark, table)
    plan = _plan(df)
    assert "lakehouse_live_row" not in plan and "Join" not in plan and "BatchScan" not in plan, plan
    assert sorted(tuple(r) for r in df.collect()) == _expected(table)


_KINDS = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
                    pa.field("kind", pa.string())])


def _kinds_batch(ids: list[int], tag: str, kind: str = "+I") -> pa.Table:
    return pa.table({"id": ids, "v": [f"{tag}{i}" for i in ids], "kind": [kind] * len(ids)}, schema=_KINDS)


def _trusted_and_untrusted(catalog: Catalog) -> tuple[FileStoreTable, DataSplit]:
    """One bucket: a compaction's file with a vector (recording 0 retractions: trusted), a file
    moved up as written (APPEND: not trusted), and a file holding `-D` rows that records 0
    retractions, as pypaimon 2.1.0 writes them (the split as such a writer's table plans it)."""
    t = create_table(catalog, "k", _KINDS, ["id"], options={
        "deletion-vectors.enabled": "true", "rowkind.field": "kind", "bucket": "1"})
    write(t, _kinds_batch(list(range(300)), "a"))
    write(t, _kinds_batch(list(range(0, 300, 2)), "b"))
    t.compact(full=True)
    write(t, _kinds_batch(list(range(0, 300, 5)), "c"))  # a vector on the compacted file
    # Level 0 (write-only: not compacted, so invisible to a DV read until placed in the split).
    write(t.copy({"write-only": "true"}), pa.concat_tables(
        [_kinds_batch(list(range(400, 420)), "d"), _kinds_batch(list(range(420, 430)), "e", "-D")]))
    (split,) = t.new_read_builder().new_scan().plan().splits()
    by_source = {f.file_source: f for f in split.files}
    compacted, moved = by_source[FILE_SOURCE_COMPACT], by_source[FILE_SOURCE_APPEND]
    assert compacted.delete_row_count == moved.delete_row_count == 0
    assert split.deletion_file(compacted.file_name) is not None
    entries = t.store.manifest_io().live_entries(t.latest_snapshot())
    (level0,) = [e.file for e in entries if e.file.level == 0]
    assert level0.file_source == FILE_SOURCE_APPEND and level0.delete_row_count == 10
    held = dataclasses.replace(level0, level=3, delete_row_count=0)
    assert split.data_deletion_files is not None
    return t, dataclasses.replace(split, sections=[*split.sections, [held]],
                                  data_deletion_files=[*split.data_deletion_files, None])


def test_the_row_kind_is_read_only_when_a_file_may_hold_retractions(
        spark: Any, tmp_path: Path, removal: str, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    t, split = _trusted_and_untrusted(catalog)
    expected = sorted(tuple(r.values()) for r in t.new_read_builder().new_read().to_arrow([split]).to_pylist())
    assert len(expected) == 320 and not any(r[0] >= 420 for r in expected)  # the -D rows dropped

    class Planned:
        def plan(self) -> Any:
            return self

        def splits(self) -> list[DataSplit]:
            return [split]  # the split as it is when `read` plans (reassigned below)

    monkeypatch.setattr(ReadBuilder, "new_scan", lambda self: Planned())
    # Some files may hold retractions: `_VALUE_KIND` read for all and the `-D` rows dropped.
    df = read(spark, t)
    assert VALUE_KIND in _plan(df) and "Union" not in _plan(df)
    assert sorted(tuple(r) for r in df.collect()) == expected
    # Only files a compaction wrote, recording no retraction: `_VALUE_KIND` not read at all.
    compacted = [f for f in split.files if f.file_source == FILE_SOURCE_COMPACT]
    split = dataclasses.replace(split, sections=[compacted], data_deletion_files=[split.deletion_file(f.file_name)
                                                                                   for f in compacted])
    assert not any(may_hold_retractions(f) for f in split.files)
    trusted = read(spark, t)
    assert VALUE_KIND not in _plan(trusted)
    assert sorted(tuple(r) for r in trusted.collect()) == sorted(
        tuple(r.values()) for r in t.new_read_builder().new_read().to_arrow([split]).to_pylist())


@pytest.mark.parametrize("same_sizes", [False, True])
def test_the_jvm_filter_finds_a_rows_file_by_its_size_only_when_no_other_file_has_that_size(
        spark: Any, tmp_path: Path, same_sizes: bool) -> None:
    _require_jar()
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    table = create_table(catalog, "s", _SCHEMA, ["id", "dt"], partition_keys=["dt"],
                         options={"bucket": "1", "deletion-vectors.enabled": "true", "rowkind.field": "kind"})

    def both(ids: list[int], tag: str) -> pa.Table:
        # The same rows in two partitions: files of equal size (the partition values have one length).
        rows = _batch(ids, tag)
        other = rows.set_column(1, "dt", pa.array(["d9" if same_sizes else "d10"] * len(ids)))
        return pa.concat_tables([rows.set_column(1, "dt", pa.array(["d1"] * len(ids))), other])

    write(table, both(list(range(200)), "a"))
    write(table, both(list(range(0, 200, 3)), "b"))
    splits = table.new_read_builder().new_scan().plan().splits()
    marked = {s.partition_values: f.file_size for s in splits for f in s.files
              if s.deletion_file(f.file_name) is not None}
    assert len(marked) == 2 and (len(set(marked.values())) == 1) == same_sizes
    df = read(spark, table)
    plan = _plan(df)
    assert "lakehouse_live_row" in plan
    assert ("file_name" in plan) == same_sizes and ("file_size" in plan) != same_sizes, plan
    assert sorted(tuple(r) for r in df.collect()) == _expected(table)
