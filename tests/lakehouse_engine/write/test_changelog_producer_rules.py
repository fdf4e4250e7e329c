"""The changelog producers with the rest of a table's options, against Paimon's definition:
combinations Paimon refuses, `sequence.field`, the aggregation engine, `lookup-wait`, and schema
evolution (changelog rows read by field id in the schema of the read)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.schema_change import SchemaChange
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put

SEQ = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()), pa.field("s", pa.int64())])


def _changes(table: Any, start: int = 0, *columns: str) -> list[tuple[Any, ...]]:
    cols = columns or ("id", "v")
    return [(r["_snapshot_id"], r["_row_kind"], *(r[c] for c in cols)) for r in table.changes(start).to_pylist()]


@pytest.mark.parametrize(("options", "match"), [
    ({"changelog-producer": "input"}, "changelog-producer"),
    ({"changelog-producer": "full-compaction"}, "changelog-producer"),
    ({"sequence.field": "s"}, "sequence.field"),
])
def test_first_row_refuses_what_paimon_refuses(catalog: Catalog, options: dict[str, str], match: str) -> None:
    """Paimon's SchemaValidation: first-row takes only the none and lookup producers (an input
    changelog would list the later rows first-row ignores) and no sequence field."""
    with pytest.raises(InvalidOptionError, match=match):
        create_table(catalog, "t", SEQ, ["id"], options={"bucket": "1", "merge-engine": "first-row", **options})
    assert catalog.list_tables("db") == []
    create_table(catalog, "ok", SEQ, ["id"], options={"bucket": "1", "merge-engine": "first-row"})
    with pytest.raises(InvalidOptionError, match=match):
        catalog.alter_table("db.ok", [SchemaChange.set_option(k, v) for k, v in options.items()])


@pytest.mark.parametrize("dedupe", [False, True])
def test_a_late_sequence_number_changes_nothing_and_the_lookup_says_so(catalog: Catalog, dedupe: bool) -> None:
    """Key 1's new record carries a lower `sequence.field` value: the table keeps the old row,
    and the changelog holds -U/+U of that old row (Paimon's lookup wrapper), or nothing with
    `changelog-producer.row-deduplicate`. Key 2's higher one is a real update."""
    t = create_table(catalog, "t", SEQ, ["id"], options={
        "bucket": "1", "changelog-producer": "lookup", "sequence.field": "s",
        "changelog-producer.row-deduplicate": str(dedupe).lower()})
    write(t, pa.table({"id": [1, 2], "v": ["a", "b"], "s": [5, 5]}, schema=SEQ))
    first = t.latest_snapshot().id
    write(t, pa.table({"id": [1, 2], "v": ["late", "new"], "s": [3, 9]}, schema=SEQ))
    assert sorted((r["id"], r["v"]) for r in read(t).to_pylist()) == [(1, "a"), (2, "new")]
    unchanged = [] if dedupe else [("-U", 1, "a"), ("+U", 1, "a")]
    assert [c[1:] for c in _changes(t, first)] == unchanged + [("-U", 2, "b"), ("+U", 2, "new")]


def test_the_lookup_changelog_of_an_aggregation_table_holds_the_sums_before_and_after(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.int64())])
    t = create_table(catalog, "t", schema, ["id"], options={
        "bucket": "1", "changelog-producer": "lookup", "merge-engine": "aggregation",
        "fields.n.aggregate-function": "sum"})
    write(t, pa.table({"id": [1], "n": [5]}, schema=schema))
    write(t, pa.table({"id": [1, 2, 1], "n": [3, 4, 10]}, schema=schema))
    assert [c[1:] for c in _changes(t, 0, "id", "n")] == [
        ("+I", 1, 5), ("-U", 1, 5), ("+U", 1, 18), ("+I", 2, 4)]


@pytest.mark.parametrize("wait", ["true", "false"])
def test_lookup_wait_either_way_commits_the_changelog_with_the_write(catalog: Catalog, wait: str) -> None:
    """`lookup-wait` = false lets Paimon commit a lookup changelog later; this engine always
    computes it before the commit, so both settings give the same snapshots and changes."""
    t = keyed_table(catalog, **{"changelog-producer": "lookup", "lookup-wait": wait})
    put(t, (1, "a", "+I"))
    put(t, (1, "b", "+I"), (2, "c", "+I"))
    assert [(s.id, s.commit_kind, bool(s.changelog_manifest_list)) for s in t.snapshots()] == [
        (1, "APPEND", False), (2, "COMPACT", True), (3, "APPEND", False), (4, "COMPACT", True)]
    assert [c[:4] for c in _changes(t)] == [(2, "+I", 1, "a"), (4, "-U", 1, "a"), (4, "+U", 1, "b"),
                                            (4, "+I", 2, "c")]


@pytest.mark.parametrize("producer", ["input", "lookup", "full-compaction"])
def test_changelog_written_before_a_rename_and_an_added_column_reads_by_field_id(
        catalog: Catalog, producer: str) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = create_table(catalog, "t", schema, ["id"], options={"bucket": "1", "changelog-producer": producer})
    write(t, pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=schema))
    if producer == "full-compaction":
        t.compact(full=True)
    catalog.alter_table("db.t", [SchemaChange.rename_column("v", "w"), SchemaChange.add_column("x", "INT")])
    t = catalog.get_table("db.t")
    write(t, pa.table({"id": [1, 3], "w": ["a2", "c"], "x": pa.array([7, 8], pa.int32())}))
    if producer == "full-compaction":
        t.compact(full=True)
    got = [c[1:] for c in _changes(t, 0, "id", "w", "x")]
    if producer == "input":
        assert got == [("+I", 1, "a", None), ("+I", 2, "b", None), ("+I", 1, "a2", 7), ("+I", 3, "c", 8)]
    else:
        assert got == [("+I", 1, "a", None), ("+I", 2, "b", None),
                       ("-U", 1, "a", None), ("+U", 1, "a2", 7), ("+I", 3, "c", 8)]
    stream = t.copy({"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}).new_stream_read_builder()
    scan, rd = stream.new_streaming_scan(), stream.new_read()
    streamed = []
    for _ in range(6):
        streamed += [(r["id"], r["w"], r["x"]) for r in rd.to_arrow(scan.plan().splits()).to_pylist()]
    assert streamed == [c[1:] for c in got]
