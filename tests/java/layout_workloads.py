"""Seeded workloads that leave a key in several levels above 0: the LSM layouts the changelog
sweep's workloads never reach (tests/java/test_java_layouts_java.py judges them).

The sweep's workloads write a few rows at a time over eight keys and end with a full compaction,
so every table it reads is one sorted run at the top level, and its small, equal-sized writes are
merged together by universal compaction's size ratio. Here a seed writes a large first run (30 to
80 keys per partition), then 12 to 22 small commits over a few hot keys (normal and write-only
writes, normal compactions, rarely a full one) and stops there: a small run is far smaller than
the runs below it, so universal compaction stacks it one level above them (output level = the
next run's level - 1), and with a low `num-sorted-run.compaction-trigger`, few `num-levels` and a
high `compaction.max-size-amplification-percent` a hot key ends in two, three or more levels
above 0. Every merge engine x producer (none, input, lookup, full-compaction) x `sequence.field`
x deletion vectors x `force-lookup`, fixed or dynamic buckets, partitions. Operations are the
sweep's (`Workload`, `build`, `java_twin`), so Java can run them on its own table as well.
"""

from __future__ import annotations

import random
from typing import Any

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.errors import LakehouseError
from lakehouse_engine.maintenance.references import DataPaths
from lakehouse_engine.mergetree.data_file_reader import read_data_file
from lakehouse_engine.schema import SEQUENCE_NUMBER
from tests.java.changelog_workloads import ENGINES, SCHEMA, Workload, deletes_allowed

PRODUCERS = ("none", "input", "lookup", "full-compaction")
HOT = 5  # keys the small commits hit again and again


def _options(rng: random.Random, producer: str, engine: str, partitioned: bool) -> dict[str, str]:
    trigger = rng.choice([2, 3, 4, 5, 5])
    opts = {"changelog-producer": producer, "rowkind.field": "k", "bucket": rng.choice(["1", "1", "2", "-1"]),
            "num-sorted-run.compaction-trigger": str(trigger),
            "compaction.max-size-amplification-percent": rng.choice(["200", "1000", "1000"])}
    if rng.random() < 0.3:
        opts["num-levels"] = str(rng.choice([3, 4]))
    if opts["bucket"] == "-1":
        opts["dynamic-bucket.target-row-num"] = "40"
    if engine != "deduplicate":
        opts["merge-engine"] = engine
    if engine == "aggregation":
        opts["fields.n.aggregate-function"] = "sum"
        opts["fields.a.aggregate-function"] = rng.choice(["last_non_null_value", "last_value"])
        if not partitioned:  # p is then a value column (see changelog_workloads._options)
            opts["fields.p.aggregate-function"] = "sum"
    if engine == "partial-update" and rng.random() < 0.5:
        opts["partial-update.remove-record-on-delete"] = "true"
    if engine == "first-row" and rng.random() < 0.6:
        opts["ignore-delete"] = "true"
    if engine != "first-row" and rng.random() < 0.35:
        opts["sequence.field"] = "s"
    if rng.random() < 0.3:
        opts["deletion-vectors.enabled"] = "true"
    if producer in ("none", "input") and rng.random() < 0.35:
        opts["force-lookup"] = "true"
    return opts


def _row(rng: random.Random, w: Workload, p: int, key: int, kind: str) -> dict[str, Any]:
    a = rng.choice(["x", "y", "z", None] if w.engine == "partial-update" else ["x", "y", "z", "w"])
    n = rng.choice([None, 1, 2, 5]) if w.engine == "partial-update" else rng.randint(0, 9)
    return {"p": p, "id": key, "a": a, "n": n, "s": rng.randint(0, 3), "k": kind}


def _small(rng: random.Random, w: Workload, first: int, deletes: bool) -> list[dict[str, Any]]:
    out = []
    for _ in range(rng.choice([1, 1, 2, 3, 6, 10])):  # unequal sizes: stacked, not merged by ratio
        kind = "-D" if deletes and rng.random() < 0.2 else rng.choice(["+I", "+I", "+U"])
        key = rng.randrange(HOT) if rng.random() < 0.8 else rng.randrange(first)
        out.append(_row(rng, w, rng.randint(0, 1) if w.partitioned else 0, key, kind))
    return out


def layout_workload(seed: int) -> Workload:
    """The workload of `seed` (deterministic); no final full compaction."""
    rng = random.Random(seed)
    # The merging engines and lookups weigh double: where reading a key's levels needs care.
    producer = rng.choice([*PRODUCERS, "lookup"])
    engine = rng.choice([*ENGINES, "partial-update", "aggregation"])
    partitioned = rng.random() < 0.35
    w = Workload(seed, producer, engine, _options(rng, producer, engine, partitioned), partitioned)
    deletes = deletes_allowed(w)
    first = rng.randint(30, 80)
    w.ops.append(("write", [_row(rng, w, p, key, "+I") for p in ((0, 1) if w.partitioned else (0,))
                            for key in range(first)]))
    for _ in range(rng.randint(12, 22)):
        r = rng.random()
        if r < 0.55:
            w.ops.append(("write", _small(rng, w, first, deletes)))
        elif r < 0.75:
            w.ops.append(("write-only", _small(rng, w, first, deletes)))
        elif r < 0.89:
            w.ops.append(("compact", []))
        elif r < 0.95:
            w.ops.append(("compact-level0", []))
        else:
            w.ops.append(("full-compact", []))
    return w


def accepted_layout(catalog: Catalog, seed: int) -> Workload:
    """`layout_workload(seed)`, re-rolled (seed + 10_000 * attempt) while the engine refuses it."""
    for attempt in range(20):
        w = layout_workload(seed + 10_000 * attempt)
        w.seed = seed
        name = f"db.probe_{seed}_{attempt}"
        pks = ["p", "id"] if w.partitioned else ["id"]
        try:
            catalog.create_table(name, Schema.from_pyarrow_schema(
                SCHEMA, partition_keys=["p"] if w.partitioned else [], primary_keys=pks, options=w.options))
        except LakehouseError:
            continue
        finally:
            catalog.drop_table(name, ignore_if_not_exists=True)
        return w
    raise AssertionError(f"seed {seed}: no accepted option combination")


def levels_above_0(table: Any) -> int:
    """The most levels above 0 one (partition, bucket) held files in, over every snapshot of
    `table` (the coverage: 2 or more means a key could sit in several)."""
    most = 0
    mio, snapshots = table.store.manifest_io(), table.snapshot_manager()
    for sid in range(snapshots.earliest_snapshot_id() or 1, (snapshots.latest_snapshot_id() or 0) + 1):
        levels: dict[tuple[bytes, int], set[int]] = {}
        for e in mio.live_entries(snapshots.snapshot(sid)):
            if e.file.level > 0:
                levels.setdefault((e.partition, e.bucket), set()).add(e.file.level)
        most = max([most, *(len(v) for v in levels.values())])
    return most


def sequence_ties_above_level0(table: Any, sid: int) -> dict[tuple[Any, ...], list[list[Any]] | None]:
    """The keys of snapshot `sid` of `table` (values of its primary key) whose latest records
    above level 0 in merge order, by (`sequence.field`, sequence number), are two or more in
    different levels: records Paimon 0.9's sort-merge reader (its loser tree) hands a merge in
    an order of its own, so its LookupMergeFunction may take either as the key's latest. Per
    key, the tied records' values (`columns` order), or None where level 0 holds the key too
    (the read then merges the taken record with those)."""
    store = table.store
    keys = list(table.schema.primary_keys)  # the value columns (a file's key columns leave out partitions)
    seq = [f for f in table.schema.options.get("sequence.field", "").split(",") if f]
    columns = [f.name for f in table.schema.fields]
    paths = DataPaths(store)
    top: dict[tuple[Any, ...], tuple[tuple[Any, ...], set[int], list[list[Any]]]] = {}
    level0: set[tuple[Any, ...]] = set()
    for e in store.manifest_io().live_entries(table.snapshot_manager().snapshot(sid)):
        rows = read_data_file(store.file_io, paths.of_entry(e)[0], [*columns, SEQUENCE_NUMBER]).to_pylist()
        for r in rows:
            key = tuple(r[k] for k in keys)
            if e.file.level == 0:
                level0.add(key)
                continue
            # Paimon orders a null sequence field first.
            order = (*((r[f] is not None, r[f] or 0) for f in seq), r[SEQUENCE_NUMBER])
            best = top.get(key)
            if best is None or order > best[0]:
                top[key] = (order, {e.file.level}, [[r[c] for c in columns]])
            elif order == best[0]:
                best[1].add(e.file.level)
                best[2].append([r[c] for c in columns])
    return {key: None if key in level0 else tied for key, (_, levels, tied) in top.items() if len(levels) > 1}
