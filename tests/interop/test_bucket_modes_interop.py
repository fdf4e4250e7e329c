"""Bucket modes and pypaimon 2.1.0: dynamic bucket (-1), postpone bucket (-2) and rescale.

Three scenarios share one warehouse and two pypaimon subprocesses, each running a list of steps
(read, time-travel read, create, alter, write): our engine writes, the first subprocess reads
(and writes), our engine writes again, the second subprocess reads the end result. Every read is
compared, sorted, with a model of the table, and checks look at where rows live on disk too:

* dynamic: two tables we fill (partitioned, and not; updates and deletes through `rowkind.field`;
  one commit by two parallel assigners) that pypaimon reads and upserts into, and a table
  pypaimon creates and fills that we upsert into. Each key in exactly one bucket, the one its
  partition's HASH index gives it; no indexed key ever moves; the messages' key counts are exact.
* postpone: rows in `bucket-postpone/` are invisible to both engines until `table.compact()`;
  then a partition rescaled before keeps its count while a new one gets the default.
* rescale: a partitioned fixed-bucket table rescaled 2 -> 7 -> 3, read by both at each step
  (time travel), then written by us and by pypaimon (after `ALTER TABLE SET bucket`, as Paimon
  asks of a writer after a rescale): every key in bucket `abs(hash % count of its partition)`.
"""

from __future__ import annotations

import random
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.bucket.hash_index import decode_hashes
from lakehouse_engine.format.bucket_hash import bucket_of, hash_rows
from lakehouse_engine.format.manifest_entries import FileKind
from lakehouse_engine.table import FileStoreTable
from tests.interop.model import (
    PYPAIMON_READ,
    TableModel,
    assert_same_rows,
    canonical_rows,
    change_batches,
    read_result,
    value_fields,
    value_row,
    write_batch_file,
)

VALUE_TYPES = ["bigint", "string_long", "decimal_10_2", "timestamp_6"]
DAYS = ["2024-02-29", "1969-12-31", "x"]
POSTPONE = -2

Row = dict[str, Any]
Key = tuple[Any, ...]


def make_schema(partitioned: bool) -> pa.Schema:
    keys = [pa.field("dt", pa.string(), nullable=False)] if partitioned else []
    keys.append(pa.field("id", pa.int64(), nullable=False))
    return pa.schema(keys + value_fields(VALUE_TYPES) + [pa.field("rk", pa.string())])


PART_SCHEMA = make_schema(True)
FLAT_SCHEMA = make_schema(False)


# ---- pypaimon: one subprocess runs a list of steps -----------------------------------------

PYPAIMON_STEPS = PYPAIMON_READ + """
from pypaimon.schema.schema_change import SchemaChange

def load_schema(path):
    with open(path + ".schema", "rb") as f:
        return pa.ipc.read_schema(pa.py_buffer(f.read()))

def run_step(catalog, step):
    op = step["op"]
    if op == "read":
        return paimon_read(catalog, step)
    if op == "create":
        schema = Schema.from_pyarrow_schema(load_schema(step["schema"]),
                                            partition_keys=step["partition_keys"],
                                            primary_keys=step["primary_keys"],
                                            options=step["options"])
        catalog.create_table(step["table"], schema, False)
        return None
    if op == "alter":
        changes = [SchemaChange.set_option(k, v) for k, v in step["options"].items()]
        catalog.alter_table(step["table"], changes)
        return None
    if op == "write":
        table = catalog.get_table(step["table"])
        wb = table.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        for f in step["files"]:
            w.write_arrow(load_batch(f))
        c.commit(w.prepare_commit())
        w.close()
        c.close()
        return catalog.get_table(step["table"]).snapshot_manager().get_latest_snapshot().id
    raise ValueError("unknown step " + op)

catalog = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
catalog.create_database("db", True)
results = []
for step in ARGS["steps"]:
    try:
        results.append(run_step(catalog, step))
    except Exception:
        results.append("ERROR " + traceback.format_exc()[-3000:])
emit(results)
"""


class Steps:
    """The pypaimon steps of one scenario for one subprocess, and then their results by label."""

    def __init__(self, tmp: Path, prefix: str):
        self.tmp = tmp
        self.prefix = prefix
        self.steps: list[dict[str, Any]] = []
        self.labels: list[str] = []
        self.results: dict[str, Any] = {}

    def _add(self, label: str, step: dict[str, Any]) -> None:
        assert label not in self.labels, label
        self.labels.append(label)
        self.steps.append(step)

    def out(self, label: str) -> str:
        return str(self.tmp / f"{self.prefix}.{label}.parquet")

    def read(self, label: str, table: str, snapshot: int | None = None) -> None:
        self._add(label, {"op": "read", "table": table, "out": self.out(label), "snapshot": snapshot})

    def write(self, label: str, table: str, schema: pa.Schema,
              batches: Sequence[Sequence[Row]]) -> None:
        files = [write_batch_file(str(self.tmp / f"{self.prefix}.{label}.in{i}.parquet"), rows, schema)
                 for i, rows in enumerate(batches)]
        self._add(label, {"op": "write", "table": table, "files": files})

    def create(self, label: str, table: str, schema: pa.Schema, primary_keys: list[str],
               partition_keys: list[str], options: dict[str, str]) -> None:
        path = write_batch_file(str(self.tmp / f"{self.prefix}.{label}.schema.parquet"), [], schema)
        self._add(label, {"op": "create", "table": table, "schema": path,
                          "primary_keys": primary_keys, "partition_keys": partition_keys,
                          "options": options})

    def alter(self, label: str, table: str, options: dict[str, str]) -> None:
        self._add(label, {"op": "alter", "table": table, "options": options})

    def rows(self, label: str, schema: pa.Schema) -> list[tuple[Any, ...]]:
        """pypaimon's canonical rows of read `label` (failing with pypaimon's error if it had one)."""
        return read_result(self.results[label], self.out(label), schema)

    def snapshot(self, label: str) -> int:
        """The latest snapshot id after pypaimon's write `label`."""
        result = self.results[label]
        if not isinstance(result, int):
            raise AssertionError(f"pypaimon failed at step {label}:\n{result}")
        return result

    def check_done(self, label: str) -> None:
        if self.results[label] is not None:
            raise AssertionError(f"pypaimon failed at step {label}:\n{self.results[label]}")


# ---- our engine ---------------------------------------------------------------------------

class Keys:
    """Rows for key index i and version v: `key_of(i)` plus sample values; remembers every index
    used, so that batches can pick keys the table has (or once had) and keys it never saw."""

    def __init__(self, key_of: Callable[[int], Row]):
        self.key_of = key_of
        self.seen: set[int] = set()
        self.index_of: dict[Key, int] = {}

    def make(self, i: int, v: int) -> Row:
        key = self.key_of(i)
        self.seen.add(i)
        self.index_of[tuple(key.values())] = i
        return {**key, **value_row(i, v, VALUE_TYPES)}

    def row(self, i: int, v: int, kind: str) -> Row:
        return {**self.make(i, v), "rk": kind}

    def fresh(self, n: int, below: int = 10**9) -> list[int]:
        """n indices never used, following the largest one used below `below`."""
        start = max((i for i in self.seen if i < below), default=-1) + 1
        return list(range(start, start + n))


def upsert_batch(keys: Keys, model: TableModel, version: int, seed: int,
                 new: Sequence[int]) -> list[Row]:
    """A shuffled mix of updates and deletes of live keys, re-inserts of deleted keys, keys
    written twice (the last wins) and the keys of indices `new`, never written before."""
    rng = random.Random(seed)
    live = sorted(keys.index_of[k] for k in (tuple(r[f] for f in model.primary_keys)
                                             for r in model.rows()))
    dead = sorted(keys.seen - set(live))
    rng.shuffle(live)
    quarter, tenth = len(live) // 4, len(live) // 10
    groups = [[keys.row(i, version, "+U")] for i in live[:quarter]]
    groups += [[keys.row(i, version, "-D")] for i in live[quarter:quarter + tenth]]
    groups += [[keys.row(i, version, "+U"), keys.row(i, version + 1, "+U")]
               for i in live[quarter + tenth:quarter + tenth + 5]]
    groups += [[keys.row(i, version, "+I")] for i in rng.sample(dead, min(5, len(dead)))]
    assert not keys.seen & set(new), "new keys must be new"
    groups += [[keys.row(i, version, "+I")] for i in new]
    rng.shuffle(groups)
    return [r for g in groups for r in g]


def create(catalog: Catalog, name: str, schema: pa.Schema, options: dict[str, str]) -> FileStoreTable:
    partitioned = "dt" in schema.names
    catalog.create_table(name, Schema.from_pyarrow_schema(
        schema, partition_keys=["dt"] if partitioned else [],
        primary_keys=["dt", "id"] if partitioned else ["id"],
        options={"rowkind.field": "rk", **options}))
    return catalog.get_table(name)


@dataclass
class Written:
    snapshot: int
    bucket_changes: list[dict[str, Any]]
    rows: list[Row]


def commit(table: FileStoreTable, schema: pa.Schema, batches: Sequence[Sequence[Row]],
           model: TableModel, assigners: int = 1) -> Written:
    """One commit of our engine (each batch a write_arrow call), applied to `model` too. With
    `assigners` > 1, as many writers each take the keys with abs(hash % n) == their id."""
    wb = table.new_batch_write_builder()
    writers = [wb.new_write(num_assigners=assigners, assigner_id=i) for i in range(assigners)]
    key_names = table.schema.trimmed_primary_keys
    for rows in batches:
        data = pa.Table.from_pylist(list(rows), schema=schema)
        if assigners == 1:
            writers[0].write_arrow(data)
        else:
            hashes = hash_rows([data.column(k) for k in key_names], table.schema.types_of(key_names))
            owner = np.abs(np.fmod(hashes.astype(np.int64), assigners))
            for i, w in enumerate(writers):
                w.write_arrow(data.filter(pa.array(owner == i)))
    messages = [m for w in writers for m in w.prepare_commit()]
    c = wb.new_commit()
    c.commit(messages)
    for w in writers:
        w.close()
    c.close()
    for rows in batches:
        model.apply(rows)
    snapshot = table.latest_snapshot()
    assert snapshot is not None
    changes = [{"partition": m.partition, "bucket": m.bucket, "inserted": m.inserted_keys,
                "updated": m.updated_keys} for m in messages if m.inserted_keys is not None]
    return Written(snapshot.id, changes, [r for rows in batches for r in rows])


def our_rows(table: FileStoreTable, schema: pa.Schema, snapshot: int | None = None) -> list[tuple[Any, ...]]:
    rb = table.new_read_builder()
    if snapshot is not None:
        rb = rb.with_snapshot(snapshot)
    out = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return [] if out is None else canonical_rows(out, schema)


# ---- where rows live -------------------------------------------------------------------------

@dataclass
class Layout:
    """Where a snapshot keeps each key: read from its live data files and HASH index files."""

    buckets: dict[Key, set[int]] = field(default_factory=lambda: defaultdict(set))  # key -> buckets
    hashes: dict[Key, int] = field(default_factory=dict)  # key -> hash of its bucket key
    totals: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))  # partition -> total_buckets
    index: dict[tuple[str, int], int] = field(default_factory=dict)  # (partition, hash) -> bucket
    index_problems: list[str] = field(default_factory=list)

    def split_keys(self) -> list[tuple[Key, list[int]]]:
        """Keys with records in more than one bucket: a merge-on-read returns each of them twice."""
        return [(k, sorted(b)) for k, b in self.buckets.items() if len(b) > 1]

    def misplaced_fixed(self, counts: Mapping[str, int]) -> list[tuple[Key, int, int]]:
        """Keys not in bucket abs(hash % n), n being the bucket count of their partition."""
        out = []
        for k, bs in self.buckets.items():
            expected = int(bucket_of(np.array([self.hashes[k]]), counts[k[0]])[0])
            out += [(k, b, expected) for b in bs if b != expected]
        return out

    def unindexed(self) -> list[tuple[Key, list[int], int | None]]:
        """Keys whose file bucket is not the bucket their partition's HASH index gives them."""
        return [(k, sorted(bs), self.index.get((k[0], self.hashes[k])))
                for k, bs in self.buckets.items() if bs != {self.index.get((k[0], self.hashes[k]))}]

    def buckets_used(self) -> dict[str, set[int]]:
        used: dict[str, set[int]] = defaultdict(set)
        for k, bs in self.buckets.items():
            used[k[0]] |= bs
        return dict(used)


def layout(table: FileStoreTable, snapshot_id: int) -> Layout:
    snapshot = table.snapshot(snapshot_id)
    codec = table.store.partition_codec()
    names = table.schema.trimmed_primary_keys
    types = table.schema.types_of(names)
    out = Layout()
    for e in table.store.manifest_io().live_entries(snapshot):
        part = codec.from_binary(e.partition)
        path = f"{table.path_factory.bucket_dir(part.spec, e.bucket)}/{e.file.file_name}"
        data = pq.read_table(pa.BufferReader(table.file_io.read_bytes(path)), columns=names)
        hashes = hash_rows([data.column(n) for n in names], types).tolist()
        values = zip(*(data.column(n).to_pylist() for n in names), strict=True)
        for vals, h in zip(values, hashes, strict=True):
            key = (part.path_string(), *vals)
            out.buckets[key].add(e.bucket)
            out.hashes[key] = h
        out.totals[part.path_string()].add(e.total_buckets)
    if snapshot.index_manifest:
        seen: set[tuple[str, int]] = set()
        for ie in table.store.manifest_io().read_index_manifest(snapshot.index_manifest):
            if ie.index_type != "HASH":
                continue
            part_name = codec.from_binary(ie.partition).path_string()
            if ie.kind != FileKind.ADD or (part_name, ie.bucket) in seen:
                out.index_problems.append(f"{ie.kind} {part_name} bucket {ie.bucket} {ie.file_name}")
            seen.add((part_name, ie.bucket))
            path = f"{table.path_factory.index_dir}/{ie.file_name}"
            for h in decode_hashes(table.file_io.read_bytes(path), path).tolist():
                if out.index.setdefault((part_name, h), ie.bucket) != ie.bucket:
                    out.index_problems.append(f"hash {h} of {part_name} in buckets "
                                              f"{out.index[(part_name, h)]} and {ie.bucket}")
    return out


def key_hashes(table: FileStoreTable, schema: pa.Schema, rows: Sequence[Row]) -> dict[Key, int]:
    """Key (partition path, bucket-key values) -> hash, for the rows of a batch."""
    names = table.schema.trimmed_primary_keys
    data = pa.Table.from_pylist(list(rows), schema=schema)
    hashes = hash_rows([data.column(n) for n in names], table.schema.types_of(names)).tolist()
    codec = table.store.partition_codec()
    out = {}
    for r, h in zip(rows, hashes, strict=True):
        part = codec.from_values(tuple(r[p] for p in table.schema.partition_keys)).path_string()
        out[(part, *(r[n] for n in names))] = h
    return out


def check_dynamic(before: Layout, after: Layout, written: Iterable[Key]) -> None:
    """A dynamic-bucket table after a commit: every key in one bucket, the one the HASH index
    gives it; the index never moves a hash; keys written that were indexed before kept the
    bucket they had."""
    assert not after.index_problems, after.index_problems[:5]
    assert not after.split_keys(), f"keys in several buckets: {after.split_keys()[:5]}"
    assert not after.unindexed(), f"keys outside their indexed bucket: {after.unindexed()[:5]}"
    moved = [(k, b, after.index.get(k)) for k, b in before.index.items() if after.index.get(k) != b]
    assert not moved, f"indexed hashes that moved or vanished: {moved[:5]}"
    stayed = [k for k in written if (k[0], after.hashes.get(k)) in before.index]
    assert stayed, "the commit updated no key the table had before"
    wrong = [(k, before.index[(k[0], after.hashes[k])], sorted(after.buckets[k])) for k in stayed
             if after.buckets[k] != {before.index[(k[0], after.hashes[k])]}]
    assert not wrong, f"updated keys that left their bucket: {wrong[:5]}"


def expected_changes(before: Layout, after: Layout, hashes: Mapping[Key, int]) -> Counter[tuple[str, int, str]]:
    """What `bucket_changes` should count: distinct keys written per (partition, bucket), as
    'inserted' when the partition's index did not know the key's hash, else 'updated'."""
    out: Counter[tuple[str, int, str]] = Counter()
    for part, h in {(k[0], h) for k, h in hashes.items()}:
        kind = "updated" if (part, h) in before.index else "inserted"
        out[(part, after.index[(part, h)], kind)] += 1
    return out


def reported_changes(table: FileStoreTable, changes: list[dict[str, Any]]) -> Counter[tuple[str, int, str]]:
    """The messages' key counts (`inserted_keys`, `updated_keys`) as counts per (partition, bucket, 'inserted' / 'updated')."""
    codec = table.store.partition_codec()
    out: Counter[tuple[str, int, str]] = Counter()
    for c in changes:
        part = codec.from_binary(c["partition"]).path_string()
        for kind in ("inserted", "updated"):
            if c[kind]:
                out[(part, c["bucket"], kind)] += c[kind]
    return out


def stats(table: FileStoreTable, snapshot_id: int) -> list[dict[str, Any]]:
    return table.bucket_stats(snapshot_id).to_pylist()


# ---- scenarios ------------------------------------------------------------------------------

class Scenario:
    """Our engine's work before the first pypaimon call (`start`, phase 0) and between the two
    (`middle`, phase 1); each phase fills `calls[phase]`, the steps of the next pypaimon call."""

    def __init__(self, tmp: Path, catalog: Catalog):
        self.tmp = tmp
        self.catalog = catalog
        self.calls = [Steps(tmp, f"{type(self).__name__}.0"), Steps(tmp, f"{type(self).__name__}.1")]
        self.failure: tuple[int, str] | None = None  # (phase, traceback)

    def start(self) -> None:
        pass

    def middle(self) -> None:
        pass

    def need(self, phase: int) -> None:
        """Fail the test when the scenario broke at or before `phase`."""
        if self.failure is not None and self.failure[0] <= phase:
            pytest.fail(f"{type(self).__name__} failed in phase {self.failure[0]}:\n{self.failure[1]}")

    def table(self, name: str) -> FileStoreTable:
        return self.catalog.get_table(name)


class Dynamic(Scenario):
    TABLES = {  # name -> (schema, target rows per bucket, key_of, keys, commits, seed)
        "db.dyn_part": (PART_SCHEMA, "40", lambda i: {"dt": DAYS[i % 3], "id": i * 13 - 500}, 240, 4, 11),
        "db.dyn_flat": (FLAT_SCHEMA, "60", lambda i: {"id": i * 7919 % 100_003 - 50_000}, 200, 4, 12),
    }
    THEIRS = "db.theirs_dyn"

    def start(self) -> None:
        self.keys: dict[str, Keys] = {}
        self.models: dict[str, list[TableModel]] = {}  # after ours, after pypaimon's, after ours again
        self.first: dict[str, int] = {}  # the first snapshot: commit of two parallel assigners
        self.before_pypaimon: dict[str, int] = {}  # our last snapshot before pypaimon's upsert
        self.ours: dict[str, list[Written]] = {}
        self.pypaimon_rows: dict[str, list[Row]] = {}
        steps = self.calls[0]
        for name, (schema, target, key_of, n_keys, commits, seed) in self.TABLES.items():
            table = create(self.catalog, name, schema, {"bucket": "-1", "dynamic-bucket.target-row-num": target})
            keys = Keys(key_of)
            model = TableModel(schema, table.schema.primary_keys, "rk")
            batches = change_batches(n_keys, commits, seed, keys.make)
            written = [commit(table, schema, [batches[0]], model, assigners=2)]
            written.append(commit(table, schema, [batches[1][:len(batches[1]) // 2],
                                                  batches[1][len(batches[1]) // 2:]], model))
            written += [commit(table, schema, [b], model) for b in batches[2:]]
            self.keys[name], self.models[name], self.ours[name] = keys, [model.copy()], written
            self.first[name] = written[0].snapshot
            self.before_pypaimon[name] = written[-1].snapshot
            rows = upsert_batch(keys, model, version=500, seed=seed, new=keys.fresh(40))
            model.apply(rows)
            self.models[name].append(model.copy())
            self.pypaimon_rows[name] = rows
            steps.read(f"{name}.before", name)
            steps.write(f"{name}.upsert", name, schema, [rows[:len(rows) // 2], rows[len(rows) // 2:]])
            steps.read(f"{name}.after", name)
        # A dynamic-bucket table of pypaimon's own, four commits of changes.
        self.their_keys = Keys(lambda i: {"dt": DAYS[i % 2], "id": i * 3})
        self.their_model = TableModel(PART_SCHEMA, ["dt", "id"], "rk")
        steps.create("theirs.create", self.THEIRS, PART_SCHEMA, ["dt", "id"], ["dt"],
                     {"bucket": "-1", "dynamic-bucket.target-row-num": "30", "rowkind.field": "rk"})
        for c, rows in enumerate(change_batches(150, 4, 13, self.their_keys.make)):
            steps.write(f"theirs.write{c}", self.THEIRS, PART_SCHEMA, [rows])
            self.their_model.apply(rows)
        self.their_models = [self.their_model.copy()]
        steps.read("theirs.read", self.THEIRS)

    def middle(self) -> None:
        first = self.calls[0]
        self.pypaimon_snapshot: dict[str, int] = {}
        self.layouts: dict[str, list[Layout]] = {}
        for name, (schema, *_rest) in self.TABLES.items():
            table = self.table(name)
            self.pypaimon_snapshot[name] = first.snapshot(f"{name}.upsert")
            before = layout(table, self.before_pypaimon[name])
            after = layout(table, self.pypaimon_snapshot[name])
            model = self.models[name][-1].copy()
            rows = upsert_batch(self.keys[name], model, version=700, seed=77,
                                new=self.keys[name].fresh(30))
            self.ours[name].append(commit(table, schema, [rows], model))
            self.models[name].append(model)
            self.layouts[name] = [before, after, layout(table, self.ours[name][-1].snapshot)]
            self.calls[1].read(f"{name}.final", name)
        # Our upsert into pypaimon's table.
        table = self.table(self.THEIRS)
        self.their_snapshot = first.snapshot("theirs.write3")
        self.their_rows = upsert_batch(self.their_keys, self.their_model, version=900, seed=99,
                                       new=self.their_keys.fresh(25))
        self.their_write = commit(table, PART_SCHEMA, [self.their_rows], self.their_model)
        self.their_models.append(self.their_model.copy())
        self.their_layouts = [layout(table, self.their_snapshot), layout(table, self.their_write.snapshot)]
        self.calls[1].read("theirs.final", self.THEIRS)


class Postpone(Scenario):
    NAME = "db.postpone"
    THEIRS = "db.theirs_postpone"  # pypaimon creates and fills it (Avro postpone files), we compact

    def start(self) -> None:
        table = create(self.catalog, self.NAME, PART_SCHEMA,
                       {"bucket": "-2", "postpone.default-bucket-num": "3"})
        a_keys = Keys(lambda i: {"dt": "a", "id": i})
        b_keys = Keys(lambda i: {"dt": "b", "id": -i})
        a_batches = change_batches(120, 3, 21, a_keys.make)
        b_batches = change_batches(90, 2, 22, b_keys.make)
        model = TableModel(PART_SCHEMA, ["dt", "id"], "rk")
        self.models = [model.copy()]  # empty, after the first compaction, after the second
        self.postponed_1 = [commit(table, PART_SCHEMA, [b], model).snapshot for b in a_batches[:2]]
        self.models.append(model.copy())
        self.compacted_1 = table.compact()
        self.rescaled = table.rescale(5, partitions=[{"dt": "a"}])
        self.postponed_2 = [commit(table, PART_SCHEMA, [a_batches[2], b_batches[0]], model).snapshot,
                            commit(table, PART_SCHEMA, [b_batches[1]], model).snapshot]
        self.models.append(model.copy())
        self.compacted_2 = table.compact()
        steps = self.calls[0]
        for label, snapshot in self.snapshots().items():
            steps.read(label, self.NAME, snapshot)
        # pypaimon's own postpone table: three commits of changes into two partitions.
        their_keys = Keys(lambda i: {"dt": DAYS[i % 2], "id": i * 5 - 100})
        self.their_model = TableModel(PART_SCHEMA, ["dt", "id"], "rk")
        steps.create("theirs.create", self.THEIRS, PART_SCHEMA, ["dt", "id"], ["dt"],
                     {"bucket": "-2", "postpone.default-bucket-num": "2", "rowkind.field": "rk"})
        for c, rows in enumerate(change_batches(100, 3, 31, their_keys.make)):
            steps.write(f"theirs.write{c}", self.THEIRS, PART_SCHEMA, [rows])
            self.their_model.apply(rows)
        steps.read("theirs.postponed", self.THEIRS)

    def middle(self) -> None:
        table = self.table(self.THEIRS)
        latest = table.latest_snapshot()
        assert latest is not None
        self.their_postponed = [e.file.file_name for e in table.store.manifest_io().live_entries(latest)
                                if e.bucket == POSTPONE]
        self.their_before = our_rows(table, PART_SCHEMA)
        self.their_compacted = table.compact()
        self.calls[1].read("theirs.final", self.THEIRS)

    def snapshots(self) -> dict[str, int]:
        """Snapshot to read -> label; their expected model is `self.models[index]`."""
        return {"postponed_1": self.postponed_1[-1], "compacted_1": self.compacted_1[-1],
                "rescaled": self.rescaled[-1], "postponed_2": self.postponed_2[-1],
                "compacted_2": self.compacted_2[-1]}


def rescale_key(i: int) -> Row:
    """Keys of partitions a, b, c; from index 10 000 of d (written after the rescales), from
    20 000 of e (written after pypaimon's ALTER TABLE)."""
    dt = "abc"[i % 3] if i < 10_000 else "d" if i < 20_000 else "e"
    return {"dt": dt, "id": i * 7}


class Rescale(Scenario):
    NAME = "db.rescale"

    def start(self) -> None:
        table = create(self.catalog, self.NAME, PART_SCHEMA, {"bucket": "2"})
        self.keys = Keys(rescale_key)
        model = TableModel(PART_SCHEMA, ["dt", "id"], "rk")
        self.written = [commit(table, PART_SCHEMA, [b], model).snapshot
                        for b in change_batches(180, 3, 31, self.keys.make)]
        self.models = [model.copy()]  # before the rescales, after our write, after pypaimon's, final
        self.rescaled = [table.rescale(7), table.rescale(3)]
        # Our write after the rescales: changes in a, b and c, and keys of a new partition d.
        new = self.keys.fresh(30, below=10_000) + list(range(10_000, 10_040))
        self.ours_after = commit(table, PART_SCHEMA,
                                 [upsert_batch(self.keys, model, 300, 32, new)], model)
        self.models.append(model.copy())
        # pypaimon sets the bucket option to the new layout (Paimon writers hash with it), then
        # upserts into a, b and c (d keeps the 2 buckets it was written with).
        rows = upsert_batch(self.keys, model, 400, 33, self.keys.fresh(30, below=10_000))
        self.pypaimon_rows = [r for r in rows if r["dt"] != "d"]
        model.apply(self.pypaimon_rows)
        self.models.append(model.copy())
        steps = self.calls[0]
        for label, snapshot in self.snapshots().items():
            steps.read(label, self.NAME, snapshot)
        steps.alter("alter", self.NAME, {"bucket": "3"})
        steps.write("upsert", self.NAME, PART_SCHEMA, [self.pypaimon_rows])
        steps.read("after_upsert", self.NAME)

    def snapshots(self) -> dict[str, int]:
        return {"written": self.written[-1], "rescaled_7": self.rescaled[0][-1],
                "rescaled_3": self.rescaled[1][-1], "ours_after": self.ours_after.snapshot}

    def middle(self) -> None:
        """Our write after pypaimon's: a, b, c keep 3 buckets, d its 2, new partition e takes the
        3 of the altered option."""
        table = self.table(self.NAME)
        self.pypaimon_snapshot = self.calls[0].snapshot("upsert")
        model = self.models[-1].copy()
        new = self.keys.fresh(20, below=10_000) + self.keys.fresh(10, below=20_000) + list(range(20_000, 20_030))
        self.final = commit(table, PART_SCHEMA, [upsert_batch(self.keys, model, 600, 34, new)], model)
        self.models.append(model)
        self.calls[1].read("final", self.NAME)


# ---- the three scenarios, run side by side: two pypaimon subprocesses in all ------------------

SCENARIOS = (Dynamic, Postpone, Rescale)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory,
          pypaimon: Callable[..., Any]) -> dict[str, Scenario]:
    tmp = tmp_path_factory.mktemp("bucket_modes")
    warehouse = str(tmp / "warehouse")
    catalog = Catalog(warehouse)
    catalog.create_database("db")
    scenarios = {cls.__name__: cls(tmp, catalog) for cls in SCENARIOS}

    def phase(n: int, method: str) -> None:
        for s in scenarios.values():
            if s.failure is None:
                try:
                    getattr(s, method)()
                except Exception:
                    s.failure = (n, traceback.format_exc())

    def call(n: int) -> None:
        live = [s for s in scenarios.values() if s.failure is None]
        steps = [step for s in live for step in s.calls[n].steps]
        results = pypaimon(PYPAIMON_STEPS, warehouse=warehouse, steps=steps) if steps else []
        assert len(results) == len(steps), results
        for s in live:
            k = len(s.calls[n].steps)
            s.calls[n].results, results = dict(zip(s.calls[n].labels, results[:k], strict=True)), results[k:]

    phase(0, "start")
    call(0)
    phase(1, "middle")
    call(1)
    return scenarios


def scenario(world: dict[str, Scenario], cls: type[Any], phase: int) -> Any:
    s = world[cls.__name__]
    s.need(phase)
    return s


# ---- 1. dynamic bucket ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(Dynamic.TABLES))
def test_pypaimon_reads_our_dynamic_table(world: dict[str, Scenario], name: str) -> None:
    """Our dynamic-bucket table (buckets filled up to the target, one commit by two parallel
    assigners, then updates and deletes): pypaimon reads it as the model says."""
    s: Dynamic = scenario(world, Dynamic, 0)
    schema, _, _, _, _, _ = Dynamic.TABLES[name]
    table = s.table(name)
    last = s.before_pypaimon[name]
    buckets = stats(table, last)
    assert {b["total_buckets"] for b in buckets} == {-1}
    per_partition = Counter(b["partition"] for b in buckets)
    assert min(per_partition.values()) >= 3, per_partition  # the target row count was passed
    first = layout(table, s.first[name])
    wrong = [(k, sorted(b)) for k, b in first.buckets.items()
             if {x % 2 for x in b} != {abs(int(np.fmod(first.hashes[k], 2)))}]
    assert not wrong, f"keys in a bucket of the other assigner: {wrong[:5]}"
    lay = layout(table, last)
    assert not lay.index_problems and not lay.split_keys() and not lay.unindexed()
    expected = s.models[name][0]
    assert_same_rows(expected.canonical(), our_rows(table, schema, last), f"our read of {name}")
    assert_same_rows(expected.canonical(pypaimon_read=True),
                     s.calls[0].rows(f"{name}.before", schema), f"pypaimon's read of {name}")


@pytest.mark.parametrize("name", list(Dynamic.TABLES))
def test_pypaimon_upserts_into_our_dynamic_table(world: dict[str, Scenario], name: str) -> None:
    """pypaimon updates, deletes and inserts keys through our HASH index: both engines read the
    model, and every key pypaimon updated stayed in its bucket."""
    s: Dynamic = scenario(world, Dynamic, 1)
    schema = Dynamic.TABLES[name][0]
    table = s.table(name)
    snapshot = s.pypaimon_snapshot[name]
    assert snapshot == s.before_pypaimon[name] + 1
    expected = s.models[name][1]
    assert_same_rows(expected.canonical(pypaimon_read=True),
                     s.calls[0].rows(f"{name}.after", schema), f"pypaimon's read of {name}")
    assert_same_rows(expected.canonical(), our_rows(table, schema, snapshot), f"our read of {name}")
    before, after, _ = s.layouts[name]
    hashes = key_hashes(table, schema, s.pypaimon_rows[name])
    check_dynamic(before, after, hashes)
    new = [k for k in hashes if (k[0], hashes[k]) not in before.index]
    assert len(new) >= 40 and all((k[0], hashes[k]) in after.index for k in new)


@pytest.mark.parametrize("name", list(Dynamic.TABLES))
def test_we_upsert_after_pypaimon_into_our_dynamic_table(world: dict[str, Scenario], name: str) -> None:
    """Our next commit reads the index pypaimon wrote: keys it inserted keep their buckets, our
    the messages count what was new and what was updated, and both engines read the model."""
    s: Dynamic = scenario(world, Dynamic, 1)
    schema = Dynamic.TABLES[name][0]
    table = s.table(name)
    ours = s.ours[name][-1]
    _, before, after = s.layouts[name]
    hashes = key_hashes(table, schema, ours.rows)
    check_dynamic(before, after, hashes)
    pypaimon_new = set(key_hashes(table, schema, s.pypaimon_rows[name])) - set(s.layouts[name][0].buckets)
    assert pypaimon_new & set(hashes), "our commit updated no key pypaimon inserted"
    assert reported_changes(table, ours.bucket_changes) == expected_changes(before, after, hashes)
    expected = s.models[name][2]
    assert_same_rows(expected.canonical(), our_rows(table, schema), f"our read of {name}")
    assert_same_rows(expected.canonical(pypaimon_read=True),
                     s.calls[1].rows(f"{name}.final", schema), f"pypaimon's final read of {name}")


def test_we_upsert_into_pypaimon_dynamic_table(world: dict[str, Scenario]) -> None:
    """A dynamic-bucket table pypaimon created and filled: we read it, upsert into it through its
    HASH index, and both engines read the model, each key once."""
    s: Dynamic = scenario(world, Dynamic, 1)
    table = s.table(Dynamic.THEIRS)
    buckets = stats(table, s.their_snapshot)
    assert {b["total_buckets"] for b in buckets} == {-1}
    assert min(Counter(b["partition"] for b in buckets).values()) >= 3, buckets
    before, after = s.their_layouts
    assert not before.index_problems and not before.split_keys() and not before.unindexed()
    assert_same_rows(s.their_models[0].canonical(pypaimon_read=True),
                     s.calls[0].rows("theirs.read", PART_SCHEMA), "pypaimon's read of its table")
    assert_same_rows(s.their_models[0].canonical(), our_rows(table, PART_SCHEMA, s.their_snapshot),
                     "our read of pypaimon's table")
    hashes = key_hashes(table, PART_SCHEMA, s.their_rows)
    check_dynamic(before, after, hashes)
    assert reported_changes(table, s.their_write.bucket_changes) == expected_changes(before, after, hashes)
    assert_same_rows(s.their_models[1].canonical(), our_rows(table, PART_SCHEMA),
                     "our read after our upsert")
    assert_same_rows(s.their_models[1].canonical(pypaimon_read=True),
                     s.calls[1].rows("theirs.final", PART_SCHEMA), "pypaimon's read after our upsert")


# ---- 2. postpone bucket --------------------------------------------------------------------------

POSTPONE_MODEL = {"postponed_1": 0, "compacted_1": 1, "rescaled": 1, "postponed_2": 1, "compacted_2": 2}


def test_postponed_rows_are_invisible_until_compaction(world: dict[str, Scenario]) -> None:
    s: Postpone = scenario(world, Postpone, 0)
    table = s.table(Postpone.NAME)
    for label, partitions in (("postponed_1", {"dt=a"}), ("postponed_2", {"dt=a", "dt=b"})):
        snapshot = s.snapshots()[label]
        waiting = [b for b in stats(table, snapshot) if b["bucket"] == POSTPONE]
        assert {b["partition"] for b in waiting} == partitions, waiting
        assert all(b["record_count"] > 0 for b in waiting)
        expected = s.models[POSTPONE_MODEL[label]]
        assert_same_rows(expected.canonical(), our_rows(table, PART_SCHEMA, snapshot), f"our read at {label}")
        assert_same_rows(expected.canonical(pypaimon_read=True), s.calls[0].rows(label, PART_SCHEMA),
                         f"pypaimon's read at {label}")
    assert s.models[0].rows() == [] and len(s.models[1].rows()) > 80


def test_postpone_compaction_keeps_rescaled_count_and_defaults_new_partition(
        world: dict[str, Scenario]) -> None:
    """After compaction every row is visible to both engines; partition a, rescaled to 5 buckets
    before its second batch, keeps 5; partition b, new, gets the default 3."""
    s: Postpone = scenario(world, Postpone, 0)
    table = s.table(Postpone.NAME)
    counts_at = {"compacted_1": {"dt=a": 3}, "rescaled": {"dt=a": 5},
                 "compacted_2": {"dt=a": 5, "dt=b": 3}}
    assert table.snapshot(s.rescaled[-1]).commit_kind == "OVERWRITE"
    for label, counts in counts_at.items():
        snapshot = s.snapshots()[label]
        lay = layout(table, snapshot)
        assert {p: sorted(t) for p, t in lay.totals.items()} == {p: [n] for p, n in counts.items()}
        assert {p: len(b) for p, b in lay.buckets_used().items()} == counts
        assert not lay.split_keys() and not lay.misplaced_fixed(counts), lay.misplaced_fixed(counts)[:5]
        expected = s.models[POSTPONE_MODEL[label]]
        assert_same_rows(expected.canonical(), our_rows(table, PART_SCHEMA, snapshot), f"our read at {label}")
        assert_same_rows(expected.canonical(pypaimon_read=True), s.calls[0].rows(label, PART_SCHEMA),
                         f"pypaimon's read at {label}")
    assert_same_rows(s.models[2].canonical(), our_rows(table, PART_SCHEMA), "our latest read")


def test_we_compact_pypaimons_avro_postpone_files(world: dict[str, Scenario]) -> None:
    """pypaimon writes postpone-bucket rows as Avro files; our compaction reads them and moves
    every row into bucket abs(hash % 2) of its partition, as both engines then read it."""
    s: Postpone = scenario(world, Postpone, 1)
    assert s.their_postponed and all(n.endswith(".avro") for n in s.their_postponed), s.their_postponed
    assert s.their_before == [] and s.calls[0].rows("theirs.postponed", PART_SCHEMA) == []
    table = s.table(Postpone.THEIRS)
    counts = {f"dt={d}": 2 for d in DAYS[:2]}
    lay = layout(table, s.their_compacted[-1])
    assert {p: sorted(t) for p, t in lay.totals.items()} == {p: [n] for p, n in counts.items()}
    assert not lay.split_keys() and not lay.misplaced_fixed(counts), lay.misplaced_fixed(counts)[:5]
    assert len(s.their_model.rows()) > 60
    assert_same_rows(s.their_model.canonical(), our_rows(table, PART_SCHEMA), "our read after compacting")
    assert_same_rows(s.their_model.canonical(pypaimon_read=True), s.calls[1].rows("theirs.final", PART_SCHEMA),
                     "pypaimon's read after our compaction")


# ---- 3. rescale ------------------------------------------------------------------------------

def test_rescale_2_7_3_keeps_rows_and_pypaimon_reads_each(world: dict[str, Scenario]) -> None:
    s: Rescale = scenario(world, Rescale, 0)
    table = s.table(Rescale.NAME)
    assert [len(ids) for ids in s.rescaled] == [1, 1]
    assert s.rescaled[1][0] == s.rescaled[0][0] + 1 == s.written[-1] + 2
    expected = s.models[0]
    for label, count in (("written", 2), ("rescaled_7", 7), ("rescaled_3", 3)):
        snapshot = s.snapshots()[label]
        if label != "written":
            assert table.snapshot(snapshot).commit_kind == "OVERWRITE"
        counts = dict.fromkeys(("dt=a", "dt=b", "dt=c"), count)
        lay = layout(table, snapshot)
        assert {p: sorted(t) for p, t in lay.totals.items()} == {p: [n] for p, n in counts.items()}
        assert {p: len(b) for p, b in lay.buckets_used().items()} == counts
        assert not lay.split_keys() and not lay.misplaced_fixed(counts), lay.misplaced_fixed(counts)[:5]
        assert_same_rows(expected.canonical(), our_rows(table, PART_SCHEMA, snapshot), f"our read at {label}")
        assert_same_rows(expected.canonical(pypaimon_read=True), s.calls[0].rows(label, PART_SCHEMA),
                         f"pypaimon's read at {label}")


def test_writes_after_rescale_land_in_their_partitions_buckets(world: dict[str, Scenario]) -> None:
    """Our write after the rescales (a, b, c: 3 buckets; new d: the option's 2), pypaimon's upsert
    after setting `bucket` to 3, then ours again (new e: 3): each key in one bucket, the right
    one, and both engines read the model at every step."""
    s: Rescale = scenario(world, Rescale, 1)
    table = s.table(Rescale.NAME)
    s.calls[0].check_done("alter")
    abc = dict.fromkeys(("dt=a", "dt=b", "dt=c"), 3)
    steps = [(s.ours_after.snapshot, {**abc, "dt=d": 2}, s.models[1], s.calls[0].rows("ours_after", PART_SCHEMA)),
             (s.pypaimon_snapshot, {**abc, "dt=d": 2}, s.models[2], s.calls[0].rows("after_upsert", PART_SCHEMA)),
             (s.final.snapshot, {**abc, "dt=d": 2, "dt=e": 3}, s.models[3], s.calls[1].rows("final", PART_SCHEMA))]
    for snapshot, counts, model, theirs in steps:
        lay = layout(table, snapshot)
        assert {p: sorted(t) for p, t in lay.totals.items()} == {p: [n] for p, n in counts.items()}, snapshot
        assert not lay.split_keys(), f"snapshot {snapshot}: keys in several buckets {lay.split_keys()[:5]}"
        assert not lay.misplaced_fixed(counts), f"snapshot {snapshot}: {lay.misplaced_fixed(counts)[:5]}"
        assert_same_rows(model.canonical(), our_rows(table, PART_SCHEMA, snapshot), f"our read at {snapshot}")
        assert_same_rows(model.canonical(pypaimon_read=True), theirs, f"pypaimon's read at {snapshot}")
    assert s.pypaimon_snapshot == s.ours_after.snapshot + 1 and s.final.snapshot > s.pypaimon_snapshot
    assert table.schema.options["bucket"] == "3"
