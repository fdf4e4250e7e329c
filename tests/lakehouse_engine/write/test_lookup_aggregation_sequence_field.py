"""The `lookup` changelog of an aggregation table with `sequence.field`: a key's row is its records
merged in sequence-field order (then sequence number), each field by its aggregate function, as
Paimon merges them: per key the level-0 records and the newest record above level 0, the key's
merged value (`mergetree.lookup_merge`). The changelog replays strictly to the table (Java sweep
seed 1150)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.read.changes_helpers import strict_replay

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("a", pa.string()),
                    pa.field("n", pa.int64()), pa.field("s", pa.int64()), pa.field("k", pa.string())])
OPTIONS = {"changelog-producer": "lookup", "merge-engine": "aggregation", "sequence.field": "s",
           "rowkind.field": "k", "fields.a.aggregate-function": "last_non_null_value",
           "fields.n.aggregate-function": "sum"}

Row = tuple[int, str | None, int, int, str]  # id, a, n, s, row kind


def _put(table: FileStoreTable, *rows: Row) -> None:
    write(table, pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA))


def _levels(table: FileStoreTable) -> list[int]:
    return sorted(e.file.level for e in table.store.manifest_io().live_entries(table.latest_snapshot()))


def _changes(table: FileStoreTable) -> list[tuple[str, int, tuple[Any, ...]]]:
    """(row kind, id, (a, n, s)) of the whole changelog, in commit order, -U before +U of a key."""
    rows = table.changes(0).to_pylist()
    rows.sort(key=lambda r: (r["_snapshot_id"], r["id"], r["_row_kind"] not in ("-U", "-D")))
    return [(r["_row_kind"], r["id"], (r["a"], r["n"], r["s"])) for r in rows]


def _table(table: FileStoreTable) -> dict[int, tuple[Any, ...]]:
    return {r["id"]: (r["a"], r["n"], r["s"]) for r in read(table).to_pylist()}


def _by_sequence_field(records: list[Row]) -> tuple[Any, ...]:
    """Paimon's definition for inserts: records in sequence-field order (ties: written order),
    `a` the last non-null value, `n` the sum, `s` the last."""
    ordered = sorted(enumerate(records), key=lambda ir: (ir[1][3], ir[0]))
    a = None
    for _, r in ordered:
        a = r[1] if r[1] is not None else a
    return a, sum(r[2] for r in records), ordered[-1][1][3]


def test_a_record_between_two_older_levels_merges_with_the_newest_merged_value(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", **OPTIONS})
    written: list[Row] = [(1, None, 10, 2, "+I")]
    _put(table, written[0])  # its commit takes it up: the top run
    written.append((1, "a", 1, 0, "+I"))
    _put(table.copy({"write-only": "true"}), written[-1])
    table.compact(level0_only=True)  # below the top run, merged with the value looked up there
    assert _levels(table) == [4, 5]  # Paimon's layout: key 1 in both, level 4 its merged value
    assert _table(table) == {1: _by_sequence_field(written)} == {1: ("a", 11, 2)}
    written.append((1, "c", 100, 1, "+I"))  # sorts between the two: a@0, c@1, null@2
    _put(table, written[-1])
    # As Paimon merges it (LookupMergeFunction): the merged row (a, 11, s=2) with c@1, which sorts
    # before it: `a` stays a (merged one by one it would be c; the documented difference of
    # aggregation with a sequence field).
    assert _table(table) == {1: ("a", 111, 2)}
    assert _changes(table)[-2:] == [("-U", 1, ("a", 11, 2)), ("+U", 1, ("a", 111, 2))]
    assert strict_replay(_changes(table)) == _table(table)


def test_seed_1150_of_the_java_sweep_replays_to_the_table(catalog: Catalog) -> None:
    """The sweep's seed 1150 (dynamic bucket, retractions of absent keys): its changelog gave key 1
    `+U (x, -9, s=2)` where the table read `(z, -9, 2)`, then `-U` of the `z` row."""
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "-1", "dynamic-bucket.target-row-num": "5", **OPTIONS})
    write_only = table.copy({"write-only": "true"})
    ops: list[tuple[FileStoreTable | str, list[Row]]] = [
        (table, [(2, "x", 5, 1, "-D"), (1, "w", 9, 1, "-D"), (1, "z", 8, 2, "-D"), (5, "y", 8, 2, "+I")]),
        (write_only, [(2, "y", 3, 2, "+I"), (5, "y", 4, 0, "-D"), (1, "x", 1, 0, "+I"), (2, "z", 7, 1, "+U")]),
        ("compact-level0", []),
        (table, [(7, "x", 4, 1, "-D"), (5, "z", 5, 2, "+I"), (4, "w", 4, 1, "-D"), (1, "z", 7, 1, "+I"),
                 (0, "w", 8, 0, "+U")]),
        (table, [(5, "x", 8, 1, "+U"), (3, "z", 6, 0, "+U")]),
        (write_only, [(4, "x", 1, 1, "+I"), (5, "w", 6, 0, "+I"), (4, "y", 7, 3, "+I"), (3, "x", 4, 0, "+U"),
                      (5, "z", 0, 3, "+I"), (1, "x", 9, 0, "-D")]),
        ("full", []),
    ]
    for target, rows in ops:
        if target == "compact-level0":
            table.compact(level0_only=True)
        elif target == "full":
            table.compact(full=True)
        else:
            assert isinstance(target, FileStoreTable)
            _put(target, *rows)
    assert strict_replay(_changes(table)) == _table(table)
    # Key 1: x@0 (then its retraction), w@1 retracted, z@1, z@2 retracted; the two retractions of
    # the first commit merged into one row (null, -17, s=2). The level-0-only compaction merges x@0
    # into that row above level 0 (one record per key there, `mergetree.compact.lookup_levels`, as
    # Paimon's lookup compaction keeps it): (x, -16, s=2), which sorts after z@1, so `a` stays x
    # (merged one by one, z@1 would follow x@0: z). Pre-merged rows order by their largest
    # sequence value, the documented difference of aggregation with a sequence field.
    assert _table(table)[1] == ("x", 1 - 9 - 9 + 7 - 8, 2)
