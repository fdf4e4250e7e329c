"""Each merge engine gives the rows Paimon 0.9 gives when its own writer is fed the same commits.

For every case two tables share one schema: we write one, Paimon's Java writer writes the other,
commit by commit. Both engines then read both tables, before and after each engine compacts its
own, and all four views must hold the same rows.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from tests.java.conftest import Judge, canonical_rows, ok, sorted_values
from tests.lakehouse_engine.conftest import create_table, read, write

D = decimal.Decimal
SCHEMA = pa.schema([
    pa.field("k", pa.int64(), nullable=False), pa.field("seq", pa.int64()), pa.field("seq2", pa.int32()),
    pa.field("price", pa.decimal128(10, 2)), pa.field("qty", pa.int32()), pa.field("name", pa.string()),
    pa.field("_rk", pa.string()),
])
Row = tuple[int, Any, Any, Any, Any, Any, str]  # k, seq, seq2, price, qty, name, row kind

# Three commits over keys 1..8: nulls in every value column and in the sequence fields,
# ties, out-of-order sequences, updates and (where the engine allows) deletes.
COMMITS: list[list[Row]] = [
    [(1, 10, 1, D("1.00"), 1, "a", "+I"), (2, None, None, D("2.00"), None, "b", "+I"),
     (3, 5, 2, None, 3, None, "+I"), (4, 7, None, D("4.00"), 4, "d", "+I"),
     (5, 1, 1, D("5.00"), 5, "e", "+I"), (6, None, 3, D("6.00"), 6, "f", "+I")],
    [(1, 9, 9, D("1.50"), None, "a2", "+U"), (2, 3, 1, None, 20, None, "+U"),
     (3, 5, 1, D("3.50"), None, "c2", "+U"), (4, None, 9, D("4.50"), 40, None, "+U"),
     (7, 2, 2, D("7.00"), 7, "g", "+I"), (6, None, None, None, 60, "f2", "+U")],
    [(1, 11, None, None, 100, None, "+U"), (3, 4, 4, D("3.75"), 30, "c3", "+U"),
     (5, 1, 0, D("5.50"), 50, "e3", "+U"), (8, None, None, D("8.00"), None, "h", "+I"),
     (7, 2, 2, D("7.25"), 70, "g3", "+U")],
]
DELETES: list[Row] = [(5, 100, 100, None, None, None, "-D"), (8, None, None, None, None, None, "-D")]


@dataclass(frozen=True)
class EngineCase:
    """Table options and whether the engine takes `-D` records."""

    options: dict[str, str]
    deletes: bool = True


CASES = {
    "deduplicate": EngineCase({}),
    "deduplicate_sequence_field_with_nulls": EngineCase({"sequence.field": "seq"}),
    "deduplicate_two_sequence_fields": EngineCase({"sequence.field": "seq,seq2"}),
    "partial_update": EngineCase({"merge-engine": "partial-update", "ignore-delete": "true"}),
    "partial_update_sequence_field": EngineCase({"merge-engine": "partial-update", "sequence.field": "seq",
                                                 "ignore-delete": "true"}),
    "partial_update_sequence_group": EngineCase({
        "merge-engine": "partial-update", "fields.seq.sequence-group": "price,qty",
        "fields.seq2.sequence-group": "name"}, deletes=False),
    # A STRING sequence field: both compare it by its UTF-8 bytes.
    "partial_update_string_sequence_group": EngineCase({
        "merge-engine": "partial-update", "fields.name.sequence-group": "price,qty"}, deletes=False),
    "aggregation": EngineCase({
        "merge-engine": "aggregation", "fields.price.aggregate-function": "sum",
        "fields.qty.aggregate-function": "max", "fields.name.aggregate-function": "last_non_null_value",
        "fields.seq.aggregate-function": "min", "fields.seq2.aggregate-function": "last_value"}, deletes=False),
    "aggregation_sequence_field": EngineCase({
        "merge-engine": "aggregation", "sequence.field": "seq", "fields.price.aggregate-function": "sum",
        "fields.qty.aggregate-function": "sum", "fields.name.aggregate-function": "first_non_null_value"},
        deletes=False),
    "first_row": EngineCase({"merge-engine": "first-row"}, deletes=False),
}


def _batch(rows: list[Row]) -> pa.Table:
    return pa.table([list(c) for c in zip(*rows, strict=True)], schema=SCHEMA)


def _commits(case: EngineCase) -> list[pa.Table]:
    batches = [_batch(rows) for rows in COMMITS]
    if case.deletes:
        batches.append(_batch(DELETES))
    return batches


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory, judge: Judge) -> dict[str, dict[str, Any]]:
    """Per case: the rows each engine reads from each table, before and after compaction."""
    warehouse = Path(tmp_path_factory.mktemp("java_engines")) / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    out: dict[str, dict[str, Any]] = {}
    requests: list[dict[str, Any]] = []
    labels: list[tuple[str, str]] = []
    tables = {}
    for name, case in CASES.items():
        opts = {"bucket": "2", "rowkind.field": "_rk", **case.options}
        ours = create_table(catalog, f"{name}_ours", SCHEMA, primary_keys=["k"], options=opts)
        create_table(catalog, f"{name}_java", SCHEMA, primary_keys=["k"], options=opts)
        tables[name] = ours
        for batch in _commits(case):
            write(ours, batch)
            requests.append({"op": "write", "warehouse": str(warehouse), "table": f"db.{name}_java",
                             "rows": canonical_rows(batch, batch.column("_rk").to_pylist())})
            labels.append((name, "-"))
        # (Paimon's batch scan of a first-row table skips level 0: both engines' writers take it
        # up at each commit, without the keys already above.)
        for label, table, op in (("java reads ours", "ours", "read"), ("java reads java", "java", "read"),
                                 ("-", "java", "compact"), ("java reads java compacted", "java", "read")):
            requests.append({"op": op, "warehouse": str(warehouse), "table": f"db.{name}_{table}", "full": True})
            labels.append((name, label))
    for (name, label), answer in zip(labels, judge(requests), strict=True):
        ok(answer)
        if label != "-":
            out.setdefault(name, {})[label] = sorted_values(answer["rows"])
    second = []
    for name, ours in tables.items():
        java_table = catalog.get_table(f"db.{name}_java")
        out[name]["we read java compacted"] = sorted_values(canonical_rows(read(java_table)))
        out[name]["we read ours"] = sorted_values(canonical_rows(read(ours)))
        ours.compact(full=True)
        out[name]["we read ours compacted"] = sorted_values(canonical_rows(read(ours)))
        second.append({"op": "read", "warehouse": str(warehouse), "table": f"db.{name}_ours"})
    for name, answer in zip(tables, judge(second), strict=True):
        out[name]["java reads ours compacted"] = sorted_values(ok(answer)["rows"])
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_merge_engine_matches_paimon_fed_the_same_commits(views: dict[str, dict[str, Any]], case: str) -> None:
    seen = views[case]
    reference = seen["java reads java compacted"]
    assert reference, "Paimon's own table must hold rows"
    assert {label: rows for label, rows in seen.items() if rows != reference} == {}
