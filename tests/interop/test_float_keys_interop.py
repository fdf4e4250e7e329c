"""NaN and -0.0 primary keys between our engine and pypaimon 2.1.0.

pypaimon reads our table with NaN, -0.0 and 0.0 keys as we do, its bucket function puts each of
those keys where we put it, and NaN keys pypaimon writes in two commits read as one row here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from lakehouse_engine.types import DataType

NUM_BUCKETS = 3
KEYS = [float("nan"), -0.0, 0.0, 1.5, -1.5, float("inf"), float("-inf")]
SCHEMA = pa.schema([pa.field("k", pa.float64(), nullable=False), pa.field("v", pa.string())])

PYPAIMON_READ_AND_BUCKET = """
import pyarrow.parquet as pq
from pypaimon.schema.data_types import AtomicType, DataField
from pypaimon.schema.schema import Schema as PSchema
from pypaimon.schema.table_schema import TableSchema
from pypaimon.write.row_key_extractor import FixedBucketRowKeyExtractor

catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
t = catalog.get_table("db.f")
rb = t.new_read_builder()
rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
fields = [DataField(0, "k", AtomicType("DOUBLE")), DataField(1, "v", AtomicType("STRING"))]
schema = PSchema(fields=fields, primary_keys=["k"], options={"bucket": str(ARGS["buckets"])})
extractor = FixedBucketRowKeyExtractor(TableSchema.from_schema(0, schema))
keys = pq.read_table(ARGS["keys"])
buckets = []
for batch in keys.to_batches():
    buckets.extend(int(b) for b in extractor.extract_partition_bucket_batch(batch)[1])
emit({"rows": [[repr(r["k"]), r["v"]] for r in rows], "buckets": buckets})
"""

PYPAIMON_WRITE_NAN = """
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
catalog.create_database("db", True)
schema = pa.schema([pa.field("k", pa.float64(), nullable=False), pa.field("v", pa.string())])
catalog.create_table("db.p", Schema.from_pyarrow_schema(schema, primary_keys=["k"],
                                                       options={"bucket": "2"}), False)
for keys, values in ARGS["commits"]:
    t = catalog.get_table("db.p")
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"k": [float(k) for k in keys], "v": values}, schema=schema))
    c.commit(w.prepare_commit())
    w.close()
    c.close()
emit("ok")
"""


def _by_key(pairs: list[list[str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in pairs:
        assert key not in out, f"key {key} read twice"
        out[key] = value
    return out


def test_pypaimon_reads_our_nan_and_negative_zero_keys_and_buckets_agree(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    catalog = Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    catalog.create_table("db.f", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["k"],
                                                            options={"bucket": str(NUM_BUCKETS)}))
    table = catalog.get_table("db.f")
    for batch in ({"k": KEYS, "v": [f"a{i}" for i in range(len(KEYS))]},
                  {"k": [float("nan"), -0.0], "v": ["nan again", "negative zero again"]}):
        wb = table.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(pa.table(batch, schema=SCHEMA))
        c.commit(w.prepare_commit())
        w.close()
        c.close()
    expected = {"nan": "nan again", "-0.0": "negative zero again", "0.0": "a2", "1.5": "a3",
                "-1.5": "a4", "inf": "a5", "-inf": "a6"}
    rb = table.new_read_builder()
    ours = _by_key([[repr(r["k"]), r["v"]] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()])
    assert ours == expected

    keys_path = tmp_path / "keys.parquet"
    pq.write_table(pa.table({"k": KEYS, "v": ["x"] * len(KEYS)}, schema=SCHEMA), keys_path)
    result = pypaimon(PYPAIMON_READ_AND_BUCKET, warehouse=str(tmp_path / "warehouse"), keys=str(keys_path),
                      buckets=NUM_BUCKETS)
    assert _by_key(result["rows"]) == expected
    our_buckets = bucket_of(hash_rows([pa.array(KEYS)], [DataType("DOUBLE", nullable=False)]), NUM_BUCKETS)
    assert result["buckets"] == our_buckets.tolist()
    # Each key's data file sits in the bucket both engines compute.
    for key, bucket in zip(KEYS, our_buckets.tolist(), strict=True):
        files = list((Path(table.path) / f"bucket-{bucket}").glob("data-*.parquet"))
        found = pa.concat_tables([pq.read_table(f, columns=["k"]) for f in files]).column("k").to_numpy()
        negative = math.copysign(1.0, key) < 0
        hit = np.isnan(found) if math.isnan(key) else (found == key) & (np.signbit(found) == negative)
        assert hit.any(), f"key {key!r} is not in bucket-{bucket}"


def test_nan_keys_pypaimon_writes_in_two_commits_read_as_one_row(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    warehouse = tmp_path / "warehouse"
    commits = [[[float("nan"), 0.0], ["first", "zero"]], [[float("nan"), -0.0], ["second", "negative zero"]]]
    assert pypaimon(PYPAIMON_WRITE_NAN, warehouse=str(warehouse), commits=commits) == "ok"
    table = Catalog(str(warehouse)).get_table("db.p")
    rb = table.new_read_builder()
    got = _by_key([[repr(r["k"]), r["v"]] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()])
    assert got == {"nan": "second", "0.0": "zero", "-0.0": "negative zero"}
    table.compact(full=True)
    rb = table.new_read_builder()
    got = _by_key([[repr(r["k"]), r["v"]] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()])
    assert got == {"nan": "second", "0.0": "zero", "-0.0": "negative zero"}
