"""pypaimon 2.1.0 reads tables this engine writes, and sees exactly what the reference model holds.

All tables are written once per module by our engine (every key type, value type, partition
type, bucket counts 1/4/7 and -1, updates, deletes and duplicate keys over several commits, and
an overwrite of one partition); a single pypaimon subprocess then reads every table (plain reads,
partition and key filters, time travel), writing each result to a parquet file that the tests
compare with the model.
"""

from __future__ import annotations

import datetime
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine import Catalog
from tests.interop.model import (
    ALL_VALUE_TYPES,
    KEY_TYPES,
    ORC_VALUE_TYPES,
    PARTITION_TYPES,
    PYPAIMON_READ,
    TWO_DATES,
    Read,
    Spec,
    TableModel,
    assert_same_rows,
    change_batches,
    filter_rows,
    key_type_spec,
    one_batch_per_commit,
    partition_type_spec,
    pk_spec,
    read_result,
    value_fields,
    value_row,
    write_ours,
)


def _specs() -> list[Spec]:
    specs = [
        pk_spec("pk_b1_all_types", [pa.field("id", pa.int64())], [], lambda i: {"id": i},
                n_keys=80, commits=4, bucket=1, value_types=ALL_VALUE_TYPES, seed=1, split=True),
        pk_spec("pk_b4_all_types", [pa.field("id", pa.int32())], [], lambda i: {"id": i * 3 - 100},
                n_keys=120, commits=3, bucket=4, value_types=ALL_VALUE_TYPES, seed=2,
                extra_options={"file.compression": "snappy", "manifest.compression": "deflate"}),
        # Data files in ORC and Avro (`file.format`); Avro holds timestamps up to microseconds.
        pk_spec("pk_b2_all_types_orc", [pa.field("id", pa.int64())], [], lambda i: {"id": i},
                n_keys=60, commits=3, bucket=2, value_types=ORC_VALUE_TYPES, seed=21,
                extra_options={"file.format": "orc"}),
        pk_spec("pk_b2_all_types_avro", [pa.field("id", pa.int64())], [], lambda i: {"id": i},
                n_keys=60, commits=3, bucket=2, value_types=[t for t in ALL_VALUE_TYPES if t != "timestamp_9"],
                seed=22, extra_options={"file.format": "avro"}),
        pk_spec("pk_b7_large", [pa.field("id", pa.int64())], [], lambda i: {"id": i * 7919},
                n_keys=20000, commits=3, bucket=7, value_types=["int", "string_long", "double"],
                seed=3),
        pk_spec("part_dt", [pa.field("dt", pa.string()), pa.field("id", pa.int64())], ["dt"],
                lambda i: {"dt": ["a", "b", "2024-01-01", "with space"][i % 4], "id": i // 2},
                n_keys=200, commits=3, bucket=4, value_types=["string", "decimal_10_2"], seed=4,
                reads=[Read("latest"), Read("dt_a", [("equal", "dt")], {"dt": "a"}),
                       Read("dt_2024", [("equal", "dt")], {"dt": "2024-01-01"})]),
        # Paimon escapes these characters in partition directory names (`=` is `%3D`).
        pk_spec("part_dt_escaped", [pa.field("dt", pa.string()), pa.field("id", pa.int64())],
                ["dt"], lambda i: {"dt": ["k=v", "12:30", "100%", "a#b?c", "a/b"][i % 5], "id": i},
                n_keys=40, commits=2, bucket=1, value_types=["int"], seed=9),
        # A blank value goes to the default partition, as an empty one does.
        pk_spec("part_dt_blank", [pa.field("dt", pa.string()), pa.field("id", pa.int64())],
                ["dt"], lambda i: {"dt": ["", " ", "x"][i % 3], "id": i},
                n_keys=30, commits=2, bucket=1, value_types=["int"], seed=19),
        pk_spec("part_int_date",
                [pa.field("p_int", pa.int32()), pa.field("p_date", pa.date32()),
                 pa.field("id", pa.int64())], ["p_int", "p_date"],
                lambda i: {"p_int": [-1, 0, 7][i % 3],
                           "p_date": TWO_DATES[i % 2],
                           "id": i // 3},
                n_keys=150, commits=3, bucket=7, value_types=["timestamp_6", "bytes"], seed=5,
                reads=[Read("latest"),
                       Read("p_int_7_leap_day", [("equal", "p_int"), ("equal", "p_date")],
                            {"p_int": 7, "p_date": datetime.date(2024, 2, 29)}),
                       Read("p_date_1969", [("equal", "p_date")],
                            {"p_date": datetime.date(1969, 12, 31)})]),
        pk_spec("composite_key", [pa.field("k1", pa.int64()), pa.field("k2", pa.string())], [],
                lambda i: {"k1": i // 3 - 5, "k2": ["x", "a-much-longer-string", "ü"][i % 3]},
                n_keys=90, commits=3, bucket=4, value_types=["int", "timestamp_3"], seed=6,
                reads=[Read("latest"),
                       Read("k1_k2", [("equal", "k1"), ("equal", "k2")], {"k1": 3, "k2": "ü"})]),
        pk_spec("many_commits", [pa.field("id", pa.int64())], [], lambda i: {"id": i},
                n_keys=50, commits=8, bucket=4, value_types=["string", "int"], seed=7,
                extra_options={"manifest.merge-min-count": "3"},
                reads=[Read("latest"), Read("commit_1", after_commit=1),
                       Read("commit_3", after_commit=3), Read("commit_6", after_commit=6)]),
    ]
    specs += [key_type_spec(i, t) for i, t in enumerate(KEY_TYPES)]
    specs += [partition_type_spec(t) for t in PARTITION_TYPES]
    append_schema = pa.schema([pa.field("id", pa.int64()), pa.field("dt", pa.string())]
                              + value_fields(ALL_VALUE_TYPES))

    def append_rows(start: int, n: int) -> list[dict[str, Any]]:
        return [{"id": i % 37, "dt": [None, "a", "b"][i % 3], **value_row(i, 0, ALL_VALUE_TYPES)}
                for i in range(start, start + n)]

    specs.append(Spec("append_unaware", append_schema, [], ["dt"], {"bucket": "-1"},
                      [[append_rows(0, 90)], [append_rows(90, 60), append_rows(0, 5)]],
                      reads=[Read("latest"), Read("dt_b", [("equal", "dt")], {"dt": "b"})]))
    specs.append(Spec("append_bucketed", append_schema, [], [],
                      {"bucket": "3", "bucket-key": "id"},
                      [[append_rows(0, 70)], [append_rows(70, 70)]]))
    overwrite_rows = [{"dt": "a", "id": i, "c_string": f"new-{i}", "c_int": i, "rk": "+I"}
                      for i in range(0, 40, 3)]
    def overwrite_row(i: int, v: int) -> dict[str, Any]:
        return {"dt": "abc"[i % 3], "id": i, **value_row(i, v, ["string", "int"])}

    specs.append(Spec(
        "overwrite_dt",
        pa.schema([pa.field("dt", pa.string()), pa.field("id", pa.int64())]
                  + value_fields(["string", "int"]) + [pa.field("rk", pa.string())]),
        ["dt", "id"], ["dt"], {"bucket": "4", "rowkind.field": "rk"},
        one_batch_per_commit(change_batches(60, 2, 8, overwrite_row)),
        reads=[Read("latest"), Read("before_overwrite", after_commit=2),
               Read("dt_a", [("equal", "dt")], {"dt": "a"})],
        overwrite=({"dt": "a"}, overwrite_rows)))
    return specs


SPECS = _specs()
CASES = [(s.name, r.label) for s in SPECS for r in s.reads]


@dataclass
class Outcome:
    expected: list[tuple[Any, ...]]
    status: str | None
    path: str
    schema: pa.Schema


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory,
             pypaimon: Callable[..., Any]) -> dict[tuple[str, str], Outcome]:
    tmp: Path = tmp_path_factory.mktemp("pypaimon_reads_ours")
    warehouse = tmp / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db", ignore_if_exists=True)
    reads: list[dict[str, Any]] = []
    expected: dict[tuple[str, str], Outcome] = {}
    for spec in SPECS:
        try:
            history = write_ours(catalog, spec)
        except Exception:
            failure = "OURS " + traceback.format_exc()[-3000:]
            for r in spec.reads:
                expected[(spec.name, r.label)] = Outcome([], failure, "", spec.schema)
            continue
        for r in spec.reads:
            out = str(tmp / f"{spec.name}.{r.label}.parquet")
            commit = history[-1] if r.after_commit is None else history[r.after_commit - 1]
            snapshot = None if r.after_commit is None else commit.first_id
            rows = commit.model.rows()
            read: dict[str, Any] = {"table": f"db.{spec.name}", "out": out, "snapshot": snapshot}
            if r.filters:
                literals = r.literals(rows) if callable(r.literals) else r.literals
                probe = str(tmp / f"{spec.name}.{r.label}.probe.parquet")
                probe_schema = pa.schema([spec.schema.field(f) for _, f in r.filters])
                pq.write_table(pa.Table.from_pylist([literals], schema=probe_schema), probe)
                read.update(filter=r.filters, probe=probe)
                rows = filter_rows(rows, r.filters, literals)
            reads.append(read)
            model = TableModel(spec.schema)
            model.apply(rows)
            expected[(spec.name, r.label)] = Outcome(model.canonical(pypaimon_read=True), None, out,
                                                     spec.schema)
    result = pypaimon(PYPAIMON_READ + """
catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
emit(paimon_reads(catalog, ARGS["reads"]))
""", warehouse=str(warehouse), reads=reads)
    for o in expected.values():
        if o.status is None:
            o.status = result[o.path]
    return expected


@pytest.mark.parametrize(("table", "read"), CASES, ids=[f"{t}-{r}" for t, r in CASES])
def test_pypaimon_reads_our_table(outcomes: dict[tuple[str, str], Outcome], table: str,
                                  read: str) -> None:
    o = outcomes[(table, read)]
    actual = read_result(o.status, o.path, o.schema)
    assert_same_rows(o.expected, actual, f"pypaimon read of {table} ({read})")


def test_every_case_has_rows(outcomes: dict[tuple[str, str], Outcome]) -> None:
    """The reads are meaningful: no filter or snapshot selects an empty result, and the tables
    cover the bucket counts 1, 4, 7 and -1."""
    assert all(o.expected for o in outcomes.values() if not (o.status or "").startswith("OURS"))
    assert {s.options.get("bucket") for s in SPECS} >= {"1", "4", "7", "-1"}
