"""A damaged schema, snapshot or manifest list raises CorruptFileError naming that file, not the file
it points to, and a flipped bit never makes a table read other rows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, CorruptFileError
from lakehouse_engine.format.manifest import decode_manifest_entries, decode_manifest_file_metas
from lakehouse_engine.format.manifest_entries import ManifestEntry
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
        catalog: Catalog, table: FileStoreTable) -> None:
    snap = table.latest_snapshot()
    path = Path(table.path_factory.manifest_path(snap.base_manifest_list))
    raw = path.read_bytes()
    # The byte that, zeroed, puts a NUL into a manifest's name (zstd keeps most of a name's
    # bytes as literals); a path with a NUL is what pyarrow refuses to open.
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


def _entries_or_none(data: bytes) -> list[ManifestEntry] | None:
    try:
        return decode_manifest_entries(data, "probe")
    except CorruptFileError:
        return None


def test_a_manifest_whose_flipped_bit_moves_a_files_key_range_raises_not_reads_duplicates(
        catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": 1, "write-only": "true"})
    write(t, pa.table({"id": [10, 11, 12, 13, 14], "v": ["a"] * 5}, schema=SCHEMA))
    write(t, pa.table({"id": [12, 13, 14, 15, 16], "v": ["b"] * 5}, schema=SCHEMA))
    good = _read_fresh(catalog)
    snap = t.latest_snapshot()
    name = t.manifest_io().read_manifest_list(snap.delta_manifest_list)[0].file_name
    path = Path(t.path_factory.manifest_path(name))
    raw = path.read_bytes()
    before = decode_manifest_entries(raw, "probe")[0].file
    # The flip that changes only the new file's _MIN_KEY, so its keys seem to start after the
    # old file's: the two files would be read as not overlapping and not merged.
    damaged = next(d for d in (bytes(raw[:i]) + bytes([raw[i] ^ (1 << b)]) + raw[i + 1:]
                               for i in range(len(raw)) for b in range(8))
                   if (e := _entries_or_none(d))
                   and e[0].file == dataclasses.replace(before, min_key=e[0].file.min_key)
                   and _key(e[0].file.min_key) > 14)
    path.write_bytes(damaged)
    with pytest.raises(CorruptFileError, match=f"{before.file_name}.*manifest"):
        _read_fresh(catalog)
    path.write_bytes(raw)
    assert _read_fresh(catalog).equals(good)


def _key(binary_row: bytes) -> int:
    """The BIGINT of a one-field key row: arity (4 bytes), header (8), then the slot."""
    return int.from_bytes(binary_row[12:20], "little", signed=True)
