"""Commit-time re-sequencing: a commit's rows lie above everything that landed before it.

A writer numbers its rows (`_SEQUENCE_NUMBER`) from the highest number of each bucket in the
snapshot it started from. Two writers that start from the same snapshot and write the same bucket
hand out the same numbers, and the merge would then decide between their rows by those numbers,
not by which commit came last. So, in every attempt of an APPEND or OVERWRITE commit of a
primary-key table, per (partition, bucket):

1. `top` = the highest `max_sequence_number` of the bucket's files live in the latest snapshot
   (minus the files this commit deletes), raised by each earlier message of this commit there.
2. If a message's new files of the bucket start at or below `top`, and share a key with a file
   whose numbers reach theirs (numbers only decide between records of one key), they are
   rewritten with `_SEQUENCE_NUMBER` shifted by one offset, so that they all lie above `top`
   (new file names, min/max sequence updated; the uncommitted originals are deleted). One offset
   per message keeps the order of the message's own rows.
3. The writer's compaction of such a bucket (`compact_before/after`) merged the old numbers: it
   is dropped (its rewritten outputs are deleted) and the COMPACT commit leaves the bucket alone.
4. Where readers skip level 0 (deletion vectors, first-row), a writer compaction must also not
   leave a level-0 file committed since it looked (numbered below this commit's rows, so not
   re-sequenced) under its newer records of the same keys: `check_level0_stays_newest`.

The table then reads as if commits were applied in snapshot order: for one key, the later commit
wins. Nothing is rewritten when no one else wrote the bucket since the writer started (the usual
case: the check reads the live files' metadata only), nor when the others wrote other keys.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import CommitConflictError, LakehouseError
from lakehouse_engine.format.manifest_entries import DataFileMeta, FileKind, ManifestEntry
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.mergetree.data_file import FILE_SOURCE_APPEND, DataFileWriter
from lakehouse_engine.mergetree.data_file_reader import read_data_file
from lakehouse_engine.mergetree.key_range import files_meeting_keys, key_span
from lakehouse_engine.options import CHANGELOG_PRODUCER
from lakehouse_engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.write.commit_message import CommitMessage, delete_message_files

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)

BucketKey = tuple[bytes, int]


class Resequencer:
    """Re-sequences the new files of one commit's messages (in place) above what already landed."""

    def __init__(self, table: FileStore, messages: list[CommitMessage]):
        """A re-sequencer of `messages`, which it rewrites in place when they overlap."""
        self.table = table
        self.messages = messages
        #: Buckets whose writer compaction was dropped: the COMPACT commit skips them.
        self.dropped: set[BucketKey] = set()
        #: Original file name -> the files that replaced it, over all attempts (for the entries).
        self._renamed: dict[str, list[DataFileMeta]] = {}

    def resequence(self, changes: Sequence[ManifestEntry], latest: Snapshot | None) -> bool:
        """Shift the messages' new files above the files live in `latest` and above earlier
        messages of the same bucket; True when any file was rewritten.

        Args:
            changes: this attempt's entries; files they DELETE (an overwrite) do not count as live.
            latest: the snapshot this attempt commits on top of.
        """
        if not self.table.schema.has_primary_key or not any(m.new_files for m in self.messages):
            return False  # append tables: numbers decide nothing (and their manifests stay unread)
        live = self.table.manifest_io().live_entries(latest)
        deleted = {e.identifier for e in changes if e.kind == FileKind.DELETE}
        top: dict[BucketKey, int] = {}
        # Per bucket, the files ours must not tie with, and the highest number each really holds.
        rivals: dict[BucketKey, list[tuple[DataFileMeta, int]]] = {}
        for e in live:
            if e.identifier not in deleted:
                key = (e.partition, e.bucket)
                top[key] = max(top.get(key, -1), e.file.max_sequence_number)
                rivals.setdefault(key, []).append((e.file, e.file.max_sequence_number))
        shifts: list[tuple[CommitMessage, int]] = []
        for m in self.messages:
            if not m.new_files:
                continue
            key = (m.partition, m.bucket)
            low = min(f.min_sequence_number for f in m.new_files)
            high = max(f.max_sequence_number for f in m.new_files)
            bound = top.get(key, -1)
            offset = 0
            if bound >= low:
                overlapping = [f for f, top_seq in rivals.get(key, []) if top_seq >= low]
                if self.share_keys(m, overlapping):
                    offset = bound + 1 - low
                    shifts.append((m, offset))
            top[key] = max(bound, high + offset)
            rivals.setdefault(key, []).extend((f, f.max_sequence_number + offset) for f in m.new_files)
        if not shifts:
            return False
        live_names = {e.file.file_name for e in live}
        for m, offset in shifts:
            self._shift(m, offset, live_names)
        return True

    def renamed(self, entries: Sequence[ManifestEntry]) -> list[ManifestEntry]:
        """`entries` with every ADD of a rewritten file replaced by ADDs of its rewrites."""
        out: list[ManifestEntry] = []
        for e in entries:
            name = e.file.file_name
            if e.kind != FileKind.ADD or name not in self._renamed:
                out.append(e)
                continue
            pending = [e.file]
            while pending:  # a file rewritten in two attempts was renamed twice
                f = pending.pop(0)
                if f.file_name in self._renamed:
                    pending = self._renamed[f.file_name] + pending
                else:
                    out.append(ManifestEntry(e.kind, e.partition, e.bucket, e.total_buckets, f))
        return out

    def without_dropped(self, entries: Sequence[ManifestEntry]) -> list[ManifestEntry]:
        """Compaction `entries` minus those of buckets whose compaction was dropped."""
        return [e for e in entries if (e.partition, e.bucket) not in self.dropped]

    # ---- do the numbers matter? ------------------------------------------------------------
    def share_keys(self, m: CommitMessage, files: list[DataFileMeta]) -> bool:
        """True when a key of `m`'s new files is also in `files` (whose numbers overlap ours).

        Numbers only decide between records of the same key: writers of disjoint keys in one
        bucket (the usual shape of parallel loads) need no rewrite (see `files_share_keys`).
        """
        return files_share_keys(self.table, m.partition, m.bucket, m.new_files, files)

    # ---- rewriting -----------------------------------------------------------------------
    def _shift(self, m: CommitMessage, offset: int, live_names: set[str]) -> None:
        """Rewrite `m`'s new files with sequence numbers + `offset`; drop its bucket's compaction."""
        table = self.table
        codec = table.partition_codec()
        partition = codec.from_binary(m.partition)
        bucket_dir = table.path_factory.bucket_dir(partition.spec, m.bucket)
        written: list[DataFileMeta] = []
        replaced: list[DataFileMeta] = []
        try:
            for f in m.new_files:
                new = self._rewrite(f, offset, bucket_dir)
                written.extend(new)
                self._renamed[f.file_name] = new
                replaced.append(f)
        except Exception:
            for f in written:  # nothing half-done stays behind; the message is unchanged
                table.file_io.delete_file(f"{bucket_dir}/{f.file_name}")
            for f in replaced:
                self._renamed.pop(f.file_name, None)
            raise
        key = (m.partition, m.bucket)
        if key not in self.dropped:
            self._drop_compaction(key)
        old, m.new_files = m.new_files, written
        for f in old:
            # The originals were never committed; a file live in the latest snapshot (an earlier
            # attempt of ours that landed after all) must stay.
            if f.file_name not in live_names:
                table.file_io.delete_file(f"{bucket_dir}/{f.file_name}")
        log.info("table %s, partition %s, bucket %s: another commit wrote this bucket since this "
                 "write started; %d file(s) re-sequenced by +%d so this commit's rows win",
                 table.name, partition.path_string() or "(none)", m.bucket, len(written), offset)

    def _rewrite(self, f: DataFileMeta, offset: int, bucket_dir: str) -> list[DataFileMeta]:
        table = self.table
        schema = table.schema
        if f.schema_id != schema.id:
            raise CommitConflictError(
                f"commit to table {table.name}: file {f.file_name} was written with schema {f.schema_id} "
                f"but the table is at schema {schema.id}, and another commit wrote its bucket "
                f"meanwhile; nothing was committed, write the batch again")
        columns = schema.field_names + [SEQUENCE_NUMBER, VALUE_KIND]
        file_schema = schema.data_file_arrow_schema()
        read_schema = pa.schema([file_schema.field(c) for c in columns])
        rows = read_data_file(table.file_io, f"{bucket_dir}/{f.file_name}", columns, read_schema, meta=f)
        seq = pc.add(rows.column(SEQUENCE_NUMBER), pa.scalar(offset, pa.int64()))
        rows = rows.set_column(rows.schema.get_field_index(SEQUENCE_NUMBER), SEQUENCE_NUMBER, seq)
        writer = DataFileWriter(table.file_io, schema, bucket_dir, table.path_factory.new_data_file_name,
                                schema.core_options.target_file_size(True))
        source = f.file_source if f.file_source is not None else FILE_SOURCE_APPEND
        return writer.write_run(rows, level=f.level, file_source=source)

    def _drop_compaction(self, key: BucketKey) -> None:
        """Drop the writer compaction of bucket `key` from every message: it embeds old numbers."""

        self.dropped.add(key)
        for m in self.messages:
            if (m.partition, m.bucket) != key or not (m.compact_before or m.compact_after):
                continue
            # Deletes the rewritten outputs only: an upgraded file is its committed original.
            delete_message_files(self.table, [m], compaction_only=True)
            log.warning("table %s, bucket %s: the writer's compaction was dropped because the "
                        "bucket's new files were re-sequenced; a later compaction picks it up",
                        self.table.name, m.bucket)
            m.compact_before, m.compact_after = [], []
            # Its deletion vectors too (their files deleted above, computed for the dropped
            # compaction): the COMPACT must not commit them; the committer compacts the bucket again.
            m.deletion_vector_files, m.deletion_vector_base = [], None
            if self.table.options.require(CHANGELOG_PRODUCER) == "full-compaction":
                # That changelog was the dropped compaction's own (deleted with its files above),
                # not the data's: the data lands without it.
                m.compact_changelog = []


def files_share_keys(table: FileStore, partition: bytes, bucket: int, ours: list[DataFileMeta],
                     theirs: list[DataFileMeta]) -> bool:
    """True when a key of the bucket's files `ours` is also in its files `theirs`.

    Key ranges from the metadata settle most cases; otherwise the key columns are read, which
    costs far less than what a wrong answer would (a rewrite, a lost compaction). When in doubt
    (a file that will not read), the answer is yes.
    """
    if not ours or not theirs:
        return False
    schema = table.schema
    key_names = schema.trimmed_primary_keys
    key_types = schema.types_of(key_names)
    theirs = files_meeting_keys(theirs, key_types, key_span(ours, key_types))
    ours = files_meeting_keys(ours, key_types, key_span(theirs, key_types)) if theirs else []
    if not ours:
        return False
    bucket_dir = table.path_factory.bucket_dir(table.partition_codec().from_binary(partition).spec, bucket)
    file_schema = schema.data_file_arrow_schema()
    key_schema = pa.schema([file_schema.field(k) for k in key_names])
    reader = table.file_reader()

    def keys(files: list[DataFileMeta]) -> pa.Table:
        tables = [reader.read(f"{bucket_dir}/{f.file_name}", key_names, key_schema, f) for f in files]
        return (pa.concat_tables(tables) if len(tables) > 1 else tables[0]).group_by(key_names).aggregate([])

    try:
        mine, other = keys(ours), keys(theirs)
    except LakehouseError:
        return True
    return mine.join(other, key_names, join_type="inner").num_rows > 0


def check_level0_stays_newest(table: FileStore, messages: Sequence[CommitMessage],
                              live: Sequence[ManifestEntry]) -> None:
    """CommitConflictError when a compaction of `messages` would take records above level 0 (or
    drop a delete there) while a level-0 file it did not see holds older records of those keys.

    Where readers skip level 0 (a deletion-vector table; a first-row table for Paimon), the
    compaction that later takes a level-0 file up trusts its records to be newer than every
    record above: its lookup marks the rows it finds above as replaced (first-row: drops its
    own). A writer's compaction looked at the bucket at `prepare_commit`; a level-0 file another
    writer committed since, numbered below this commit's records (so nothing was re-sequenced),
    would be left under records newer than its own, and the compaction taking it up would then
    let the older record win (a replaced row shows, or a deleted one comes back). This
    compaction loses instead; the committer compacts the bucket again with that file in it.

    Only inputs numbered at or above the file's lowest number count, and only when they share a
    key with it: a file committed while an input was live was re-sequenced above it where they
    share keys, so the check fails only for inputs that landed after the file (this commit's own).
    """
    for m in messages:
        if not (m.compact_before or m.compact_after):
            continue
        seen = {f.file_name for f in m.compact_before + m.compact_after} | set(m.compact_base or ())
        unseen = [e.file for e in live if e.partition == m.partition and e.bucket == m.bucket
                  and e.file.level == 0 and e.file.file_name not in seen]
        for older in unseen:
            newer = [f for f in m.compact_before if f.max_sequence_number >= older.min_sequence_number]
            if files_share_keys(table, m.partition, m.bucket, newer, [older]):
                raise CommitConflictError(
                    f"table {table.name}, bucket {m.bucket}: level-0 file {older.file_name}, committed "
                    f"since this compaction looked at the bucket, holds older records of keys it "
                    f"compacts; nothing of it was committed (the bucket is compacted again with it)")


def check_compaction_sees_older_files(table: FileStore, changes: Sequence[ManifestEntry],
                                      live: Sequence[ManifestEntry]) -> None:
    """CommitConflictError when a compaction into a bucket's top level left out a file that is not
    newer than what it merged.

    Compaction into the highest level drops deletes: right only if no older record of the key
    stays outside it. One writer's unpicked files are always newer (higher numbers) than its
    compaction's inputs; a file another writer committed since the compaction's snapshot may not
    be, and a delete dropped now would let its older record come back.
    """
    if not table.schema.has_primary_key:
        return
    key_types = table.schema.types_of(table.schema.trimmed_primary_keys)
    buckets: dict[BucketKey, tuple[list[DataFileMeta], list[DataFileMeta]]] = {}
    for e in changes:
        before, after = buckets.setdefault((e.partition, e.bucket), ([], []))
        (before if e.kind == FileKind.DELETE else after).append(e.file)
    gone = {e.identifier for e in changes if e.kind == FileKind.DELETE}
    for (partition, bucket), (before, after) in buckets.items():
        if not before:
            continue
        # No output at all: every record merged was deleted, which happens at the top level only.
        output_level = max((f.level for f in after), default=2**31)
        others = [e.file for e in live
                  if e.partition == partition and e.bucket == bucket and e.identifier not in gone]
        if any(f.level > output_level for f in others):
            continue  # not the top level: the compaction kept its deletes
        # A file left out may hold an older record of a key whose delete was dropped only if its
        # key range meets that of a merged file and it has a number below that file's highest.
        older = [o.file_name for o in others
                 if any(o.min_sequence_number <= b.max_sequence_number
                        and files_meeting_keys([o], key_types, key_span([b], key_types)) for b in before)]
        if older:
            raise CommitConflictError(
                f"commit to table {table.name}: the compaction of bucket {bucket} to its top level "
                f"did not read files committed meanwhile with records as old as its "
                f"own ({older[:3]}); it could drop a delete they need, so nothing was committed")

