"""Branches: Paimon's `branch/branch-<name>/` layout over the table's shared data files."""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.catalog import Identifier
from lakehouse_engine.errors import (
    CommitConflictError,
    InvalidIdentifierError,
    LakehouseError,
    TableNotExistError,
)
from lakehouse_engine.io import FileIO
from lakehouse_engine.maintenance.branches import BranchAlreadyExistError
from lakehouse_engine.schema_change import SchemaChange
from lakehouse_engine.store.file_store import BranchNotExistError
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.support.io_faults import FaultInjectingFileIO

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
NOW_PLUS = 60_000


def _rows(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


def _state(table: FileStoreTable, snapshot_id: int | None = None) -> dict[int, int]:
    got = read(table, snapshot_id)
    return dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True))


def _main_with_tag(catalog: Catalog, **options: Any) -> FileStoreTable:
    """Main: snapshot 1 = {1,2,3: 1}, tagged `t1`; snapshot 2 = {1: 2, 2: 1, 3: 1}."""
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": 1, **options})
    write(table, _rows([1, 2, 3], 1))
    table.create_tag("t1", 1)
    write(table, _rows([1], 2))
    return table


def test_a_branch_from_a_tag_starts_at_the_tagged_snapshot_and_goes_its_own_way(catalog: Catalog) -> None:
    main = _main_with_tag(catalog)
    catalog.create_branch("db.t", "b", "t1")
    assert catalog.list_branches("db.t") == ["b"] and main.list_branches() == ["b"]
    branch = catalog.get_table("db.t$branch_b")
    assert branch.name == "db.t$branch_b" and branch.identifier == Identifier.create("db", "t", "b")
    assert _state(branch) == {1: 1, 2: 1, 3: 1} and branch.list_tags() == ["t1"]
    write(branch, _rows([3, 4], 7))
    assert _state(branch) == {1: 1, 2: 1, 3: 7, 4: 7}
    assert _state(catalog.get_table("db.t")) == {1: 2, 2: 1, 3: 1}  # main is untouched
    assert Path(main.path, "branch", "branch-b", "snapshot", "snapshot-2").is_file()
    # The branch's data files sit in the table's bucket directory, shared with main.
    assert not list(Path(main.path, "branch").rglob("*.parquet"))
    # The same branch three ways: the identifier, the `branch` option, the table's call.
    for same in (catalog.get_table(Identifier.create("db", "t", branch="b")), main.copy({"branch": "b"}),
                 main.branch_table("b")):
        assert _state(same) == _state(branch)


def test_an_empty_branch_has_mains_schema_and_no_snapshot(catalog: Catalog) -> None:
    main = _main_with_tag(catalog)
    main.create_branch("dev")
    dev = main.branch_table("dev")
    assert dev.latest_snapshot() is None and _state(dev) == {}
    write(dev, _rows([9], 9))
    assert _state(dev) == {9: 9} and _state(main) == {1: 2, 2: 1, 3: 1}


def test_tags_time_travel_compaction_and_schema_evolution_on_a_branch(catalog: Catalog) -> None:
    main = _main_with_tag(catalog)
    main.create_branch("b", "t1")
    branch = main.branch_table("b")
    for v in (3, 4):
        write(branch, _rows([1, 5], v))
    branch.create_tag("bt", 2)
    assert branch.list_tags() == ["bt", "t1"] and main.list_tags() == ["t1"]
    assert _state(branch, 2) == {1: 3, 2: 1, 3: 1, 5: 3}
    (compacted,) = branch.compact(full=True)
    assert branch.snapshot(compacted).commit_kind == "COMPACT"
    assert _state(branch) == {1: 4, 2: 1, 3: 1, 5: 4}
    catalog.alter_table("db.t$branch_b", [SchemaChange.add_column("w", pa.string())])
    assert catalog.get_table("db.t$branch_b").field_names == ["id", "v", "w"]
    assert catalog.get_table("db.t").field_names == ["id", "v"]  # main's schema is its own
    evolved = catalog.get_table("db.t$branch_b")
    write(evolved, pa.table({"id": [6], "v": [6], "w": ["x"]}))
    assert read(evolved).num_rows == 5 and _state(main) == {1: 2, 2: 1, 3: 1}


def test_expiry_on_either_side_keeps_what_the_other_references(catalog: Catalog) -> None:
    main = _main_with_tag(catalog)
    main.create_branch("b", "t1")
    branch = main.branch_table("b")
    write(branch, _rows([4], 4))
    # Main drops its tag and expires everything but its latest: snapshot 1's files (still the
    # branch's) must stay, as must the manifests both snapshot-1 files name.
    main.delete_tag("t1")
    for v in range(3, 6):
        write(main, _rows([2], v))
    main.compact(full=True)
    main.expire_snapshots(retain_max=1, retain_min=1)
    assert _state(fresh(branch), 1) == {1: 1, 2: 1, 3: 1}
    assert _state(fresh(branch)) == {1: 1, 2: 1, 3: 1, 4: 4}
    # And the branch expiring its own early snapshots keeps main's files.
    for v in range(5, 8):
        write(branch, _rows([4], v))
    branch.compact(full=True)
    branch.delete_tag("t1")
    branch.expire_snapshots(retain_max=1, retain_min=1)
    assert _state(fresh(main)) == {1: 2, 2: 5, 3: 1}
    assert _state(fresh(branch)) == {1: 1, 2: 1, 3: 1, 4: 7}


def fresh(table: FileStoreTable) -> FileStoreTable:
    """The same branch through a new handle (nothing cached)."""
    from lakehouse_engine.store.manifest_io import clear_manifest_cache

    clear_manifest_cache()
    return FileStoreTable(table.file_io, table.store.table_name, table.path, table.schema, table.branch)


def test_orphan_removal_on_main_keeps_files_a_branch_wrote_after_the_branch_point(catalog: Catalog) -> None:
    main = _main_with_tag(catalog)
    main.create_branch("b", "t1")
    branch = main.branch_table("b")
    write(branch, _rows([7, 8], 7))
    branch.create_tag("bt")
    write(branch, _rows([9], 9))
    orphan = Path(main.path, "bucket-0", "data-orphan-0.parquet")
    shutil.copy(next(Path(main.path, "bucket-0").glob("*.parquet")), orphan)
    removed = main.remove_orphan_files(older_than=int(time.time() * 1000) + NOW_PLUS)
    assert removed == [str(orphan)]
    assert _state(fresh(branch)) == {1: 1, 2: 1, 3: 1, 7: 7, 8: 7, 9: 9}
    assert _state(fresh(main)) == {1: 2, 2: 1, 3: 1}
    assert branch.remove_orphan_files(older_than=int(time.time() * 1000) + NOW_PLUS) == []


def test_fast_forward_makes_main_the_branch_and_main_goes_on_from_there(catalog: Catalog) -> None:
    main = _main_with_tag(catalog)
    main.create_branch("b", "t1")
    branch = main.branch_table("b")
    write(branch, _rows([4], 4))
    write(branch, _rows([5], 5))
    branch.create_tag("bt")
    catalog.fast_forward("db.t", "b")
    main = catalog.get_table("db.t")
    assert _state(main) == {1: 1, 2: 1, 3: 1, 4: 4, 5: 5}
    assert [s.id for s in main.snapshots()] == [1, 2, 3] and main.list_tags() == ["bt", "t1"]
    (sid,) = write(main, _rows([6], 6))
    assert sid == 4 and _state(main) == {1: 1, 2: 1, 3: 1, 4: 4, 5: 5, 6: 6}
    assert _state(main.branch_table("b")) == {1: 1, 2: 1, 3: 1, 4: 4, 5: 5}


def test_fast_forward_over_main_with_more_snapshots_and_another_schema(catalog: Catalog) -> None:
    main = _main_with_tag(catalog)
    main.create_branch("b", "t1")
    write(main.branch_table("b"), _rows([4], 4))
    catalog.alter_table("db.t", [SchemaChange.add_column("w", pa.string())])
    main = catalog.get_table("db.t")
    for v in range(3):
        write(main, pa.table({"id": [1], "v": [v], "w": ["m"]}))
    main.fast_forward("b")
    main = catalog.get_table("db.t")
    assert main.field_names == ["id", "v"] and _state(main) == {1: 1, 2: 1, 3: 1, 4: 4}


def _crashed_fast_forward(template: FileStoreTable, case: Path, k: int) -> FileStoreTable:
    shutil.copytree(template.path, case)
    io = FaultInjectingFileIO.local(fail_at=k)
    table = FileStoreTable(io, template.name, str(case), template.schema)
    with contextlib.suppress(OSError):  # (the LATEST hint's failure is only logged)
        table.fast_forward("b")
    assert io.fault is not None
    return FileStoreTable(FileIO(pafs.LocalFileSystem()), template.name, str(case), template.schema)


def test_a_crash_at_any_file_operation_of_a_fast_forward_leaves_main_readable(
        catalog: Catalog, tmp_path: Path) -> None:
    main = _main_with_tag(catalog)
    main.create_branch("b", "t1")
    branch = main.branch_table("b")
    write(branch, _rows([4], 4))
    write(branch, _rows([5], 5))
    main_states = [_state(main, s.id) for s in main.snapshots()]
    branch_states = [_state(branch, s.id) for s in branch.snapshots()]
    counting = FaultInjectingFileIO.local()
    shutil.copytree(main.path, tmp_path / "ref")
    FileStoreTable(counting, main.name, str(tmp_path / "ref"), main.schema).fast_forward("b")
    assert counting.count >= 5
    for k in range(1, counting.count + 1):
        after = _crashed_fast_forward(main, tmp_path / f"c{k}", k)
        seen = _state(after)
        assert seen in main_states + branch_states, f"a crash at operation {k} left main at {seen}"
        after.fast_forward("b")  # running it again finishes it
        assert _state(fresh(after)) == branch_states[-1]


def test_a_commit_to_main_racing_a_fast_forward_gets_a_clear_conflict(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    main = _main_with_tag(catalog)
    main.create_branch("b", "t1")
    write(main.branch_table("b"), _rows([4], 4))
    real = FileIO.overwrite_atomic
    fired: list[int] = []

    def commit_meanwhile(self: FileIO, path: str, data: bytes) -> None:
        real(self, path, data)
        if "/snapshot/snapshot-" in path and not fired:
            fired.append(1)
            write(catalog.get_table("db.t"), _rows([8], 8))

    monkeypatch.setattr(FileIO, "overwrite_atomic", commit_meanwhile)
    with pytest.raises(CommitConflictError, match="fast-forward"):
        main.fast_forward("b")
    monkeypatch.undo()
    assert fired and 8 in _state(catalog.get_table("db.t"))  # main holds the racing commit, readable


def test_concurrent_commits_to_main_and_a_branch_both_land(catalog: Catalog) -> None:
    main = _main_with_tag(catalog)
    main.create_branch("b", "t1")
    errors: list[BaseException] = []

    def commits(table: FileStoreTable, base: int) -> None:
        try:
            for i in range(8):
                write(table, _rows([base + i], i))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=commits, args=(catalog.get_table("db.t"), 100)),
               threading.Thread(target=commits, args=(catalog.get_table("db.t$branch_b"), 200))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert _state(catalog.get_table("db.t")) == {1: 2, 2: 1, 3: 1, **{100 + i: i for i in range(8)}}
    assert _state(catalog.get_table("db.t$branch_b")) == {1: 1, 2: 1, 3: 1, **{200 + i: i for i in range(8)}}


def test_drop_rename_and_bad_names(catalog: Catalog) -> None:
    main = _main_with_tag(catalog)
    main.create_branch("b", "t1")
    with pytest.raises(BranchAlreadyExistError):
        main.create_branch("b")
    main.create_branch("b", ignore_if_exists=True)
    main.rename_branch("b", "c")
    assert main.list_branches() == ["c"] and _state(main.branch_table("c")) == {1: 1, 2: 1, 3: 1}
    with pytest.raises(BranchNotExistError):
        main.branch_table("b")
    with pytest.raises(TableNotExistError, match="branch 'b'"):
        catalog.get_table("db.t$branch_b")
    for bad in ("main", "", " x", "12", "a/b", "a.b", "a$b"):
        with pytest.raises(InvalidIdentifierError):
            main.create_branch(bad)
    with pytest.raises(InvalidIdentifierError):
        catalog.drop_table("db.t$branch_c")
    main.drop_branch("c")
    assert main.list_branches() == [] and not Path(main.path, "branch", "branch-c").exists()
    with pytest.raises(BranchNotExistError):
        main.drop_branch("c")
    main.create_branch("empty")
    with pytest.raises(LakehouseError, match="no snapshot"):
        main.fast_forward("empty")


def test_a_fallback_branch_gives_the_partitions_main_lacks(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                        pa.field("v", pa.int64())])
    table = create_table(catalog, "p", schema, primary_keys=["id", "dt"], partition_keys=["dt"],
                         options={"bucket": 1})
    table.create_branch("stream")
    stream = table.branch_table("stream")
    write(stream, pa.table({"id": [1, 2], "dt": ["d1", "d2"], "v": [10, 20]}, schema=schema))
    write(table, pa.table({"id": [1], "dt": ["d1"], "v": [1]}, schema=schema))
    catalog.alter_table("db.p", [SchemaChange.set_option("scan.fallback-branch", "stream")])
    got = read(catalog.get_table("db.p")).sort_by("dt").to_pylist()
    # d1 is main's own (its value, not the fallback's); d2 only the fallback has.
    assert got == [{"id": 1, "dt": "d1", "v": 1}, {"id": 2, "dt": "d2", "v": 20}]
    assert read(catalog.get_table("db.p"), snapshot_id=1).num_rows == 1  # time travel: main only


def test_a_rollback_of_main_keeps_the_files_of_a_branch_made_from_a_later_tag(catalog: Catalog) -> None:
    main = _main_with_tag(catalog)
    main.create_tag("t2", 2)
    main.create_branch("b", "t2")
    main.delete_tag("t2")
    main.rollback_to(1)  # snapshot 2's files are main's no more, but the branch still reads them
    assert _state(fresh(main)) == {1: 1, 2: 1, 3: 1}
    assert _state(fresh(main.branch_table("b"))) == {1: 2, 2: 1, 3: 1}
    assert main.remove_orphan_files(older_than=int(time.time() * 1000) + NOW_PLUS) == []


def _changes(table: FileStoreTable) -> list[tuple[int, str, int, int]]:
    start = table.snapshot_manager().earliest_readable_id()
    assert start is not None
    return [(r["_snapshot_id"], r["_row_kind"], r["id"], r["v"]) for r in table.changes(start - 1).to_pylist()]


@pytest.mark.parametrize("producer", ["input", "none"])
def test_fast_forward_replaces_mains_long_lived_changelogs_from_the_branch_point_on(
        catalog: Catalog, producer: str) -> None:
    # Main's changelogs kept past their snapshots describe main's own history: after a fast-forward
    # to a branch made at t3 they were read as main's changes (rows that are in no snapshot of it),
    # and expiry kept them over the branch's snapshots of the same ids.
    options = {"bucket": 1, "changelog-producer": producer, "snapshot.num-retained.min": 1,
               "snapshot.num-retained.max": 2, "changelog.num-retained.max": 50}
    main = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options=options)
    for i in range(3):
        write(main, _rows([i], 0))
    main.create_tag("t3", 3)
    for i in range(3, 10):
        write(main, _rows([i], 99))  # main's history the fast-forward undoes
    main.create_branch("b", "t3")
    branch = main.branch_table("b")
    for i in range(100, 104):
        write(branch, _rows([i], 1))
    branch_changes = _changes(branch)
    main.fast_forward("b")
    main = catalog.get_table("db.t")
    assert _state(main) == {0: 0, 1: 0, 2: 0, 100: 1, 101: 1, 102: 1, 103: 1}
    changes = _changes(main)
    assert not [c for c in changes if c[3] == 99]
    assert [c for c in changes if c[0] > 3] == [c for c in branch_changes if c[0] > 3]
    for i in range(200, 204):
        write(main, _rows([i], 2))
    changes = _changes(main)
    assert not [c for c in changes if c[3] == 99]
    replayed = {}
    for _, kind, key, value in changes:
        if kind in ("+I", "+U"):
            replayed[key] = value
        else:
            replayed.pop(key)
    assert replayed == _state(main)
