"""BucketCompaction: the compaction inside a bucket writer, as Paimon's MergeTreeCompactManager is
its MergeTreeWriter's: compact the bucket's levels at the stop trigger and at commit (a full
compaction at the commits `full-compaction.delta-commits` names, level 0 taken up where readers
skip it, a DV table's through the lookup), and what the compactions since the last commit message
replaced and wrote, with their changelog.

BucketWriter (write/bucket_writer.py) is its subclass: the buffer, the flush and the commit message.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lakehouse_engine.errors import CommitConflictError, DataFileMissingError
from lakehouse_engine.options import MERGE_ENGINE
from lakehouse_engine.write.bucket_levels import BucketLevels
from lakehouse_engine.write.bucket_router import RestoredState
from lakehouse_engine.write.deletion_vectors import DeletionVectorBase, DeletionVectorCompactor
from lakehouse_engine.write.level0_changelog import level0_changelog_of

if TYPE_CHECKING:
    import pyarrow as pa

    from lakehouse_engine.format.manifest_entries import DataFileMeta, IndexManifestEntry

log = logging.getLogger(__name__)

__all__ = ["BucketCompaction"]


class BucketCompaction(BucketLevels):
    """The compaction part of a BucketWriter (its base class; the state is BucketWriter's): the
    bucket's compactions and the files they replaced and wrote since the last commit message."""

    compact_before: list[DataFileMeta]
    compact_changelog: list[DataFileMeta]
    compact_base: set[str] | None
    changelog_given: set[str]
    _run_changelog: list[tuple[frozenset[str], list[DataFileMeta]]]
    first_row_unlogged: int | None
    new_keys: dict[str, pa.Table]
    deletion_vector_files: list[IndexManifestEntry]
    deletion_vector_base: tuple[list[str], list[str]] | None
    lookup_base: list[str] | None
    lookup_snapshot: int | None
    _handed_out: set[str]

    def compact(self, full: bool, force_up_level0: bool = False, changelog: bool = True,
                realign: bool = True) -> None:
        """Compact the bucket now (with `force_up_level0`, level 0 up when nothing else is picked;
        without `changelog`, writing no full-compaction changelog); the results merge into what it
        compacted since the last message. A file of the levels that is gone because the table no
        longer lists it: the levels are taken from the table again and the compaction tried again
        (once, with `realign`)."""
        from lakehouse_engine.mergetree.compact.rewriter import BucketCompactor
        from lakehouse_engine.mergetree.compact.universal import pick_unit

        ctx = self.context
        levels = self.levels()
        unit = pick_unit(levels, ctx.options, full, force_up_level0)
        if unit is None:
            return
        level0 = [f for f in unit.files if f.level == 0]
        unlogged = None
        if level0 and ctx.first_row_changelog:
            # No level-0 file a snapshot lists has given its changelog (a write-only writer's
            # neither): the first-row compaction writes that of every level-0 row it keeps.
            own = [] if self.first_row_unlogged is None else [self.first_row_unlogged]
            unlogged = min(own + [f.min_sequence_number for f in level0])
        lookup = ctx.changelog_producer == "lookup" and not ctx.first_row_changelog
        compactor = BucketCompactor(ctx.table, self.partition, self.bucket, changelog,
                                    level0_changelog_of(ctx.table, given=self.changelog_given) if lookup else None,
                                    unlogged)
        seen = {f.file_name for f in levels.all_files()}
        try:
            before, after = compactor.compact(levels, unit)
            if lookup:
                # The changelog of the bucket's other level-0 files (a write-only writer's) comes
                # first: this writer's flushes that gave their own came after those went up.
                self.compact_changelog[:0] = compactor.changelog_files
            else:
                self.compact_changelog.extend(compactor.changelog_files)
            if unlogged is not None:
                self.first_row_unlogged = None  # (a compaction with level 0 takes all of it up)
        except DataFileMissingError as e:
            replaced, damaged = self._levels_replaced()
            if replaced and realign:
                # The bucket's files changed under this writer during the cycle (a dedicated
                # compaction replaced them and expiry removed them): compact what the table holds.
                log.info("table %s, bucket %s: the writer's compaction met a file the table no longer "
                         "lists; compacting again on its latest files: %s", ctx.table.name, self.bucket, e)
                self.compact(full, force_up_level0, changelog, realign=False)
                return
            if unlogged is not None:
                # This compaction writes the changelog of the writer's new keys (and takes its level
                # 0 up, which readers of first-row skip): it cannot be skipped.
                if damaged:
                    raise DataFileMissingError(
                        f"table {ctx.table.name}, bucket {self.bucket}: data file {damaged[0]} is listed in "
                        f"the latest snapshot but missing from storage (the table is damaged: restore "
                        f"the file or roll the table back); the writer's first-row compaction must read "
                        f"it to give the changelog of its new keys, nothing was committed") from e
                raise CommitConflictError(
                    f"table {ctx.table.name}, bucket {self.bucket}: the bucket's files changed under "
                    f"this writer's first-row compaction ({e}); nothing was committed, write again") from e
            # Compaction here is an optimisation: write the data without it (a `lookup` table's
            # runs left in level 0 give their changelog later). A file that is there but will not
            # decode still fails the write.
            log.warning("table %s, bucket %s: skipping the writer's compaction: %s", ctx.table.name,
                        self.bucket, e)
            return
        if ctx.options.require(MERGE_ENGINE) == "first-row":
            # The commit checks no file it did not see took the same keys up meanwhile.
            self.compact_base = seen | (self.compact_base or set())
        after_names = {f.file_name for f in self.compact_after}
        before_names = {f.file_name for f in self.compact_before}
        upgraded = {f.file_name for f in after}
        bucket_dir = ctx.table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        for f in before:
            if f.file_name in after_names:
                # An intermediate file of this session, never committed: drop it for good
                # (unless it is an upgraded committed file sharing its physical file, or this
                # compaction only moved it up a level).
                self.compact_after = [a for a in self.compact_after if a.file_name != f.file_name]
                if f.file_name not in before_names and f.file_name not in upgraded:
                    ctx.table.file_io.delete_file(f"{bucket_dir}/{f.file_name}")
            else:
                self.compact_before.append(f)
        self.compact_after.extend(after)

    def compact_at_commit(self, full: bool) -> None:
        """The compaction before the commit: `full` at the commits `full-compaction.delta-commits`
        names (TableWrite decides); a `lookup` or first-row table's takes level 0 up."""
        self.compact(full, self.context.force_up_level0)
        self._withhold_level0_changelog()

    def _withhold_level0_changelog(self) -> None:
        """The flush changelog of the runs the compaction at commit left in level 0 (it was skipped,
        or picked other runs) stays out of the commit, whatever else this cycle compacted (Paimon's
        invariant: a level-0 file a snapshot lists has not given its changelog yet); the compaction
        that takes them up gives it. A run partly taken up keeps its changelog (its files above
        level 0 would give none)."""
        if not self._run_changelog:
            return
        level0 = {f.file_name for f in self.levels().level0}
        withheld = [run for run in self._run_changelog if run[0] <= level0]
        if not withheld:
            return
        gone = {f.file_name for _, files in withheld for f in files}
        self.compact_changelog = [f for f in self.compact_changelog if f.file_name not in gone]
        self._run_changelog = [run for run in self._run_changelog if not run[0] <= level0]
        bucket_dir = self.context.table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        for names, files in withheld:
            self.changelog_given -= names
            for f in files:
                self.context.table.file_io.delete_file(f"{bucket_dir}/{f.file_name}")

    def _drop_cycle_work(self, live: list[DataFileMeta], snapshot: int) -> None:
        """Before the levels are taken from `live` (the bucket's files in `snapshot`): what this
        cycle's compactions did on the old levels is dropped (their files deleted), and the flush
        changelog with them.

        Raises:
            CommitConflictError: a first-row lookup-changelog writer's new rows number below a file
                above level 0 that another writer's rows reached meanwhile: its compaction tells
                its new keys by their numbers, and would give that writer's again.
        """
        ctx = self.context
        names = {f.file_name for f in live}
        if ctx.first_row_changelog and self.new_files:
            unlogged = min(f.min_sequence_number for f in self.new_files)
            newer = [f.file_name for f in live if f.level > 0 and f.max_sequence_number >= unlogged]
            if newer:
                raise CommitConflictError(
                    f"table {ctx.table.name}, bucket {self.bucket}: another writer's rows were compacted "
                    f"into the bucket's files above level 0 ({newer[0]}) while this writer's were "
                    f"numbered below them; its first-row changelog cannot tell its new keys apart, "
                    f"nothing was committed, write again")
        bucket_dir = ctx.table.path_factory.bucket_dir(self.partition.spec, self.bucket)
        kept = {f.file_name for f in self.new_files}
        for f in self.compact_after + self.compact_changelog:
            if f.file_name not in kept:
                ctx.table.file_io.delete_file(f"{bucket_dir}/{f.file_name}")
        self.compact_before, self.compact_after, self.compact_changelog = [], [], []
        # (The flush changelog was of the old levels: the compaction taking those runs up gives it,
        # from the new ones, which the commit's staleness check then starts from.)
        self.changelog_given, self._run_changelog = set(), []
        if self.lookup_base is not None:
            self.lookup_base = sorted(names | self._handed_out)
            self.lookup_snapshot = snapshot
        if ctx.first_row_changelog and self.new_files:
            # Their first-row changelog went with the dropped compactions: the next one writes it.
            self.first_row_unlogged = min(f.min_sequence_number for f in self.new_files)

    def take_level0_up(self, full: bool = False) -> None:
        """At the commit of a writer that does not compact as it writes (an overwrite, a rescale,
        postpone compaction), take its level 0 up (Paimon's ForceUpLevel0Compaction), as Paimon's
        writers of those do on a table whose readers skip level 0; `full`: to the top level, with
        no changelog (an overwrite's files on a full-compaction table, whose readers read the top)."""
        ctx = self.context
        if ctx.role.compaction_output:
            # Its files are a compaction's output already: what this compaction replaces of them
            # never lands.
            self.compact_after.extend(self.new_files)
            self.new_files = []
        if ctx.write_only:
            # Its flushes kept the levels as they were: the files it wrote join them now.
            names = {f.file_name for f in self.levels().all_files()}
            self.levels().add_files(f for f in self.new_files + self.compact_after if f.file_name not in names)
        self.compact(full=full, force_up_level0=not full, changelog=not full)

    def compact_deletion_vectors(self, state: RestoredState,
                                 bases: dict[tuple[bytes, int], DeletionVectorBase]) -> None:
        """Compact a DV table's bucket at commit: its level 0 up through the lookup, vectors marked.

        `state` and `bases`: the table's files and vectors as the commit finds them.
        """
        key = (self.partition.binary, self.bucket)
        if self.context.role.replaces:
            # The older files go with the replaced partition: the new ones compact among themselves.
            files, base = list(self.new_files), DeletionVectorBase()
        else:
            base = bases.get(key, DeletionVectorBase())
            files = state.bucket_files.get(key, []) + list(self.new_files)
        ctx = self.context
        level0_changelog = (level0_changelog_of(ctx.table, lambda: state.latest, self.changelog_given)
                            if ctx.changelog_producer == "lookup" else None)
        done = DeletionVectorCompactor(ctx.table, self.partition, self.bucket, base, self.new_keys,
                                       level0_changelog).compact(files)
        if done is None:
            return
        # The changelog of the bucket's other level-0 files first (see `compact`).
        self.compact_changelog[:0] = done.changelog_files
        self.compact_before, self.compact_after = done.before, done.after
        self.deletion_vector_files = done.index_files
        self.deletion_vector_base = (list(base.index_files), list(base.upper_files))
