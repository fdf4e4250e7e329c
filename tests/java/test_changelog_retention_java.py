"""Paimon 0.9 (Java) and we agree on long-lived changelogs (`changelog.num-retained.*`).

* Java's stream scan from snapshot 1 reads our table, whose early snapshots expired into
  `changelog/changelog-<id>`, plan by plan as our own scan read it before the expiry.
* Java expires its own snapshots into long-lived changelogs (and runs its changelog expiry): the
  `changelog/` files it leaves are the ones ours writes, and our streaming scan reads through them
  what Java's stream scan reads.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from tests.java.conftest import Judge, ok
from tests.java.test_changes_java import JAVA_FIELDS, SCHEMA, _java, _ours
from tests.lakehouse_engine.conftest import create_table, write

# Java decides from the table's options whether a stream scan reads long-lived changelogs
# (changelog.num-retained.max above snapshot.num-retained.max); write-only: expiry only when asked.
KEEP = {"changelog.num-retained.max": "100", "changelog.num-retained.min": "1",
        "snapshot.num-retained.max": "2", "snapshot.num-retained.min": "1", "write-only": "true"}
BATCHES = [
    [("+I", i, f"a{i}") for i in range(8)],
    [("+U", i, f"b{i}") for i in range(4, 10)] + [("-D", 0, "a0")],
    [("-D", 1, "a1"), ("+I", 20, "c20")],
    [("+U", 20, "d20"), ("+I", 21, "d21")],
    [("-D", 4, "b4"), ("+I", 22, "e22")],
]


def _ours_table(catalog: Catalog, name: str, producer: str) -> Any:
    t = create_table(catalog, name, SCHEMA, primary_keys=["id"],
                     options={"bucket": "2", "rowkind.field": "k", "changelog-producer": producer, **KEEP})
    for i, batch in enumerate(BATCHES):
        write(t, pa.Table.from_pylist([{"id": n, "v": v, "k": k} for k, n, v in batch], schema=SCHEMA))
        if producer == "none" and i == 2:
            t.compact(full=True)  # the written files of 1..3 are compacted away; their changes stay
    return t


def _changelog_dir(table_path: str) -> dict[str, str]:
    return {p.name: p.read_text() for p in Path(table_path, "changelog").iterdir() if p.is_file()}


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory, judge: Judge) -> dict[str, Any]:
    warehouse = tmp_path_factory.mktemp("retention") / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    w = str(warehouse)
    ours, before = {}, {}
    for producer in ("input", "none"):
        t = _ours_table(catalog, f"ours_{producer}", producer)
        before[producer] = _ours(t, 1)
        t.expire_snapshots()
        ours[producer] = t
    java = "db.java_input"
    requests: list[dict[str, Any]] = [
        {"op": "create", "warehouse": w, "table": java, "fields": JAVA_FIELDS, "primary_keys": ["id"],
         "options": {"bucket": "2", "changelog-producer": "input", **KEEP}}]
    requests += [{"op": "write", "warehouse": w, "table": java, "rows": [[k, i, v] for k, i, v in b]}
                 for b in BATCHES]
    requests += [{"op": "stream", "warehouse": w, "table": java,
                  "options": {"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}},
                 {"op": "expire", "warehouse": w, "table": java, "retain_max": 2, "retain_min": 2,
                  "changelog_retain_max": 100, "changelog_retain_min": 5},
                 {"op": "stream", "warehouse": w, "table": java,
                  "options": {"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}},
                 {"op": "expire", "warehouse": w, "table": java, "retain_max": 2, "retain_min": 2,
                  "changelog_retain_max": 4}]
    requests += [{"op": "stream", "warehouse": w, "table": f"db.ours_{p}",
                  "options": {"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}} for p in ("input", "none")]
    answers = judge(requests)
    for r, a in zip(requests, answers, strict=True):
        if r["op"] != "stream":
            ok(a)
    n = len(BATCHES) + 1
    return {"catalog": catalog, "ours": ours, "before": before, "java_before": answers[n],
            "java_expire": answers[n + 1], "java_after": answers[n + 2], "java_changelog_expire": answers[n + 3],
            "java_reads_ours": dict(zip(("input", "none"), answers[n + 4:], strict=True))}


@pytest.mark.parametrize("producer", ["input", "none"])
def test_java_stream_scan_reads_our_long_lived_changelogs(tables: dict[str, Any], producer: str) -> None:
    ours = tables["ours"][producer]
    assert ours.snapshot_manager().earliest_snapshot_id() == ours.snapshot_manager().latest_snapshot_id() - 1
    assert any(name.startswith("changelog-") for name in _changelog_dir(ours.path))
    before = tables["before"][producer]
    assert before and _java(tables["java_reads_ours"][producer]) == before
    assert _ours(ours, 1) == before


def test_java_long_lived_changelogs_are_ours_and_we_read_through_them(tables: dict[str, Any]) -> None:
    # Java's snapshot expiry (keep 2, the changes of 5) left snapshots 4 and 5 and changelogs
    # 1..3; its changelog expiry (keep the changes of 2 to 4 snapshots, none young enough to stay)
    # then removed 1 and 2: it always keeps the latest long-lived changelog.
    assert ok(tables["java_expire"])["expired"] == 3
    assert ok(tables["java_changelog_expire"])["changelogs_expired"] == 2
    table = tables["catalog"].get_table("db.java_input")
    files = _changelog_dir(table.path)
    assert sorted(files) == ["EARLIEST", "LATEST", "changelog-3"]
    assert files["LATEST"] == "3" and files["EARLIEST"] == "3"
    sm = table.snapshot_manager()
    assert sm.earliest_long_lived_changelog_id() == 3 and sm.latest_long_lived_changelog_id() == 3
    # What Java's stream scan read through its changelogs (before its changelog expiry) is what
    # it read from its snapshots, and what ours reads now from the changelog on.
    java_after = _java(tables["java_after"])
    assert java_after == _java(tables["java_before"])
    assert _ours(table, 1) == [p for p in java_after if p[0] >= 3]


def test_our_changelog_expiry_leaves_what_javas_leaves(tables: dict[str, Any]) -> None:
    # The same history, the same retention as Java's second expiry: the same changelog/ files
    # (on a copy of our table: the other tests read the original).
    original = tables["ours"]["input"]
    shutil.copytree(original.path, str(Path(original.path).parent / "ours_input_copy"))
    ours = tables["catalog"].get_table("db.ours_input_copy").copy({"changelog.num-retained.max": "4", "changelog.num-retained.min": "2",
                                         "changelog.time-retained": "1 ms"})
    java = tables["catalog"].get_table("db.java_input")
    assert sorted(_changelog_dir(ours.path)) == ["LATEST", "changelog-1", "changelog-2", "changelog-3"]
    assert ours.expire_changelogs() == 2
    assert _changelog_dir(ours.path).keys() == _changelog_dir(java.path).keys()
    assert {k: v for k, v in _changelog_dir(ours.path).items() if not k.startswith("changelog-")} == \
        {k: v for k, v in _changelog_dir(java.path).items() if not k.startswith("changelog-")}
