"""OS errors (a full disk above all) surface as StorageError naming the table and the path, and a
write that meets one commits nothing: the table reads as before."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, LakehouseError, StorageError
from lakehouse_engine.io_warehouse import warehouse_file_io
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, rows, write
from tests.support.io_faults import full_disk_file_io

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _on_full_disk(table: FileStoreTable, full: Callable[[str], bool], code: int = errno.ENOSPC) -> FileStoreTable:
    """The same table, reached through a filesystem whose selected writes fail with `code`."""
    return FileStoreTable(full_disk_file_io(full, code), table.name, table.path, table.schema)


def _files(table: FileStoreTable) -> dict[str, int]:
    root = Path(table.path)
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(params=["fixed", "dynamic"])
def table(catalog: Catalog, request: pytest.FixtureRequest) -> FileStoreTable:
    bucket = "2" if request.param == "fixed" else "-1"
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": bucket})
    write(t, pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    return t


NEW_ROWS = pa.table({"id": [2, 3], "v": ["B", "c"]}, schema=SCHEMA)
FULL_AT = {
    "data file": lambda p: "/bucket-" in p and "/data-" in p,
    "manifest": lambda p: "/manifest/manifest-" in p and "list" not in p,
    "manifest list": lambda p: "/manifest/manifest-list-" in p,
}


@pytest.mark.parametrize("where", sorted(FULL_AT))
def test_a_full_disk_during_a_write_raises_storage_error_and_commits_nothing(table: FileStoreTable, where: str):
    before_rows, before_files = rows(read(table), "id"), _files(table)
    broken = _on_full_disk(table, FULL_AT[where])
    with pytest.raises(StorageError) as info:
        write(broken, NEW_ROWS)
    err = info.value
    assert isinstance(err, OSError) and isinstance(err, LakehouseError)
    assert err.errno == errno.ENOSPC
    assert "disk full" in str(err) and "of table db.t" in str(err)
    assert err.filename is not None and FULL_AT[where](err.filename) and err.filename in str(err)
    clear_manifest_cache()
    assert [s.id for s in table.snapshots()] == [1]
    assert rows(read(table), "id") == before_rows
    if where == "data file":
        assert _files(table) == before_files  # the half-written data file was removed


def test_a_full_disk_writing_a_dynamic_bucket_index_commits_nothing(catalog: Catalog):
    t = create_table(catalog, "d", SCHEMA, primary_keys=["id"], options={"bucket": "-1"})
    write(t, pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    broken = _on_full_disk(t, lambda p: "/index/index-" in p)
    with pytest.raises(StorageError, match=r"/index/index-\S+ of table db\.d: disk full"):
        write(broken, NEW_ROWS)
    clear_manifest_cache()
    assert [s.id for s in t.snapshots()] == [1]
    assert rows(read(t), "id") == [{"id": 1, "v": "a"}]


def test_a_full_disk_during_compaction_names_the_table_and_changes_nothing(table: FileStoreTable):
    write(table, NEW_ROWS)
    before_rows, before_ids = rows(read(table), "id"), [s.id for s in table.snapshots()]
    broken = _on_full_disk(table, FULL_AT["data file"])
    with pytest.raises(StorageError, match=r"disk full .*of table db\.t|of table db\.t: disk full"):
        broken.compact(full=True)
    clear_manifest_cache()
    assert [s.id for s in table.snapshots()] == before_ids
    assert rows(read(table), "id") == before_rows


def test_other_os_errors_name_their_cause(tmp_path: Path):
    fio = full_disk_file_io(lambda p: True, errno.EACCES)
    with pytest.raises(StorageError, match=r"Permission denied \(EACCES\)") as info:
        fio.write_bytes(str(tmp_path / "w.db" / "t" / "schema" / "schema-0"), b"{}")
    assert info.value.errno == errno.EACCES
    assert "of table w.t" in str(info.value)


def test_a_missing_file_stays_file_not_found(tmp_path: Path):
    fio, _ = warehouse_file_io(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        fio.read_bytes(str(tmp_path / "nope"))
    with pytest.raises(StorageError, match=r"cannot read .* is a directory"):
        fio.read_bytes(str(tmp_path))
