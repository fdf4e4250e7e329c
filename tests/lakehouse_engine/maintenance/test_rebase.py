"""Re-committing a branch's appends onto a branch made at main's latest (`rebase_appends`): main's
commits since the branch point stay, the batch lands once and later than them, its changelog is
computed against main's rows, and the source branch stays intact."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import CommitConflictError, UnsupportedError
from lakehouse_engine.schema_change import SchemaChange
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import read, snapshot_files, write
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, changes, keyed_table, put


def _state(table: FileStoreTable) -> list[tuple[int, str]]:
    return sorted((r["id"], r["v"]) for r in read(table).to_pylist())


def _branch_at_latest(table: FileStoreTable, name: str) -> tuple[FileStoreTable, int]:
    latest = table.latest_snapshot()
    assert latest is not None
    table.create_tag(f"{name}-base", latest.id)
    table.create_branch(name, f"{name}-base")
    return table.branch_table(name), latest.id


@pytest.fixture
def audited(catalog: Catalog) -> tuple[FileStoreTable, FileStoreTable, int]:
    """Main with three rows, and branch `audit` (made at main's latest) holding a batch on top."""
    main = keyed_table(catalog, **{"changelog-producer": "lookup"})
    put(main, (1, "a", "+I"), (2, "b", "+I"), (3, "c", "+I"))
    audit, base = _branch_at_latest(main, "audit")
    put(audit, (1, "a2", "+I"), (2, "b", "-D"), (4, "d", "+I"))
    return main, audit, base


def test_the_batch_lands_after_mains_new_commits_with_a_changelog_against_mains_rows(
        audited: tuple[FileStoreTable, FileStoreTable, int]) -> None:
    main, audit, base = audited
    audit_rows = _state(audit)
    put(main, (1, "x", "+I"), (3, "c2", "+I"))        # another writer, on a key of the batch too
    main_commits = main.compact(full=True)             # and a compaction
    moved = main.latest_snapshot().id
    assert main_commits and moved > base
    rebased, onto = _branch_at_latest(main, "rebased")

    ids = rebased.rebase_appends("audit", base)

    assert [rebased.snapshot(i).commit_kind for i in ids] == ["APPEND", "COMPACT"] and ids[0] == onto + 1
    assert rebased.snapshot(ids[0]).commit_user == audit.snapshot(base + 1).commit_user
    # Main's commits stay under the batch; the batch, committed later, wins on key 1.
    assert _state(rebased) == [(1, "a2"), (3, "c2"), (4, "d")]
    # Its changelog is against main's rows (1 was x, not a) and holds the batch once.
    assert changes(rebased.changes(onto, ids[-1])) == [
        ("+U", 1, "a2"), ("-U", 1, "x"), ("-D", 2, "b"), ("+I", 4, "d")]
    assert _state(audit) == audit_rows               # the source branch reads as before

    # Idempotent: the target already holds the commit, so nothing is committed twice.
    again = rebased.rebase_appends("audit", base)
    assert again[0] == ids[0] and rebased.latest_snapshot().id == ids[-1]

    main.fast_forward("rebased")
    assert [main.snapshot(i).commit_kind for i in main_commits] == ["COMPACT"] * len(main_commits)
    assert _state(main) == [(1, "a2"), (3, "c2"), (4, "d")]


def test_after_a_rescale_the_batch_is_written_into_the_new_buckets(
        audited: tuple[FileStoreTable, FileStoreTable, int]) -> None:
    main, audit, base = audited
    main.rescale(4)
    rebased, onto = _branch_at_latest(main, "rebased")
    ids = rebased.rebase_appends("audit", base)
    assert _state(rebased) == [(1, "a2"), (3, "c"), (4, "d")]
    assert {r["total_buckets"] for r in rebased.bucket_stats().to_pylist()} == {4}
    assert changes(rebased.changes(onto, ids[-1])) == [
        ("+U", 1, "a2"), ("-U", 1, "a"), ("-D", 2, "b"), ("+I", 4, "d")]


def test_a_file_of_another_schema_is_refused_and_nothing_is_committed(catalog: Catalog) -> None:
    main = keyed_table(catalog)
    put(main, (1, "a", "+I"))
    audit, base = _branch_at_latest(main, "audit")
    catalog.alter_table("db.t$branch_audit", [SchemaChange.add_column("w", pa.int64())])
    audit = main.branch_table("audit")
    write(audit, pa.table({"id": [2], "v": ["b"], "k": ["+I"], "w": [7]}))   # the batch adds a column
    rebased, onto = _branch_at_latest(main, "rebased")
    before = snapshot_files(main)
    with pytest.raises(CommitConflictError, match="schema"):
        rebased.rebase_appends("audit", base)
    assert rebased.latest_snapshot().id == onto and snapshot_files(main) == before


def test_nothing_to_carry_commits_nothing(catalog: Catalog) -> None:
    main = keyed_table(catalog)
    put(main, (1, "a", "+I"))
    audit, base = _branch_at_latest(main, "audit")
    audit.compact(full=True)                          # a compaction only: no append to carry
    rebased, onto = _branch_at_latest(main, "rebased")
    assert rebased.rebase_appends("audit", base) == [] and rebased.latest_snapshot().id == onto


def test_an_overwrite_on_the_branch_is_refused(catalog: Catalog) -> None:
    main = keyed_table(catalog)
    put(main, (1, "a", "+I"))
    audit, base = _branch_at_latest(main, "audit")
    write(audit, pa.Table.from_pylist([{"id": 2, "v": "b", "k": "+I"}], schema=SCHEMA), overwrite={})
    rebased, onto = _branch_at_latest(main, "rebased")
    with pytest.raises(UnsupportedError, match="OVERWRITE"):
        rebased.rebase_appends("audit", base)
    assert rebased.latest_snapshot().id == onto


@pytest.mark.parametrize("bucket", ["-1", "-2"])
def test_dynamic_and_postpone_bucket_tables_rebase_through_their_writers(catalog: Catalog, bucket: str) -> None:
    main = keyed_table(catalog, bucket=bucket)
    put(main, (1, "a", "+I"), (2, "b", "+I"))
    audit, base = _branch_at_latest(main, "audit")
    put(audit, (1, "a2", "+I"), (3, "c", "+I"))
    put(main, (2, "b2", "+I"))                            # main moved
    rebased, onto = _branch_at_latest(main, "rebased")
    ids = rebased.rebase_appends("audit", base)
    assert ids and ids[0] == onto + 1
    if bucket == "-2":
        rebased.compact_postpone()                        # postponed rows reach their buckets
    assert _state(rebased) == [(1, "a2"), (2, "b2"), (3, "c")]
