"""Reading deletion-vector tables: a table Paimon 0.9 (Java) wrote, read snapshot by snapshot.

The fixture `data/java_dv_table` is a primary-key table (`id`, 2 buckets, `deletion-vectors.enabled`)
that Paimon 0.9 wrote through tests/java/test_deletion_vectors_java.py's steps: 200 inserts, 150
upserts, a delete of every 7th id, a full compaction, 40 more upserts (nine snapshots: each write
commits level 0, then its lookup compaction). `java_dv_table_reads.json` is Paimon's read of
each snapshot.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.read.deletion_vectors import DeletionVectorReader
from lakehouse_engine.read.predicate import PredicateBuilder
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.read.dv_fixture import copy_table, rewrite_vectors

DATA = Path(__file__).parent / "data"
JAVA_READS = {int(k): v for k, v in json.loads((DATA / "java_dv_table_reads.json").read_text()).items()}


@pytest.fixture()
def table(tmp_path: Path) -> FileStoreTable:
    shutil.copytree(DATA / "java_dv_table", tmp_path / "db.db" / "t")
    return Catalog(str(tmp_path)).get_table("db.t")


def _java(snapshot: int) -> list[tuple[object, ...]]:
    return sorted(tuple(r[1:]) for r in JAVA_READS[snapshot])


def _ours(t: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in t.to_pylist())


@pytest.mark.parametrize("snapshot", sorted(JAVA_READS))
def test_every_snapshot_reads_as_paimon_reads_it(table: FileStoreTable, snapshot: int) -> None:
    assert _ours(read(table, snapshot_id=snapshot)) == _java(snapshot)


def test_splits_are_one_file_per_section_above_level_zero_with_their_vectors(table: FileStoreTable) -> None:
    splits = table.new_read_builder().with_snapshot(6).new_scan().plan().splits()
    files = [f for s in splits for f in s.files]
    assert files and all(f.level > 0 for f in files)
    assert all(len(section) == 1 for s in splits for section in s.sections)
    vectors = [d for s in splits for d in s.data_deletion_files or [] if d is not None]
    assert vectors and all(d.dv_index_path.rsplit("/", 1)[-1].startswith("index-") for d in vectors)
    # The vectors delete as many rows as the files hold beyond what Paimon reads (0.9 records no
    # cardinality in the ranges: count the marks).
    assert all(d.cardinality is None for d in vectors)
    reader = DeletionVectorReader(table.file_io)
    deleted = sum(int((~reader.keep_mask(d, f.row_count)).sum())
                  for s in splits if s.data_deletion_files is not None
                  for f, d in zip(s.files, s.data_deletion_files, strict=True)
                  if d is not None)
    assert sum(f.row_count for f in files) - deleted == len(JAVA_READS[6])
    # Without the cardinality, Paimon's merged row count is not available from metadata.
    with_vectors = [s for s in splits if any(d is not None for d in s.data_deletion_files or [])]
    assert with_vectors and not any(s.merged_row_count_available() for s in with_vectors)
    assert with_vectors[0].merged_row_count() is None  # pypaimon's "not known"


def test_level_zero_of_a_dv_table_is_invisible(table: FileStoreTable) -> None:
    # Snapshot 1 holds only the first write's level-0 files: not yet looked up, so not read.
    assert {e.file.level for e in table.store.manifest_io().live_entries(table.snapshot(1))} == {0}
    assert read(table, snapshot_id=1).num_rows == 0


def test_predicates_and_projections_apply_after_the_vectors(table: FileStoreTable) -> None:
    pb = PredicateBuilder(table.schema.field_names)
    got = read(table, snapshot_id=9, projection=["v"], predicate=pb.between("id", 140, 160))
    expected = sorted(r[3] for r in JAVA_READS[9] if 140 <= r[1] <= 160)
    assert sorted(got.column("v").to_pylist()) == expected


def test_a_flipped_vector_byte_is_a_corrupt_file_naming_the_index_file(table: FileStoreTable) -> None:
    splits = table.new_read_builder().with_snapshot(9).new_scan().plan().splits()
    deletion = next(d for s in splits for d in s.data_deletion_files or [] if d is not None)
    path = Path(deletion.dv_index_path)
    data = bytearray(path.read_bytes())
    data[deletion.offset + 6] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=path.name):
        read(table, snapshot_id=9)


def test_a_missing_index_file_is_a_corrupt_file_naming_it(table: FileStoreTable) -> None:
    splits = table.new_read_builder().with_snapshot(9).new_scan().plan().splits()
    deletion = next(d for s in splits for d in s.data_deletion_files or [] if d is not None)
    Path(deletion.dv_index_path).unlink()
    with pytest.raises(CorruptFileError, match=Path(deletion.dv_index_path).name):
        read(table, snapshot_id=9)


def test_index_manifests_with_the_ranges_under_either_name_read_alike(tmp_path: Path) -> None:
    for ranges in ("ours", "old"):
        copy_table(tmp_path / ranges, ranges)
        table = Catalog(str(tmp_path / ranges)).get_table("db.t")
        assert _ours(read(table, snapshot_id=9)) == _java(9), ranges


def test_a_filter_skips_files_whose_value_statistics_exclude_it(table: FileStoreTable) -> None:
    pb = PredicateBuilder(table.schema.field_names)
    everything = table.new_read_builder().with_snapshot(9).new_scan().plan().splits()
    # `v` is no key field: only the files' value statistics can skip files for it.
    only_c = pb.equal("v", "c300")
    pruned = table.new_read_builder().with_snapshot(9).with_filter(only_c).new_scan().plan().splits()
    assert 0 < sum(len(s.files) for s in pruned) < sum(len(s.files) for s in everything)
    assert read(table, snapshot_id=9, predicate=only_c).to_pylist() == [{"id": 300, "dt": "d0", "v": "c300"}]


@pytest.mark.parametrize("target_size", [30, 2 << 20])
def test_vectors_rewritten_by_our_index_file_writer_read_alike(tmp_path: Path, target_size: int) -> None:
    table_dir = copy_table(tmp_path)
    written = rewrite_vectors(table_dir, target_size)
    table = Catalog(str(tmp_path)).get_table("db.t")
    for snapshot in sorted(JAVA_READS):
        assert _ours(read(table, snapshot_id=snapshot)) == _java(snapshot), snapshot
    rolled = False
    for snapshot in sorted(JAVA_READS):
        splits = table.new_read_builder().with_snapshot(snapshot).new_scan().plan().splits()
        files = {(s.bucket, d.dv_index_path) for s in splits for d in s.data_deletion_files or [] if d}
        rolled |= len(files) > len({b for b, _ in files})
    # A small target size rolls a bucket's vectors over several files; the default does not.
    assert rolled == (target_size == 30) and written > 0


def test_expiry_tags_rollback_and_orphan_removal_keep_the_vectors_snapshots_need(table: FileStoreTable) -> None:
    table.create_tag("after-delete", snapshot_id=6)
    # (retain_min 2: the fixture's snapshots are older than the default time retention.)
    assert table.expire_snapshots(retain_max=2, retain_min=2) == 7
    index_dir = Path(table.path_factory.index_dir)
    # Vectors only expired snapshots used are gone; those of snapshots 8, 9 and the tag remain.
    assert table.remove_orphan_files(older_than=2**62) == []
    for snapshot in (8, 9):
        assert _ours(read(table, snapshot_id=snapshot)) == _java(snapshot)
    tagged = table.new_read_builder().with_tag("after-delete")
    assert _ours(tagged.new_read().to_arrow(tagged.new_scan().plan().splits())) == _java(6)
    live = {d.dv_index_path.rsplit("/", 1)[-1] for n in (8, 9)
            for s in table.new_read_builder().with_snapshot(n).new_scan().plan().splits()
            for d in s.data_deletion_files or [] if d}
    assert live <= {p.name for p in index_dir.iterdir()}
    table.rollback_to("after-delete")
    assert _ours(read(table)) == _java(6)
