"""The lookup at commit: new keys found in the newest older level holding them, with their old rows
and places; dead rows (a deletion vector's) skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.format.float_order import comparable_key
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.lookup import lookup
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, write

SCHEMA = pa.schema([pa.field("k1", pa.int64(), nullable=False), pa.field("k2", pa.string(), nullable=False),
                    pa.field("v", pa.string())])


def _batch(ids: range, tag: str) -> pa.Table:
    return pa.table({"k1": list(ids), "k2": [f"s{i % 3}" for i in ids], "v": [f"{tag}{i}" for i in ids]},
                    schema=SCHEMA)


@pytest.fixture()
def table(tmp_path: Path) -> FileStoreTable:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    t = create_table(catalog, "t", SCHEMA, primary_keys=["k1", "k2"],
                     options={"bucket": "1", "write-only": "true"})
    for start in (0, 200, 400):              # the older run: three key-disjoint files
        write(t, _batch(range(start, start + 200), "a"))
    write(t, _batch(range(300, 450), "b"))   # the newer run
    return t


def _runs(t: FileStoreTable) -> list[list[DataFileMeta]]:
    files = [e.file for e in t.store.manifest_io().live_entries(t.latest_snapshot())]
    by_seq = sorted({f.max_sequence_number > 599 for f in files}, reverse=True)
    return [[f for f in files if (f.max_sequence_number > 599) == newer] for newer in by_seq]


def _tools(t: FileStoreTable) -> dict[str, Any]:
    reader = t.store.file_reader()
    bucket_dir = t.path_factory.bucket_dir("", 0)
    schema = t.schema.data_file_arrow_schema()
    types = t.schema.types_of(["k1", "k2"])

    def read_file(f: DataFileMeta, columns: list[str]) -> pa.Table:
        return reader.read(f"{bucket_dir}/{f.file_name}", columns, pa.schema([schema.field(c) for c in columns]), f)

    def key_range(f: DataFileMeta) -> tuple[Any, Any]:
        return (comparable_key(deserialize_row(f.min_key, types)), comparable_key(deserialize_row(f.max_key, types)))

    return {"read_file": read_file, "key_range": key_range, "comparable": comparable_key,
            "key_names": ["k1", "k2"], "value_schema": pa.schema([SCHEMA.field("v"), SCHEMA.field("k1")])}


def test_keys_are_found_in_the_newest_run_that_holds_them(table: FileStoreTable) -> None:
    runs = _runs(table)
    assert len(runs) == 2 and len(runs[1]) > 1  # the older run spans several files
    keys = _batch(range(250, 700, 25), "new").select(["k1", "k2"])
    got = lookup(keys, runs, **_tools(table))
    ids = keys.column("k1").to_pylist()
    assert got.exists.tolist() == [i < 600 for i in ids]
    assert got.key_index.tolist() == [n for n, i in enumerate(ids) if i < 600]
    assert got.old_rows.column("v").to_pylist() == [("b" if 300 <= i < 450 else "a") + str(i)
                                                    for i in ids if i < 600]
    # Each old row is where the lookup says: that row of that file.
    bucket_dir = table.path_factory.bucket_dir("", 0)
    for i, name, pos in zip(got.old_rows.column("k1").to_pylist(), got.file_names, got.positions.tolist(),
                            strict=True):
        assert pq.read_table(f"{bucket_dir}/{name}", columns=["k1"]).column("k1")[pos].as_py() == i


def test_a_dead_row_is_skipped_and_the_older_run_answers(table: FileStoreTable) -> None:
    runs = _runs(table)
    tools = _tools(table)
    newer = {f.file_name for f in runs[0]}

    def live_rows(f: DataFileMeta, rows: pa.Table) -> np.ndarray | None:
        if f.file_name not in newer:
            return None
        return np.asarray(pa.compute.not_equal(rows.column("k1"), 310).to_numpy(zero_copy_only=False))

    keys = _batch(range(310, 311), "new").select(["k1", "k2"])
    got = lookup(keys, runs, live_rows=live_rows, **tools)
    assert got.old_rows.column("v").to_pylist() == ["a310"]
    assert got.file_names[0] not in newer
    by_file = got.positions_by_file()
    assert list(by_file) == [got.file_names[0]] and by_file[got.file_names[0]].tolist() == got.positions.tolist()


def test_no_key_found_gives_empty_rows_of_the_value_schema(table: FileStoreTable) -> None:
    tools = _tools(table)
    got = lookup(_batch(range(900, 905), "n").select(["k1", "k2"]), _runs(table), **tools)
    assert not got.exists.any() and got.old_rows.schema == tools["value_schema"] and got.old_rows.num_rows == 0


def _expected(sought: pa.Table, rows: pa.Table, names: list[str]) -> list[int]:
    where = {tuple(r[n] for n in names): i for i, r in enumerate(sought.to_pylist())}
    return [where.get(tuple(r[n] for n in names), -1) for r in rows.to_pylist()]


@pytest.mark.parametrize("case", ["int-sorted", "int-unsorted", "date", "string", "composite"])
def test_match_keys_finds_each_row_among_the_sought_keys(case: str) -> None:
    # Every path of the match (binary search in an ascending integer file, hash lookups otherwise,
    # column-by-column codes for composite keys) agrees with a plain dictionary lookup.
    import datetime

    from lakehouse_engine.mergetree.lookup import match_keys

    rng = np.random.default_rng(7)
    file_ids = np.sort(rng.choice(5_000, 1_000, replace=False)).astype(np.int64)
    sought_ids = rng.choice(5_000, 300, replace=False).astype(np.int64)
    if case == "int-unsorted":
        file_ids = rng.permutation(file_ids)
    if case in ("int-sorted", "int-unsorted"):
        rows, sought, names = pa.table({"k": file_ids}), pa.table({"k": sought_ids}), ["k"]
    elif case == "date":
        day = datetime.date(2026, 1, 1)
        rows = pa.table({"k": pa.array([day + datetime.timedelta(days=int(i)) for i in file_ids], pa.date32())})
        sought = pa.table({"k": pa.array([day + datetime.timedelta(days=int(i)) for i in sought_ids], pa.date32())})
        names = ["k"]
    elif case == "string":
        rows, sought = pa.table({"k": [f"s{i}" for i in file_ids]}), pa.table({"k": [f"s{i}" for i in sought_ids]})
        names = ["k"]
    else:
        rows = pa.table({"a": file_ids % 50, "b": [f"x{i // 50}" for i in file_ids]})
        sought = pa.table({"a": sought_ids % 50, "b": [f"x{i // 50}" for i in sought_ids]})
        names = ["a", "b"]
    got = match_keys(sought, rows, names).tolist()
    assert got == _expected(sought, rows, names)
    assert any(i >= 0 for i in got) and any(i < 0 for i in got)
    # match_rows: the same matches as (ascending positions, sought index), with sought keys in
    # random order and in key order (the flush lookup's), without a per-row code array.
    from lakehouse_engine.mergetree.lookup import match_rows

    expected = np.asarray(_expected(sought, rows, names))
    for order in (np.arange(sought.num_rows), np.argsort(sought_ids, kind="stable")):
        ordered = sought.take(pa.array(order))
        positions, hit = match_rows(ordered, rows, names)
        assert positions.tolist() == np.flatnonzero(expected >= 0).tolist()
        assert order[hit].tolist() == expected[positions].tolist()


def test_rows_at_gathers_the_rows_a_key_only_lookup_found_in_its_order(table: FileStoreTable) -> None:
    # The lookup is run with one column; the others are gathered after, from every file it found
    # rows in (the newer run and the older run's files), each row as the full lookup gives it.
    from lakehouse_engine.mergetree.lookup import rows_at

    runs = _runs(table)
    tools = _tools(table)
    full_schema = tools["value_schema"]
    keys = _batch(range(700, 100, -37), "new").select(["k1", "k2"])  # (not in key order)
    full = lookup(keys, runs, **tools)
    narrow = lookup(keys, runs, **{**tools, "value_schema": pa.schema([full_schema.field("k1")])})
    assert len(narrow.files) > 2
    got = rows_at(narrow, [f for run in runs for f in run], tools["read_file"], full_schema)
    assert got.equals(full.old_rows)
    assert narrow.key_index.tolist() == full.key_index.tolist()
    nothing = lookup(_batch(range(900, 905), "n").select(["k1", "k2"]), runs, **tools)
    assert rows_at(nothing, [], tools["read_file"], full_schema).equals(full_schema.empty_table())


@pytest.mark.parametrize("span", ["below", "overlap-low", "inside", "overlap-high", "above", "around"])
def test_match_rows_of_sorted_keys_searches_only_the_files_key_range(span: str) -> None:
    # A flush's run comes sorted: only its keys within the file's [first, last] key are searched.
    # Keys below, above or around the file's range match exactly as a plain dictionary lookup.
    from lakehouse_engine.mergetree.lookup import match_rows

    rng = np.random.default_rng(11)
    file_ids = np.sort(rng.choice(np.arange(1_000, 2_000), 400, replace=False)).astype(np.int64)
    low, high = {"below": (0, 900), "overlap-low": (500, 1_500), "inside": (1_100, 1_900),
                 "overlap-high": (1_500, 2_500), "above": (2_100, 3_000), "around": (0, 3_000)}[span]
    sought_ids = np.sort(rng.choice(np.arange(low, high), 300, replace=False)).astype(np.int64)
    rows, sought = pa.table({"k": file_ids}), pa.table({"k": sought_ids})
    expected = np.asarray(_expected(sought, rows, ["k"]))
    positions, hit = match_rows(sought, rows, ["k"])
    assert positions.tolist() == np.flatnonzero(expected >= 0).tolist()
    assert hit.tolist() == expected[positions].tolist()
    assert (len(positions) > 0) == (span not in ("below", "above"))
    none_sought = match_rows(sought.slice(0, 0), rows, ["k"])
    assert none_sought[0].tolist() == [] and none_sought[1].tolist() == []
