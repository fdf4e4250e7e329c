"""Which parquet columns are dictionary-encoded: where the values repeat, unless the table's
`parquet.enable.dictionary` options say otherwise (mergetree/parquet_dictionary.py)."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.mergetree.parquet_dictionary import dictionary_columns
from tests.lakehouse_engine.conftest import create_table, read, rows, write

N = 20_000
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()),
    pa.field("city", pa.string()), pa.field("qty", pa.int32()), pa.field("price", pa.float64()),
    pa.field("rate", pa.float64()), pa.field("ts", pa.timestamp("us")),
])


def _data(n: int = N, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    cities = np.array([f"city-{i:03d}" for i in range(40)])
    return pa.table({
        "id": pa.array(rng.permutation(n), pa.int64()),
        "name": pa.array([f"customer-{v:012d}" for v in rng.integers(0, 10**12, n)]),  # unique
        "city": pa.array(cities[rng.integers(0, len(cities), n)]),                     # 40 values
        "qty": pa.array(rng.integers(1, 10, n), pa.int32()),                           # 9 values
        "price": pa.array(np.round(rng.uniform(0, 5_000, n), 2)),                      # near-unique
        "rate": pa.array(rng.choice([0.0, 0.05, 0.2], n)),                             # 3 values
        "ts": pa.array(np.arange(n, dtype=np.int64) * 1_000, pa.timestamp("us")),      # unique
    }, schema=SCHEMA)


def _encodings(path: str) -> dict[str, bool]:
    """Per column of a parquet file: whether it holds dictionary-encoded pages."""
    meta = pq.ParquetFile(path).metadata
    out: dict[str, bool] = {}
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            chunk = meta.row_group(g).column(c)
            dictionary = any("DICTIONARY" in e for e in chunk.encodings)
            out[chunk.path_in_schema] = out.get(chunk.path_in_schema, False) or dictionary
    return out


def _files(tmp_path: Path, name: str, prefix: str = "data-") -> list[str]:
    files = sorted(glob.glob(str(tmp_path / "warehouse" / "db.db" / name / "bucket-*" / f"{prefix}*.parquet")))
    assert files
    return files


def _file_layout(n: int, **columns: pa.Array) -> pa.Table:
    base = {"_KEY_id": pa.array(np.arange(n)), "_SEQUENCE_NUMBER": pa.array(np.arange(n)),
            "_VALUE_KIND": pa.array(np.zeros(n, np.int8)), "id": pa.array(np.arange(n))}
    return pa.table({**base, **columns})


def test_repeating_columns_take_a_dictionary_and_unique_ones_are_plain() -> None:
    rng = np.random.default_rng(3)
    n = 100_000
    chosen = dictionary_columns(_file_layout(
        n, few=pa.array(rng.integers(0, 7, n)),
        # 2,500 distinct values in 100,000 rows: repeats 40 times each, though a 4,096-row
        # sample sees most of them only once or twice
        medium=pa.array(rng.integers(0, 2_500, n)),
        unique=pa.array(rng.permutation(n)),
        text=pa.array([f"t{v}" for v in rng.permutation(n)]),
        low_float=pa.array(rng.choice([1.5, -0.0, 2.25], n)),
        flag=pa.array(rng.integers(0, 2, n).astype(bool))))
    assert chosen == ["_VALUE_KIND", "few", "medium", "low_float"]


def test_a_clustered_column_is_judged_by_the_whole_file_not_its_first_rows() -> None:
    n = 100_000
    # the first 10,000 rows repeat one value; the rest are unique: a dictionary would not pay
    clustered = np.concatenate([np.zeros(10_000, np.int64), np.arange(1, n - 9_999)])
    assert dictionary_columns(_file_layout(n, c=pa.array(clustered))) == ["_VALUE_KIND"]


def test_a_key_column_follows_its_field() -> None:
    n = 50_000
    table = pa.table({"_KEY_day": pa.array(np.repeat(np.arange(5), n // 5)),
                      "_KEY_id": pa.array(np.arange(n)), "_SEQUENCE_NUMBER": pa.array(np.arange(n)),
                      "_VALUE_KIND": pa.array(np.zeros(n, np.int8)),
                      "day": pa.array(np.repeat(np.arange(5), n // 5)), "id": pa.array(np.arange(n))})
    assert dictionary_columns(table) == ["_KEY_day", "_VALUE_KIND", "day"]


def test_small_files_count_exactly() -> None:
    table = _file_layout(10, d=pa.array([1, 2, 3] * 3 + [1]), u=pa.array(range(10)))
    assert dictionary_columns(table) == ["_VALUE_KIND", "d"]


def test_judging_a_run_of_many_chunks_allocates_its_sample_not_a_copy_of_the_run() -> None:
    # A flushed run is its buffered slices, a chunk each. Taking the sample with `take` copied each
    # judged column of such a run whole first (the scale bench's 2M-row upsert peaked 141 MiB higher).
    names = pa.array([f"{i:04d}-" + "x" * 91 for i in range(1024)])
    n = 400_000
    whole = _file_layout(n, s=names.take(pa.array(np.arange(n) % 1024)))
    run = pa.Table.from_batches(whole.to_batches(max_chunksize=n // 8))
    assert run.column("s").num_chunks == 8
    strings = run.column("s").nbytes  # ~38 MiB
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        chosen = dictionary_columns(run)
    finally:
        pa.set_memory_pool(previous)
    assert chosen == ["_VALUE_KIND", "s"]
    assert pool.max_memory() < strings // 16, f"{pool.max_memory() / 2**20:.1f} MiB allocated to judge the run"


def test_data_and_changelog_files_encode_unique_columns_plain(catalog: Catalog, tmp_path: Path) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                         options={"bucket": "1", "changelog-producer": "lookup"})
    write(table, _data())
    update = _data(seed=2).slice(0, 5_000)
    write(table, update)
    expected = {"_KEY_id": False, "_SEQUENCE_NUMBER": False, "_VALUE_KIND": True, "id": False,
                "name": False, "city": True, "qty": True, "price": False, "rate": True, "ts": False}
    for path in _files(tmp_path, "t") + _files(tmp_path, "t", "changelog-"):
        assert _encodings(path) == expected, path
    assert read(table).num_rows == N


def test_dictionary_files_are_not_larger_on_a_low_cardinality_table(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n = 50_000
    table = _file_layout(n, city=pa.array(np.array([f"c{i}" for i in range(30)])[rng.integers(0, 30, n)]),
                         qty=pa.array(rng.integers(0, 100, n)), rate=pa.array(rng.choice([0.5, 1.5], n)))
    sizes = {}
    for label, choice in (("ours", dictionary_columns(table)), ("none", False), ("all", True)):
        path = tmp_path / f"{label}.parquet"
        pq.write_table(table, path, compression="zstd", compression_level=1, use_dictionary=choice)
        sizes[label] = path.stat().st_size
    assert dictionary_columns(table) == ["_VALUE_KIND", "city", "qty", "rate"]
    assert sizes["ours"] <= sizes["none"] and sizes["ours"] <= sizes["all"]


@pytest.mark.parametrize(("options", "expected"), [
    ({"parquet.enable.dictionary": "false"}, {}),
    ({"parquet.enable.dictionary": "true"},
     {c: True for c in ("_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "name", "city", "qty",
                        "price", "rate", "ts")}),
    ({"parquet.enable.dictionary#name": "true", "parquet.enable.dictionary#city": "false"},
     {"_VALUE_KIND": True, "name": True, "qty": True, "rate": True}),
    ({"parquet.enable.dictionary": "false", "parquet.enable.dictionary#_KEY_id": "true"},
     {"_KEY_id": True}),
])
def test_an_explicit_option_wins(catalog: Catalog, tmp_path: Path, options: dict[str, str],
                                 expected: dict[str, bool]) -> None:
    table = create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={"bucket": "1", **options})
    write(table, _data())
    (path,) = _files(tmp_path, "t")
    assert {c for c, on in _encodings(path).items() if on} == {c for c, on in expected.items() if on}
    assert rows(read(table), "id") == rows(_data(), "id")


def test_an_invalid_dictionary_option_is_refused_naming_it(catalog: Catalog) -> None:
    for key in ("parquet.enable.dictionary", "parquet.enable.dictionary#name"):
        with pytest.raises(InvalidOptionError, match=f"'{key}'"):
            create_table(catalog, "t", SCHEMA, primary_keys=["id"], options={key: "yes"})
