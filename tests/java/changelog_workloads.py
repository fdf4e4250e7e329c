"""Seeded random changelog workloads for the conformance sweeps (Java 0.9 and pypaimon 2.1.0 judge).

A seed picks a table (changelog producer, merge engine, fixed or dynamic buckets, partitions,
`sequence.field`, deletion vectors, long-lived changelogs) and a sequence of operations (upserts,
deletes, write-only commits, `table.compact()`, level-0-only and full compactions, snapshot
expiry), ending with a full compaction so that every write has reached the changelog. Option
combinations the engine refuses are re-rolled from the same seed, so a seed names one workload.
Our own views of the result (stream read, ChangeRead, the table) are here too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.errors import LakehouseError
from lakehouse_engine.table import FileStoreTable
from tests.java.conftest import our_stream_plans
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("p", pa.int32(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                    pa.field("a", pa.string()), pa.field("n", pa.int64()), pa.field("s", pa.int64()),
                    pa.field("k", pa.string())])
COLUMNS = ["p", "id", "a", "n", "s", "k"]
#: The fields as the judge's `create` takes them (a Java-written twin of a workload's table).
JAVA_FIELDS = [["p", "INT", False], ["id", "BIGINT", False], ["a", "STRING", True], ["n", "BIGINT", True],
               ["s", "BIGINT", True], ["k", "STRING", True]]
PRODUCERS = ("input", "lookup", "full-compaction")
ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
KEYS = 8  # ids per partition: small, so keys are hit again and again


@dataclass
class Workload:
    """One seed's table options and operations, and what each write committed."""

    seed: int
    producer: str
    engine: str
    options: dict[str, str]
    partitioned: bool
    ops: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)

    def describe(self) -> str:
        """What to put in an assertion message so a failing seed can be read at a glance."""
        return (f"seed {self.seed}: {self.producer}/{self.engine} partitioned={self.partitioned} "
                f"options={self.options} ops={[op for op, _ in self.ops]}")


def _options(rng: random.Random, producer: str, engine: str) -> dict[str, str]:
    opts = {"changelog-producer": producer, "rowkind.field": "k",
            "bucket": rng.choice(["1", "2", "-1"])}
    if opts["bucket"] == "-1":
        opts["dynamic-bucket.target-row-num"] = str(rng.choice([3, 5]))
    if engine != "deduplicate":
        opts["merge-engine"] = engine
    if engine == "aggregation":
        opts["fields.n.aggregate-function"] = "sum"
        opts["fields.a.aggregate-function"] = rng.choice(["last_non_null_value", "last_value"])
        # p is NOT NULL and, unpartitioned, a value column: a retraction must not clear it (Paimon
        # 0.9 then writes a null there, which its own reader cannot read back; see the sweep test).
        opts["fields.p.aggregate-function"] = "sum"
    if engine == "partial-update" and rng.random() < 0.6:
        opts["partial-update.remove-record-on-delete"] = "true"
    if engine == "first-row" and rng.random() < 0.6:
        opts["ignore-delete"] = "true"
    if engine != "first-row" and rng.random() < 0.4:
        opts["sequence.field"] = "s"
    if rng.random() < 0.3:
        opts["deletion-vectors.enabled"] = "true"
    if rng.random() < 0.3:
        # Changelogs outlive their snapshots, so a stream from snapshot 1 survives the expiry.
        opts.update({"changelog.num-retained.max": "1000", "changelog.num-retained.min": "1",
                     "snapshot.num-retained.max": "500", "snapshot.num-retained.min": "1"})
    return opts


def deletes_allowed(w: Workload) -> bool:
    """Whether the engine takes `-D` rows as the table is configured (else Paimon raises)."""
    o = w.options
    if w.engine == "partial-update":
        return o.get("partial-update.remove-record-on-delete") == "true"
    if w.engine == "first-row":
        return o.get("ignore-delete") == "true"
    return True


def _rows(rng: random.Random, w: Workload, deletes: bool) -> list[dict[str, Any]]:
    out = []
    for _ in range(rng.randint(1, 6)):
        kind = "-D" if deletes and rng.random() < 0.3 else rng.choice(["+I", "+I", "+U"])
        a = rng.choice(["x", "y", "z", None] if w.engine == "partial-update" else ["x", "y", "z", "w"])
        n = rng.choice([None, 1, 2, 5]) if w.engine == "partial-update" else rng.randint(0, 9)
        out.append({"p": rng.randint(0, 1) if w.partitioned else 0, "id": rng.randrange(KEYS), "a": a, "n": n,
                    "s": rng.randint(0, 3), "k": kind})
    return out


def workload(seed: int) -> Workload:
    """The workload of `seed` (deterministic); the table is not created yet (see `build`)."""
    rng = random.Random(seed)
    producer = rng.choice(PRODUCERS)
    engine = rng.choice(ENGINES)
    if engine == "first-row" and producer == "full-compaction":
        engine = "deduplicate"  # refused by Paimon: first-row has no full-compaction changelog
    w = Workload(seed, producer, engine, _options(rng, producer, engine), partitioned=rng.random() < 0.4)
    deletes = deletes_allowed(w)
    expiring = "changelog.num-retained.max" in w.options
    for _ in range(rng.randint(6, 12)):
        r = rng.random()
        if r < 0.5:
            w.ops.append(("write", _rows(rng, w, deletes)))
        elif r < 0.65:
            w.ops.append(("write-only", _rows(rng, w, deletes)))
        elif r < 0.75:
            w.ops.append(("compact", []))
        elif r < 0.82:
            w.ops.append(("compact-level0", []))
        elif r < 0.92:
            w.ops.append(("full-compact", []))
        elif expiring:
            w.ops.append(("expire", []))
    w.ops.append(("full-compact", []))
    return w


def build(catalog: Catalog, name: str, w: Workload, consumers: tuple[str, ...] = ()
          ) -> tuple[FileStoreTable, list[tuple[list[int], list[dict[str, Any]]]]]:
    """Create table `name` of `w` and run its operations; the snapshots and rows of each write.
    `consumers` are registered at snapshot 1 first (what they still need survives the expiries)."""
    pks = ["p", "id"] if w.partitioned else ["id"]
    t = create_table(catalog, name, SCHEMA, primary_keys=pks, partition_keys=["p"] if w.partitioned else [],
                     options=w.options)
    for consumer in consumers:
        t.consumer_manager().reset_consumer(consumer, 1)
    writes = []
    for op, rows in w.ops:
        if op in ("write", "write-only"):
            target = t.copy({"write-only": "true"}) if op == "write-only" else t
            writes.append((write(target, pa.Table.from_pylist(rows, schema=SCHEMA)), rows))
        elif op == "compact":
            t.compact()
        elif op == "compact-level0":
            t.compact(level0_only=True)
        elif op == "full-compact":
            t.compact(full=True)
        elif op == "expire":
            t.expire_snapshots(retain_max=2, retain_min=1)
    return t, writes


def accepted(catalog: Catalog, seed: int) -> Workload:
    """`workload(seed)`, re-rolled (seed + 10_000 * attempt) while the engine refuses its options."""
    for attempt in range(20):
        w = workload(seed + 10_000 * attempt)
        w.seed = seed
        try:
            catalog.create_table(f"db.probe_{seed}_{attempt}", _probe_schema(w))
        except LakehouseError:
            continue
        finally:
            catalog.drop_table(f"db.probe_{seed}_{attempt}", ignore_if_not_exists=True)
        return w
    raise AssertionError(f"seed {seed}: no accepted option combination")


def _probe_schema(w: Workload) -> Schema:
    pks = ["p", "id"] if w.partitioned else ["id"]
    return Schema.from_pyarrow_schema(SCHEMA, partition_keys=["p"] if w.partitioned else [], primary_keys=pks,
                                      options=w.options)


def key_of(row: list[Any]) -> tuple[Any, Any]:
    """The primary key (p, id) of a change row `[kind, p, id, ...]`."""
    return (row[1], row[2])


def our_stream(table: FileStoreTable, start: int = 1) -> list[tuple[int, list[list[Any]]]]:
    """Our streaming scan from snapshot `start` to the latest: (snapshot id, rows in read order)
    of each plan with rows, a row `[_row_kind, *COLUMNS]`."""
    return our_stream_plans(table, COLUMNS, start, by_key=False)


def our_change_read(table: FileStoreTable) -> list[tuple[int, list[list[Any]]]]:
    """ChangeRead (`table.changes(0)`) grouped by snapshot, rows in read order."""
    out: dict[int, list[list[Any]]] = {}
    for r in table.changes(0).to_pylist():
        out.setdefault(r["_snapshot_id"], []).append([r["_row_kind"], *(r[c] for c in COLUMNS)])
    return sorted(out.items())


def multisets(plans: list[tuple[int, list[list[Any]]]]) -> list[tuple[int, list[list[Any]]]]:
    """Each plan's rows as a sorted multiset (the order inside a snapshot is not compared)."""
    return [(sid, sorted(rows, key=repr)) for sid, rows in plans if rows]


def table_rows(table: FileStoreTable) -> list[list[Any]]:
    """The latest snapshot's rows, `[*COLUMNS]`, sorted."""
    return sorted(([r[c] for c in COLUMNS] for r in read(table).to_pylist()), key=repr)


def java_twin(warehouse: str, name: str, w: Workload) -> list[dict[str, Any]]:
    """Judge requests with which Java creates `name` as `w`'s table and runs its operations itself:
    the same rows and write-only commits, `compact` for both of our compactions (Java has no
    level-0-only one), full compactions; not the expiries (0.9's changelog expiry fails when it
    keeps more changelogs than exist)."""
    pks = ["p", "id"] if w.partitioned else ["id"]
    requests: list[dict[str, Any]] = [
        {"op": "create", "warehouse": warehouse, "table": name, "fields": JAVA_FIELDS, "primary_keys": pks,
         "partition_keys": ["p"] if w.partitioned else [], "options": w.options}]
    for op, rows in w.ops:
        if op in ("write", "write-only"):
            requests.append({"op": "write", "warehouse": warehouse, "table": name,
                             "rows": [[r["k"], *(r[c] for c in COLUMNS)] for r in rows],
                             **({"options": {"write-only": "true"}} if op == "write-only" else {})})
        elif op in ("compact", "compact-level0", "full-compact"):
            requests.append({"op": "compact", "warehouse": warehouse, "table": name, "full": op == "full-compact"})
    return requests


def per_key(plans: list[tuple[int, list[list[Any]]]]) -> dict[tuple[Any, Any], list[list[list[Any]]]]:
    """Each key's changes, snapshot by snapshot (snapshot ids left out): the key's rows of each
    snapshot that has some, as a sorted multiset."""
    out: dict[tuple[Any, Any], list[list[list[Any]]]] = {}
    for _, rows in plans:
        mine: dict[tuple[Any, Any], list[list[Any]]] = {}
        for r in rows:
            mine.setdefault(key_of(r), []).append(r)
        for key, group in mine.items():
            out.setdefault(key, []).append(sorted(group, key=repr))
    return out
