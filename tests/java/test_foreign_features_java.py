"""Tables Paimon 0.9 (Java) writes with features this engine does not write: a deletion-vector
table is read as Paimon reads it (1,000 rows, not the 1,050 its files hold) and not written; a
table whose feature does not change its rows (a changelog producer) is read right and not written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, UnsupportedFeatureError
from tests.java.conftest import Judge, canonical_rows, ok
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    cat = Catalog(str(tmp_path / "warehouse"))
    cat.create_database("db")
    return cat


def _rows(ids: range, v: str) -> pa.Table:
    return pa.table({"id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def _java_table(catalog: Catalog, name: str) -> dict[str, str]:
    """A table made here without the option, which Paimon 0.9 then sets (`_three_commits`)."""
    create_table(catalog, name, SCHEMA, ["id"], options={"bucket": "2"})
    return {"warehouse": str(catalog.warehouse), "table": f"db.{name}"}


def _alter(table: dict[str, str], option: tuple[str, str]) -> dict[str, object]:
    return {**table, "op": "alter", "changes": [{"kind": "option", "key": option[0], "value": option[1]}]}


def _three_commits(judge: Judge, table: dict[str, str], option: tuple[str, str],
                   then: list[dict[str, object]] | None = None) -> list[dict[str, object]]:
    """In one JVM: Paimon 0.9 sets the option (as a Java user would), then inserts 1,050 keys,
    upserts 500, deletes the last 50 (1,000 rows remain) and reads; then `then`. The answers
    after the alter's (`[-1]` the read's when `then` is empty)."""
    answers = judge([
        _alter(table, option),
        {**table, "op": "write", "rows": canonical_rows(_rows(range(1050), "insert"))},
        {**table, "op": "write", "rows": canonical_rows(_rows(range(500), "upsert"))},
        {**table, "op": "write", "rows": canonical_rows(_rows(range(1000, 1050), "x"), ["-D"] * 50)},
        {**table, "op": "read"},
        *(then or []),
    ])
    ok(answers[0])
    return answers[1:]


def test_a_java_deletion_vector_table_reads_as_paimon_reads_it_and_is_written_with_its_vectors(
        catalog: Catalog, judge: Judge) -> None:
    table = _java_table(catalog, "dv")
    answers = _three_commits(judge, table, ("deletion-vectors.enabled", "true"))
    java_rows = sorted((r[1], r[2]) for r in ok(answers[-1])["rows"])
    assert len(java_rows) == 1000  # Paimon's own reading
    ours = catalog.get_table("db.dv")
    index_files = [e for e in ours.store.manifest_io().index_entries(ours.latest_snapshot())
                   if e.index_type == "DELETION_VECTORS"]
    assert index_files, "Paimon 0.9 wrote no deletion vectors: the case is not the one under test"
    assert sorted((r["id"], r["v"]) for r in read(ours).to_pylist()) == java_rows
    # Our upsert marks Paimon's rows in its files' vectors; our full compaction applies them.
    write(ours, _rows(range(3), "ours"))
    expected = sorted([(i, "ours") for i in range(3)] + [r for r in java_rows if r[0] >= 3])
    assert sorted((r[1], r[2]) for r in ok(judge([{**table, "op": "read"}])[0])["rows"]) == expected
    ours.compact(full=True)
    assert sorted((r[1], r[2]) for r in ok(judge([{**table, "op": "read"}])[0])["rows"]) == expected
    assert sorted((r["id"], r["v"]) for r in read(ours).to_pylist()) == expected


def test_vectors_stay_applied_and_writes_refused_with_the_option_taken_away(
        catalog: Catalog, judge: Judge) -> None:
    """With the option taken away again (as Java allows), the vectors Paimon wrote still mark rows
    deleted (the -D records they stand for are gone), and a write still names the index file."""
    table = _java_table(catalog, "dv2")
    answers = _three_commits(judge, table, ("deletion-vectors.enabled", "true"),
                             then=[_alter(table, ("deletion-vectors.enabled", "false"))])
    java_rows = sorted((r[1], r[2]) for r in ok(answers[-2])["rows"])
    ok(answers[-1])
    ours = catalog.get_table("db.dv2")
    assert sorted((r["id"], r["v"]) for r in read(ours).to_pylist()) == java_rows
    with pytest.raises(UnsupportedFeatureError, match=r"table db.dv2: index file index-.* uses deletion vectors"):
        write(ours, _rows(range(3), "ours"))


def test_a_java_changelog_table_is_read_right_and_written_with_its_changelog(catalog: Catalog, judge: Judge) -> None:
    table = _java_table(catalog, "cl")
    answers = _three_commits(judge, table, ("changelog-producer", "input"))
    java_rows = sorted((r[1], r[2]) for r in ok(answers[-1])["rows"])
    ours = catalog.get_table("db.cl")
    assert sorted((r["id"], r["v"]) for r in read(ours).to_pylist()) == java_rows
    assert len(java_rows) == 1000
    write(ours, _rows(range(3), "ours"))  # the input producer: our write adds its changelog too
    expected = sorted({**dict(java_rows), **{i: "ours" for i in range(3)}}.items())
    assert sorted((r["id"], r["v"]) for r in read(ours).to_pylist()) == expected
    assert sorted((r[1], r[2]) for r in ok(judge([{**table, "op": "read"}])[0])["rows"]) == expected
    latest = ours.latest_snapshot()
    assert latest is not None and latest.changelog_manifest_list is not None
