"""Writers that assign buckets themselves, at once: a key lives in one partition and bucket
whichever commit lands last, or the late commit conflicts (a clear error, nothing stored changes);
it never ends up in two buckets (dynamic bucket) or two partitions (cross-partition upsert)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, CommitConflictError
from lakehouse_engine.write.commit_message import CommitMessage
from tests.lakehouse_engine.conftest import create_table, read, rows, snapshot_files, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int64()), pa.field("rk", pa.string())])


def batch(*records: tuple[Any, ...]) -> pa.Table:
    return pa.table({"id": [r[0] for r in records], "dt": [r[1] for r in records], "v": [r[2] for r in records],
                     "rk": [r[3] if len(r) > 3 else "+I" for r in records]}, schema=SCHEMA)


def cross_partition_table(catalog: Catalog, **options: str):
    return create_table(catalog, "moves", SCHEMA, primary_keys=["id"], partition_keys=["dt"],
                        options={"bucket": "-1", "rowkind.field": "rk", **options})


def prepared(table, data: pa.Table) -> tuple[Any, list[CommitMessage]]:
    """A batch written (its global index bootstrapped now) but not committed yet."""
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(data)
    return wb.new_commit(), w.prepare_commit()


def conflicts_untouched(table, commit: Any, messages: list[CommitMessage], error: str) -> None:
    """`commit(messages)` raises CommitConflictError matching `error`, and once aborted nothing
    stored changed but the messages' uncommitted files, which the abort removed."""
    before = snapshot_files(table)
    with pytest.raises(CommitConflictError, match=error):
        commit.commit(messages)
    commit.abort(messages)
    names = [f.file_name for m in messages
             for f in m.new_files + m.new_changelog + m.compact_changelog + m.compact_after]
    names += [e.file_name for m in messages for e in m.new_index_files]
    assert snapshot_files(table) == {p: b for p, b in before.items() if not any(n in p for n in names)}


def view(table) -> list[tuple[Any, ...]]:
    return [(r["id"], r["dt"], r["v"]) for r in rows(read(table), "id", "dt")]


@pytest.mark.parametrize("producer", ["none", "lookup"])
@pytest.mark.parametrize("late", [
    pytest.param(batch((1, "c", 30)), id="moves-elsewhere"),
    pytest.param(batch((1, "a", 30)), id="updates-where-it-was"),
    pytest.param(batch((1, "c", 30), (2, "b", 40)), id="moves-elsewhere-and-writes-the-partition"),
])
def test_a_late_writer_of_a_key_another_writer_moved_conflicts(catalog: Catalog, producer: str,
                                                                late: pa.Table) -> None:
    """Writer B routed key 1 with the global index of the snapshot before writer A moved it to
    partition b: B's commit would leave the key in two partitions, so it conflicts and the table
    keeps A's commit only."""
    table = cross_partition_table(catalog, **{"changelog-producer": producer})
    write(table, batch((1, "a", 10), (2, "a", 20)))
    commit_a, messages_a = prepared(catalog.get_table("db.moves"), batch((1, "b", 11)))
    commit_b, messages_b = prepared(catalog.get_table("db.moves"), late)
    commit_a.commit(messages_a)
    conflicts_untouched(table, commit_b, messages_b, "another partition or bucket")
    assert view(table) == [(1, "b", 11), (2, "a", 20)]


@pytest.mark.parametrize("producer", ["none", "lookup"])
def test_two_writers_inserting_one_new_key_in_two_partitions_conflict(catalog: Catalog, producer: str) -> None:
    table = cross_partition_table(catalog, **{"changelog-producer": producer})
    write(table, batch((2, "a", 20)))
    commit_a, messages_a = prepared(catalog.get_table("db.moves"), batch((1, "a", 10)))
    commit_b, messages_b = prepared(catalog.get_table("db.moves"), batch((1, "b", 11)))
    commit_a.commit(messages_a)
    conflicts_untouched(table, commit_b, messages_b, "another partition or bucket")
    assert view(table) == [(1, "a", 10), (2, "a", 20)]
    # Written again (a fresh index sees the key in a), the key moves: one row, in b.
    write(catalog.get_table("db.moves"), batch((1, "b", 11)))
    assert view(table) == [(1, "b", 11), (2, "a", 20)]


def test_writers_of_the_same_partition_and_bucket_are_resequenced_not_refused(catalog: Catalog) -> None:
    """Both writers update the key where it lives: the later commit wins, no conflict."""
    table = cross_partition_table(catalog)
    write(table, batch((1, "a", 10), (2, "a", 20)))
    commit_a, messages_a = prepared(catalog.get_table("db.moves"), batch((1, "a", 11)))
    commit_b, messages_b = prepared(catalog.get_table("db.moves"), batch((1, "a", 12)))
    commit_a.commit(messages_a)
    commit_b.commit(messages_b)
    assert view(table) == [(1, "a", 12), (2, "a", 20)]


def test_writers_of_other_keys_do_not_conflict(catalog: Catalog) -> None:
    table = cross_partition_table(catalog)
    write(table, batch((1, "a", 10), (2, "a", 20)))
    commit_a, messages_a = prepared(catalog.get_table("db.moves"), batch((1, "b", 11)))
    commit_b, messages_b = prepared(catalog.get_table("db.moves"), batch((2, "c", 21), (3, "b", 30)))
    commit_a.commit(messages_a)
    commit_b.commit(messages_b)
    assert view(table) == [(1, "b", 11), (2, "c", 21), (3, "b", 30)]


def test_a_stream_writers_own_earlier_moves_do_not_conflict(catalog: Catalog) -> None:
    """A stream writer's index knows where its own commits put keys: only others' commits count."""
    table = cross_partition_table(catalog)
    write(table, batch((1, "a", 10)))
    builder = table.new_stream_write_builder()
    w, c = builder.new_write(), builder.new_commit()
    for i, dt in enumerate(["b", "c", "a"], start=1):
        w.write_arrow(batch((1, dt, 10 + i)))
        c.commit(w.prepare_commit(i), i)
        assert view(table) == [(1, dt, 10 + i)]


def test_a_stream_writers_index_base_moves_past_its_own_commits_up_to_another_writers(catalog: Catalog) -> None:
    """So the committer reads each snapshot since the index once over a stream of commits, not
    every snapshot since the writer started at every commit."""
    table = cross_partition_table(catalog)
    write(table, batch((1, "a", 10)))
    builder = table.new_stream_write_builder()
    w, c = builder.new_write(), builder.new_commit()
    for i in (1, 2):
        w.write_arrow(batch((1, "b" if i == 1 else "c", 10 + i)))
        messages = w.prepare_commit(i)
        assert {m.route_snapshot for m in messages} == {table.latest_snapshot().id}
        c.commit(messages, i)
    write(catalog.get_table("db.moves"), batch((2, "a", 20)))  # another writer's commit
    seen = table.latest_snapshot().id - 1
    w.write_arrow(batch((1, "a", 13)))
    messages = w.prepare_commit(3)
    assert {m.route_snapshot for m in messages} == {seen}
    c.commit(messages, 3)  # the other writer wrote another key: no conflict
    assert view(table) == [(1, "a", 13), (2, "a", 20)]


@pytest.mark.parametrize("producer", ["none", "lookup"])
def test_dynamic_bucket_writers_placing_one_new_key_in_two_buckets_conflict(catalog: Catalog, producer: str) -> None:
    """With one key per bucket, writer B's batch fills the bucket A puts key 10 in with key 11 and
    puts 10 in the next bucket: committed, the key would read twice."""
    table = create_table(catalog, "dyn", SCHEMA, primary_keys=["id"], options={
        "bucket": "-1", "dynamic-bucket.target-row-num": "1", "rowkind.field": "rk",
        "changelog-producer": producer})
    write(table, batch((1, "a", 1)))
    commit_a, messages_a = prepared(catalog.get_table("db.dyn"), batch((10, "a", 100)))
    commit_b, messages_b = prepared(catalog.get_table("db.dyn"), batch((11, "a", 110), (10, "a", 101)))
    # B put key 11 where A put key 10, and key 10 in a bucket of its own.
    assert len(messages_b) == 2 and {m.bucket for m in messages_a} < {m.bucket for m in messages_b}
    commit_a.commit(messages_a)
    conflicts_untouched(table, commit_b, messages_b, "assigned new keys to dynamic buckets")
    write(catalog.get_table("db.dyn"), batch((11, "a", 110), (10, "a", 101)))
    assert view(table) == [(1, "a", 1), (10, "a", 101), (11, "a", 110)]


def test_a_commit_whose_index_window_expired_conflicts(catalog: Catalog) -> None:
    """Where another writer put keys is unknown once its snapshot expired: the late commit conflicts."""
    table = cross_partition_table(catalog)
    write(table, batch((1, "a", 10)))
    commit_b, messages_b = prepared(catalog.get_table("db.moves"), batch((2, "b", 20)))
    write(catalog.get_table("db.moves"), batch((3, "c", 30)))
    write(catalog.get_table("db.moves"), batch((4, "c", 40)))
    table.expire_snapshots(retain_max=1, retain_min=1)
    conflicts_untouched(table, commit_b, messages_b, "expired meanwhile")
    assert view(table) == [(1, "a", 10), (3, "c", 30), (4, "c", 40)]


def prepared_overwrite(table, data: pa.Table, partition: dict[str, str]) -> tuple[Any, list[CommitMessage]]:
    """An INSERT OVERWRITE of `partition` written (its global index read now) but not committed yet."""
    wb = table.new_batch_write_builder().overwrite(partition)
    w = wb.new_write()
    w.write_arrow(data)
    return wb.new_commit(), w.prepare_commit()


@pytest.mark.parametrize("producer", ["none", "lookup"])
def test_an_overwrite_placing_a_key_another_writer_put_in_another_partition_conflicts(
        catalog: Catalog, producer: str) -> None:
    """The overwrite of partition b routed key 5 as new; an APPEND committed key 5 into partition a
    meanwhile: the overwrite would leave the key in two partitions, so it conflicts (as an APPEND
    would) and the table keeps the APPEND only."""
    table = cross_partition_table(catalog, **{"changelog-producer": producer})
    write(table, batch((2, "a", 20)))
    commit_o, messages_o = prepared_overwrite(catalog.get_table("db.moves"), batch((5, "b", 50)), {"dt": "b"})
    commit_a, messages_a = prepared(catalog.get_table("db.moves"), batch((5, "a", 51)))
    commit_a.commit(messages_a)
    conflicts_untouched(table, commit_o, messages_o, "another partition or bucket")
    assert view(table) == [(2, "a", 20), (5, "a", 51)]


def test_an_append_after_an_overwrite_placed_the_key_elsewhere_conflicts(catalog: Catalog) -> None:
    table = cross_partition_table(catalog)
    write(table, batch((2, "a", 20)))
    commit_o, messages_o = prepared_overwrite(catalog.get_table("db.moves"), batch((5, "b", 50)), {"dt": "b"})
    commit_a, messages_a = prepared(catalog.get_table("db.moves"), batch((5, "a", 51)))
    commit_o.commit(messages_o)
    conflicts_untouched(table, commit_a, messages_a, "another partition or bucket")
    assert view(table) == [(2, "a", 20), (5, "b", 50)]


def test_keys_others_put_in_the_partition_an_overwrite_replaces_do_not_conflict(catalog: Catalog) -> None:
    """What another writer committed into the overwritten partition meanwhile goes with it: the
    overwrite lands, and the key lives once, where the overwrite put it."""
    table = cross_partition_table(catalog)
    write(table, batch((2, "a", 20)))
    commit_o, messages_o = prepared_overwrite(catalog.get_table("db.moves"), batch((5, "b", 50)), {"dt": "b"})
    commit_a, messages_a = prepared(catalog.get_table("db.moves"), batch((5, "b", 51), (6, "b", 60)))
    commit_a.commit(messages_a)
    commit_o.commit(messages_o)
    assert view(table) == [(2, "a", 20), (5, "b", 50)]
