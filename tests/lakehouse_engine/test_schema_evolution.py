"""Schema evolution: `catalog.alter_table` with every change kind, Paimon's rules, and reads of files
written under older schema versions (mapped by field id) in every read and rewrite path."""

from __future__ import annotations

import os
import threading
from decimal import Decimal

import pyarrow as pa
import pytest

from lakehouse_engine import (
    Catalog,
    ColumnAlreadyExistError,
    ColumnNotExistError,
    CommitConflictError,
    InvalidOptionError,
    Move,
    SchemaChange,
    SchemaError,
)
from lakehouse_engine.errors import UnsupportedError
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, rows, write

T = "db.t"
BASE = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("dt", pa.string(), nullable=False),
    pa.field("qty", pa.int32()),
    pa.field("name", pa.string()),
])


def base_rows(ids: list[int], dt: str = "d1") -> pa.Table:
    return pa.table({"id": ids, "dt": [dt] * len(ids), "qty": [i * 10 for i in ids],
                     "name": [f"n{i}" for i in ids]}, schema=BASE)


@pytest.fixture
def table(catalog: Catalog) -> FileStoreTable:
    t = create_table(catalog, "t", BASE, primary_keys=["id", "dt"], partition_keys=["dt"],
                     options={"bucket": "2"})
    write(t, base_rows([1, 2, 3]))
    return t


def schema_files(catalog: Catalog) -> list[str]:
    return sorted(os.listdir(f"{catalog.table_path(T)}/schema"))


def alter(catalog: Catalog, *changes: SchemaChange) -> FileStoreTable:
    catalog.alter_table(T, list(changes))
    return catalog.get_table(T)


def all_rows(t: FileStoreTable, **kw: object) -> list[dict]:
    return rows(read(t, **kw), "id")  # type: ignore[arg-type]


# ---- every change kind ---------------------------------------------------------------------


def test_add_column_reads_old_rows_as_null_and_new_rows_with_values(catalog: Catalog, table) -> None:
    t = alter(catalog, SchemaChange.add_column("price", pa.decimal128(10, 2), comment="unit price"))
    assert t.schema.id == 1 and t.schema.field_names == ["id", "dt", "qty", "name", "price"]
    assert t.schema.field("price").id == 4 and t.schema.highest_field_id == 4
    assert t.schema.field("price").description == "unit price"
    new = base_rows([3, 4]).append_column("price", pa.array([Decimal("1.50"), None], pa.decimal128(10, 2)))
    write(t, new)
    got = {r["id"]: r["price"] for r in all_rows(t)}
    assert got == {1: None, 2: None, 3: Decimal("1.50"), 4: None}
    assert schema_files(catalog) == ["schema-0", "schema-1"]


@pytest.mark.parametrize("move, order", [
    (Move.first("c"), ["c", "id", "dt", "qty", "name"]),
    (Move.after("c", "id"), ["id", "c", "dt", "qty", "name"]),
    (Move.before("c", "name"), ["id", "dt", "qty", "c", "name"]),
    (Move.last("c"), ["id", "dt", "qty", "name", "c"]),
])
def test_add_column_with_a_move(catalog: Catalog, table, move: Move, order: list[str]) -> None:
    t = alter(catalog, SchemaChange.add_column("c", "INT", move=move))
    assert t.schema.field_names == order
    assert read(t).column_names == order
    assert read(t).column("c").null_count == 3


def test_rename_column_reads_old_files_by_field_id(catalog: Catalog, table) -> None:
    t = alter(catalog, SchemaChange.rename_column("name", "label"))
    assert t.schema.field("label").id == 3
    write(t, base_rows([4]).rename_columns(["id", "dt", "qty", "label"]))
    assert [r["label"] for r in all_rows(t)] == ["n1", "n2", "n3", "n4"]
    assert sorted(read(t, projection=["label"]).column("label").to_pylist()) == ["n1", "n2", "n3", "n4"]


def test_drop_column_is_gone_and_a_readded_column_of_that_name_starts_empty(catalog: Catalog, table) -> None:
    t = alter(catalog, SchemaChange.drop_column("name"))
    assert t.schema.field_names == ["id", "dt", "qty"]
    assert read(t).column_names == ["id", "dt", "qty"]
    t = alter(catalog, SchemaChange.add_column("name", pa.string()))
    assert t.schema.field("name").id == 4  # field ids are never reused
    assert read(t).column("name").null_count == 3


def test_update_column_type_widens_old_values(catalog: Catalog, table) -> None:
    t = alter(catalog, SchemaChange.update_column_type("qty", pa.int64()))
    assert str(t.schema.field("qty").type) == "BIGINT"
    got = read(t)
    assert got.schema.field("qty").type == pa.int64()
    assert sorted(got.column("qty").to_pylist()) == [10, 20, 30]
    write(t, base_rows([9]).set_column(2, "qty", pa.array([2**40], pa.int64())))
    assert sorted(read(t).column("qty").to_pylist()) == [10, 20, 30, 2**40]


@pytest.mark.parametrize("old, new, value, expected", [
    (pa.int32(), "DOUBLE", 7, 7.0),
    (pa.int64(), "DOUBLE", 2**53 + 1, float(2**53)),  # rounds, as Paimon's cast does
    (pa.int32(), "FLOAT", 2**30 + 1, float(2**30)),
    (pa.float32(), "DOUBLE", 1.5, 1.5),
    (pa.int32(), "DECIMAL(12, 2)", 7, Decimal("7.00")),
    (pa.decimal128(5, 2), "DECIMAL(9, 3)", Decimal("1.25"), Decimal("1.250")),
    (pa.int32(), "STRING", 7, "7"),
    (pa.int8(), "SMALLINT", 7, 7),
])
def test_allowed_type_changes_cast_old_files(catalog: Catalog, old: pa.DataType, new: str,
                                             value: object, expected: object) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", old)])
    t = create_table(catalog, "t", schema, primary_keys=["id"], options={"bucket": "1"})
    write(t, pa.table({"id": [1], "v": pa.array([value], old)}))
    catalog.alter_table(T, [SchemaChange.update_column_type("v", new)])
    assert read(catalog.get_table(T)).column("v").to_pylist() == [expected]


def test_nullability_and_comments(catalog: Catalog, table) -> None:
    t = alter(catalog, SchemaChange.update_column_comment("qty", "how many"),
              SchemaChange.update_comment("orders"),
              SchemaChange.update_column_nullability("qty", True))
    assert t.schema.field("qty").description == "how many" and t.schema.comment == "orders"
    assert len(schema_files(catalog)) == 2  # several changes, one schema version


def test_update_column_position(catalog: Catalog, table) -> None:
    t = alter(catalog, SchemaChange.update_column_position(Move.first("name")))
    assert read(t).column_names == ["name", "id", "dt", "qty"]
    t = alter(catalog, SchemaChange.update_column_position(Move.after("name", "qty")))
    assert t.schema.field_names == ["id", "dt", "qty", "name"]


def test_set_and_remove_option(catalog: Catalog, table) -> None:
    t = alter(catalog, SchemaChange.set_option("snapshot.num-retained.min", "3"))
    assert t.schema.options["snapshot.num-retained.min"] == "3"
    t = alter(catalog, SchemaChange.remove_option("snapshot.num-retained.min"))
    assert "snapshot.num-retained.min" not in t.schema.options


def test_alter_of_a_missing_table(catalog: Catalog) -> None:
    from lakehouse_engine import TableNotExistError

    with pytest.raises(TableNotExistError):
        catalog.alter_table("db.nope", [SchemaChange.drop_column("x")])
    catalog.alter_table("db.nope", [SchemaChange.drop_column("x")], ignore_if_not_exists=True)


# ---- rules: each failure names the column and changes nothing --------------------------------


@pytest.mark.parametrize("change, error, words", [
    (SchemaChange.drop_column("id"), SchemaError, "'id' is part of the primary key"),
    (SchemaChange.drop_column("dt"), SchemaError, "'dt' is a partition key"),
    (SchemaChange.rename_column("id", "key"), SchemaError, "'id' is part of the primary key"),
    (SchemaChange.rename_column("dt", "day"), SchemaError, "'dt' is a partition key"),
    (SchemaChange.update_column_type("id", "STRING"), SchemaError, "'id' is part of the primary key"),
    (SchemaChange.update_column_type("dt", "VARCHAR(10)"), SchemaError, "'dt' is a partition key"),
    (SchemaChange.update_column_type("qty", "SMALLINT"), SchemaError, "cannot be converted to SMALLINT"),
    (SchemaChange.update_column_type("name", "INT"), SchemaError, "cannot be converted to INT"),
    (SchemaChange.update_column_type("qty", "INT NOT NULL"), SchemaError, "NOT NULL"),
    (SchemaChange.update_column_nullability("qty", False), SchemaError, "'qty'"),
    (SchemaChange.update_column_nullability("id", True), SchemaError, "'id' is part of the primary key"),
    (SchemaChange.add_column("x", "INT NOT NULL"), SchemaError, "must be nullable"),
    (SchemaChange.add_column("qty", "INT"), ColumnAlreadyExistError, "'qty' already exists"),
    (SchemaChange.add_column("_KEY_x", "INT"), SchemaError, "reserved"),
    (SchemaChange.rename_column("qty", "name"), ColumnAlreadyExistError, "'name' already exists"),
    (SchemaChange.drop_column("nope"), ColumnNotExistError, "'nope' does not exist"),
    (SchemaChange.rename_column("nope", "x"), ColumnNotExistError, "'nope' does not exist"),
    (SchemaChange.update_column_comment("nope", "x"), ColumnNotExistError, "'nope'"),
    (SchemaChange.update_column_position(Move.after("qty", "nope")), ColumnNotExistError, "'nope'"),
    (SchemaChange.set_option("bucket", "4"), InvalidOptionError, "rescale"),
    (SchemaChange.remove_option("bucket"), InvalidOptionError, "rescale"),
    (SchemaChange.set_option("merge-engine", "first-row"), InvalidOptionError, "'merge-engine' cannot change"),
    (SchemaChange.set_option("bucket-key", "id"), InvalidOptionError, "'bucket-key' cannot change"),
    (SchemaChange.set_option("sequence.field", "qty"), InvalidOptionError, "'sequence.field' cannot change"),
    (SchemaChange.set_option("num-levels", "1"), InvalidOptionError, "num-levels"),
])
def test_a_rule_breaking_alter_names_the_problem_and_changes_nothing(
        catalog: Catalog, table, change: SchemaChange, error: type, words: str) -> None:
    before = schema_files(catalog)
    # A valid change first: the whole alter is refused, not only the bad change.
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        catalog.alter_table(T, [SchemaChange.add_column("ok", "INT"), change])
    assert schema_files(catalog) == before
    assert catalog.get_table(T).schema.field_names == ["id", "dt", "qty", "name"]


def test_nested_column_paths_are_refused() -> None:
    with pytest.raises(UnsupportedError, match="top-level"):
        SchemaChange.drop_column(["a", "b"])


def test_immutable_options_may_change_before_the_first_snapshot(catalog: Catalog) -> None:
    create_table(catalog, "t", BASE, primary_keys=["id", "dt"], options={"bucket": "1"})
    t = alter(catalog, SchemaChange.set_option("merge-engine", "first-row"))
    assert t.schema.options["merge-engine"] == "first-row"


def test_dropping_a_column_an_option_names_is_refused(catalog: Catalog) -> None:
    create_table(catalog, "t", BASE, primary_keys=["id", "dt"], options={"bucket": "1", "sequence.field": "qty"})
    with pytest.raises(SchemaError, match="'sequence.field'"):
        catalog.alter_table(T, [SchemaChange.drop_column("qty")])


# ---- atomic schema files and concurrent alters ----------------------------------------------


def test_the_loser_of_two_concurrent_alters_gets_a_conflict(catalog: Catalog, table, monkeypatch) -> None:
    """Both alters read schema 0; the one that publishes schema-1 second is refused."""
    from lakehouse_engine.store.schema_manager import SchemaManager

    barrier = threading.Barrier(2)
    original = SchemaManager.latest

    def latest_then_wait(self: SchemaManager):  # type: ignore[no-untyped-def]
        schema = original(self)
        barrier.wait(timeout=10)
        return schema

    monkeypatch.setattr(SchemaManager, "latest", latest_then_wait)
    results: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            table.schema_manager().commit_changes([SchemaChange.add_column(name, "INT")], lambda: True)
            results[name] = "ok"
        except CommitConflictError as e:
            results[name] = e

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    monkeypatch.undo()
    assert sorted(str(type(v).__name__) for v in results.values()) == ["CommitConflictError", "str"]
    loser = next(v for v in results.values() if isinstance(v, CommitConflictError))
    assert "another alter wrote schema 1 first" in str(loser)
    assert schema_files(catalog) == ["schema-0", "schema-1"]
    names = catalog.get_table(T).schema.field_names
    assert ("a" in names) != ("b" in names)


# ---- reads of evolved files in every path --------------------------------------------------


def evolve_through_every_kind(catalog: Catalog) -> FileStoreTable:
    """Schema 0 rows 1-3; then add `price`, rename `name` -> `label`, widen `qty`, drop `price`, add
    `note`, with a write under each version."""
    t = alter(catalog, SchemaChange.add_column("price", "DOUBLE"))
    write(t, base_rows([4]).append_column("price", pa.array([4.5])))
    t = alter(catalog, SchemaChange.rename_column("name", "label"))
    write(t, base_rows([5]).append_column("price", pa.array([5.5])).rename_columns(
        ["id", "dt", "qty", "label", "price"]))
    t = alter(catalog, SchemaChange.update_column_type("qty", "BIGINT"))
    t = alter(catalog, SchemaChange.drop_column("price"), SchemaChange.add_column("note", "STRING"))
    write(t, pa.table({"id": [1, 6], "dt": ["d1", "d1"], "qty": [100, 60], "label": ["one", "n6"],
                       "note": ["x", None]}))
    return t


EXPECTED = [
    {"id": 1, "dt": "d1", "qty": 100, "label": "one", "note": "x"},
    {"id": 2, "dt": "d1", "qty": 20, "label": "n2", "note": None},
    {"id": 3, "dt": "d1", "qty": 30, "label": "n3", "note": None},
    {"id": 4, "dt": "d1", "qty": 40, "label": "n4", "note": None},
    {"id": 5, "dt": "d1", "qty": 50, "label": "n5", "note": None},
    {"id": 6, "dt": "d1", "qty": 60, "label": "n6", "note": None},
]


def test_merge_on_read_over_files_of_five_schema_versions(catalog: Catalog, table) -> None:
    t = evolve_through_every_kind(catalog)
    ids = {e.file.schema_id for e in t.store.manifest_io().live_entries(t.latest_snapshot())}
    assert ids == {0, 1, 2, 4}
    assert all_rows(t) == EXPECTED
    assert read(t).schema.field("qty").type == pa.int64()


def test_full_compaction_rewrites_old_files_into_the_latest_schema(catalog: Catalog, table) -> None:
    t = evolve_through_every_kind(catalog)
    t.compact(full=True)
    ids = {e.file.schema_id for e in t.store.manifest_io().live_entries(t.latest_snapshot())}
    assert ids == {4}
    assert all_rows(t) == EXPECTED


def test_time_travel_reads_each_snapshot_with_its_own_schema(catalog: Catalog, table) -> None:
    t = evolve_through_every_kind(catalog)
    first = read(t, snapshot_id=1)
    assert first.column_names == ["id", "dt", "qty", "name"]
    assert first.schema.field("qty").type == pa.int32()
    second = read(t, snapshot_id=2)
    assert second.column_names == ["id", "dt", "qty", "name", "price"]
    assert sorted(second.column("price").to_pylist(), key=str) == [4.5, None, None, None]
    third = read(t, snapshot_id=3, projection=["id", "label"])
    assert sorted(third.column("label").to_pylist()) == ["n1", "n2", "n3", "n4", "n5"]
    t.create_tag("v1", 1)
    assert [f.name for f in t.new_read_builder().with_tag("v1").read_type()] == ["id", "dt", "qty", "name"]
    assert [f.name for f in t.copy({"scan.snapshot-id": "1"}).new_read_builder().read_type()] == ["id", "dt", "qty", "name"]


def test_rescale_reads_old_files_and_writes_the_latest_schema(catalog: Catalog, table) -> None:
    t = evolve_through_every_kind(catalog)
    t.rescale(3)
    t = catalog.get_table(T)
    assert t.options.bucket == 3
    assert all_rows(t) == EXPECTED


def test_postpone_compaction_maps_old_postpone_files(catalog: Catalog) -> None:
    t = create_table(catalog, "t", BASE, primary_keys=["id", "dt"], options={"bucket": "-2"})
    write(t, base_rows([1, 2]))
    t = alter(catalog, SchemaChange.rename_column("name", "label"), SchemaChange.add_column("x", "INT"))
    write(t, pa.table({"id": [2], "dt": ["d1"], "qty": [7], "label": ["two"], "x": [9]}))
    t.compact()
    assert all_rows(t) == [
        {"id": 1, "dt": "d1", "qty": 10, "label": "n1", "x": None},
        {"id": 2, "dt": "d1", "qty": 7, "label": "two", "x": 9},
    ]


def test_append_table_reads_and_compacts_old_files(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.int32())])
    t = create_table(catalog, "t", schema, options={"compaction.min.file-num": "2"})
    write(t, pa.table({"id": [1], "v": pa.array([1], pa.int32())}))
    t = alter(catalog, SchemaChange.update_column_type("v", "BIGINT"), SchemaChange.add_column("w", "STRING"))
    write(t, pa.table({"id": [2], "v": [2**40], "w": ["b"]}))
    expected = [{"id": 1, "v": 1, "w": None}, {"id": 2, "v": 2**40, "w": "b"}]
    assert all_rows(t) == expected
    t.compact(full=True)
    assert {e.file.schema_id for e in t.store.manifest_io().live_entries(t.latest_snapshot())} == {1}
    assert all_rows(t) == expected


def test_a_table_that_only_changed_options_reads_without_mapping(catalog: Catalog, table, monkeypatch) -> None:
    from lakehouse_engine.mergetree.evolution import EvolvingFileReader

    t = alter(catalog, SchemaChange.set_option("snapshot.num-retained.min", "5"))
    built: list[object] = []
    original = EvolvingFileReader._build

    def spy(self, *a):  # type: ignore[no-untyped-def]
        m = original(self, *a)
        built.append(m.identity)
        return m

    monkeypatch.setattr(EvolvingFileReader, "_build", spy)
    assert len(all_rows(t)) == 3
    assert built and all(built)


# ---- a writer or compactor holding an older schema ------------------------------------------


def test_a_writer_holding_an_older_schema_commits_rows_readers_map_correctly(catalog: Catalog, table) -> None:
    stale = catalog.get_table(T)
    wb = stale.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(base_rows([7]))
    alter(catalog, SchemaChange.rename_column("name", "label"), SchemaChange.add_column("x", "INT"),
          SchemaChange.update_column_type("qty", "BIGINT"))
    c.commit(w.prepare_commit())
    t = catalog.get_table(T)
    assert t.latest_snapshot().schema_id == 1  # the snapshot records the latest schema
    got = {r["id"]: r for r in all_rows(t)}
    assert got[7] == {"id": 7, "dt": "d1", "qty": 70, "label": "n7", "x": None}


def test_a_compaction_holding_an_older_schema_than_its_files_is_a_conflict(catalog: Catalog, table) -> None:
    stale = catalog.get_table(T)
    t = alter(catalog, SchemaChange.add_column("x", "INT"))
    write(t, base_rows([1]).append_column("x", pa.array([5], pa.int32())))
    before = t.latest_snapshot().id
    with pytest.raises(CommitConflictError, match="newer than schema 0 of this table handle"):
        stale.compact(full=True)
    t = catalog.get_table(T)
    assert t.latest_snapshot().id == before
    assert {r["id"]: r["x"] for r in all_rows(t)}[1] == 5
    # A reader holding the old schema still reads the newer files (without the new column).
    assert [r["name"] for r in all_rows(stale)] == ["n1", "n2", "n3"]


# ---- merge engines with evolved columns ------------------------------------------------------


def test_partial_update_on_an_added_column(catalog: Catalog) -> None:
    t = create_table(catalog, "t", BASE, primary_keys=["id", "dt"],
                     options={"bucket": "1", "merge-engine": "partial-update"})
    write(t, base_rows([1]))
    t = alter(catalog, SchemaChange.add_column("extra", "STRING"))
    write(t, pa.table({"id": [1], "dt": ["d1"], "qty": [None], "name": [None], "extra": ["e"]},
                      schema=t.schema.arrow_schema()))
    assert all_rows(t) == [{"id": 1, "dt": "d1", "qty": 10, "name": "n1", "extra": "e"}]
    t.compact(full=True)
    assert all_rows(t) == [{"id": 1, "dt": "d1", "qty": 10, "name": "n1", "extra": "e"}]


def test_aggregation_on_an_added_column_and_its_options_follow_a_rename(catalog: Catalog) -> None:
    t = create_table(catalog, "t", BASE, primary_keys=["id", "dt"],
                     options={"bucket": "1", "merge-engine": "aggregation",
                              "fields.qty.aggregate-function": "sum",
                              "fields.name.aggregate-function": "last_non_null_value"})
    write(t, base_rows([1]))
    t = alter(catalog, SchemaChange.add_column("total", "BIGINT"),
              SchemaChange.set_option("fields.total.aggregate-function", "sum"))
    s = t.schema.arrow_schema()
    write(t, pa.table({"id": [1], "dt": ["d1"], "qty": [1], "name": [None], "total": [5]}, schema=s))
    write(t, pa.table({"id": [1], "dt": ["d1"], "qty": [1], "name": [None], "total": [6]}, schema=s))
    assert all_rows(t) == [{"id": 1, "dt": "d1", "qty": 12, "name": "n1", "total": 11}]
    t = alter(catalog, SchemaChange.rename_column("qty", "amount"))
    assert t.schema.options["fields.amount.aggregate-function"] == "sum"
    assert "fields.qty.aggregate-function" not in t.schema.options
    write(t, pa.table({"id": [1], "dt": ["d1"], "amount": [3], "name": [None], "total": [1]},
                      schema=t.schema.arrow_schema()))
    assert all_rows(t) == [{"id": 1, "dt": "d1", "amount": 15, "name": "n1", "total": 12}]
    t = alter(catalog, SchemaChange.drop_column("total"))
    assert "fields.total.aggregate-function" not in t.schema.options


def test_sequence_group_options_follow_a_rename(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("a", pa.string()),
                        pa.field("g", pa.int64())])
    create_table(catalog, "t", schema, primary_keys=["id"],
                 options={"bucket": "1", "merge-engine": "partial-update", "fields.g.sequence-group": "a"})
    t = alter(catalog, SchemaChange.rename_column("a", "b"), SchemaChange.rename_column("g", "h"))
    assert t.schema.options["fields.h.sequence-group"] == "b"
