"""Changing `deletion-vectors.enabled` on a table with snapshots, as Paimon's SchemaManager rules:
refused unless `deletion-vectors.modifiable` = true, with nothing stored changed. Turning vectors on
would hide the rows still in level 0 (readers of a DV table skip it); turning them off would make
other engines merge rows the vectors deleted."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.schema_change import SchemaChange
from tests.lakehouse_engine.conftest import create_table, read, rows, snapshot_files, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _table_with_level_zero_rows(catalog: Catalog, **options: str) -> tuple[str, list[dict[str, object]]]:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "2", **options})
    write(t, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    write(t, pa.table({"id": [1], "v": ["a2"]}, schema=SCHEMA))
    return "db.t", rows(read(t), "id")


@pytest.mark.parametrize(("start", "change"), [
    ({}, SchemaChange.set_option("deletion-vectors.enabled", "true")),
    ({"deletion-vectors.enabled": "true"}, SchemaChange.set_option("deletion-vectors.enabled", "false")),
    ({"deletion-vectors.enabled": "true"}, SchemaChange.remove_option("deletion-vectors.enabled")),
])
def test_the_mode_of_a_table_with_snapshots_does_not_change(catalog: Catalog, start: dict[str, str],
                                                            change: SchemaChange) -> None:
    name, before = _table_with_level_zero_rows(catalog, **start)
    files = snapshot_files(catalog.get_table(name))
    with pytest.raises(InvalidOptionError, match="deletion-vectors.modifiable"):
        catalog.alter_table(name, [change])
    assert snapshot_files(catalog.get_table(name)) == files
    assert rows(read(catalog.get_table(name)), "id") == before


def test_restating_the_mode_in_another_spelling_is_no_change(catalog: Catalog) -> None:
    name, before = _table_with_level_zero_rows(catalog, **{"deletion-vectors.enabled": "true"})
    catalog.alter_table(name, [SchemaChange.set_option("deletion-vectors.enabled", "TRUE")])
    assert rows(read(catalog.get_table(name)), "id") == before


def test_with_modifiable_the_mode_changes_and_a_full_compaction_brings_level_zero_up(catalog: Catalog) -> None:
    """What the guard is for: once vectors are on, rows still in level 0 are invisible (as in
    Paimon) until a compaction brings them up."""
    name, before = _table_with_level_zero_rows(catalog)
    catalog.alter_table(name, [SchemaChange.set_option("deletion-vectors.modifiable", "true"),
                               SchemaChange.set_option("deletion-vectors.enabled", "true")])
    t = catalog.get_table(name)
    assert t.options.deletion_vectors_enabled()
    assert read(t).num_rows < len(before)
    t.compact(full=True)
    assert rows(read(t), "id") == before


def test_a_table_without_snapshots_changes_mode_freely_but_not_into_a_refused_combination(
        catalog: Catalog) -> None:
    create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1"})
    catalog.alter_table("db.t", [SchemaChange.set_option("deletion-vectors.enabled", "true")])
    assert catalog.get_table("db.t").options.deletion_vectors_enabled()
    create_table(catalog, "f", SCHEMA, ["id"], options={"bucket": "1", "merge-engine": "first-row"})
    with pytest.raises(InvalidOptionError, match="first-row"):
        catalog.alter_table("db.f", [SchemaChange.set_option("deletion-vectors.enabled", "true")])
    create_table(catalog, "c", SCHEMA, ["id"], options={"bucket": "1", "deletion-vectors.enabled": "true"})
    with pytest.raises(InvalidOptionError, match="full-compaction"):
        catalog.alter_table("db.c", [SchemaChange.set_option("changelog-producer", "full-compaction")])
