"""Paimon 0.9's stream scan reads the changelog of our tables for every merge engine as we read it,
and that changelog, replayed in snapshot order, is the table (Paimon's definition: per key the
merged row before the commit and after it; first-row only `+I` for new keys)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.format.binary_row import deserialize_row
from lakehouse_engine.read.changes import CHANGELOG, ChangeScan
from lakehouse_engine.read.incremental import IncrementalRead, IncrementalScan
from lakehouse_engine.table import FileStoreTable
from tests.java.conftest import Judge, ok, our_stream_plans
from tests.lakehouse_engine.conftest import create_table, read, write

pytestmark = pytest.mark.java

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("a", pa.string()),
                    pa.field("n", pa.int64())])
# Commits of (id, a, n); None is "no value" for partial-update.
COMMITS: list[list[tuple[int, str | None, int | None]]] = [
    [(1, "a1", None), (2, None, 20), (3, "c1", 3)],
    [(1, None, 10), (4, "d1", 4), (2, "b2", None)],
    [(3, "c3", None), (1, "a3", 1), (5, "e", None)],
]
ENGINES = {
    "deduplicate": {},
    "partial_update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
                    "fields.a.aggregate-function": "last_non_null_value"},
    "first_row": {"merge-engine": "first-row"},
}
INCREMENTAL = ("lookup", "full-compaction")
CASES = {f"{e}_{p.replace('-', '_')}": (e, p) for e in ENGINES for p in ("lookup", "full-compaction")
         if not (e == "first_row" and p == "full-compaction")}  # refused, as by Paimon


# Java 0.9's read of the two-bucket range returns this row more than ours: key 3's stale `+I`.
STALE_INSERT = ["+I", 3, "c1", 3]


# One key inserted, then updated: on any bucket count Java 0.9 returns both rows (see below).
ONE_KEY: list[list[tuple[int, str | None, int | None]]] = [[(3, "c1", 3)], [(3, "c3", None)]]


def _write(table: FileStoreTable, producer: str,
           commits: list[list[tuple[int, str | None, int | None]]] = COMMITS) -> None:
    for rows in commits:
        write(table, pa.table({"id": [r[0] for r in rows], "a": [r[1] for r in rows],
                               "n": [r[2] for r in rows]}, schema=SCHEMA))
        if producer == "full-compaction":
            table.compact(full=True)


def _ours(table: FileStoreTable) -> list[tuple[int, list[list[Any]]]]:
    return our_stream_plans(table, ["id", "a", "n"])


def _java(answer: dict[str, Any]) -> list[tuple[int, list[list[Any]]]]:
    return [(p["next"] - 1, sorted([r[:4] for r in p["rows"]], key=lambda r: r[1]))
            for p in ok(answer)["plans"] if p["rows"]]


@pytest.fixture(scope="module")
def streams(tmp_path_factory: pytest.TempPathFactory, judge: Judge) -> dict[str, Any]:
    warehouse = tmp_path_factory.mktemp("engines-changelog") / "warehouse"
    catalog = Catalog(str(warehouse))
    catalog.create_database("db")
    tables = {}
    for name, (engine, producer) in CASES.items():
        t = create_table(catalog, name, SCHEMA, primary_keys=["id"],
                         options={"bucket": "2", "changelog-producer": producer, **ENGINES[engine]})
        _write(t, producer)
        tables[name] = t
    requests = [{"op": "stream", "warehouse": str(warehouse), "table": f"db.{name}",
                 "options": {"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}} for name in CASES]
    # Batch incremental-between over the whole history, auto (a producer's table: its changelog),
    # of deduplicate tables: ours on one bucket and on two (the CASES table), and the same
    # two-bucket table as Java writes it itself (same options, same commits), read by Java.
    reads: dict[str, str] = {}
    for producer in INCREMENTAL:
        tag = producer.replace("-", "_")
        t = create_table(catalog, f"one_{tag}", SCHEMA, primary_keys=["id"],
                         options={"bucket": "1", "changelog-producer": producer})
        _write(t, producer)
        tables[f"one_{tag}"] = t
        reads[f"one_{tag}"] = f"db.one_{tag}"
        reads[f"two_{tag}"] = f"db.deduplicate_{tag}"
        tables[f"two_{tag}"] = tables[f"deduplicate_{tag}"]
        reads[f"java_{tag}"] = f"db.java_{tag}"
        requests += _java_writes(str(warehouse), f"db.java_{tag}", producer, 2, COMMITS)
        t = create_table(catalog, f"one_key_{tag}", SCHEMA, primary_keys=["id"],
                         options={"bucket": "1", "changelog-producer": producer})
        _write(t, producer, ONE_KEY)
        tables[f"one_key_{tag}"] = t
        reads[f"one_key_{tag}"] = f"db.one_key_{tag}"
        reads[f"java_one_key_{tag}"] = f"db.java_one_key_{tag}"
        requests += _java_writes(str(warehouse), f"db.java_one_key_{tag}", producer, 1, ONE_KEY)
    for name in reads.values():
        commits = len(ONE_KEY if "one_key" in name else COMMITS)
        requests.append({"op": "read", "warehouse": str(warehouse), "table": name,
                         "options": {"incremental-between": f"1,{2 * commits}"}})
    answers = judge(requests)
    out: dict[str, Any] = {name: (tables[name], answers[i]) for i, name in enumerate(CASES)}
    out.update({key: (tables.get(key), answers[len(answers) - len(reads) + i]) for i, key in enumerate(reads)})
    out["warehouse"] = (catalog, None)
    return out


def _java_writes(warehouse: str, table: str, producer: str, buckets: int,
                 commits: list[list[tuple[int, str | None, int | None]]]) -> list[dict[str, Any]]:
    """Java creating and writing `table` itself as `_write` writes ours: the same options and
    commits (each a lookup APPEND + COMPACT pair, or an APPEND and a full compaction)."""
    requests: list[dict[str, Any]] = [
        {"op": "create", "warehouse": warehouse, "table": table, "primary_keys": ["id"],
         "fields": [["id", "BIGINT", False], ["a", "STRING", True], ["n", "BIGINT", True]],
         "options": {"bucket": str(buckets), "changelog-producer": producer}}]
    for rows in commits:
        requests.append({"op": "write", "warehouse": warehouse, "table": table,
                         "rows": [["+I", *r] for r in rows]})
        if producer == "full-compaction":
            requests.append({"op": "compact", "warehouse": warehouse, "table": table, "full": True})
    return requests


@pytest.mark.parametrize("name", list(CASES))
def test_java_streams_our_changelog_of_each_merge_engine_as_we_do(streams: dict[str, Any], name: str) -> None:
    table, answer = streams[name]
    ours = _ours(table)
    assert ours, "we produced no changelog"
    assert _java(answer) == ours


@pytest.mark.parametrize("name", list(CASES))
def test_the_changelog_replays_to_the_table_with_each_before_image_the_row_it_replaces(
        streams: dict[str, Any], name: str) -> None:
    table, _ = streams[name]
    state: dict[int, tuple[Any, Any]] = {}
    for _, rows in _ours(table):
        before = None  # the key of the -U just read: a +U must follow it
        for kind, k, a, n in sorted(rows, key=lambda r: (r[1], r[0] != "-U")):
            if kind in ("-U", "-D"):
                assert state.pop(k) == (a, n), f"{kind} of key {k} is not its row before"
            else:
                assert (before == k) if kind == "+U" else (k not in state), f"{kind} of key {k}"
                state[k] = (a, n)
            before = k if kind == "-U" else None
    assert state == {r["id"]: (r["a"], r["n"]) for r in read(table).to_pylist()}
    if CASES[name][0] == "first_row":
        assert {r[0] for _, rows in _ours(table) for r in rows} == {"+I"}


def _incremental(table: FileStoreTable, commits: int = len(COMMITS)) -> list[list[Any]]:
    """Our batch read of the whole history: snapshots 1 (exclusive) to the last commit's COMPACT."""
    assert table.snapshot_manager().latest_snapshot_id() == 2 * commits
    ranged = table.copy({"incremental-between": f"1,{2 * commits}"})
    rows = IncrementalRead(table, include_row_kind=True).to_arrow(IncrementalScan(ranged).plan().splits())
    return sorted([list(r.values()) for r in rows.to_pylist()], key=repr)


@pytest.mark.parametrize("producer", INCREMENTAL)
def test_java_incremental_between_reads_our_one_bucket_changelog_range_as_we_do(
        streams: dict[str, Any], producer: str) -> None:
    """Batch `incremental-between` (auto: the changelog) merges the range's changes per key, as
    Java's does, on a deduplicate table. Not the other engines: Java 0.9 refuses the
    partial-update changelog (its -U rows), reads nothing of a first-row table's (its scan skips
    level 0, where changelog files sit) and folds aggregation's -U rows into the sums; ours gives
    the rows the range ends with."""
    table, answer = streams[f"one_{producer.replace('-', '_')}"]
    mine = _incremental(table)
    assert len(mine) == 5, "every key changed in the range"
    assert sorted(ok(answer)["rows"], key=repr) == mine


@pytest.mark.parametrize("producer", INCREMENTAL)
def test_java_incremental_between_on_two_buckets_keeps_a_stale_insert_where_a_file_holds_a_keys_pair(
        streams: dict[str, Any], producer: str) -> None:
    """On two buckets Java 0.9 returns key 3 (alone in bucket 1) twice on a table whose changelog
    file holds a key's `-U` and `+U` together (Java's own lookup table, our full-compaction one):
    its `+I c1` of snapshot 2 and its `+U c3` of snapshot 6. Its batch read merges a bucket's
    changelog files with a min-heap ordered by key and sequence number, assuming one record per
    key per file; the later file's `-U c1` carries the sequence number of the `+I c1` it
    retracts, the tie falls to the `+I` (kept, the `-U` dropped) and the `+U` then forms a group
    of its own. Our lookup changelog of a run of adds puts a key's `-U` and `+U` in two files
    (the before-images, then the run's data file): one record per key per file, as that merge
    assumes, and Java returns the row the range ends with, as ours does (ours merges per key)."""
    tag = producer.replace("-", "_")
    table, answer = streams[f"two_{tag}"]
    java_of_ours = sorted(ok(answer)["rows"], key=repr)
    java_of_java = sorted(ok(streams[f"java_{tag}"][1])["rows"], key=repr)
    mine = _incremental(table)
    assert len(mine) == 5, "every key changed in the range"
    assert java_of_java == sorted(mine + [STALE_INSERT], key=repr)
    assert java_of_ours == (mine if producer == "lookup" else java_of_java)


@pytest.mark.parametrize("producer", INCREMENTAL)
def test_java_incremental_between_keeps_the_stale_insert_of_a_key_updated_once_on_one_bucket(
        streams: dict[str, Any], producer: str) -> None:
    """Not a matter of buckets: one key inserted in one commit and updated in the next, on one
    bucket, reads from Java 0.9 as its `+I` and its `+U` where one changelog file holds the
    key's pair (the only record tied with the `-U` is the `+I`, and it wins the tie), and as the
    `+U` from ours, and from Java on our lookup table (the pair in two files, as above)."""
    tag = producer.replace("-", "_")
    table, answer = streams[f"one_key_{tag}"]
    java_of_ours = sorted(ok(answer)["rows"], key=repr)
    java_of_java = sorted(ok(streams[f"java_one_key_{tag}"][1])["rows"], key=repr)
    mine = _incremental(table, len(ONE_KEY))
    assert mine == [["+U", 3, "c3", None]]
    assert java_of_java == sorted(mine + [STALE_INSERT], key=repr)
    assert java_of_ours == (mine if producer == "lookup" else java_of_java)


def _changelog_files(table: FileStoreTable) -> list[tuple[int, str, int, list[tuple[Any, ...]]]]:
    """Per snapshot: its kind, changelogRecordCount and the fields of its changelog files Java's
    split planning and merge read use, by bucket (levels apart: see the test)."""
    out: list[tuple[int, str, int, list[tuple[Any, ...]]]] = []
    for snapshot in table.snapshot_manager().list_snapshots():
        entries = ChangeScan(table).entries(snapshot, CHANGELOG)
        files = sorted((e.bucket, e.total_buckets, e.file.row_count, e.file.min_key, e.file.max_key,
                        e.file.key_stats, e.file.min_sequence_number, e.file.max_sequence_number,
                        e.file.delete_row_count, e.file.schema_id, e.file.file_source, e.file.level)
                       for e in entries)
        out.append((snapshot.id, snapshot.commit_kind, snapshot.changelog_record_count or 0, files))
    return out


def _per_bucket(changelog: list[tuple[int, str, int, list[tuple[Any, ...]]]], key_types: list[Any]) -> list[tuple[Any, ...]]:
    """Per snapshot, per bucket: its changelog files together (rows, deletes, sequence range, key
    range, total buckets, schema, file source)."""
    out: list[tuple[Any, ...]] = []
    for sid, kind, count, files in changelog:
        buckets: dict[int, list[tuple[Any, ...]]] = {}
        for f in files:
            buckets.setdefault(f[0], []).append(f)
        for bucket, fs in sorted(buckets.items()):
            keys = [tuple(deserialize_row(f[k], key_types)) for f in fs for k in (3, 4)]
            out.append((sid, kind, count, bucket, {f[1] for f in fs}, sum(f[2] for f in fs), min(keys), max(keys),
                        min(f[6] for f in fs), max(f[7] for f in fs), sum(f[8] for f in fs),
                        {(f[9], f[10]) for f in fs}))
    return out


@pytest.mark.parametrize("producer", INCREMENTAL)
def test_our_changelog_files_carry_what_javas_carry_for_the_same_writes(
        streams: dict[str, Any], producer: str) -> None:
    """The changelog of our two-bucket table is Java's for the same commits in every field its
    incremental planning and merge read use (bucket, totalBuckets, key range and stats, row,
    delete and sequence counts): the stale row above is Java's, not ours. Differences, none
    changing what a stream read returns: an APPEND snapshot of ours leaves changelogRecordCount
    out where Java writes 0; a lookup changelog file of ours is at level 0 (our lookup producer
    does not compact; Java's file takes its compaction's output level); and our lookup changelog
    of a run of adds is a bucket's before-images, then the run's data file under a changelog name,
    where Java writes one file: per bucket the files together carry what Java's carries."""
    tag = producer.replace("-", "_")
    catalog = streams["warehouse"][0]
    ours = _changelog_files(streams[f"two_{tag}"][0])
    java = _changelog_files(catalog.get_table(f"db.java_{tag}"))
    if producer == "lookup":
        assert {f[-1] for _, _, _, files in ours for f in files} == {0}
        key_types = streams[f"two_{tag}"][0].schema.types_of(["id"])
        assert _per_bucket(ours, key_types) == _per_bucket(java, key_types)
        # Bucket 0: key 1 updated, key 5 new; key 3 alone in bucket 1: a -U file, then the run's file.
        assert [(f[0], f[2], f[8]) for f in ours[-1][3]] == [(0, 1, 1), (0, 2, 0), (1, 1, 1), (1, 1, 0)]
        return
    assert ours == java
    assert [f[0] for f in ours[-1][3]] == [0, 1] and ours[-1][3][1][3] == ours[-1][3][1][4], (
        "key 3 is alone in bucket 1")
