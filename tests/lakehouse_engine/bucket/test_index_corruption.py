"""A damaged dynamic-bucket HASH index file fails the write with CorruptFileError naming it, changes
nothing stored, and never gives a key a second bucket."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lakehouse_engine import Catalog, CorruptFileError
from lakehouse_engine.bucket.dynamic import HASH_INDEX
from lakehouse_engine.store.manifest_io import clear_manifest_cache
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.bucket.test_dynamic import batch, bucket_of_each_key, dynamic_table
from tests.lakehouse_engine.conftest import snapshot_files, write


def _index_file(table: FileStoreTable) -> Path:
    snap = table.latest_snapshot()
    entries = table.store.manifest_io().read_index_manifest(snap.index_manifest)
    name = next(e.file_name for e in entries if e.index_type == HASH_INDEX and e.bucket == 0)
    return Path(table.path_factory.index_dir) / name


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "missing":
        path.unlink()
    elif how == "short":
        path.write_bytes(data[:-4])
    elif how == "grown":
        path.write_bytes(data + data[:4])
    elif how == "garbled":
        path.write_bytes(bytes(b ^ 0x5A for b in data))
    else:  # a single flipped bit in one hash: same size, same count
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x10
        path.write_bytes(bytes(flipped))


@pytest.mark.parametrize("how", ["missing", "short", "grown", "garbled", "flipped"])
def test_a_damaged_hash_index_file_fails_the_write_naming_it(catalog: Catalog, how: str) -> None:
    table = dynamic_table(catalog)
    write(table, batch(np.arange(300), 1))
    path = _index_file(table)
    _damage(path, how)
    before = snapshot_files(table)
    clear_manifest_cache()
    with pytest.raises(CorruptFileError, match=path.name):
        write(table, batch(np.arange(300), 2))  # every key again: each must find its bucket
    assert snapshot_files(table) == before
    assert len(bucket_of_each_key(table)) == 300  # no key in two buckets


def test_every_single_bit_flip_of_a_hash_index_file_is_caught(catalog: Catalog) -> None:
    table = dynamic_table(catalog)
    write(table, batch(np.arange(20), 1))
    path = _index_file(table)
    raw = path.read_bytes()
    caught = 0
    for bit in range(len(raw) * 8):
        flipped = bytearray(raw)
        flipped[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(flipped))
        clear_manifest_cache()
        with pytest.raises(CorruptFileError, match=path.name):
            write(table, batch(np.arange(20), 2))
        caught += 1
    path.write_bytes(raw)
    write(table, batch(np.arange(20), 3))
    assert caught == len(raw) * 8 and len(bucket_of_each_key(table)) == 20
