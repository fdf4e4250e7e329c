"""What a flush lookup that met a missing file raises: the table changed under the writer, or it is damaged.

A writer takes a bucket's levels at its first use in a commit cycle (`write.bucket_levels`) and keeps
them through the cycle's flushes. A dedicated compaction can replace the files they hold and expiry
remove them between two flushes of one cycle; the second flush's lookup then meets a file that is
gone (unless the lookup cache still holds it). Its changelog would be computed against rows the
table no longer holds, and the commit's staleness check would refuse it anyway (the compaction's
files share its keys, or the snapshots since the lookup expired), so the flush stops there with the
CommitConflictError the commit would raise, as Paimon's writer fails when a file it looks up was
expired. A file the latest snapshot still lists but storage lacks is damage: that error stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from lakehouse_engine.errors import CommitConflictError, DataFileMissingError
from lakehouse_engine.write.bucket_router import RestoredState

if TYPE_CHECKING:
    from lakehouse_engine.format.manifest_entries import DataFileMeta
    from lakehouse_engine.partition import Partition
    from lakehouse_engine.store.file_store import FileStore
    from lakehouse_engine.write.bucket_writer import BucketWriter

__all__ = ["flush_lookup_error", "flush_lookup_errors"]


@contextmanager
def flush_lookup_errors(table: FileStore, writer: BucketWriter) -> Iterator[None]:
    """Around `writer`'s flush: a DataFileMissingError raised as `flush_lookup_error` decides."""
    try:
        yield
    except DataFileMissingError as e:
        raise flush_lookup_error(table, writer.partition, writer.bucket, writer.lookup_files(), e) from e


def flush_lookup_error(table: FileStore, partition: Partition, bucket: int, older: Iterable[DataFileMeta],
                       error: DataFileMissingError) -> Exception:
    """The error to raise for `error`, met by a flush lookup in `older` (the bucket's files it looked
    in): CommitConflictError naming the gone file when the latest snapshot no longer lists it, else
    `error` itself (the table lists a file storage lacks, or the missing file is none of `older`)."""
    bucket_dir = table.path_factory.bucket_dir(partition.spec, bucket)
    missing = [f.file_name for f in older if not table.file_io.exists(f"{bucket_dir}/{f.file_name}")]
    if not missing:
        return error
    live = {f.file_name for f in RestoredState.read(table).bucket_files.get((partition.binary, bucket), [])}
    if any(name in live for name in missing):
        return error
    return CommitConflictError(
        f"table {table.name}, bucket {bucket}: the bucket's files changed under this writer during its "
        f"commit cycle: {missing[0]} is gone and the table no longer lists it (a compaction replaced it "
        f"and expiry removed it, or the commit that wrote it was aborted); its flush lookup cannot "
        f"compute the changelog, nothing was committed: abort the write and write the cycle's rows again")
