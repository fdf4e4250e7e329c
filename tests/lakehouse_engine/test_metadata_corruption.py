"""A damaged schema, snapshot or manifest list raises CorruptFileError naming that file, not the file
it points to, and a flipped bit never makes a table read other rows."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, CorruptFileError
from lakehouse_engine.format.manifest import (
    decode_manifest_entries,
    decode_manifest_file_metas,
    encode_manifest_entries,
)
from lakehouse_engine.format.manifest_entries import DataFileMeta, FileKind, ManifestEntry
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


@pytest.fixture
def table(catalog: Catalog) -> FileStoreTable:
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": 2})
    write(t, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    write(t, pa.table({"id": [3, 4], "v": ["x", "y"]}, schema=SCHEMA))
    return t


def _read_fresh(catalog: Catalog) -> pa.Table:
    clear_manifest_cache()
    return read(catalog.get_table("db.t")).sort_by("id")


@pytest.mark.parametrize("damage", [b"\xff\xfe garbage \x00", b"BIGINT"])
def test_a_damaged_schema_file_raises_naming_it(catalog: Catalog, table: FileStoreTable,
                                                damage: bytes) -> None:
    path = Path(table.path_factory.schema_path(0))
    text = path.read_bytes()
    # Garbage that is not UTF-8, or one flipped bit in a type string (BIGINT -> BIGINT with 'I' as 'K').
    path.write_bytes(damage if damage != b"BIGINT" else text.replace(b'"BIGINT', b'"BKGINT', 1))
    with pytest.raises(CorruptFileError, match="schema-0"):
        catalog.get_table("db.t")


def test_a_manifest_list_naming_a_file_with_a_nul_char_raises_naming_the_list(
        catalog: Catalog) -> None:
    # Uncompressed, as this engine's zstd lists carry a checksum that catches the NUL first.
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": 2, "manifest.compression": "none"})
    write(table, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    write(table, pa.table({"id": [3, 4], "v": ["x", "y"]}, schema=SCHEMA))
    snap = table.latest_snapshot()
    path = Path(table.path_factory.manifest_path(snap.base_manifest_list))
    raw = path.read_bytes()
    # The byte that, zeroed, puts a NUL into a manifest's name; a path with a NUL is what pyarrow
    # refuses to open.
    damaged = next(d for d in (raw[:i] + b"\0" + raw[i + 1:] for i in range(len(raw)))
                   if "\0" in _first_name(d))
    path.write_bytes(damaged)
    with pytest.raises(CorruptFileError, match=path.name):
        _read_fresh(catalog)


def _first_name(data: bytes) -> str:
    try:
        return decode_manifest_file_metas(data, "probe")[0].file_name
    except (CorruptFileError, IndexError):
        return ""


def _flips(raw: bytes) -> list[tuple[int, int]]:
    """Every bit after the Avro header (the records), one bit of every header byte."""
    body = raw.find(raw[-16:]) + 16  # the header ends with the sync marker every block ends with
    return [(byte, bit) for byte in range(len(raw)) for bit in range(8)
            if byte >= body or bit == byte % 8]


def test_a_single_bit_flip_in_a_manifest_list_reads_exactly_or_raises_naming_it(
        catalog: Catalog, table: FileStoreTable) -> None:
    good = _read_fresh(catalog)
    snap = table.latest_snapshot()
    path = Path(table.path_factory.manifest_path(snap.base_manifest_list))
    raw = path.read_bytes()
    wrong, unclear, named = [], [], 0
    for byte, bit in _flips(raw):
        damaged = bytearray(raw)
        damaged[byte] ^= 1 << bit
        path.write_bytes(bytes(damaged))
        try:
            got = _read_fresh(catalog)
        except CorruptFileError as exc:
            if path.name in str(exc):
                named += 1
            else:
                unclear.append((byte, bit, str(exc)))
            continue
        except Exception as exc:  # anything but CorruptFileError is unclear
            unclear.append((byte, bit, repr(exc)))
            continue
        if not got.equals(good):
            wrong.append((byte, bit))
    path.write_bytes(raw)
    assert wrong == [] and unclear == []
    assert named > 1000


def test_a_snapshot_naming_another_manifest_list_raises_naming_the_snapshot(
        catalog: Catalog, table: FileStoreTable) -> None:
    path = Path(table.path_factory.snapshot_path(2))
    doc = json.loads(path.read_text())
    name = doc["deltaManifestList"]
    doc["deltaManifestList"] = name[:-1] + chr(ord(name[-1]) ^ 0x04)  # one flipped bit
    path.write_text(json.dumps(doc))
    with pytest.raises(CorruptFileError, match="snapshot-2"):
        _read_fresh(catalog)


def test_a_manifest_whose_flipped_bit_moves_a_files_key_range_raises_not_reads_duplicates(
        catalog: Catalog) -> None:
    # Uncompressed: this engine's zstd manifests carry a checksum that catches any flip first.
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": 1, "write-only": "true", "manifest.compression": "none"})
    write(t, pa.table({"id": [10, 11, 12, 13, 14], "v": ["a"] * 5}, schema=SCHEMA))
    write(t, pa.table({"id": [12, 13, 14, 15, 16], "v": ["b"] * 5}, schema=SCHEMA))
    good = _read_fresh(catalog)
    path = _delta_manifest(t)
    raw = path.read_bytes()
    before = decode_manifest_entries(raw, "probe")[0].file
    # The flip that changes only the new file's _MIN_KEY (12 -> 44), so its keys seem to start
    # after the old file's: the two files would be read as not overlapping and not merged.
    _flip_where(path, lambda e: _replace(e, min_key=k[:12] + bytes([k[12] | 32]) + k[13:])
                if _key(k := e.file.min_key) == 12 else None)
    assert _key(decode_manifest_entries(path.read_bytes(), "probe")[0].file.min_key) > 14
    with pytest.raises(CorruptFileError, match=f"{before.file_name}.*manifest"):
        _read_fresh(catalog)
    path.write_bytes(raw)
    assert _read_fresh(catalog).equals(good)


def _key(binary_row: bytes) -> int:
    """The BIGINT of a one-field key row: arity (4 bytes), header (8), then the slot."""
    return int.from_bytes(binary_row[12:20], "little", signed=True)


# ---- errors name the damaged file, not the file it points to ---------------------------------------
def _plain_table(catalog: Catalog, partitioned: bool = False, buckets: int = 2) -> FileStoreTable:
    """Two commits of overlapping keys into two buckets, with manifests as other writers leave them
    (no checksum): a flipped bit there decodes as another value."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("p", pa.int32())])
    t = create_table(catalog, "t", schema, primary_keys=["id", "p"] if partitioned else ["id"],
                     partition_keys=["p"] if partitioned else [],
                     options={"bucket": buckets, "write-only": "true", "manifest.compression": "none"})
    write(t, pa.table({"id": [1, 2, 3, 4, 5, 6], "v": ["a"] * 6, "p": [7] * 6}, schema=schema))
    write(t, pa.table({"id": [3, 4, 5, 6, 7, 8], "v": ["b"] * 6, "p": [7] * 6}, schema=schema))
    return t


def _delta_manifest(t: FileStoreTable) -> Path:
    snap = t.latest_snapshot()
    name = t.store.manifest_io().read_manifest_list(snap.delta_manifest_list)[0].file_name
    return Path(t.path_factory.manifest_path(name))


def _flip_where(path: Path, damage: Callable[[ManifestEntry], ManifestEntry | None]) -> None:
    """Write `path` back with the first entry `damage` changes (None: leave it) changed, checking
    that the file then differs from the original in exactly one bit (a single-bit flip)."""
    raw = path.read_bytes()
    entries = decode_manifest_entries(raw, "probe")
    for i, entry in enumerate(entries):
        changed = damage(entry)
        if changed is None:
            continue
        data = encode_manifest_entries(entries[:i] + [changed] + entries[i + 1:], codec="null")
        data = data.replace(data[-16:], raw[-16:])  # the original sync marker
        if len(data) == len(raw):
            flipped = sum(bin(a ^ b).count("1") for a, b in zip(data, raw, strict=True))
            if flipped == 1:
                path.write_bytes(data)
                return
    raise AssertionError("no single-bit flip makes that change")


def _replace(entry: ManifestEntry, **changes: Any) -> ManifestEntry:
    file_changes = {k: v for k, v in changes.items() if k in DataFileMeta.__dataclass_fields__}
    entry_changes = {k: v for k, v in changes.items() if k not in file_changes}
    return dataclasses.replace(entry, file=dataclasses.replace(entry.file, **file_changes),
                               **entry_changes)


def test_a_flipped_data_file_name_in_a_manifest_names_the_manifest(catalog: Catalog) -> None:
    t = _plain_table(catalog)
    path = _delta_manifest(t)
    # 'data-...' read as 'dava-...': a name like any other, of a file that is not there.
    _flip_where(path, lambda e: _replace(e, file_name=e.file.file_name.replace("data", "dava", 1)))
    with pytest.raises(CorruptFileError, match=f"is missing.*listed in manifest .*{path.name}"):
        _read_fresh(catalog)


def test_a_flipped_field_name_in_the_schema_names_the_schema_file(
        catalog: Catalog, table: FileStoreTable) -> None:
    path = Path(table.path_factory.schema_path(0))
    path.write_bytes(re.sub(rb'("name"\s*:\s*)"v"', rb'\1"w"', path.read_bytes(), count=1))
    with pytest.raises(CorruptFileError, match="lacks columns.*schema-0"):
        _read_fresh(catalog)


def test_a_tag_naming_a_missing_manifest_list_names_the_tag_file(
        catalog: Catalog, table: FileStoreTable) -> None:
    table.create_tag("t1", 1)
    path = Path(table.path) / "tag" / "tag-t1"
    doc = json.loads(path.read_text())
    doc["baseManifestList"] = doc["baseManifestList"][:-1] + "x"
    path.write_text(json.dumps(doc))
    clear_manifest_cache()
    rb = catalog.get_table("db.t").new_read_builder().with_tag("t1")
    with pytest.raises(CorruptFileError, match="named by .*tag-t1"):
        rb.new_read().to_arrow(rb.new_scan().plan().splits())


@pytest.mark.parametrize("field", ["bucket", "kind", "max_sequence_number", "partition"])
def test_a_flipped_number_in_a_manifest_entry_raises_naming_the_manifest(
        catalog: Catalog, field: str) -> None:
    # Each of these flips once read as other rows: a bucket of -2 (postpone: skipped by readers),
    # an ADD read as a DELETE (the file vanishes), a negative max sequence number (two files
    # merged in the wrong order), the same partition encoded twice (its files never merged).
    t = _plain_table(catalog, partitioned=field == "partition")
    good = _read_fresh(catalog)
    path = _delta_manifest(t)
    # Avro ints are zig-zag encoded: flipping the lowest bit of n gives -n - 1.
    damages: dict[str, Callable[[ManifestEntry], ManifestEntry | None]] = {
        "bucket": lambda e: _replace(e, bucket=-2) if e.bucket == 1 else None,
        "kind": lambda e: _replace(e, kind=FileKind.DELETE),
        "max_sequence_number": lambda e: _replace(e, max_sequence_number=-1 - e.file.max_sequence_number),
        # The row-kind byte of the partition's BinaryRow: the same partition, other bytes.
        "partition": lambda e: _replace(e, partition=e.partition[:4] + b"\x01" + e.partition[5:]),
    }
    raw = path.read_bytes()
    _flip_where(path, damages[field])
    with pytest.raises(CorruptFileError, match=f"manifest .*{path.name}"):
        _read_fresh(catalog)
    path.write_bytes(raw)
    assert _read_fresh(catalog).equals(good)


def test_a_sequence_range_that_disagrees_with_the_file_raises_naming_both(catalog: Catalog) -> None:
    # A lower min makes the two files' ranges overlap, so `_SEQUENCE_NUMBER` is read, and the
    # file's true range is compared with its entry.
    t = _plain_table(catalog, buckets=1)
    path = _delta_manifest(t)
    _flip_where(path, lambda e: _replace(e, min_sequence_number=m & (m - 1))
                if (m := e.file.min_sequence_number) > 0 else None)
    with pytest.raises(CorruptFileError, match=f"sequence numbers run from .*{path.name}"):
        _read_fresh(catalog)
