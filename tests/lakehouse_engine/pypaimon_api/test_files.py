"""Data file names as Paimon and pypaimon name them: `<data-file.prefix><uuid>-<n>` with `n` from
0, and postpone-bucket files `<prefix>-u-<commit user>-s-<n>-w-<uuid>-<n>`."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from lakehouse_engine import CatalogFactory, Schema

PA_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("value", pa.string())])


def _files(tmp_path: Path, options: dict[str, str], suffix: str, ids=(1,)) -> list[str]:
    catalog = CatalogFactory.create({"warehouse": str(tmp_path)})
    catalog.create_database("default", True)
    catalog.create_table("default.t", Schema.from_pyarrow_schema(PA_SCHEMA, primary_keys=["id"], options=options), False)
    table = catalog.get_table("default.t")
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.Table.from_pylist([{"id": i, "value": "a"} for i in ids], schema=PA_SCHEMA))
    wb.new_commit().commit(w.prepare_commit())
    return sorted(p.name for p in Path(tmp_path, "default.db", "t").rglob(f"*.{suffix}"))


def test_first_data_file_ends_in_zero_with_the_default_prefix(tmp_path: Path) -> None:
    names = _files(tmp_path, {"bucket": "1"}, "parquet")
    assert len(names) == 1 and re.fullmatch(r"data-[0-9a-f-]{36}-0\.parquet", names[0]), names


def test_each_bucket_counts_its_data_files_from_zero(tmp_path: Path) -> None:
    names = _files(tmp_path, {"bucket": "4"}, "parquet", ids=range(20))
    assert len(names) > 1 and all(n.endswith("-0.parquet") for n in names), names
    assert len({n[:-len("-0.parquet")] for n in names}) == len(names)  # one uuid per bucket


def test_data_file_prefix_names_every_data_file(tmp_path: Path) -> None:
    names = _files(tmp_path, {"bucket": "1", "data-file.prefix": "test_prefix"}, "parquet")
    assert len(names) == 1 and re.fullmatch(r"test_prefix[0-9a-f-]{36}-0\.parquet", names[0]), names


def test_postpone_bucket_files_carry_the_commit_user(tmp_path: Path) -> None:
    names = _files(tmp_path, {"bucket": "-2"}, "avro")
    assert len(names) == 1 and re.fullmatch(r"data--u-.+-s-\d+-w-.+-0\.avro", names[0]), names
