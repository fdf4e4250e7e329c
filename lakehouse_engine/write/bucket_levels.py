"""BucketLevels: a bucket writer's levels (its picture of the bucket's files) and how they stay
the table's across the commit cycles of a stream writer.

A TableWrite kept across commits keeps each bucket's levels, maintained by its own flushes and
compactions. The table can change under it (see `write.commit_cycles`): at the first use in each
later cycle the levels are checked against the latest snapshot and taken from it where they differ
(`_align_levels`), the buffered rows then numbered above the files taken (`_above_levels`); a
compaction that meets a file the table no longer lists takes them from it too (`_levels_replaced`).
What the writer did on the old levels in the cycle is the writer's to drop (`_drop_cycle_work`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.mergetree.compact.levels import Levels
from lakehouse_engine.schema import SEQUENCE_NUMBER
from lakehouse_engine.write.bucket_router import RestoredState
from lakehouse_engine.write.commit_cycles import levels_stale

if TYPE_CHECKING:
    from lakehouse_engine.format.manifest_entries import DataFileMeta
    from lakehouse_engine.partition import Partition
    from lakehouse_engine.write.write_context import WriteContext

log = logging.getLogger(__name__)

__all__ = ["BucketLevels"]


class BucketLevels:
    """The levels part of a BucketWriter (its base class): the levels, the snapshot they come from,
    and their alignment with the table in a stream writer's later commit cycles."""

    context: WriteContext
    partition: Partition
    bucket: int
    next_sequence: int
    new_files: list[DataFileMeta]
    compact_after: list[DataFileMeta]

    def __init__(self) -> None:
        """No levels yet: read on first use."""
        self._levels: Levels | None = None
        #: The snapshot the levels were taken from (a lookup's staleness check starts there).
        self.levels_snapshot = 0
        #: The commit cycle (`WriteContext.cycles`) the levels were last checked against the table in.
        self._levels_cycle = 0
        #: Set when the levels were taken from the table again: the next flush numbers its rows above it.
        self._sequence_floor: int | None = None

    def levels(self) -> Levels:
        """The bucket's files by level: what the latest snapshot held (read on first use), then
        what this writer's flushes and compactions added; in each later commit cycle of a stream
        writer, first checked against the latest snapshot (`_align_levels`)."""
        ctx = self.context
        cycle = ctx.cycles.count if ctx.cycles is not None else 0
        if self._levels is None:
            # A later cycle's new bucket writer reads the table as it is now, not as it was at
            # the writer's first cycle. A DV writer's levels serve its flush lookup only (read
            # again after every commit): they come from the table as the cycle's first flush finds
            # it, as a state read at a write before may list files another writer's compaction
            # at commit replaced and expiry removed since.
            if ctx.flush_state is not None:
                state, fresh = ctx.flush_state(), True
            elif cycle and ctx.current is not None:
                state, fresh = ctx.current(), True
            else:
                state, fresh = ctx.restored(), False
            # An overwrite's files replace the bucket's (Paimon's ignorePreviousFiles): its
            # compactions take only its own files, never the rows the overwrite deletes.
            restored = [] if ctx.role.replaces else state.bucket_files.get((self.partition.binary, self.bucket), [])
            self._levels = Levels(restored, ctx.options.num_levels)
            self.levels_snapshot = state.latest.id if state.latest is not None else 0
            if fresh:
                self._sequence_floor = max([f.max_sequence_number + 1 for f in restored], default=None)
            self._levels_cycle = cycle
        elif cycle != self._levels_cycle:
            self._levels_cycle = cycle
            self._align_levels()
        return self._levels

    def _align_levels(self) -> None:
        """At a stream writer's first use of the levels in a commit cycle: where they are no longer
        the bucket's files in the latest snapshot (its last compaction lost, a dedicated compaction
        or the committer replaced files, another writer added some), take them from it, as Paimon's
        writer restores its levels after a failed commit (see `write.commit_cycles`). Not while the
        last commit is in flight: the levels then hold its files, which no snapshot lists yet (its
        lookup's staleness check covers the rest) - unless a file they hold is gone (a given-up
        compaction's output), which no lookup may read."""
        ctx = self.context
        if ctx.current is None or ctx.cycles is None or ctx.role.replaces:
            return
        assert self._levels is not None
        # Whether the last commit landed, looked up now (once a cycle, a few snapshots back), while
        # its snapshots are surely retained: a compaction of this cycle may need to know.
        ctx.cycles.settled_by()
        now = ctx.current()
        live = now.bucket_files.get((self.partition.binary, self.bucket), [])
        own = {f.file_name for f in self.new_files + self.compact_after}
        stale, gone = levels_stale((f for f in self._levels.all_files() if f.file_name not in own), live)
        snapshot = now.latest.id if now.latest is not None else 0
        if not stale:
            self.levels_snapshot = snapshot
            return
        if gone:
            settled_by = ctx.cycles.settled_by()
            if settled_by is None and not self._any_missing(gone):
                return
            if settled_by is not None and snapshot < settled_by:
                # The state was read before the last commit landed: read the table again.
                now = RestoredState.read(ctx.table)
                live = now.bucket_files.get((self.partition.binary, self.bucket), [])
                snapshot = now.latest.id if now.latest is not None else 0
        log.info("table %s, bucket %s: the writer's levels are not the table's (%d file(s) gone); "
                 "taking them from snapshot %s", ctx.table.name, self.bucket, len(gone), snapshot)
        self._take_levels(live, snapshot)

    def _levels_replaced(self) -> tuple[bool, list[str]]:
        """After a compaction met a missing file: whether the levels held files the table no longer
        lists that are gone (then the levels are taken from the latest snapshot, this cycle's
        compactions dropped), and the missing files the table still lists (damage). Not while the
        last commit is in flight (its files, in the levels, are in no snapshot yet)."""
        ctx = self.context
        if ctx.role.replaces:
            return False, []
        own = {f.file_name for f in self.new_files + self.compact_after}
        bucket_dir = ctx.table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        missing = [f for f in self.levels().all_files()
                   if f.file_name not in own and not ctx.table.file_io.exists(f"{bucket_dir}/{f.file_name}")]
        if not missing:
            return False, []
        now = RestoredState.read(ctx.table)
        live = now.bucket_files.get((self.partition.binary, self.bucket), [])
        listed = {f.file_name for f in live}
        damaged = [f.file_name for f in missing if f.file_name in listed]
        if damaged or (ctx.cycles is not None and ctx.cycles.settled_by() is None):
            return False, damaged
        self._take_levels(live, now.latest.id if now.latest is not None else 0)
        return True, []

    def _any_missing(self, files: list[DataFileMeta]) -> bool:
        """Whether a file of `files` (of this bucket) is not in storage."""
        bucket_dir = self.context.table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        return any(not self.context.table.file_io.exists(f"{bucket_dir}/{f.file_name}") for f in files)

    def reset_levels(self) -> None:
        """Forget the levels: the next use reads them again from what the table then holds."""
        self._levels = None

    def _above_levels(self, rows: pa.Table) -> pa.Table:
        """`rows` (the bucket's whole buffer), numbered above every file of the levels when a later
        commit cycle took them from the table again (another writer's files may number higher than
        this writer's next numbers): shifted by one offset, in order, as the commit's re-sequencing
        would shift the run (which would then drop its compaction and changelog)."""
        self.levels()  # (a later cycle's first use checks them against the table)
        floor, self._sequence_floor = self._sequence_floor, None
        seq = rows.column(SEQUENCE_NUMBER)
        low = int(seq[0].as_py())  # (the buffer stands in sequence order)
        if floor is None or low >= floor:
            return rows
        offset = floor - low
        self.next_sequence += offset
        return rows.set_column(rows.schema.get_field_index(SEQUENCE_NUMBER), SEQUENCE_NUMBER,
                               pc.add(seq, pa.scalar(offset, pa.int64())))

    def realign_levels(self, live: list[DataFileMeta], snapshot: int | None = None) -> None:
        """Take the bucket's levels from `live` (its files in the latest snapshot) and this commit's
        own new files, when the levels hold a file `live` lacks: an earlier compaction of this
        writer never landed (its messages thrown away, or its commit lost). What this commit's
        compactions did on those levels is dropped (files deleted), its new files kept. `snapshot`:
        the id of the snapshot `live` comes from (default: the one the levels came from)."""
        names = {f.file_name for f in live}
        own = {f.file_name for f in self.new_files} | {f.file_name for f in self.compact_after}
        if all(f.file_name in names or f.file_name in own for f in self.levels().all_files()):
            return
        self._take_levels(live, self.levels_snapshot if snapshot is None else snapshot)

    def _take_levels(self, live: list[DataFileMeta], snapshot: int) -> None:
        """The levels from `live` (the bucket's files in `snapshot`) and this cycle's new files
        (`_drop_cycle_work` first: the writer's own part, which may refuse)."""
        self._drop_cycle_work(live, snapshot)
        names = {f.file_name for f in live}
        self._levels = Levels(list(live) + [f for f in self.new_files if f.file_name not in names],
                              self.context.options.num_levels)
        self.levels_snapshot = snapshot
        # Rows written from now on (and the buffered ones, at the next flush) number above every
        # file the levels now hold.
        self._sequence_floor = max([f.max_sequence_number + 1 for f in live], default=None)
        self.next_sequence = max(self.next_sequence, self._sequence_floor or 0)

    def _drop_cycle_work(self, live: list[DataFileMeta], snapshot: int) -> None:
        """The writer's part of `_take_levels` (see BucketCompaction)."""
        raise NotImplementedError
