"""Writers of the same keys at the same time: the later commit wins, before and after full compaction."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.mergetree.merge_order import merge_order
from lakehouse_engine.table import FileStoreTable
from lakehouse_engine.write.resequence import Resequencer
from tests.lakehouse_engine.conftest import create_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
                    pa.field("rk", pa.string())])
MODES = {"fixed": {"bucket": "1"}, "fixed-4": {"bucket": "4"}, "dynamic": {"bucket": "-1"}}


def _table(catalog: Catalog, options: dict[str, str], name: str = "t") -> FileStoreTable:
    return create_table(catalog, name, SCHEMA, primary_keys=["id"], options={"rowkind.field": "rk", **options})


def _batch(ids: list[int], value: str, kind: str = "+I") -> pa.Table:
    return pa.table({"id": ids, "v": [value] * len(ids), "rk": [kind] * len(ids)}, schema=SCHEMA)


def _state(table: FileStoreTable) -> dict[int, str]:
    t = read(table)
    return dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


def _open(table: FileStoreTable, *batches: pa.Table) -> tuple[Any, Any]:
    """A writer that has written `batches` (so it has taken its sequence numbers), not committed."""
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    for b in batches:
        w.write_arrow(b)
    return w, c


def _commit(writer: tuple[Any, Any]) -> list[int]:
    w, c = writer
    return list(c.commit(w.prepare_commit()))


def _orphans(table: FileStoreTable) -> list[str]:
    """Files no snapshot references (a commit that re-sequenced must leave none behind)."""
    return table.remove_orphan_files(older_than=int(time.time() * 1000) + 3_600_000, dry_run=True)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_delete_committed_last_stays_deleted_after_full_compaction(catalog: Catalog, mode: str) -> None:
    table = _table(catalog, MODES[mode])
    write(table, _batch([1, 2, 3], "v0"))
    upsert = _open(table, _batch([1], "a"))
    delete = _open(table, _batch([1], "x", "-D"))
    _commit(upsert)
    _commit(delete)
    assert _state(table) == {2: "v0", 3: "v0"}
    table.compact(full=True)
    assert _state(table) == {2: "v0", 3: "v0"}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("later", ["a", "b"])
def test_an_upsert_of_keys_1_to_5_by_two_writers_reads_as_the_later_commit(catalog: Catalog, mode: str,
                                                                            later: str) -> None:
    table = _table(catalog, MODES[mode])
    write(table, _batch([1, 2, 3, 4, 5], "v0"))
    # The writers take the keys in opposite orders, so per key their sequence numbers cross.
    writers = {"a": _open(table, _batch([1, 2, 3, 4, 5], "a")),
               "b": _open(table, *[_batch([k], "b") for k in (5, 4, 3, 2, 1)])}
    earlier = "b" if later == "a" else "a"
    _commit(writers[earlier])
    _commit(writers[later])
    expected = {k: later for k in range(1, 6)}
    assert _state(table) == expected
    assert _orphans(table) == []  # the re-sequenced originals are gone
    table.compact(full=True)
    assert _state(table) == expected


def test_writers_of_disjoint_keys_in_one_bucket_are_not_rewritten(catalog: Catalog) -> None:
    table = _table(catalog, {"bucket": "1"})
    write(table, _batch([1, 2, 3, 4], "v0"))
    interleaved = _open(table, _batch([2, 4], "even"))  # key range overlaps, keys do not
    apart = _open(table, _batch([10, 11], "apart"))  # key range apart from the others
    _commit(_open(table, _batch([1, 3], "odd")))
    for w, c in (interleaved, apart):
        messages = w.prepare_commit()
        names = [f.file_name for m in messages for f in m.new_files]
        c.commit(messages)
        # Same numbers as the other commit, but no key in common: committed without a rewrite.
        assert [f.file_name for m in messages for f in m.new_files] == names
    assert _state(table) == {1: "odd", 2: "even", 3: "odd", 4: "even", 10: "apart", 11: "apart"}
    table.compact(full=True)
    assert _state(table) == {1: "odd", 2: "even", 3: "odd", 4: "even", 10: "apart", 11: "apart"}


def test_a_writer_compaction_keeps_a_delete_an_unread_older_file_still_needs(catalog: Catalog) -> None:
    table = _table(catalog, {"bucket": "1", "full-compaction.delta-commits": "1"})
    quiet = table.copy({"write-only": "true"})  # these writers never compact
    write(quiet, _batch([1, 2], "v0"))  # sequence 0, 1
    stale = _open(quiet, _batch([1], "stale"))  # numbered from 1: sequence 2
    write(quiet, _batch([2], "x", "-D"))  # sequence 2, key 2 only
    deleter = _open(table, _batch([1], "x", "-D"))  # sequence 3; compacts fully at commit
    _commit(stale)  # no key in common with the file at 2: committed as numbered
    _commit(deleter)  # later: key 1 is deleted, and its compaction must not drop the delete
    assert _state(table) == {}
    table.compact(full=True)
    assert _state(table) == {}


def test_two_messages_of_one_commit_for_one_bucket_resolve_in_message_order(catalog: Catalog) -> None:
    table = _table(catalog, {"bucket": "1"})
    write(table, _batch([1, 2, 3], "v0"))
    a = _open(table, _batch([1, 2, 3], "a"))
    b = _open(table, *[_batch([k], "b") for k in (3, 2, 1)])
    messages = a[0].prepare_commit() + b[0].prepare_commit()
    table.new_batch_write_builder().new_commit().commit(messages)
    assert _state(table) == {1: "b", 2: "b", 3: "b"}
    table.compact(full=True)
    assert _state(table) == {1: "b", 2: "b", 3: "b"}


def test_a_resequenced_bucket_drops_the_writer_compaction_and_leaves_no_files_behind(catalog: Catalog) -> None:
    # Every commit compacts fully in the writer, so the late writer's compaction merged old numbers.
    table = _table(catalog, {"bucket": "1", "full-compaction.delta-commits": "1"})
    write(table, _batch([1, 2, 3], "v0"))
    early = _open(table, _batch([1, 2], "early"))
    late = _open(table, _batch([2, 3], "late"))
    _commit(early)
    ids = _commit(late)
    assert len(ids) == 1  # the APPEND only: its bucket's compaction was dropped
    assert _state(table) == {1: "early", 2: "late", 3: "late"}
    assert _orphans(table) == []
    table.compact(full=True)
    assert _state(table) == {1: "early", 2: "late", 3: "late"}


def test_postponed_rows_of_the_later_commit_win_when_moved_into_buckets(catalog: Catalog) -> None:
    table = _table(catalog, {"bucket": "-2", "postpone.default-bucket-num": "2"})
    write(table, _batch([1, 2, 3, 4], "v0"))
    table.compact()
    first = _open(table, _batch([1, 2, 3, 4], "first"))
    second = _open(table, _batch([1, 2, 3, 4], "second"))
    # The later commit flushes its files first: only the commit order may decide.
    messages = second[0].prepare_commit()
    time.sleep(0.01)
    _commit(first)
    second[1].commit(messages)
    table.compact()
    assert _state(table) == {k: "second" for k in (1, 2, 3, 4)}
    table.compact(full=True)
    assert _state(table) == {k: "second" for k in (1, 2, 3, 4)}


def test_a_commit_over_an_overwrite_is_resequenced_above_it(catalog: Catalog) -> None:
    table = _table(catalog, {"bucket": "1"})
    write(table, _batch([1, 2], "v0"))
    late = _open(table, *[_batch([k], "late") for k in (2, 1)])
    write(table, _batch([1, 2, 3], "overwrite"), overwrite={})
    _commit(late)
    assert _state(table) == {1: "late", 2: "late", 3: "overwrite"}
    table.compact(full=True)
    assert _state(table) == {1: "late", 2: "late", 3: "overwrite"}


def test_without_resequencing_ties_resolve_alike_in_reads_and_full_compaction(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another engine's two jobs leave files with equal sequence numbers: the merge order decides,
    # and every merge path decides the same way.
    monkeypatch.setattr(Resequencer, "resequence", lambda self, changes, latest: False)
    table = _table(catalog, {"bucket": "1"})
    write(table, _batch([1, 2, 3], "v0"))
    writers = [_open(table, _batch([1, 2, 3], f"w{i}")) for i in range(4)]
    for w in writers:
        _commit(w)
    files = [e.file for e in table.store.manifest_io().live_entries(table.latest_snapshot())]
    assert sorted((f.min_sequence_number, f.max_sequence_number) for f in files) == [(0, 2)] + [(3, 5)] * 4
    last = merge_order(files)[-1]  # the tie goes to the last file in merge order (by file name)
    last_value = pq.read_table(f"{table.path_factory.table_path}/bucket-0/{last.file_name}").column("v")[0].as_py()
    assert _state(table) == {1: last_value, 2: last_value, 3: last_value}
    table.compact(full=True)
    assert _state(table) == {1: last_value, 2: last_value, 3: last_value}


def test_merge_order_is_total_and_ignores_input_order() -> None:
    from lakehouse_engine.format.manifest_entries import DataFileMeta, SimpleStats

    def meta(name: str, lo: int, hi: int) -> DataFileMeta:
        return DataFileMeta(name, 1, 1, b"", b"", SimpleStats.EMPTY, SimpleStats.EMPTY, lo, hi, 0, 0)

    files = [meta("c", 0, 5), meta("a", 3, 5), meta("b", 3, 5), meta("d", 0, 2)]
    expected = ["d", "c", "a", "b"]
    assert [f.file_name for f in merge_order(files)] == expected
    assert [f.file_name for f in merge_order(reversed(files))] == expected
