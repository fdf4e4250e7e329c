"""A stream writer owes a bucket its full compaction until that compaction's COMPACT snapshot has
landed (Paimon's GlobalFullCompactionSinkWrite checks the committed snapshots of its commit user),
not merely until it prepared one: a full compaction whose messages were thrown away or aborted,
or whose COMPACT commit lost, is done again at the next full-compaction identifier, and the
changelog then covers every row of those buckets."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, change_tuples, keyed_table, replay


def _rows(*rows: tuple[int, str]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "v": [r[1] for r in rows], "k": ["+I"] * len(rows)},
                    schema=SCHEMA)


def _table_rows(table: FileStoreTable) -> dict[int, str]:
    rb = table.new_read_builder()
    return {r["id"]: r["v"] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()}


def _buckets(table: FileStoreTable, ids: list[int]) -> dict[int, int]:
    return dict(zip(ids, table.preview_buckets(_rows(*((i, "") for i in ids))).to_pylist(),
                    strict=True))


def _split_keys(table: FileStoreTable) -> tuple[list[int], int]:
    """Keys 1..10 (both buckets) and one key of a bucket they do not all share: (others, lone)."""
    buckets = _buckets(table, list(range(0, 11)))
    lone = 0
    others = [i for i in range(1, 11) if buckets[i] != buckets[lone]]
    assert others
    return others, lone


@pytest.mark.parametrize("drop", ["thrown-away", "aborted"])
def test_a_full_compaction_whose_messages_were_dropped_is_done_again(catalog: Catalog, drop: str) -> None:
    t = keyed_table(catalog, **{"changelog-producer": "full-compaction", "full-compaction.delta-commits": "2"})
    others, lone = _split_keys(t)
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(*((i, "a") for i in others)))  # the other bucket only
    c.commit(w.prepare_commit(1), 1)
    w.write_arrow(_rows((lone, "lost")))
    messages = w.prepare_commit(2)  # the full compaction of both buckets, never committed
    assert any(m.compact_after for m in messages)
    if drop == "aborted":
        w.abort(messages)
    w.write_arrow(_rows((lone, "b")))
    c.commit(w.prepare_commit(3), 3)
    w.write_arrow(_rows((lone, "c")))
    c.commit(w.prepare_commit(4), 4)  # full again: the other bucket still owes its compaction
    assert _table_rows(t) == {lone: "c", **{i: "a" for i in others}}
    assert replay(change_tuples(t)) == _table_rows(t)


def test_a_full_compaction_whose_commit_lost_is_done_again(catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    """The data lands, its COMPACT snapshot loses to a dedicated compaction of the same bucket."""
    t = keyed_table(catalog, **{"changelog-producer": "full-compaction", "full-compaction.delta-commits": "2"})
    others, lone = _split_keys(t)
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(*((i, "a") for i in others)))
    c.commit(w.prepare_commit(1), 1)
    w.write_arrow(_rows((lone, "b")))
    messages = w.prepare_commit(2)
    t.compact(full=True)  # replaces the files the writer's full compaction took
    with caplog.at_level(logging.WARNING):
        kinds = [t.snapshot(s).commit_kind for s in c.commit(messages, 2)]
    assert kinds == ["APPEND"]  # its compaction lost
    w.write_arrow(_rows((lone, "c")))
    c.commit(w.prepare_commit(3), 3)
    w.write_arrow(_rows(*((i, "d") for i in others[:1])))
    c.commit(w.prepare_commit(4), 4)
    assert _table_rows(t) == {lone: "c", others[0]: "d", **{i: "a" for i in others[1:]}}
    assert replay(change_tuples(t)) == _table_rows(t)


def test_a_landed_full_compaction_is_not_done_again(catalog: Catalog) -> None:
    """Once its COMPACT snapshot is seen, a bucket left alone is not compacted at the next one."""
    t = keyed_table(catalog, **{"changelog-producer": "full-compaction", "full-compaction.delta-commits": "2"})
    others, lone = _split_keys(t)
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(*((i, "a") for i in others)))
    c.commit(w.prepare_commit(1), 1)
    w.write_arrow(_rows((lone, "b")))
    c.commit(w.prepare_commit(2), 2)
    w.write_arrow(_rows((lone, "c")))
    c.commit(w.prepare_commit(3), 3)
    w.write_arrow(_rows((lone, "d")))
    messages = w.prepare_commit(4)
    other_bucket = _buckets(t, others[:1])[others[0]]
    assert [m.bucket for m in messages if m.compact_after] == [_buckets(t, [lone])[lone]] != [other_bucket]
    c.commit(messages, 4)
    assert replay(change_tuples(t)) == _table_rows(t)


def test_a_writer_of_another_commit_user_owes_nothing_for_what_earlier_writers_wrote(catalog: Catalog) -> None:
    """As Paimon's sink started without Flink state (a new job, a new commit user): the buckets an
    earlier writer left without their full compaction get their changelog from a dedicated full
    compaction. (A restart under the same commit user finds them: test_full_compaction_restart.)"""
    t = keyed_table(catalog, **{"changelog-producer": "full-compaction", "full-compaction.delta-commits": "2"})
    others, lone = _split_keys(t)
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(*((i, "a") for i in others)))
    c.commit(w.prepare_commit(1), 1)
    w.close()
    wb2 = t.new_stream_write_builder()
    assert wb2.commit_user != wb.commit_user
    w2, c2 = wb2.new_write(), wb2.new_commit()
    w2.write_arrow(_rows((lone, "b")))
    c2.commit(w2.prepare_commit(2), 2)
    assert replay(change_tuples(t)) == {lone: "b"}
    t.compact(full=True)
    assert replay(change_tuples(t)) == _table_rows(t)


@pytest.mark.parametrize("skipped", ["written", "owing"])
def test_a_bucket_whose_full_compaction_was_skipped_still_owes_it(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch, skipped: str) -> None:
    """At a full-compaction identifier the writer's compaction of one bucket is skipped (it met a
    file it could not read: `BucketWriter.compact` writes the data without it) while the other
    bucket's full compaction lands in the COMPACT snapshot of that identifier: that snapshot is
    not the skipped bucket's full compaction, so the bucket owes it at the next full identifier and
    its changelog comes then. (`written`: the bucket was written at that identifier; `owing`: it
    was written before and owed the compaction from an earlier commit.)"""
    from lakehouse_engine.errors import DataFileMissingError
    from lakehouse_engine.mergetree.compact.rewriter import BucketCompactor

    t = keyed_table(catalog, **{"changelog-producer": "full-compaction", "full-compaction.delta-commits": "2"})
    others, lone = _split_keys(t)
    lone_bucket = _buckets(t, [lone])[lone]
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(*((i, "a") for i in others), *([(lone, "a")] if skipped == "owing" else [])))
    c.commit(w.prepare_commit(1), 1)
    w.write_arrow(_rows(*((i, "b") for i in others[:1]), *([(lone, "b")] if skipped == "written" else [])))
    real = BucketCompactor.compact

    def unreadable(self: BucketCompactor, *args: object, **kwargs: object) -> object:
        if self.bucket == lone_bucket:
            raise DataFileMissingError("a file of the bucket could not be read")
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(BucketCompactor, "compact", unreadable)
        ids = c.commit(w.prepare_commit(2), 2)
    compacted = [t.snapshot(s) for s in ids if t.snapshot(s).commit_kind == "COMPACT"]
    # The other bucket's full compaction landed under identifier 2, the lone bucket's did not.
    assert [(s.commit_user, s.commit_identifier) for s in compacted] == [(wb.commit_user, 2)]
    assert replay(change_tuples(t)) != _table_rows(t)  # the lone bucket's rows wait for it
    w.write_arrow(_rows(*((i, "c") for i in others[:1])))
    c.commit(w.prepare_commit(3), 3)
    w.write_arrow(_rows(*((i, "d") for i in others[:1])))
    messages = w.prepare_commit(4)  # full again: the lone bucket is taken too, unwritten since
    assert lone_bucket in [m.bucket for m in messages if m.compact_after]
    c.commit(messages, 4)
    assert replay(change_tuples(t)) == _table_rows(t)


def test_the_committer_takes_no_level_0_up_on_a_full_compaction_table(catalog: Catalog) -> None:
    """The committer's level-0-up (a COMPACT snapshot of the writer's commit user and identifier,
    `write/level0_changelog.py`) is made on `lookup`, first-row and deletion-vector tables only:
    on a `full-compaction` table the writer's level 0 stays until its full compaction, so every
    COMPACT snapshot of its commit user at a full identifier is its full compaction. (Its lost
    full compaction lands no COMPACT either: test_a_full_compaction_whose_commit_lost_is_done_again.)"""
    t = keyed_table(catalog, **{"changelog-producer": "full-compaction", "full-compaction.delta-commits": "2"})
    wb = t.new_stream_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows((1, "a"), (2, "a")))
    assert [t.snapshot(s).commit_kind for s in c.commit(w.prepare_commit(1), 1)] == ["APPEND"]
    assert {e.file.level for e in t.store.manifest_io().live_entries(t.latest_snapshot())} == {0}
    assert change_tuples(t) == []  # its changelog waits for the full compaction
    w.write_arrow(_rows((1, "b")))
    compacted = [t.snapshot(s) for s in c.commit(w.prepare_commit(2), 2)]
    assert [(s.commit_kind, s.commit_identifier) for s in compacted] == [("APPEND", 2), ("COMPACT", 2)]
    assert {e.file.level for e in t.store.manifest_io().live_entries(t.latest_snapshot())} == {
        t.options.num_levels - 1}
    assert replay(change_tuples(t)) == _table_rows(t) == {1: "b", 2: "a"}
