"""The commit's check that a first-row table's compaction takes no key above level 0 twice, and
the compaction the committer runs when a writer's lost (`first_row_level0_up`).

Paimon reads the files above level 0 of a first-row table raw, so a key may sit in one of them
only. A compaction drops the level-0 rows whose keys it finds above (its first-row lookup), but it
looked at the bucket as its writer saw it. Another writer may have committed the same key since and
taken it up: then both would hold it. Re-sequencing (`write.resequence`) drops the writer's
compaction when the other's numbers overlap its own; this check covers the rest, from the file
names the compaction saw (`CommitMessage.compact_base`): a file above level 0 it did not see that
shares a key with its output makes the compaction lose (CommitConflictError; its data stays
committed at level 0, and the next compaction of the bucket takes it up through the lookup).
Files are compared by key range first (`mergetree.key_range`); only files that meet have their key
columns read.
When the writer's compaction lost (or re-sequencing dropped it), the committer takes the bucket's
level 0 up again against what landed (`write.level0_settlement`, as for a deletion-vector table).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_engine.errors import CommitConflictError
from lakehouse_engine.format.manifest_entries import DataFileMeta, ManifestEntry
from lakehouse_engine.mergetree.key_range import files_meeting_keys, key_span
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.level0_changelog import lookup_level0_up

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

__all__ = ["BucketLevel0Up", "check_first_row_keys_once", "first_row_level0_up"]

#: Compacts one bucket's level 0 up: (partition, bucket), total buckets, its live files -> the
#: compaction's message (None: nothing to do).
BucketLevel0Up = Callable[[tuple[bytes, int], int, list[DataFileMeta]], "CommitMessage | None"]


def first_row_level0_up(table: FileStore, commit_user: str) -> BucketLevel0Up:
    """The committer's first-row compaction of a bucket: level 0 up through the first-row lookup
    (Paimon's ForceUpLevel0Compaction), checked at commit like a writer's."""
    return lookup_level0_up(table, commit_user, checked=True)


def check_first_row_keys_once(table: FileStore, messages: Sequence[CommitMessage],
                              live: Sequence[ManifestEntry]) -> None:
    """CommitConflictError when a first-row compaction of `messages` would put a key above level 0
    that a file of `live` above level 0, unseen by that compaction, already holds."""
    for m in messages:
        if m.compact_base is None:
            continue
        ours = [f for f in m.compact_after if f.level > 0]
        if not ours:
            continue
        seen = set(m.compact_base) | {f.file_name for f in m.compact_after}
        unseen = [e.file for e in live if e.partition == m.partition and e.bucket == m.bucket
                  and e.file.level > 0 and e.file.file_name not in seen]
        if unseen and _share_keys(table, m, ours, unseen):
            raise CommitConflictError(
                f"table {table.name}, bucket {m.bucket}: another commit took keys of this first-row "
                f"compaction above level 0 since it looked them up; the compaction was not committed "
                f"(its rows stay at level 0 until the next compaction)")


def _share_keys(table: FileStore, m: CommitMessage, ours: list[DataFileMeta], theirs: list[DataFileMeta]) -> bool:
    """Whether a key of the files `ours` is in one of `theirs` (key ranges first, then key columns)."""
    schema = table.schema
    key_names = schema.trimmed_primary_keys
    key_types = schema.types_of(key_names)
    theirs = files_meeting_keys(theirs, key_types, key_span(ours, key_types))
    if not theirs:
        return False
    bucket_dir = table.path_factory.bucket_dir(table.partition_codec().from_binary(m.partition).spec, m.bucket)
    file_schema = schema.data_file_arrow_schema()
    key_schema = pa.schema([file_schema.field(k) for k in key_names])
    reader = table.file_reader()

    def keys(files: list[DataFileMeta]) -> pa.Table:
        tables = [reader.read(f"{bucket_dir}/{f.file_name}", key_names, key_schema, f) for f in files]
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    return keys(ours).join(keys(theirs), key_names, join_type="inner").num_rows > 0
