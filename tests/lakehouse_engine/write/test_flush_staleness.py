"""A stream writer whose bucket files a dedicated compaction replaced and expiry removed between two
flushes of one commit cycle: its second flush's lookup still uses the levels the cycle's first flush
took. It never computes a changelog it commits from removed rows: with the removed file out of the
lookup cache it raises CommitConflictError naming the file (before: DataFileMissingError calling the
table damaged), with the file still cached the commit's staleness check refuses it. Written again by a
new writer, every row lands once and the changes replay strictly to the table."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_engine import Catalog, CommitConflictError
from lakehouse_engine.errors import DataFileMissingError
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, strict_replay

WRITERS = {
    "deletion-vectors-lookup": {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
    "deduplicate-lookup": {"changelog-producer": "lookup"},
}


def _rows(keys: list[int], v: str) -> pa.Table:
    return pa.table({"id": keys, "v": [v] * len(keys), "k": ["+I"] * len(keys)}, schema=SCHEMA)


def _other(t: FileStoreTable, keys: list[int], v: str, write_only: bool = False) -> None:
    """Another writer's commit (`write_only`: its rows left in level 0 for a compaction's changelog)."""
    wb = (t.copy({"write-only": "true"}) if write_only else t).new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(_rows(keys, v))
    wb.new_commit().commit(w.prepare_commit())
    w.close()


def _flush(w: Any) -> None:
    """Flush the writer's buffers now, as a full write buffer does mid-cycle."""
    w._flush_all(list(w._writers.values()))


@pytest.mark.parametrize("cached", [False, True], ids=["uncached", "cached"])
@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_flush_after_its_cycles_files_were_replaced_and_expired_conflicts_and_the_retry_lands(
        catalog: Catalog, writer: str, cached: bool) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "changelog.num-retained.min": "1000",
        "changelog.num-retained.max": "1000", **({} if cached else {"lookup.cache-max-memory-size": "0"}),
        **WRITERS[writer]})
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(list(range(10)), "a"))
    c.commit(w.prepare_commit(1), 1)
    _other(t, list(range(990, 1000)), "a")  # (a second file: the first flush never reads it)
    w.write_arrow(_rows([5], "z"))
    c.commit(w.prepare_commit(2), 2)
    w.write_arrow(_rows([0], "b"))
    _flush(w)  # the cycle's first flush takes the levels
    _other(t, [500], "o")
    t.compact(full=True)
    t.expire_snapshots(retain_max=1, retain_min=1)  # the files the first flush's levels hold are gone
    w.write_arrow(_rows([999], "c"))
    with pytest.raises(CommitConflictError, match="the bucket's files changed under this writer|same keys") as err:
        _flush(w)
        c.commit(w.prepare_commit(3), 3)
    assert not isinstance(err.value.__cause__, DataFileMissingError) or "no longer lists it" in str(err.value)
    w.abort()
    w.close()
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows([0], "b"))
    w.write_arrow(_rows([999], "c"))
    c.commit(w.prepare_commit(4), 4)
    w.close()
    rows = {r["id"]: r["v"] for r in read(t).to_pylist()}
    assert rows == {**{k: "a" for k in [*range(10), *range(990, 1000)]}, 5: "z", 500: "o", 0: "b", 999: "c"}
    t.compact(full=True)
    changes = [(r["_row_kind"], r["id"], r["v"]) for r in t.changes(0).to_pylist()]
    assert strict_replay(changes) == rows


def test_a_flush_lookup_over_a_file_the_table_still_lists_but_storage_lacks_names_the_damage(
        catalog: Catalog) -> None:
    t = create_table(catalog, "t", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "lookup.cache-max-memory-size": "0", **WRITERS["deduplicate-lookup"]})
    _other(t, list(range(10)), "a")
    (only,) = [f for s in t.new_read_builder().new_scan().plan().splits() for f in s.files]
    bucket_dir = t.path_factory.bucket_dir([], 0)
    t.file_io.delete_file(f"{bucket_dir}/{only.file_name}")
    wb = t.new_stream_write_builder()
    w = wb.new_write()
    w.write_arrow(_rows([3], "b"))
    with pytest.raises(DataFileMissingError, match=only.file_name):
        w.prepare_commit(1)
    w.close()


PROPERTY_WRITERS = {
    **WRITERS,
    "dv-aggregation-lookup": {"deletion-vectors.enabled": "true", "changelog-producer": "lookup",
                              "merge-engine": "aggregation", "fields.v.aggregate-function": "max"},
    "partial-update-lookup": {"merge-engine": "partial-update", "changelog-producer": "lookup"},
    "sequence-field-lookup": {"changelog-producer": "lookup", "sequence.field": "v"},
    # (Found a first-row `+I` given twice: test_first_row_overlapping_sequences.py.)
    "first-row-lookup": {"merge-engine": "first-row", "changelog-producer": "lookup", "ignore-delete": "true"},
}
step = st.one_of(
    st.tuples(st.just("write"), st.lists(st.integers(0, 11), min_size=1, max_size=4)),
    st.tuples(st.just("flush"), st.none()),
    st.tuples(st.just("commit"), st.none()),
    st.tuples(st.just("compact"), st.sampled_from(["minor", "full", "level0"])),
    st.tuples(st.just("other"), st.lists(st.integers(0, 11), min_size=1, max_size=3)),
    st.tuples(st.just("other-write-only"), st.lists(st.integers(0, 11), min_size=1, max_size=3)),
    st.tuples(st.just("expire"), st.none()),
)


def _run(catalog: Catalog, writer: str, cached: bool, script: list[tuple[str, Any]], n: int) -> None:
    """Run `script` against a stream writer; each conflict aborts its cycle (a new writer); the
    table holds exactly the landed rows and its changes replay strictly to it."""
    t = create_table(catalog, f"t{n}", SCHEMA, ["id"], options={
        "bucket": "1", "rowkind.field": "k", "num-sorted-run.compaction-trigger": "2",
        "changelog.num-retained.min": "1000", "changelog.num-retained.max": "1000",
        **({} if cached else {"lookup.cache-max-memory-size": "0"}), **PROPERTY_WRITERS[writer]})
    options = PROPERTY_WRITERS[writer]
    # (Values are `w<step>`/`o<step>`: a `max` aggregate and a `v` sequence field keep the largest.)
    largest = options.get("merge-engine") == "aggregation" or "sequence.field" in options
    first = options.get("merge-engine") == "first-row"
    rows: dict[int, str] = {}

    def land(batch: list[tuple[int, str]]) -> None:
        for k, v in batch:
            if first:
                rows.setdefault(k, v)
            else:
                rows[k] = max(rows[k], v) if largest and k in rows else v

    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    pending: list[tuple[int, str]] = []
    for i, (kind, arg) in enumerate(script):
        try:
            if kind == "write":
                batch = [(k, f"w{i:03}") for k in arg]
                pending += batch
                w.write_arrow(_rows([k for k, _ in batch], batch[0][1]))
            elif kind == "flush":
                _flush(w)
            elif kind == "commit":
                messages = w.prepare_commit(i)
                try:
                    c.commit(messages, i)
                except CommitConflictError:
                    w.abort(messages)
                else:
                    land(pending)
                pending = []
            elif kind == "compact":
                t.compact(full=arg == "full", level0_only=arg == "level0")
            elif kind in ("other", "other-write-only"):
                _other(t, arg, f"o{i:03}", write_only=kind == "other-write-only")
                land([(k, f"o{i:03}") for k in arg])
            else:
                t.expire_snapshots(retain_max=1, retain_min=1)
        except CommitConflictError:
            w.abort()
            w.close()
            w, c, pending = wb.new_write(), wb.new_commit(), []
    w.close()
    # (Level 0 up, with its changelog: a DV table's write-only rows are read from then on.)
    t.compact(full=True)
    assert {r["id"]: r["v"] for r in read(t).to_pylist()} == rows
    assert strict_replay((r["_row_kind"], r["id"], r["v"]) for r in t.changes(0).to_pylist()) == rows


@pytest.mark.parametrize("cached", [False, True], ids=["uncached", "cached"])
@pytest.mark.parametrize("writer", list(PROPERTY_WRITERS))
def test_a_stream_writer_flushing_amid_compactions_other_writers_and_expiry_keeps_every_landed_row(
        catalog: Catalog, writer: str, cached: bool) -> None:
    """Random scripts with flushes inside the cycles: no removed file is read as damage, every
    landed row is in the table and its changes replay strictly."""
    count = iter(range(10**6))

    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
    @given(script=st.lists(step, min_size=1, max_size=12))
    def check(script: list[tuple[str, Any]]) -> None:
        _run(catalog, writer, cached, script + [("commit", None)], next(count))

    check()
