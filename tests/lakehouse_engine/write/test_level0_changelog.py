"""The `lookup` changelog of a compaction taking level 0 up (`write.level0_changelog`) is Paimon's
(LookupChangelogMergeFunctionWrapper): every level-0 record of a key merged with the key's row above
level 0, ONE change per key, however many write-only commits wrote the key."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.read.scan import TableScan
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.changelog_producers import LookupChangelog
from lakehouse_engine.write.level0_changelog import Level0Changelog

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64()),
                    pa.field("w", pa.int64()), pa.field("rk", pa.string())])
KINDS = {0: "+I", 1: "-U", 2: "+U", 3: "-D"}


def _table(tmp_path: Any, **options: str) -> FileStoreTable:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "rk", "changelog-producer": "lookup", **options}))
    return catalog.get_table("db.t")


def _commit(table: FileStoreTable, rows: list[tuple[Any, ...]], write_only: bool = True) -> None:
    """Commit rows (id, v, kind), w = 10 v, or (id, v, w, kind)."""
    full = [r if len(r) == 4 else (r[0], r[1], r[1] * 10, r[2]) for r in rows]
    writing = table.copy({"write-only": "true"}) if write_only else table
    wb = writing.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": [r[0] for r in full], "v": [r[1] for r in full], "w": [r[2] for r in full],
                            "rk": [r[3] for r in full]}, schema=SCHEMA))
    c.commit(w.prepare_commit())


def _compaction_changes(table: FileStoreTable) -> list[tuple[str, int, Any, Any]]:
    before = table.latest_snapshot()
    table.compact()
    after = table.latest_snapshot()
    assert after is not None and after.commit_kind == "COMPACT"
    start = before.id if before is not None else 0
    return [(r["_row_kind"], r["id"], r["v"], r["w"]) for r in table.changes(start).to_pylist()]


#: Per engine: the options, the two write-only commits' (v, w) of key 1, the compaction's changes.
ONE_CHANGE: dict[str, tuple[dict[str, str], list[tuple[Any, Any]], list[tuple[str, int, Any, Any]]]] = {
    # Paimon: the newest record of the key, against nothing above level 0: +I of it.
    "deduplicate": ({}, [(1, 10), (2, 20)], [("+I", 1, 2, 20)]),
    "deletion-vectors": ({"deletion-vectors.enabled": "true"}, [(1, 10), (2, 20)], [("+I", 1, 2, 20)]),
    # The records merged: the second commit's null v keeps the first's, its w wins.
    "partial-update": ({"merge-engine": "partial-update"}, [(1, 10), (None, 20)], [("+I", 1, 1, 20)]),
    "deletion-vectors, partial-update": ({"deletion-vectors.enabled": "true", "merge-engine": "partial-update"},
                                         [(1, 10), (None, 20)], [("+I", 1, 1, 20)]),
    "aggregation": ({"merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
                     "fields.w.aggregate-function": "sum"}, [(1, 10), (2, 20)], [("+I", 1, 3, 30)]),
    # The first row of a new key only.
    "first-row": ({"merge-engine": "first-row"}, [(1, 10), (2, 20)], [("+I", 1, 1, 10)]),
    # `sequence.field` = w: the record with the larger w wins, the older one here.
    "sequence field": ({"sequence.field": "w"}, [(2, 20), (1, 10)], [("+I", 1, 2, 20)]),
}


@pytest.mark.parametrize("engine", list(ONE_CHANGE))
def test_a_key_in_two_write_only_commits_gives_one_change_in_the_compaction(tmp_path: Any, engine: str) -> None:
    options, commits, expected = ONE_CHANGE[engine]
    table = _table(tmp_path, **options)
    for v, w in commits:
        _commit(table, [(1, v, w, "+I")])
    # Before Paimon's rule: two changes (+I of the first row, then -U/+U).
    assert _compaction_changes(table) == expected


def test_a_sequence_field_keeps_the_older_record_and_the_change_says_so(tmp_path: Any) -> None:
    table = _table(tmp_path, **{"sequence.field": "v"})
    _commit(table, [(1, 5, "+I")], write_only=False)  # above level 0
    _commit(table, [(1, 9, "+I")])
    _commit(table, [(1, 7, "+I")])
    # v = 9 wins over both; one update from the row above level 0 to it.
    assert _compaction_changes(table) == [("-U", 1, 5, 50), ("+U", 1, 9, 90)]


@pytest.mark.parametrize("dv", [False, True])
def test_the_one_change_compares_the_row_above_level_0_with_the_merged_level_0(tmp_path: Any, dv: bool) -> None:
    table = _table(tmp_path, **({"deletion-vectors.enabled": "true"} if dv else {}))
    _commit(table, [(1, 1, "+I"), (2, 1, "+I"), (3, 1, "+I")], write_only=False)
    _commit(table, [(1, 2, "+I"), (2, 2, "+I"), (4, 2, "+I"), (5, 2, "+I")])
    _commit(table, [(1, 3, "+I"), (2, 0, "-D"), (4, 0, "-D"), (5, 3, "+I"), (6, 3, "+I"), (6, 0, "-D")])
    assert _compaction_changes(table) == [
        ("-U", 1, 1, 10), ("+U", 1, 3, 30),   # two updates: one
        ("-D", 2, 1, 10),                     # updated, then deleted: the delete of the row above
        # 3: not in level 0, no change; 4: inserted then deleted in level 0: nothing
        ("+I", 5, 3, 30),                     # inserted, updated: one insert of the last row
        # 6: inserted and deleted in one commit: nothing
    ]


def test_row_deduplicate_gives_nothing_when_the_merged_level_0_equals_the_row_above(tmp_path: Any) -> None:
    table = _table(tmp_path, **{"changelog-producer.row-deduplicate": "true"})
    _commit(table, [(1, 1, "+I"), (2, 1, "+I")], write_only=False)
    _commit(table, [(1, 2, "+I"), (2, 2, "+I")])
    _commit(table, [(1, 1, "+I"), (2, 3, "+I")])
    # Key 1 went back to the row above level 0: no -U/+U pair (two changes would have given two).
    assert _compaction_changes(table) == [("-U", 2, 1, 10), ("+U", 2, 3, 30)]


def test_many_key_ranges_in_a_tiny_merge_budget_give_the_same_one_change_per_key_in_key_order(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(tmp_path, **{"sort-spill-buffer-size": "1"})  # every batch at its floor: many ranges
    ranges = []
    record_changes = LookupChangelog.record_changes

    def counted(self: LookupChangelog, *args: Any, **kwargs: Any) -> pa.Table:
        ranges.append(args[2].num_rows)
        return record_changes(self, *args, **kwargs)

    monkeypatch.setattr(LookupChangelog, "record_changes", counted)
    n = 3000
    _commit(table, [(k, 1, "+I") for k in range(0, n, 2)], write_only=False)
    _commit(table, [(k, 2, "+I") for k in range(n)])
    _commit(table, [(k, 3, "+I") for k in range(0, n, 3)])
    changes = _compaction_changes(table)
    assert len(ranges) > 10 and max(ranges) < 1000  # the level-0 records were looked up range by range
    expected: list[tuple[str, int, Any, Any]] = []
    for k in range(n):
        last = 3 if k % 3 == 0 else 2
        if k % 2 == 0:
            expected += [("-U", k, 1, 10), ("+U", k, last, last * 10)]
        else:
            expected.append(("+I", k, last, last * 10))
    assert changes == expected


def test_a_stretch_after_a_file_its_flush_looked_up_is_compared_with_it(tmp_path: Any) -> None:
    """Level-0 files between two a writer's flush already gave the changelog of are compared with
    the older ones too: one change per key per stretch, oldest stretch first."""
    table = _table(tmp_path)
    _commit(table, [(1, 1, "+I")], write_only=False)  # above level 0
    for v in (2, 3, 4, 5):
        _commit(table, [(1, v, "+I"), (v, v, "+I")])
    scan = TableScan(table.store, None, None)
    (split,) = scan.plan().splits()
    files = [f for section in split.sections for f in section]
    level0 = sorted((f for f in files if f.level == 0), key=lambda f: f.max_sequence_number)
    upper = [f for f in files if f.level > 0]
    assert len(level0) == 4
    # The third file's changelog was given (as by its writer's flush): files 1-2, then file 4.
    written = Level0Changelog(table.store, given=[level0[2].file_name]).changelog(
        table.store.partition_codec().from_binary(split.partition), 0, level0, upper)
    reader = table.store.file_reader()
    columns = ["id", "v", SEQUENCE_NUMBER, VALUE_KIND]
    file_schema = table.store.schema.data_file_arrow_schema()
    rows = []
    for f in written:
        t = reader.read(f"{split.bucket_path}/{f.file_name}", columns,
                        pa.schema([file_schema.field(c) for c in columns]), f)
        rows += [(KINDS[r[VALUE_KIND]], r["id"], r["v"]) for r in t.to_pylist()]
    assert rows == [("-U", 1, 1), ("+U", 1, 3), ("+I", 2, 2), ("+I", 3, 3),
                    ("-U", 1, 4), ("+U", 1, 5), ("+I", 5, 5)]
