"""Apache Paimon 0.9 (Java) reads tables we evolved (added, renamed, dropped, widened and moved
columns, files of five schema versions, before and after our compaction) as we read them, and
time-travels to a snapshot of an older schema as we do."""

from __future__ import annotations

from pathlib import Path

from lakehouse_engine import Catalog
from tests.interop.test_schema_evolution_interop import evolve_ours
from tests.java.conftest import Judge, canonical_rows, ok, sorted_values
from tests.lakehouse_engine.conftest import read


def test_java_paimon_reads_our_evolved_tables(tmp_path: Path, judge: Judge) -> None:
    wh = str(tmp_path / "wh")
    catalog = Catalog(wh)
    catalog.create_database("db")
    for name, options in (("fixed", {"bucket": "2"}), ("dynamic", {"bucket": "-1"}), ("compacted", {"bucket": "1"})):
        evolve_ours(catalog, name, options)
    catalog.get_table("db.compacted").compact(full=True)
    requests = [{"op": "read", "warehouse": wh, "table": f"db.{n}"} for n in ("fixed", "dynamic", "compacted")]
    requests.append({"op": "read", "warehouse": wh, "table": "db.fixed", "options": {"scan.snapshot-id": "2"}})
    answers = judge(requests)
    for name, answer in zip(("fixed", "dynamic", "compacted"), answers, strict=False):
        ours = read(catalog.get_table(f"db.{name}"))
        assert sorted_values(ok(answer)["rows"]) == sorted_values(canonical_rows(ours)), name
    old = read(catalog.get_table("db.fixed"), snapshot_id=2)
    assert old.column_names == ["id", "dt", "qty", "color", "price", "amount", "name", "gone"]
    assert sorted_values(ok(answers[3])["rows"]) == sorted_values(canonical_rows(old))
