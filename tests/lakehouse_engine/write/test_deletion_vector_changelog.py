"""`deletion-vectors.enabled` with `changelog-producer = lookup` (Paimon allows the two together):
the changelog compares each key with its live old row, never with a row a deletion vector marks,
and replayed it equals the table; the vectors read the same table."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, change_tuples, put, replay

_DV_LOOKUP = {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"}


def _per_commit(changes: list[tuple[int, str, int, Any]]) -> list[list[tuple[str, int, Any]]]:
    by: dict[int, list[tuple[str, int, Any]]] = {}
    for sid, kind, k, v in changes:
        by.setdefault(sid, []).append((kind, k, v))
    return [sorted(v, key=lambda c: (c[1], c[0])) for _, v in sorted(by.items())]


def _rows(table: Any, value: str = "v") -> dict[int, Any]:
    t = read(table)
    return dict(zip(t.column("id").to_pylist(), t.column(value).to_pylist(), strict=True))


@pytest.mark.parametrize("buckets", ["1", "2"])
def test_lookup_changelog_of_a_dv_table_compares_with_the_live_rows(catalog: Catalog, buckets: str) -> None:
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": buckets, "rowkind.field": "k", **_DV_LOOKUP})
    put(t, (1, "a", "+I"), (2, "b", "+I"), (3, "c", "+I"))
    put(t, (1, "a2", "+I"), (2, None, "-D"), (4, "d", "+I"))
    put(t, (3, "c2", "+I"))
    put(t, (2, "b2", "+I"), (3, "c3", "+I"))  # 2 was deleted: its old rows are all marked
    put(t, (1, None, "-D"), (3, "c4", "+I"))
    assert _per_commit(change_tuples(t)) == [
        [("+I", 1, "a"), ("+I", 2, "b"), ("+I", 3, "c")],
        [("+U", 1, "a2"), ("-U", 1, "a"), ("-D", 2, "b"), ("+I", 4, "d")],
        [("+U", 3, "c2"), ("-U", 3, "c")],
        [("+I", 2, "b2"), ("+U", 3, "c3"), ("-U", 3, "c2")],
        [("-D", 1, "a2"), ("+U", 3, "c4"), ("-U", 3, "c3")],
    ]
    assert replay(change_tuples(t)) == _rows(t) == {2: "b2", 3: "c4", 4: "d"}
    # Every commit left no level-0 file (the table is read through its vectors alone).
    files = [e.file for e in t.store.manifest_io().live_entries(t.latest_snapshot())]
    assert files and all(f.level > 0 for f in files)


def test_lookup_changelog_of_a_dv_aggregation_table_merges_only_live_rows(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.int64())])
    t = create_table(catalog, "agg", schema, primary_keys=["id"],
                     options={"bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
                              **_DV_LOOKUP})
    for n in (1, 2, 3):
        write(t, pa.table({"id": [7, 8], "n": [n, 10 * n]}, schema=schema))
    assert _rows(t, "n") == {7: 6, 8: 60}
    got = [(r["_snapshot_id"], r["_row_kind"], r["id"], r["n"]) for r in t.changes(0).to_pylist()]
    last = _per_commit(got)[-1]
    assert last == [("+U", 7, 6), ("-U", 7, 3), ("+U", 8, 60), ("-U", 8, 30)]
    assert replay(got) == _rows(t, "n")


def test_split_merged_row_count_leaves_out_the_rows_vectors_delete(catalog: Catalog) -> None:
    # Paimon's DataSplit.mergedRowCount: a raw-convertible split's rows less its vectors'
    # cardinalities; `row_count` (and the snapshot's totalRecordCount, the files' record counts)
    # still count every stored row, as Paimon's do.
    t = create_table(catalog, "counts", SCHEMA, primary_keys=["id"],
                     options={"bucket": "2", "rowkind.field": "k", "deletion-vectors.enabled": "true"})
    put(t, *[(i, f"a{i}", "+I") for i in range(20)])
    put(t, *[(i, f"b{i}", "+I") for i in range(0, 20, 2)], (1, None, "-D"), (3, None, "-D"))
    splits = t.new_read_builder().new_scan().plan().splits()
    assert any(d is not None for s in splits for d in s.data_deletion_files or [])
    assert all(s.merged_row_count_available() for s in splits)
    assert sum(s.merged_row_count() or 0 for s in splits) == len(_rows(t)) == 18
    assert sum(s.partial_merged_row_count() for s in splits) == 18
    stored = sum(s.row_count for s in splits)
    assert stored == sum(e.file.row_count for e in t.store.manifest_io().live_entries(t.latest_snapshot()))
    assert stored > 18
    assert t.latest_snapshot().total_record_count == stored


def test_a_streaming_writer_commits_lookup_changelog_on_a_dv_table_commit_after_commit(catalog: Catalog) -> None:
    # Each commit's lookup sees the bucket as the writer's previous commit left it (its level 0
    # compacted up, older rows marked): no conflict with itself, and each change is against the
    # previous value.
    t = create_table(catalog, "s", SCHEMA, primary_keys=["id"],
                     options={"bucket": "1", "rowkind.field": "k", **_DV_LOOKUP})
    wb = t.new_stream_write_builder()
    writer, commit = wb.new_write(), wb.new_commit()
    for i, v in enumerate(["a", "b", "c"]):
        writer.write_arrow(pa.Table.from_pylist([{"id": 1, "v": v, "k": "+I"}, {"id": 2 + i, "v": v, "k": "+I"}],
                                                schema=SCHEMA))
        commit.commit(writer.prepare_commit(), i)
    writer.close()
    commit.close()
    assert _per_commit(change_tuples(t)) == [
        [("+I", 1, "a"), ("+I", 2, "a")],
        [("+U", 1, "b"), ("-U", 1, "a"), ("+I", 3, "b")],
        [("+U", 1, "c"), ("-U", 1, "b"), ("+I", 4, "c")],
    ]
    assert replay(change_tuples(t)) == _rows(t) == {1: "c", 2: "a", 3: "b", 4: "c"}
