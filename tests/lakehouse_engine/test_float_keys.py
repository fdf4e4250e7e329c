"""FLOAT and DOUBLE primary keys follow Java's Double.compare, as Paimon does: all NaNs are one key
(whatever their payload bits), -0.0 and 0.0 are two keys, before and after a full compaction."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.format.binary_row import deserialize_row, serialize_row
from lakehouse_engine.format.binary_rows import serialize_rows
from lakehouse_engine.format.bucket_hash import hash_rows
from lakehouse_engine.format.float_order import comparable_key, total_order
from lakehouse_engine.format.manifest_entries import DataFileMeta, SimpleStats
from lakehouse_engine.read.predicate import PredicateBuilder
from lakehouse_engine.read.split import interval_partition
from lakehouse_engine.types import DataType
from tests.lakehouse_engine.conftest import create_table, read, write

# A quiet NaN with payload bits, as some producers leave them: still NaN, other bytes.
PAYLOAD_NAN = float(np.array([0x7FF8_0000_DEAD_BEEF], np.uint64).view(np.float64)[0])
NEG_NAN = float(np.array([0xFFF8_0000_0000_0001], np.uint64).view(np.float64)[0])

BUCKET_MODES = {"fixed": {"bucket": "3"}, "dynamic": {"bucket": "-1"}}


def _schema(key_type: pa.DataType) -> pa.Schema:
    return pa.schema([pa.field("k", key_type, nullable=False), pa.field("v", pa.string()),
                      pa.field("rk", pa.string())])


def _batch(schema: pa.Schema, keys: list[float], values: list[str], kinds: list[str] | None = None) -> pa.Table:
    return pa.table({"k": pa.array(keys, schema.field("k").type), "v": values,
                     "rk": kinds or ["+I"] * len(keys)}, schema=schema)


def _table(catalog: Catalog, mode: str, key_type: pa.DataType | None = None):
    options = {**BUCKET_MODES[mode], "rowkind.field": "rk"}
    schema = _schema(key_type or pa.float64())
    return create_table(catalog, f"f_{mode}", schema, primary_keys=["k"], options=options)


def _keyed(table) -> dict[str, str]:
    """Rows as {repr of key: value}: repr tells -0.0 from 0.0, and every NaN prints as nan."""
    out: dict[str, str] = {}
    for r in read(table).to_pylist():
        name = repr(r["k"])
        assert name not in out, f"key {name} read twice"
        out[name] = r["v"]
    return out


@pytest.mark.parametrize("mode", sorted(BUCKET_MODES))
@pytest.mark.parametrize("key_type", [pa.float64(), pa.float32()], ids=["DOUBLE", "FLOAT"])
def test_two_upserts_of_nan_read_as_one_row_before_and_after_full_compaction(catalog, mode, key_type):
    t = _table(catalog, mode, key_type)
    s = _schema(key_type)
    write(t, _batch(s, [float("nan"), 1.0], ["first", "one"]))
    write(t, _batch(s, [PAYLOAD_NAN], ["second"]))
    assert _keyed(t) == {"nan": "second", "1.0": "one"}
    t.compact(full=True)
    assert _keyed(t) == {"nan": "second", "1.0": "one"}


@pytest.mark.parametrize("mode", sorted(BUCKET_MODES))
def test_nans_with_different_payload_bits_in_one_batch_are_one_key(catalog, mode):
    t = _table(catalog, mode)
    s = _schema(pa.float64())
    write(t, _batch(s, [PAYLOAD_NAN, float("nan"), NEG_NAN], ["a", "b", "c"]))
    assert _keyed(t) == {"nan": "c"}


@pytest.mark.parametrize("mode", sorted(BUCKET_MODES))
def test_delete_of_nan_deletes_it_before_and_after_full_compaction(catalog, mode):
    t = _table(catalog, mode)
    s = _schema(pa.float64())
    write(t, _batch(s, [float("nan"), 2.0], ["x", "two"]))
    t.compact(full=True)
    write(t, _batch(s, [PAYLOAD_NAN], [None], ["-D"]))
    assert _keyed(t) == {"2.0": "two"}
    t.compact(full=True)
    assert _keyed(t) == {"2.0": "two"}


@pytest.mark.parametrize("mode", sorted(BUCKET_MODES))
def test_negative_zero_and_zero_are_two_keys(catalog, mode):
    t = _table(catalog, mode)
    s = _schema(pa.float64())
    write(t, _batch(s, [0.0, -0.0], ["zero", "negative zero"]))
    write(t, _batch(s, [-0.0], ["negative zero again"]))
    assert _keyed(t) == {"0.0": "zero", "-0.0": "negative zero again"}
    t.compact(full=True)
    assert _keyed(t) == {"0.0": "zero", "-0.0": "negative zero again"}


def test_composite_key_with_nan_field_is_one_key(catalog):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("x", pa.float64(), nullable=False),
                        pa.field("v", pa.string())])
    t = create_table(catalog, "c", schema, primary_keys=["id", "x"], options={"bucket": "2"})
    write(t, pa.table({"id": [1, 1, 1], "x": [float("nan"), -0.0, 0.0], "v": ["a", "b", "c"]}, schema=schema))
    write(t, pa.table({"id": [1], "x": [PAYLOAD_NAN], "v": ["d"]}, schema=schema))
    t.compact(full=True)
    got = sorted((repr(r["x"]), r["v"]) for r in read(t).to_pylist())
    assert got == [("-0.0", "b"), ("0.0", "c"), ("nan", "d")]


def test_nan_keys_serialize_and_hash_as_the_canonical_nan():
    double = [DataType("DOUBLE", nullable=False)]
    canonical = serialize_row([float("nan")], double)
    assert serialize_row([PAYLOAD_NAN], double) == canonical
    assert serialize_rows([pa.array([PAYLOAD_NAN, NEG_NAN])], double) == [canonical, canonical]
    assert canonical[-8:] == (0x7FF8_0000_0000_0000).to_bytes(8, "little")
    hashes = hash_rows([pa.array([float("nan"), PAYLOAD_NAN, NEG_NAN, 0.0, -0.0])], double)
    assert len(set(hashes[:3].tolist())) == 1
    assert hashes[3] != hashes[4]
    single = [DataType("FLOAT", nullable=False)]
    payload32 = float(np.array([0x7FC0_BEEF], np.uint32).view(np.float32)[0])
    assert serialize_rows([pa.array([payload32], pa.float32())], single) == [serialize_row([float("nan")], single)]


def test_total_order_is_javas_double_compare():
    values = np.array([np.nan, np.inf, 1.0, 0.0, -0.0, -1.0, -np.inf, PAYLOAD_NAN])
    order = total_order(values)
    assert values[np.argsort(order, kind="stable")].tolist()[:6] == [-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf]
    assert order[0] == order[7]  # every NaN is one value, above +Infinity
    assert order[0] > order[1]
    assert comparable_key([-0.0]) < comparable_key([0.0]) < comparable_key([float("inf")]) < comparable_key([NEG_NAN])
    assert comparable_key([float("nan")]) == comparable_key([PAYLOAD_NAN])


def test_key_stats_with_nan_do_not_prune_matching_files(catalog):
    t = _table(catalog, "fixed")
    s = _schema(pa.float64())
    write(t, _batch(s, [7.0, float("nan"), -0.0], ["seven", "nan", "negative zero"]))
    pb = PredicateBuilder(["k", "v", "rk"])
    got = read(t, predicate=pb.greater_than("k", 5.0)).column("v").to_pylist()
    assert sorted(got) == ["nan", "seven"]  # Java's order: NaN is above every other double


def test_a_file_written_nan_first_is_merged_with_every_other_file():
    double = [DataType("DOUBLE", nullable=False)]

    def meta(name: str, first: float, last: float) -> DataFileMeta:
        return DataFileMeta(name, 100, 2, serialize_row([first], double), serialize_row([last], double),
                            SimpleStats.EMPTY, SimpleStats.EMPTY, 0, 0, 0, 0)

    def key(binary: bytes) -> tuple[object, ...]:
        return comparable_key(deserialize_row(binary, double))

    # pypaimon 2.1.0 sorts NaN before numbers: its files' first key lies above their last one.
    files = [meta("pypaimon", float("nan"), 0.0), meta("later", 5.0, 6.0), meta("nan", float("nan"), float("nan"))]
    assert [[f.file_name for f in s] for s in interval_partition(files, key)] == [["later", "pypaimon", "nan"]]
    ordered = [meta("a", 0.0, 1.0), meta("b", 5.0, float("nan"))]
    assert [[f.file_name for f in s] for s in interval_partition(ordered, key)] == [["a"], ["b"]]


def test_cross_partition_upsert_moves_a_nan_key_whatever_its_payload_bits(catalog):
    schema = pa.schema([pa.field("k", pa.float64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                        pa.field("v", pa.string())])
    t = create_table(catalog, "x", schema, primary_keys=["k"], partition_keys=["dt"], options={"bucket": "-1"})
    write(t, pa.table({"k": [float("nan"), -0.0], "dt": ["a", "a"], "v": ["first", "negative zero"]}, schema=schema))
    fresh = catalog.get_table("db.x")  # a new writer bootstraps the global index from the files
    write(fresh, pa.table({"k": [PAYLOAD_NAN, 0.0], "dt": ["b", "b"], "v": ["moved", "zero"]}, schema=schema))
    got = sorted((repr(r["k"]), r["dt"], r["v"]) for r in read(t).to_pylist())
    assert got == [("-0.0", "a", "negative zero"), ("0.0", "b", "zero"), ("nan", "b", "moved")]
