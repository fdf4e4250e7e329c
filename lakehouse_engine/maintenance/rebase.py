"""Re-commit a branch's appends onto another branch: what a write-audit-publish pipeline does when
main moved after its audit branch was made (docs/branches.md, "Re-committing a branch's appends").

A fast-forward replaces main's snapshots after the branch point with the branch's, so it is only
right while main has not moved. When it has, the branch's *writes* can be carried over instead:
the records its APPEND snapshots added (the batch, as written and audited, row kinds included) are
written again to a branch made at main's latest snapshot, through the normal write and commit path:

- each record keeps its place: the files are read in the order their sequence numbers give them
  (within a bucket, file by file, each file in its (key, sequence) order), so for every key the
  writer numbers the records in the order the source did, above everything the target holds (the
  re-written batch lands later than main's new commits, so it wins, as any later commit does);
- the writer does what any write does on the target: bucket assignment (after a rescale too), the
  dynamic-bucket index, the changelog producer's changelog against the target's rows (a `lookup`
  changelog of the source compared the batch with the old base: it is not carried, nor are the
  source's COMPACT snapshots, which merged files of the old base);
- the commit carries the source's commit user and identifier, and a target that already holds a
  commit of that user and identifier (an earlier re-commit, or the batch itself) gets nothing:
  re-committing is idempotent, never a second copy of the batch;
- the source branch is only read: it stays as it was until it is dropped.

A data file written with another schema than the target's (a column the batch added, or main
added since) is refused: the batch must then be written again by its producer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakehouse_engine.errors import CommitConflictError, LakehouseError, UnsupportedError
from lakehouse_engine.format.manifest_entries import FileKind, ManifestEntry
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.mergetree.data_file_reader import read_data_file_batches
from lakehouse_engine.schema import VALUE_KIND
from lakehouse_engine.write.commit_retry import snapshots_of_commit
from lakehouse_engine.write.write_builder import BatchWriteBuilder

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

APPEND = "APPEND"
COMPACT = "COMPACT"
#: Decoded bytes of a source file held at once while it is re-written.
READ_BATCH_BYTES = 32 << 20


def appends_after(source: FileStore, after: int) -> list[Snapshot]:
    """The APPEND snapshots of `source` after snapshot `after`; UnsupportedError when a later
    snapshot is neither an APPEND nor a COMPACT (an OVERWRITE's deletes cannot be carried)."""
    later = [source.snapshot(i) for i in source.snapshot_manager().list_snapshot_ids() if i > after]
    other = [s for s in later if s.commit_kind not in (APPEND, COMPACT)]
    if other:
        raise UnsupportedError(
            f"table {source.name}, branch {source.branch}: snapshot {other[0].id} is an "
            f"{other[0].commit_kind}; only appends (and their compactions) can be re-committed")
    return [s for s in later if s.commit_kind == APPEND]


def rebase_appends(target: FileStore, source: FileStore, after: int) -> list[int]:
    """Write to `target` the records `source`'s APPEND snapshots after snapshot `after` added, and
    commit them as the source's commit user and identifier; the snapshot ids the commit landed in
    (those it landed in before when the target holds it already; empty: nothing to carry).

    Raises:
        UnsupportedError: an OVERWRITE among the source's snapshots, appends of several commit
            users, or a primary-key-less table; nothing was committed.
        CommitConflictError: a source file has another schema than the target; nothing was committed.
    """
    if not target.schema.has_primary_key:
        raise UnsupportedError(f"table {target.name} has no primary key: only a primary-key table's "
                               f"appends are re-committed")
    appends = appends_after(source, after)
    if not appends:
        return []
    users = sorted({s.commit_user for s in appends})
    if len(users) > 1:
        raise UnsupportedError(
            f"table {source.name}, branch {source.branch}: appends after snapshot {after} come from "
            f"{len(users)} commit users ({', '.join(users)}); re-commit them one writer at a time")
    identifier = appends[-1].commit_identifier
    landed = snapshots_of_commit(target, users[0], identifier, None)
    if landed.by_kind:
        return sorted(landed.by_kind.values())
    entries = [e for s in appends for e in _added(source, s)]
    for e in entries:
        if e.file.schema_id != target.schema.id:
            raise CommitConflictError(
                f"table {target.name}: file {e.file.file_name} of branch {source.branch} was written "
                f"with schema {e.file.schema_id} but branch {target.branch} is at schema "
                f"{target.schema.id}; nothing was committed, write the batch again")
    # Per bucket in sequence order: the writer numbers each key's records as the source did.
    entries.sort(key=lambda e: (e.partition, e.bucket, e.file.min_sequence_number, e.file.max_sequence_number))
    fields = target.schema.field_names
    file_schema = target.schema.data_file_arrow_schema()
    columns = [*fields, VALUE_KIND]
    read_schema = pa.schema([file_schema.field(c) for c in columns])
    codec = source.partition_codec()
    builder = BatchWriteBuilder(target).with_commit_user(users[0])
    write = builder.new_write()
    try:
        for e in entries:
            bucket_dir = source.path_factory.bucket_dir(codec.from_binary(e.partition).spec, e.bucket)
            for rows in read_data_file_batches(source.file_io, f"{bucket_dir}/{e.file.file_name}", columns,
                                               read_schema, e.file, READ_BATCH_BYTES):
                kinds = rows.column(VALUE_KIND).to_numpy().astype(np.int8)
                write.write_rows(rows.select(fields), kinds)
        messages = write.prepare_commit()
    finally:
        write.close()
    with builder.new_commit() as commit:
        return commit.commit(messages, identifier)


def _added(source: FileStore, snapshot: Snapshot) -> list[ManifestEntry]:
    """The data files `snapshot` added; LakehouseError on a DELETE (an APPEND never has one)."""
    if not snapshot.delta_manifest_list:
        return []
    mio = source.manifest_io()
    name = snapshot.delta_manifest_list
    snapshot_file = snapshot.file or source.path_factory.snapshot_path(snapshot.id)
    out: list[ManifestEntry] = []
    for meta in mio.read_manifest_list(name, snapshot.delta_manifest_list_size, snapshot_file):
        for e in mio.read_manifest(meta.file_name, meta.file_size, mio.paths.manifest_path(name)):
            if e.kind != FileKind.ADD:
                raise LakehouseError(
                    f"table {source.name}, branch {source.branch}: APPEND snapshot {snapshot.id} "
                    f"deletes file {e.file.file_name}; it cannot be re-committed")
            out.append(e)
    return out
