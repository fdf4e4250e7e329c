"""`sequence.field` with null values orders as Paimon's comparator does: a null sorts first, so it loses.

Paimon compares sequence fields with nulls first whatever `sequence.field.sort-order` says (the
direction flips only non-null comparisons), field by field; equal sequences fall back to
`_SEQUENCE_NUMBER`, so the later write wins. The same order must hold in the write buffer (one
batch), in merge-on-read (one commit per record) and after a full compaction.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("s1", pa.int64()),
                    pa.field("s2", pa.int64()), pa.field("v", pa.string())])

# (key, s1, s2, v) written in this order; EXPECTED[options] gives each key's surviving v.
RECORDS = [
    [(1, None, 1, "a"), (2, 5, 1, "a"), (3, None, None, "a"), (4, 5, None, "a"), (5, 5, 2, "a"),
     (6, 5, 1, "a"), (7, 5, 2, "a")],
    [(1, 5, 1, "b"), (2, None, 1, "b"), (3, None, None, "b"), (4, 5, 1, "b"), (5, 5, None, "b"),
     (6, 3, 1, "b"), (7, 5, 1, "b")],
]
CASES: dict[str, tuple[dict[str, str], dict[int, str]]] = {
    # One field: a null loses to any value; two nulls or equal values: the later write wins.
    "one-field": ({"sequence.field": "s1"},
                  {1: "b", 2: "a", 3: "b", 4: "b", 5: "b", 6: "a", 7: "b"}),
    # Descending: the smaller value wins, but a null still loses.
    "descending": ({"sequence.field": "s1", "sequence.field.sort-order": "descending"},
                   {1: "b", 2: "a", 3: "b", 4: "b", 5: "b", 6: "b", 7: "b"}),
    # Two fields compared in order, each with nulls first.
    "two-fields": ({"sequence.field": "s1,s2"},
                   {1: "b", 2: "a", 3: "b", 4: "b", 5: "a", 6: "a", 7: "a"}),
    "two-fields-descending": ({"sequence.field": "s1,s2", "sequence.field.sort-order": "descending"},
                              {1: "b", 2: "a", 3: "b", 4: "b", 5: "a", 6: "b", 7: "b"}),
}


def _batch(records: list[tuple[Any, ...]]) -> pa.Table:
    return pa.table([list(c) for c in zip(*records, strict=True)], schema=SCHEMA)


def _survivors(result: pa.Table) -> dict[int, str]:
    return dict(zip(result.column("k").to_pylist(), result.column("v").to_pylist(), strict=True))


@pytest.mark.parametrize("case", sorted(CASES))
def test_null_sequence_values_lose_in_merge_on_read_and_after_compaction(catalog: Catalog, case: str) -> None:
    options, expected = CASES[case]
    table = create_table(catalog, "t", SCHEMA, primary_keys=["k"], options={"bucket": "1", **options})
    for records in RECORDS:
        write(table, _batch(records))
    assert _survivors(read(table)) == expected
    table.compact(full=True)
    assert _survivors(read(table)) == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_null_sequence_values_lose_in_the_write_buffer(catalog: Catalog, case: str) -> None:
    options, expected = CASES[case]
    table = create_table(catalog, "t", SCHEMA, primary_keys=["k"], options={"bucket": "1", **options})
    write(table, _batch(RECORDS[0] + RECORDS[1]))
    assert _survivors(read(table)) == expected
