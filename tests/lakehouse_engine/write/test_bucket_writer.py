"""A bucket writer across the commits of one stream write (found by the feature-interaction audit)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import CommitConflictError
from tests.lakehouse_engine.conftest import create_table, read

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def test_a_stream_writers_own_full_compactions_do_not_make_its_lookup_changelog_stale(catalog: Catalog) -> None:
    # lookup producer + full-compaction.delta-commits = 1: every commit's full compaction rewrites
    # the bucket, so the files this writer added at its earlier commits are gone from its levels.
    # They are its own, already merged into what it looks up: not another writer's change.
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": "1", "changelog-producer": "lookup", "full-compaction.delta-commits": "1"})
    wb = t.new_stream_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    for n, ids in enumerate((range(10), range(5), range(3), range(7))):
        write.write_arrow(pa.Table.from_pylist([{"id": i, "v": f"c{n}"} for i in ids], schema=SCHEMA))
        commit.commit(write.prepare_commit(n), n)
    write.close()
    expected = {i: "c3" if i < 7 else "c0" for i in range(10)}
    assert {r["id"]: r["v"] for r in read(t).to_pylist()} == expected
    changes = [(r["_row_kind"], r["id"], r["v"]) for r in t.changes(0).to_pylist()]
    assert ("-U", 0, "c2") in changes and ("+U", 0, "c3") in changes
    replayed: dict[int, str] = {}
    for kind, key, value in changes:
        if kind in ("+I", "+U"):
            replayed[key] = value
        else:
            assert replayed.pop(key) == value  # every before-image is the row the key had
    assert replayed == expected


def _stream_table(catalog: Catalog, **options: str):  # type: ignore[no-untyped-def]
    return create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                        options={"bucket": "1", "changelog-producer": "lookup", **options})


def test_a_stream_writers_lookup_changelog_survives_the_expiry_of_the_snapshots_since_it_started(
        catalog: Catalog) -> None:
    # The staleness check read every snapshot since the writer restored the bucket; once one of
    # them expired it assumed another writer, and every later commit of a long-running stream
    # writer failed (after `snapshot.time-retained`, an hour by default).
    t = _stream_table(catalog, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    wb = t.new_stream_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    for n in range(8):
        write.write_arrow(pa.Table.from_pylist([{"id": n % 3, "v": f"c{n}"}], schema=SCHEMA))
        commit.commit(write.prepare_commit(n), n)
    write.close()
    assert {r["id"]: r["v"] for r in read(t).to_pylist()} == {0: "c6", 1: "c7", 2: "c5"}
    changes = [(r["_row_kind"], r["id"], r["v"]) for r in t.changes(t.latest_snapshot().id - 2).to_pylist()]
    assert changes == [("-U", 1, "c4"), ("+U", 1, "c7")]


def test_a_stream_writer_still_conflicts_with_another_writer_of_its_keys(catalog: Catalog) -> None:
    """Another writer commits the key after the stream writer's flush looked it up: stale."""
    t = _stream_table(catalog)
    wb = t.new_stream_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    for n in range(2):
        write.write_arrow(pa.Table.from_pylist([{"id": 1, "v": f"c{n}"}], schema=SCHEMA))
        commit.commit(write.prepare_commit(n), n)
    write.write_arrow(pa.Table.from_pylist([{"id": 1, "v": "c2"}], schema=SCHEMA))
    messages = write.prepare_commit(2)  # (its flush looked key 1 up)
    other = t.new_batch_write_builder()
    w2, c2 = other.new_write(), other.new_commit()
    w2.write_arrow(pa.Table.from_pylist([{"id": 1, "v": "other"}], schema=SCHEMA))
    c2.commit(w2.prepare_commit())
    with pytest.raises(CommitConflictError):
        commit.commit(messages, 2)


def test_a_stream_writer_looks_up_what_another_writer_committed_between_its_commits(catalog: Catalog) -> None:
    """Its next cycle takes the bucket's levels from the table again: the lookup compares its rows
    with the other writer's, and the commit lands (before: it conflicted as stale)."""
    t = _stream_table(catalog)
    wb = t.new_stream_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    for n in range(2):
        write.write_arrow(pa.Table.from_pylist([{"id": 1, "v": f"c{n}"}], schema=SCHEMA))
        commit.commit(write.prepare_commit(n), n)
    other = t.new_batch_write_builder()
    w2, c2 = other.new_write(), other.new_commit()
    w2.write_arrow(pa.Table.from_pylist([{"id": 1, "v": "other"}], schema=SCHEMA))
    c2.commit(w2.prepare_commit())
    start = t.latest_snapshot().id
    write.write_arrow(pa.Table.from_pylist([{"id": 1, "v": "c2"}], schema=SCHEMA))
    commit.commit(write.prepare_commit(2), 2)
    write.close()
    assert {r["id"]: r["v"] for r in read(t).to_pylist()} == {1: "c2"}
    changes = [(r["_row_kind"], r["id"], r["v"]) for r in t.changes(start).to_pylist()]
    assert changes == [("-U", 1, "other"), ("+U", 1, "c2")]
