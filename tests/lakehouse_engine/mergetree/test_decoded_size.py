"""decoded_size: how many bytes a parquet file's columns take decoded, told from its footer, which
decides whether a merge of bounded memory reads the file whole or in batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_engine.mergetree.data_file_reader import decoded_size


def _file(tmp_path: Path, dictionary: list[str]) -> pq.ParquetFile:
    n = 20_000
    rng = np.random.default_rng(1)
    table = pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "qty": pa.array(rng.integers(0, 5, n), pa.int32()),  # repeats: dictionary-encoded
        "name": pa.array([f"name-{i:08d}" for i in range(n)]),
        "tag": pa.array([["a", "b", "c"][i % 3] for i in range(n)]),
        "tags": pa.array([[i] for i in range(n)], pa.list_(pa.int32())),
    })
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, compression="zstd", use_dictionary=dictionary, row_group_size=7_000)
    return pq.ParquetFile(path)


def test_fixed_width_and_plain_string_columns_are_sized_from_the_footer(tmp_path: Path) -> None:
    pf = _file(tmp_path, ["qty", "tag"])
    columns = ["id", "qty", "name"]
    decoded = pf.read(columns=columns).nbytes
    estimate = decoded_size(pf, columns)
    assert estimate is not None
    assert 0.8 * decoded <= estimate <= 1.25 * decoded


def test_dictionary_strings_and_nested_columns_cannot_be_sized(tmp_path: Path) -> None:
    pf = _file(tmp_path, ["qty", "tag"])
    # A dictionary-encoded string column is small in the footer, wide decoded.
    assert decoded_size(pf, ["id", "tag"]) is None
    assert decoded_size(pf, ["tags"]) is None
    assert decoded_size(pf, ["missing"]) is None
