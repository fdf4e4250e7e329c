"""Paimon 0.9's stream scan reads the changelog each of our producers writes as we read it."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from tests.java.conftest import Judge
from tests.java.test_changes_java import SCHEMA, _java, _ours
from tests.lakehouse_engine.conftest import create_table
from tests.lakehouse_engine.read.changes_helpers import put
from tests.lakehouse_engine.write.test_changelog_producers import BATCHES

PRODUCERS = {"input": {}, "lookup": {}, "lookup-dedupe": {"changelog-producer.row-deduplicate": "true"},
             "full-compaction": {"write-only": "true"},
             # A stream writer (commit identifiers) compacts fully at every commit, no compact call.
             "full-compaction-stream": {}}


@pytest.fixture(scope="module")
def streams(tmp_path_factory: pytest.TempPathFactory, judge: Judge) -> dict[str, Any]:
    warehouse = tmp_path_factory.mktemp("ours-changelog") / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    tables = {}
    for name, extra in PRODUCERS.items():
        producer = name.replace("-dedupe", "").replace("-stream", "")
        t = create_table(catalog, name.replace("-", "_"), SCHEMA, primary_keys=["id"],
                         options={"bucket": "2", "rowkind.field": "k", "changelog-producer": producer, **extra})
        if name.endswith("-stream"):
            wb = t.new_stream_write_builder()
            w, c = wb.new_write(), wb.new_commit()
            for i, batch in enumerate(BATCHES, start=1):
                w.write_arrow(pa.Table.from_pylist([{"id": r[0], "v": r[1], "k": r[2]} for r in batch], schema=SCHEMA))
                c.commit(w.prepare_commit(i), i)
            tables[name] = t
            continue
        for i, batch in enumerate(BATCHES):
            put(t, *batch)
            if producer == "full-compaction" and i != 1:
                t.compact(full=True)
        tables[name] = t
    answers = judge([{"op": "stream", "warehouse": str(warehouse), "table": f"db.{n.replace('-', '_')}",
                      "options": {"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}} for n in PRODUCERS])
    return {n: (tables[n], a) for n, a in zip(PRODUCERS, answers, strict=True)}


@pytest.mark.parametrize("name", list(PRODUCERS))
def test_java_stream_scan_reads_our_changelog_as_we_do(streams: dict[str, Any], name: str) -> None:
    table, answer = streams[name]
    ours = _ours(table, 1)
    assert ours, "we produced no changelog"
    assert _java(answer) == ours
