"""Shared by the lifecycle tests: a small keyed table, and an independent account of the files a
table should hold (every snapshot and tag, merged one by one, without the engine's shortcuts)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from lakehouse_engine import Catalog
from lakehouse_engine.format.manifest import decode_index_manifest_entries
from lakehouse_engine.format.manifest_entries import FileKind
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.io import FileIO
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.support.io_faults import FaultInjectingFileIO

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False),
                    pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int64())])
DATES = ("2026-11-01", "2026-11-02")


def keyed_table(catalog: Catalog, name: str = "t", options: dict[str, Any] | None = None) -> FileStoreTable:
    """A table keyed by (id, dt), partitioned by dt, 2 buckets; `options` add to or override these."""
    opts: dict[str, Any] = {"bucket": "2"}
    opts.update(options or {})
    return create_table(catalog, name, SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                        options=opts)


def batch(ids: Iterable[int], v: int) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "dt": [DATES[i % 2] for i in ids], "v": [v] * len(ids)}, schema=SCHEMA)


def upsert(table: FileStoreTable, ids: Iterable[int], v: int) -> list[int]:
    return write(table, batch(ids, v))


def state(table: FileStoreTable, snapshot_id: int | None = None, tag: str | None = None) -> dict[int, int]:
    """{id: v} of the latest snapshot, snapshot `snapshot_id` or tag `tag`."""
    if tag is not None:
        rb = table.new_read_builder().with_tag(tag)
        data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    else:
        data = read(table, snapshot_id)
    out = {r["id"]: r["v"] for r in data.to_pylist()}
    assert len(out) == data.num_rows, "a key was read twice"
    return out


def now_ms() -> int:
    """A cutoff after every file written so far (modification times have a coarse clock)."""
    time.sleep(0.002)
    return int(time.time() * 1000) + 1


def files_on_disk(table: FileStoreTable) -> set[str]:
    return {str(p) for p in Path(table.path).rglob("*") if p.is_file()}


def _snapshot_files(table: FileStoreTable, s: Snapshot) -> set[str]:
    """What one snapshot references, merged from its own manifests (no shortcuts)."""
    paths = table.path_factory
    mio = table.store.manifest_io()
    codec = table.store.partition_codec()
    lists = [s.base_manifest_list, s.delta_manifest_list] + (
        [s.changelog_manifest_list] if s.changelog_manifest_list else [])
    out = {paths.manifest_path(n) for n in lists}
    for name in lists:
        out |= {paths.manifest_path(m.file_name) for m in mio.read_manifest_list(name)}
    for e in mio.live_entries(s):
        directory = paths.bucket_dir(codec.from_binary(e.partition).spec, e.bucket)
        out |= {f"{directory}/{n}" for n in (e.file.file_name, *e.file.extra_files)}
    if s.index_manifest:
        path = paths.manifest_path(s.index_manifest)
        out.add(path)
        entries = decode_index_manifest_entries(Path(path).read_bytes(), path)
        out |= {f"{paths.index_dir}/{e.file_name}" for e in entries if e.kind == FileKind.ADD}
    return out


def expected_files(table: FileStoreTable) -> set[str]:
    """Schema, snapshot, hint and tag files plus everything a snapshot or tag references."""
    root = Path(table.path)
    out = {str(p) for d in ("schema", "snapshot", "tag") for p in (root / d).glob("*")
           if p.is_file() and not p.name.endswith(".tmp")}
    for s in table.snapshots():
        out |= _snapshot_files(table, s)
    for t in table.tags().values():
        out |= _snapshot_files(table, t)
    return out


def missing_files(table: FileStoreTable) -> set[str]:
    """Files some snapshot or tag references that are not on disk (must always be empty)."""
    return expected_files(table) - files_on_disk(table)


class ObservedFileIO(FaultInjectingFileIO):
    """Calls `observe()` before every mutating operation: a reader looking at each moment."""

    def __init__(self, observe: Callable[[], None]):
        super().__init__(pafs.LocalFileSystem())
        self.observe = observe

    def _fails(self, kind: str, path: str) -> bool:
        self.observe()
        return super()._fails(kind, path)


def on_io(table: FileStoreTable, observe: Callable[[], None]) -> FileStoreTable:
    """The same table, its mutating operations observed."""
    return FileStoreTable(ObservedFileIO(observe), table.name, table.path, table.schema)


def fresh(table: FileStoreTable) -> FileStoreTable:
    """The same table through a plain FileIO and an empty manifest cache, as another process sees it."""
    clear_manifest_cache()
    return FileStoreTable(FileIO(pafs.LocalFileSystem()), table.name, table.path, table.schema)
