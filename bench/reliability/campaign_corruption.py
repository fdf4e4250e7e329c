"""Single-bit flips and truncations of every kind of file of a small table: each damaged read must
return exactly the rows, or raise CorruptFileError naming the damaged file (UnsupportedFeatureError
for a flipped manifest `_VERSION`, which reads as a newer layout).

The table: a dynamic-bucket primary-key table (so it has HASH index files and an index manifest),
seven column types with nulls, two commits and a tag. For each kind of file (data file, manifest,
manifest list, snapshot, schema, index manifest, HASH index file, tag) one file is damaged at a
time and restored after: one bit of every byte flipped (quick: of every fourth byte; every bit
of files under 256 bytes) and the file cut at evenly spaced points. What is done with the damaged table is what uses that file: reading the
latest snapshot (data, manifest, manifest list, snapshot, schema), reading the tag (tag), or a
writer assigning buckets to every key again (index files: a wrong assignment is a key given a
second bucket).

A second table streams: fixed bucket, deletion vectors, a `lookup` changelog producer, two
snapshots retained and the changelogs of the expired ones kept (`changelog/changelog-<id>`), and a
consumer. Its files are damaged the same way: a changelog file, a changelog manifest and manifest
list and a long-lived changelog (read: every change from the first snapshot), the consumer file
(read: a streaming read with that consumer, its start and first plan; the file is Paimon's JSON
without a checksum, so a digit flipped into another valid position cannot be told), a
deletion-vector index file and the index manifest (read: the latest snapshot).
"""

from __future__ import annotations

import datetime
import decimal
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench.reliability import Outcome
from lakehouse_engine import Catalog, CorruptFileError, Schema, UnsupportedFeatureError
from lakehouse_engine.bucket.dynamic import HASH_INDEX, DynamicBucketAssigner
from lakehouse_engine.format.bucket_hash import hash_rows
from lakehouse_engine.format.deletion_vectors import DELETION_VECTORS_INDEX
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from lakehouse_engine.table import FileStoreTable

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("amount", pa.float64()),
    ("qty", pa.int32()), ("day", pa.date32()), ("ts", pa.timestamp("us")),
    ("price", pa.decimal128(10, 2)),
])


def _rows(ids: range, version: int) -> pa.Table:
    def v(i: int, x: object) -> object:
        return None if i % 5 == 0 else x
    return pa.table({
        "id": list(ids),
        "name": [v(i, f"n{i}-{version}") for i in ids],
        "amount": [v(i, i * 1.5 + version) for i in ids],
        "qty": [v(i, i * 3) for i in ids],
        "day": [v(i, datetime.date(2026, 1, 1) + datetime.timedelta(days=i)) for i in ids],
        "ts": [v(i, datetime.datetime(2026, 1, 1, 0, 0, i % 60)) for i in ids],
        "price": [v(i, decimal.Decimal(i) / 4) for i in ids],
    }, schema=SCHEMA)


def _commit(table: FileStoreTable, ids: range, version: int) -> None:
    """One batch commit of `ids` at `version`."""
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(ids, version))
    c.commit(w.prepare_commit())
    w.close()
    c.close()


def _build(root: Path, name: str = "db.t", **options: str) -> FileStoreTable:
    catalog = Catalog(str(root / "warehouse"))
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_table(name, Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["id"], options={"bucket": "-1", "dynamic-bucket.target-row-num": "15",
                                              "write-only": "true", **options}))
    table = catalog.get_table(name)
    for ids, version in ((range(0, 20), 1), (range(10, 30), 2)):
        _commit(table, ids, version)
        if version == 1:
            table.create_tag("first", 1)
    return table


def _read(table: FileStoreTable, tag: str | None = None) -> set[tuple[Any, ...]]:
    clear_manifest_cache()
    fresh = Catalog(str(Path(table.path).parents[1])).get_table(table.name)
    rb = fresh.new_read_builder()
    if tag is not None:
        rb = rb.with_tag(tag)
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return set(zip(*(c.to_pylist() for c in data.columns), strict=True))


def _assignment(table: FileStoreTable) -> set[tuple[Any, ...]]:
    """(key hash, bucket) a new writer gives every key of the table (a writer's first step)."""
    clear_manifest_cache()
    fresh = Catalog(str(Path(table.path).parents[1])).get_table(table.name)
    snapshot = fresh.latest_snapshot()
    partition = fresh.store.manifest_io().live_entries(snapshot)[0].partition
    hashes = hash_rows([pa.array(np.arange(30, dtype=np.int64))], fresh.schema.types_of(["id"]))
    assigner = DynamicBucketAssigner(fresh.store, snapshot)
    buckets = assigner.assign(fresh.store.partition_codec().from_binary(partition), hashes)
    return set(zip(hashes.tolist(), buckets.tolist(), strict=True))


def _files(table: FileStoreTable) -> dict[str, tuple[Path, Callable[[], set[tuple[Any, ...]]]]]:
    """One file of each kind, and the operation that uses it."""
    snap = table.latest_snapshot()
    mio = table.store.manifest_io()
    paths = table.path_factory
    base = mio.read_manifest_list(snap.delta_manifest_list)
    entry = mio.live_entries(snap)[0]
    index_entry = next(e for e in mio.read_index_manifest(snap.index_manifest or "")
                       if e.index_type == HASH_INDEX)
    data = next(Path(table.path).rglob(entry.file.file_name))
    return {
        "data file": (data, lambda: _read(table)),
        "manifest": (Path(paths.manifest_path(base[0].file_name)), lambda: _read(table)),
        "manifest list": (Path(paths.manifest_path(snap.delta_manifest_list)), lambda: _read(table)),
        "snapshot": (Path(paths.snapshot_path(snap.id)), lambda: _read(table)),
        "schema": (Path(paths.schema_path(0)), lambda: _read(table)),
        "tag": (Path(table.path) / "tag" / "tag-first", lambda: _read(table, "first")),
        "index manifest": (Path(paths.manifest_path(snap.index_manifest or "")),
                           lambda: _assignment(table)),
        "HASH index file": (Path(paths.index_dir) / index_entry.file_name, lambda: _assignment(table)),
    }


def _build_streaming(root: Path, name: str = "db.s") -> FileStoreTable:
    """A deletion-vector table with a lookup changelog, long-lived changelogs and a consumer."""
    catalog = Catalog(str(root / "warehouse"))
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "deletion-vectors.enabled": "true", "changelog-producer": "lookup",
        "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
        "changelog.num-retained.min": "10", "changelog.num-retained.max": "20"}))
    table = catalog.get_table(name)
    for ids, version in ((range(0, 20), 1), (range(10, 30), 2), (range(5, 15), 3), (range(25, 35), 4)):
        _commit(table, ids, version)
    table.consumer_manager().reset_consumer("etl", table.snapshot_manager().latest_snapshot_id() or 1)
    return table


def _fresh(table: FileStoreTable) -> FileStoreTable:
    clear_manifest_cache()
    return Catalog(str(Path(table.path).parents[1])).get_table(table.name)


def _changes(table: FileStoreTable) -> set[tuple[Any, ...]]:
    data = _fresh(table).changes(0)
    return set(zip(*(c.to_pylist() for c in data.columns), strict=True))


def _consumer_stream(table: FileStoreTable) -> set[tuple[Any, ...]]:
    """Where a streaming read with consumer `etl` starts, and its first plan's rows."""
    builder = _fresh(table).new_stream_read_builder().with_consumer_id("etl").with_include_row_kind()
    scan = builder.new_streaming_scan()
    data = builder.new_read().to_arrow(scan.plan().splits())
    return {("start", scan.checkpoint())} | set(zip(*(c.to_pylist() for c in data.columns), strict=True))


def _streaming_files(table: FileStoreTable) -> dict[str, tuple[Path, Callable[[], set[tuple[Any, ...]]]]]:
    """One file of each kind a streaming read or a deletion-vector read uses, and that read."""
    snap = table.latest_snapshot()
    mio = table.store.manifest_io()
    paths = table.path_factory
    with_changelog = next(s for s in reversed(table.snapshots()) if s.changelog_manifest_list)
    changelog_list = with_changelog.changelog_manifest_list or ""
    metas = mio.read_manifest_list(changelog_list)
    changelog = mio.read_manifest(metas[0].file_name)[0].file.file_name
    long_lived = sorted(Path(paths.changelog_dir).glob("changelog-[0-9]*"))[0]
    vectors = next(e for e in mio.read_index_manifest(snap.index_manifest or "")
                   if e.index_type == DELETION_VECTORS_INDEX)
    return {
        "changelog file": (next(Path(table.path).rglob(changelog)), lambda: _changes(table)),
        "changelog manifest": (Path(paths.manifest_path(metas[0].file_name)), lambda: _changes(table)),
        "changelog manifest list": (Path(paths.manifest_path(changelog_list)), lambda: _changes(table)),
        "long-lived changelog": (long_lived, lambda: _changes(table)),
        "consumer file": (Path(table.path) / "consumer" / "consumer-etl", lambda: _consumer_stream(table)),
        "deletion-vector index file": (Path(paths.index_dir) / vectors.file_name, lambda: _read(table)),
        "deletion-vector index manifest": (Path(paths.manifest_path(snap.index_manifest or "")),
                                           lambda: _read(table)),
    }


@dataclass
class _Tally:
    trials: int = 0
    exact: int = 0
    named: int = 0
    lost: int = 0
    wrong: int = 0
    unclear: int = 0
    examples: list[str] = field(default_factory=list)


def _damages(raw: bytes, quick: bool, stride: int | None = None) -> Iterator[bytes]:
    """Single-bit flips (quick: one bit of every fourth byte; full: one bit of every byte, every
    bit of files under 256 bytes), then cuts at evenly spaced points."""
    every = len(raw) < 256 and not quick
    for byte in range(0, len(raw), stride or (4 if quick else 1)):
        for bit in (range(8) if every else (byte % 8,)):
            damaged = bytearray(raw)
            damaged[byte] ^= 1 << bit
            yield bytes(damaged)
    cuts = 16 if quick else 64
    for cut in sorted({0, 1, len(raw) - 1, *range(0, len(raw), max(1, len(raw) // cuts))}):
        yield raw[:cut]


def _attack(path: Path, use: Callable[[], set[tuple[Any, ...]]], quick: bool,
            stride: int | None = None) -> _Tally:
    good = use()
    raw = path.read_bytes()
    tally = _Tally()
    try:
        for damaged in _damages(raw, quick, stride):
            tally.trials += 1
            path.write_bytes(damaged)
            try:
                got = use()
            except (CorruptFileError, UnsupportedFeatureError) as exc:
                # A flipped `_VERSION` of a manifest without checksum reads as a newer manifest
                # layout: refused as such, naming the file (format/features.py).
                if path.name in str(exc):
                    tally.named += 1
                else:
                    tally.unclear += 1
                    tally.examples.append(str(exc)[:160])
                continue
            except Exception as exc:  # anything else is an unclear error
                tally.unclear += 1
                tally.examples.append(repr(exc)[:160])
                continue
            if got == good:
                tally.exact += 1
            else:
                tally.lost += len(good - got)
                tally.wrong += len(got - good)
                tally.examples.append(f"wrong read: {len(good - got)} rows lost, {len(got - good)} other")
    finally:
        path.write_bytes(raw)
    return tally


def run(quick: bool) -> list[Outcome]:
    """Flip and cut every kind of file of a small table; tally exact reads and named errors."""
    root = Path(tempfile.mkdtemp(prefix="campaign-corruption-"))
    outcomes = []
    try:
        table = _build(root)
        attacks = list(_files(table).items())
        # Manifests this engine writes carry zstd checksums; other writers' (and uncompressed
        # ones) do not, so their numeric fields (sequence numbers, bucket, level, sizes, kind)
        # must be checked where they are used.
        plain = _build(root, "db.plain", **{"manifest.compression": "none"})
        attacks.append(("manifest without checksum (uncompressed)", _files(plain)["manifest"]))
        attacks += list(_streaming_files(_build_streaming(root)).items())
        for kind, (path, use) in attacks:
            t = _attack(path, use, quick)
            how = "one bit of every fourth byte" if quick else "one bit of every byte"
            result = f"exact {t.exact:,}, CorruptFileError naming the file {t.named:,}"
            if t.examples:
                result += f"; e.g. {t.examples[0]}"
            outcomes.append(Outcome(
                area="corruption", tried=f"{how} of {'an' if kind[0] in 'aeiou' else 'a'} {kind} ({path.stat().st_size:,} bytes) "
                f"flipped, and cuts", trials=t.trials, lost_rows=t.lost, wrong_rows=t.wrong,
                unclear_errors=t.unclear, result=result))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return outcomes
