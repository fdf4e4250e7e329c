"""The vectorised bucket hash against a one-row-at-a-time MurmurHash3 reference."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_engine.errors import InvalidOptionError, SchemaError
from lakehouse_engine.format.binary_row import serialize_row
from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from lakehouse_engine.types import DataType

from .test_binary_row import CASES, STRATEGIES

P = DataType.parse
M32 = 0xFFFFFFFF


def murmur_by_words(data: bytes, seed: int = 42) -> int:
    """Reference MurmurHash3-32 over whole little-endian 4-byte words (Paimon's hashBytesByWords)."""
    h = seed
    for i in range(0, len(data) // 4 * 4, 4):
        k = (int.from_bytes(data[i : i + 4], "little") * 0xCC9E2D51) & M32
        k = (((k << 15) | (k >> 17)) * 0x1B873593) & M32
        h ^= k
        h = ((((h << 13) | (h >> 19)) & M32) * 5 + 0xE6546B64) & M32
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    h ^= h >> 16
    return h - (1 << 32) if h >> 31 else h


def reference_hashes(rows: list[list[object]], types: list[DataType]) -> list[int]:
    return [murmur_by_words(serialize_row(r, types)[4:]) for r in rows]


def java_bucket(h: int, n: int) -> int:
    rem = abs(h) % n
    return rem if h >= 0 else -rem  # Java's % truncates toward zero


@pytest.mark.parametrize(
    ("data", "seed", "expected"),
    [  # published MurmurHash3_x86_32 vectors (for whole words, hashBytesByWords is the same)
        (b"", 0, 0),
        (b"", 1, 0x514E28B7),
        (b"", 0xFFFFFFFF, 0x81F16F39),
        (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
        (b"\xff\xff\xff\xff", 0, 0x76293B50),
        (b"\x21\x43\x65\x87", 0, 0xF55B516B),
        (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    ],
)
def test_reference_murmur_known_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur_by_words(data, seed) & M32 == expected


@pytest.mark.parametrize("type_str", CASES)
def test_hash_matches_reference_per_type(type_str: str) -> None:
    t = P(type_str)
    values = CASES[type_str]
    got = hash_rows([pa.array(values, type=t.to_arrow())], [t])
    assert got.dtype == np.int32
    assert got.tolist() == reference_hashes([[v] for v in values], [t])


def test_composite_and_chunked_keys() -> None:
    ids = [1, -5, 2**40, None, 7]
    names = ["a", "a much longer name", None, "日本語のテキスト", ""]
    types = [P("BIGINT"), P("STRING")]
    expected = reference_hashes([list(r) for r in zip(ids, names, strict=True)], types)
    cols = [pa.chunked_array([ids[:2], ids[2:]], pa.int64()), pa.array(names)]
    assert hash_rows(cols, types).tolist() == expected


def test_mixed_lengths_including_very_long_values() -> None:
    """Rows whose variable parts differ widely, including the one-by-one tail for a few long rows."""
    rng = np.random.default_rng(7)
    values: list[str | None] = ["x" * int(n) for n in rng.integers(0, 40, 300)]
    values[5] = "long" * 2000
    values[77] = "y" * 999
    values[100] = None
    t = P("STRING")
    got = hash_rows([pa.array(values)], [t])
    assert got.tolist() == reference_hashes([[v] for v in values], [t])
    wide = [P("DECIMAL(38, 4)"), P("STRING"), P("TIMESTAMP(9)")]
    rows: list[list[object]] = [
        [Decimal("-1.0000"), "zz" * 50, dt.datetime(2000, 1, 1, 0, 0, 0, 5)],
        [None, "abc", None],
        [Decimal("123456789012345678901234.5678"), None, dt.datetime(1960, 1, 1)],
    ]
    cols = [pa.array([r[i] for r in rows], t.to_arrow()) for i, t in enumerate(wide)]
    assert hash_rows(cols, wide).tolist() == reference_hashes(rows, wide)


def test_empty_input_and_errors() -> None:
    assert hash_rows([pa.array([], pa.int64())], [P("BIGINT")]).tolist() == []
    with pytest.raises(SchemaError):
        hash_rows([], [])
    with pytest.raises(InvalidOptionError):
        bucket_of(np.array([1], np.int32), 0)


def test_bucket_of_uses_java_remainder() -> None:
    hashes = np.array([0, 1, -1, 6, -6, 7, -7, 2**31 - 1, -(2**31), -123456789], np.int32)
    for n in (1, 4, 7, 10):
        assert bucket_of(hashes, n).tolist() == [abs(java_bucket(int(h), n)) for h in hashes]
        assert bucket_of(hashes, n).dtype == np.int32


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_property_hash_equals_reference(data: st.DataObject) -> None:
    names = data.draw(st.lists(st.sampled_from(sorted(STRATEGIES)), min_size=1, max_size=4))
    types = [P(name) for name in names]
    n = data.draw(st.integers(1, 12))
    cols = [
        data.draw(st.lists(st.none() | STRATEGIES[name], min_size=n, max_size=n)) for name in names
    ]
    rows = [list(r) for r in zip(*cols, strict=True)]
    arrays = [pa.array(c, type=t.to_arrow()) for c, t in zip(cols, types, strict=True)]
    hashes = hash_rows(arrays, types)
    assert hashes.tolist() == reference_hashes(rows, types)
    assert bucket_of(hashes, 7).tolist() == [abs(java_bucket(h, 7)) for h in hashes.tolist()]


@pytest.mark.parametrize("with_null", [False, True])
def test_rows_without_nulls_hash_their_zero_header_once_as_the_reference_does(with_null: bool) -> None:
    """Without nulls every row's header words are zero and are mixed once as a scalar; with a
    null the header differs per row and is mixed row by row. Both match the reference."""
    ids: list[int | None] = [0, 1, -1, 2**62, -(2**63), 42]
    if with_null:
        ids.append(None)
    types = [P("BIGINT"), P("INT")]
    rows = [[v, 7] for v in ids]
    cols = [pa.array(ids, pa.int64()), pa.array([7] * len(ids), pa.int32())]
    assert hash_rows(cols, types).tolist() == reference_hashes(rows, types)
