"""A `lookup`-producer flush: its data files and its changelog files are written at once, and a
failure of either leaves the commit undone with none of the flush's files behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import StorageError
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.data_file import DataFileWriter
from lakehouse_engine.mergetree.lookup_cache import clear_caches
from lakehouse_engine.write import bucket_writer, changelog_producers, flush_files
from lakehouse_engine.write.bucket_writer import BucketWriter
from tests.lakehouse_engine.conftest import read
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, keyed_table, put


def _files(table: Any) -> set[str]:
    root = Path(table.store.path_factory.table_path)
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _rows(table: Any) -> dict[int, Any]:
    t = read(table)
    return dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


def _seed(catalog: Catalog, name: str) -> Any:
    t = keyed_table(catalog, name, **{"changelog-producer": "lookup"})
    put(t, *[(i, f"v{i}", "+I") for i in range(20)])
    return t


def _upsert(table: Any) -> None:
    put(table, *[(i, f"w{i}", "+I") for i in range(10, 30)], (3, None, "-D"))


@pytest.mark.parametrize("overlapped", [True, False])  # False: the lookup reads the run's files back
def test_a_failing_changelog_write_fails_the_commit_and_leaves_no_file(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch, overlapped: bool) -> None:
    t = _seed(catalog, "t")
    if not overlapped:
        monkeypatch.setattr(BucketWriter, "_run_columns", lambda self, rows: None)
    before_files, before_rows, snapshots = _files(t), _rows(t), len(list(t.snapshots()))

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("changelog file: disk full")

    # (Every bucket's: a bucket without the -D writes only its before-images, in flush_files.)
    monkeypatch.setattr(changelog_producers, "write_changelog", fail)
    monkeypatch.setattr(flush_files, "write_changelog", fail)
    with pytest.raises(StorageError, match="disk full"):
        _upsert(t)
    assert len(list(t.snapshots())) == snapshots
    assert _rows(t) == before_rows
    # The flush's data files (written while the changelog was being made) are gone too.
    assert _files(t) == before_files
    monkeypatch.undo()
    _upsert(t)  # and the table takes the same write afterwards
    assert _rows(t)[15] == "w15" and 3 not in _rows(t)


def test_a_failing_data_write_deletes_the_changelog_files(catalog: Catalog,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    t = _seed(catalog, "t")
    before_files, before_rows = _files(t), _rows(t)

    class FailingWriter(DataFileWriter):
        def write_run(self, *args: Any, **kwargs: Any) -> Any:
            raise StorageError("data file: disk full")

    # (The flush's data writer fails; the changelog's writer, made in mergetree.changelog, does not.)
    monkeypatch.setattr(bucket_writer, "DataFileWriter", FailingWriter)
    with pytest.raises(StorageError, match="disk full"):
        _upsert(t)
    assert _rows(t) == before_rows
    assert _files(t) == before_files


def _bucket_files(table: Any) -> dict[str, list[pa.Table]]:
    """Per bucket directory, the rows of its changelog files and of its data files, in name order."""
    root = Path(table.store.path_factory.table_path)
    out: dict[str, list[pa.Table]] = {}
    for d in sorted(p for p in root.iterdir() if p.name.startswith("bucket-")):
        for prefix in ("changelog-", "data-"):
            for f in sorted(d.glob(f"{prefix}*")):
                out.setdefault(f"{d.name}/{prefix}", []).append(pq.read_table(f))
    return out


@pytest.mark.parametrize("buffer", ["64 mb", "1 kb"])  # one flush per bucket, or several per commit
def test_the_overlapped_flush_writes_what_a_flush_reading_its_files_back_writes(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch, buffer: str) -> None:
    def commit_all(name: str) -> tuple[Any, list[Any]]:
        t = keyed_table(catalog, name, **{"changelog-producer": "lookup", "write-buffer-size": buffer})
        put(t, *[(i, f"v{i}", "+I") for i in range(300)])
        write = t.new_batch_write_builder().new_write()
        for lo in range(100, 400, 50):
            write.write_arrow(pa.Table.from_pylist(
                [{"id": i, "v": f"w{i}", "k": "+I" if i % 7 else "-D"} for i in range(lo, lo + 50)],
                schema=SCHEMA))
        messages = write.prepare_commit()
        shape = [(m.bucket, len(m.new_files), len(m.compact_changelog),
                  [f.row_count for f in m.compact_changelog]) for m in messages]
        t.new_batch_write_builder().new_commit().commit(messages)
        clear_caches()
        return t, shape

    overlapped, overlapped_shape = commit_all("overlapped")
    # The same writes with the run unavailable in memory: the data files are written first and
    # the lookup reads them back (the sequential flush).
    monkeypatch.setattr(BucketWriter, "_run_columns", lambda self, rows: None)
    sequential, sequential_shape = commit_all("sequential")
    assert overlapped_shape == sequential_shape
    assert any(changelog for _, _, changelog, _ in overlapped_shape)
    a, b = _bucket_files(overlapped), _bucket_files(sequential)
    assert a.keys() == b.keys()
    order = [("_KEY_id", "ascending"), ("_SEQUENCE_NUMBER", "ascending"), ("_VALUE_KIND", "ascending")]
    for where in a:
        assert sorted(x.num_rows for x in a[where]) == sorted(x.num_rows for x in b[where]), where
        assert pa.concat_tables(a[where]).sort_by(order).equals(pa.concat_tables(b[where]).sort_by(order)), where
    assert _rows(overlapped) == _rows(sequential)


# ---- a run of adds: its data files are the after-images -----------------------------------------
def _upsert_adds(table: Any) -> None:
    put(table, *[(i, f"w{i}", "+I") for i in range(10, 30)])


def test_a_run_of_adds_is_written_once_with_its_before_images_listed_first(catalog: Catalog) -> None:
    t = _seed(catalog, "t")
    write = t.new_batch_write_builder().new_write()
    write.write_arrow(pa.Table.from_pylist([{"id": i, "v": f"w{i}", "k": "+I"} for i in range(10, 30)],
                                           schema=SCHEMA))
    messages = write.prepare_commit()
    root = Path(t.store.path_factory.table_path)
    for m in messages:
        bucket_dir = root / f"bucket-{m.bucket}"
        before, *after = m.compact_changelog
        (data,) = m.new_files
        # The data file holds the changelog's kinds: +U for a key the bucket held, +I else.
        rows = pq.read_table(bucket_dir / data.file_name).to_pylist()
        assert rows and all(r["_VALUE_KIND"] == (2 if r["id"] < 20 else 0) for r in rows)
        # The before-images: the old rows of the updated keys, as -U, in key order.
        olds = pq.read_table(bucket_dir / before.file_name).to_pylist()
        assert [(r["id"], r["v"], r["_VALUE_KIND"]) for r in olds] == [
            (r["id"], f"v{r['id']}", 1) for r in rows if r["id"] < 20]
        # The after-images: the data file itself under a changelog name (no second encode).
        assert len(after) == 1 and after[0].file_name.startswith("changelog-")
        assert (bucket_dir / after[0].file_name).samefile(bucket_dir / data.file_name)
    t.new_batch_write_builder().new_commit().commit(messages)
    assert _rows(t) == {**{i: f"v{i}" for i in range(10)}, **{i: f"w{i}" for i in range(10, 30)}}


@pytest.mark.parametrize("cores", [1, 64])  # every core has a flush (one thread each), or not (two)
@pytest.mark.parametrize("fails", ["before-images", "data", "link"])
def test_a_failure_in_a_run_of_adds_fails_the_commit_and_leaves_no_file(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch, fails: str, cores: int) -> None:
    monkeypatch.setattr(flush_files, "cores", lambda: cores)
    t = _seed(catalog, "t")
    before_files, before_rows, snapshots = _files(t), _rows(t), len(list(t.snapshots()))

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise StorageError(f"{fails}: disk full")

    class FailingWriter(DataFileWriter):
        def write_run(self, *args: Any, **kwargs: Any) -> Any:
            fail()

    if fails == "before-images":
        monkeypatch.setattr(flush_files, "write_changelog", fail)
    elif fails == "data":
        monkeypatch.setattr(bucket_writer, "DataFileWriter", FailingWriter)
    else:
        monkeypatch.setattr(FileIO, "copy_file", fail)
    with pytest.raises(StorageError, match="disk full"):
        _upsert_adds(t)
    assert len(list(t.snapshots())) == snapshots
    assert _rows(t) == before_rows
    assert _files(t) == before_files
    monkeypatch.undo()
    _upsert_adds(t)
    assert _rows(t)[15] == "w15"


@pytest.mark.parametrize("cores", [1, 2, 64])
def test_a_flush_encodes_its_two_files_on_a_second_thread_only_while_a_core_has_no_flush(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch, cores: int) -> None:
    # Four buckets flushed `min(4, cores)` at a time: with a flush on every core, a second thread
    # per flush would only add switching between threads (the warm lookup upsert's CPU).
    t = keyed_table(catalog, "t", **{"changelog-producer": "lookup", "bucket": "4"})
    put(t, *[(i, f"v{i}", "+I") for i in range(200)])
    monkeypatch.setattr(flush_files, "cores", lambda: cores)
    monkeypatch.setattr("lakehouse_engine.threads.cores", lambda: cores)
    seconds: list[str] = []
    real = flush_files.ThreadPoolExecutor

    def counted(*args: Any, **kwargs: Any) -> Any:
        seconds.append(kwargs.get("thread_name_prefix", ""))
        return real(*args, **kwargs)

    monkeypatch.setattr(flush_files, "ThreadPoolExecutor", counted)
    put(t, *[(i, f"w{i}", "+I") for i in range(100, 300)])
    if cores >= 64:
        assert seconds == ["flush-data"] * 4  # (flushes run 4 at once: each encodes on two threads)
    elif cores == 1:
        assert seconds == []
    assert _rows(t) == {**{i: f"v{i}" for i in range(100)}, **{i: f"w{i}" for i in range(100, 300)}}
    changes = t.changes(max(s.id for s in t.snapshots()) - 1)
    assert changes.filter(pa.compute.equal(changes.column("_row_kind"), "-U")).num_rows == 100


def test_a_run_of_adds_rolled_into_several_files_lists_each_as_an_after_image(catalog: Catalog) -> None:
    t = keyed_table(catalog, "t", **{"changelog-producer": "lookup", "bucket": "1", "target-file-size": "16 kb"})
    put(t, *[(i, f"v{i}", "+I") for i in range(6000)])
    write = t.new_batch_write_builder().new_write()
    write.write_arrow(pa.Table.from_pylist([{"id": i, "v": f"w{i}", "k": "+I"} for i in range(3000, 9000)],
                                           schema=SCHEMA))
    (m,) = write.prepare_commit()
    assert len(m.new_files) > 1
    root = Path(t.store.path_factory.table_path) / "bucket-0"
    afters = m.compact_changelog[-len(m.new_files):]
    assert all((root / a.file_name).samefile(root / d.file_name) for a, d in zip(afters, m.new_files, strict=True))
    befores = pa.concat_tables([pq.read_table(root / f.file_name) for f in m.compact_changelog[:-len(m.new_files)]])
    assert befores.column("id").to_pylist() == list(range(3000, 6000))
    assert set(befores.column("_VALUE_KIND").to_pylist()) == {1}
    start = max(s.id for s in t.snapshots())
    t.new_batch_write_builder().new_commit().commit([m])
    changes = t.changes(start)
    assert changes.num_rows == 9000
    assert changes.filter(pa.compute.equal(changes.column("_row_kind"), "+U")).num_rows == 3000


def test_a_fresh_process_decodes_each_older_file_once_keys_and_kinds_first(
        catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    # The run's kinds need only the older rows' keys and kinds (read together); the other columns
    # of a file holding an updated key are read once after, while the data files encode.
    from lakehouse_engine.mergetree.evolution import EvolvingFileReader

    t = keyed_table(catalog, "t", **{"changelog-producer": "lookup", "bucket": "1"})
    put(t, *[(i, f"v{i}", "+I") for i in range(20)])
    older = {e.file.file_name for e in t.store.manifest_io().live_entries(t.latest_snapshot())}
    reads: list[tuple[str, list[str]]] = []
    real = EvolvingFileReader.read

    def counted(self: Any, path: str, columns: Any, *args: Any, **kwargs: Any) -> Any:
        reads.append((path.rsplit("/", 1)[-1], list(columns)))
        return real(self, path, columns, *args, **kwargs)

    clear_caches()
    monkeypatch.setattr(EvolvingFileReader, "read", counted)
    _upsert_adds(t)
    monkeypatch.undo()
    (name,) = older
    assert [c for f, c in reads if f == name] == [["id", "_VALUE_KIND"], ["v", "k", "_SEQUENCE_NUMBER"]]
    assert _rows(t)[15] == "w15"
