"""The files a bucket's flush writes beside its run: the flush lookup's changelog written while the
run is encoded (or, where the run's data files are its after-images, only its before-images), the
input changelog, and the cleanup that leaves nothing behind when one fails."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pyarrow as pa

from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.mergetree.changelog import write_changelog
from lakehouse_engine.mergetree.data_file import DataFileWriter
from lakehouse_engine.partition import Partition
from lakehouse_engine.schema import VALUE_KIND
from lakehouse_engine.threads import cores
from lakehouse_engine.write.write_roles import BeforeImages, FlushLookup, LookupResult

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

_T = TypeVar("_T")

__all__ = ["delete_lookup_files", "flush_running", "input_changelog_files", "looked_up", "write_and_look_up"]

#: The bucket flushes running now in this process (`flush_running`).
_running = 0
_running_lock = threading.Lock()


@contextlib.contextmanager
def flush_running() -> Iterator[None]:
    """Counts a bucket's flush as running while the block runs. A flush that writes two files
    encodes the second on a thread of its own only while fewer flushes run than the machine has
    cores: where every core has a flush already, a second thread per flush only adds switching
    between them (measured: some 3 per cent more CPU for the warm `lookup` upsert)."""
    global _running
    with _running_lock:
        _running += 1
    try:
        yield
    finally:
        with _running_lock:
            _running -= 1


def write_and_look_up(table: FileStore, flush_lookup: FlushLookup, writer: DataFileWriter, rows: pa.Table,
                      partition: Partition, bucket: int, older: list[DataFileMeta],
                      run: pa.Table) -> tuple[list[DataFileMeta], LookupResult, pa.Table]:
    """Write the run's data files and look it up (the changelog files it makes) at once; also
    the run as written (its kinds those of its changelog where its files are the after-images).

    The two are independent files and both encodes release the GIL, so they overlap on two cores;
    memory is what the flush holds anyway (the run, its changelog). If either fails, the files the
    other wrote are deleted and the error raised: the flush leaves nothing behind.
    """
    bucket_dir = table.path_factory.bucket_dir(partition.spec, bucket)
    images = flush_lookup.before_images(partition, bucket, older, run)
    if images is not None:
        return _write_after_images(table, writer, rows, run, images, bucket_dir)
    written, found = _beside_data(table, writer, rows, bucket_dir,
                                  lambda: flush_lookup.lookup(partition, bucket, [], older, run=run),
                                  lambda f: delete_lookup_files(table, bucket_dir, f))
    return written, found, run


def _write_after_images(table: FileStore, writer: DataFileWriter, rows: pa.Table, run: pa.Table,
                        images: BeforeImages, bucket_dir: str) -> tuple[list[DataFileMeta], LookupResult, pa.Table]:
    """The run's data files written with the changelog's kinds (+I/+U), the before-images (-U)
    written at once as changelog files of their own, then the data files under changelog names.

    The commit lists the -U files before the after-image files: a key's -U precedes its +U in
    the snapshot's changelog, as readers read a bucket's changelog files in order (Paimon's own
    rolling changelog writer can split a key's pair across files too). A failure deletes every
    file of the flush.
    """
    rows, run = _with_kinds(rows, images.kinds), _with_kinds(run, images.kinds)
    paths = table.path_factory
    # The before-images are rows of the same columns, older versions of the run's keys: the
    # run's dictionary judgement serves both files (judged once, not again on the -U rows).
    dictionary = writer.dictionary_for(rows)
    written, before = _beside_data(
        table, writer, rows, bucket_dir,
        lambda: write_changelog(table.file_io, table.schema, bucket_dir, paths.new_changelog_file_name,
                                writer.target_file_size, images.rows, dictionary=dictionary),
        lambda files: _delete_files(table, bucket_dir, files),
        dictionary)
    try:
        after = _as_changelog(table, bucket_dir, written)
    except BaseException:
        _delete_files(table, bucket_dir, before + written)
        raise
    return written, LookupResult(changelog_files=before + after), run


def _beside_data(table: FileStore, writer: DataFileWriter, rows: pa.Table, bucket_dir: str,
                 other: Callable[[], _T], delete_other: Callable[[_T], None],
                 dictionary: bool | list[str] | None = None) -> tuple[list[DataFileMeta], _T]:
    """The run `rows`' data files (`dictionary`: their judged dictionary columns, None to judge),
    encoded on a second thread while `other()` writes the flush's other files (both encodes
    release the GIL; one after the other in this thread where other flushes keep every core
    busy: `flush_running`); if either fails, what the other wrote is deleted and the error raised."""
    if _running >= cores():
        return _one_after_the_other(table, writer, rows, bucket_dir, other, dictionary)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="flush-data") as pool:
        data = pool.submit(writer.write_run, rows, 0, dictionary=dictionary)
        try:
            result = other()
        except BaseException:
            # Wait for the data files, then delete them: this flush is not committed.
            written: list[DataFileMeta] = []
            with contextlib.suppress(Exception):  # (other's error is the one raised)
                written = data.result()
            _delete_files(table, bucket_dir, written)
            raise
        try:
            written = data.result()
        except BaseException:
            delete_other(result)
            raise
    return written, result


def _one_after_the_other(table: FileStore, writer: DataFileWriter, rows: pa.Table, bucket_dir: str,
                         other: Callable[[], _T], dictionary: bool | list[str] | None) -> tuple[list[DataFileMeta], _T]:
    """`_beside_data` in this thread: the data files, then `other()` (whose failure deletes them)."""
    written = writer.write_run(rows, 0, dictionary=dictionary)
    try:
        result = other()
    except BaseException:
        _delete_files(table, bucket_dir, written)  # this flush is not committed
        raise
    return written, result


def _as_changelog(table: FileStore, bucket_dir: str, written: list[DataFileMeta]) -> list[DataFileMeta]:
    """The data files `written` copied (linked where the file system can) under changelog names:
    the same bytes as changelog files. A failure deletes the copies made and raises."""
    paths = table.path_factory
    files: list[DataFileMeta] = []
    try:
        for f in written:
            name = paths.new_changelog_file_name(f.file_name.rsplit(".", 1)[-1])
            table.file_io.copy_file(f"{bucket_dir}/{f.file_name}", f"{bucket_dir}/{name}")
            files.append(replace(f, file_name=name))
    except BaseException:
        _delete_files(table, bucket_dir, files)
        raise
    return files


def _with_kinds(rows: pa.Table, kinds: np.ndarray) -> pa.Table:
    at = rows.column_names.index(VALUE_KIND)
    return rows.set_column(at, rows.schema.field(at), pa.array(kinds, rows.schema.field(at).type))


def looked_up(table: FileStore, written: list[DataFileMeta], look_up: Callable[[], LookupResult],
              bucket_dir: str) -> LookupResult:
    """`look_up()` of a run already written; when it fails, the run's data files `written` are
    deleted first."""
    try:
        return look_up()
    except BaseException:
        _delete_files(table, bucket_dir, written)
        raise


def delete_lookup_files(table: FileStore, bucket_dir: str, found: LookupResult) -> None:
    """Delete the changelog and index files a flush lookup wrote (its flush failed: never committed)."""
    _delete_files(table, bucket_dir, found.changelog_files)
    for entry in found.index_files:
        table.file_io.delete_file(f"{table.path_factory.index_dir}/{entry.file_name}", quiet=True)


def input_changelog_files(table: FileStore, target_file_size: int, changelog: pa.Table, run: pa.Table,
                          written: list[DataFileMeta], bucket_dir: str) -> list[DataFileMeta]:
    """The input changelog of a flush.

    When no record merged away (the run is the records as given, in the same order), the run's
    files under changelog names (the same bytes: nothing encoded twice); else the records written
    as changelog files of their own.
    """
    paths = table.path_factory
    if changelog is not run and (changelog.num_rows != run.num_rows or not changelog.equals(run)):
        return write_changelog(table.file_io, table.schema, bucket_dir, paths.new_changelog_file_name,
                               target_file_size, changelog)
    return _as_changelog(table, bucket_dir, written)


def _delete_files(table: FileStore, bucket_dir: str, files: list[DataFileMeta]) -> None:
    for f in files:
        table.file_io.delete_file(f"{bucket_dir}/{f.file_name}", quiet=True)
