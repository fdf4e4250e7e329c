"""Level0Settlement: the committer's part in keeping the buckets a commit wrote free of level-0
files where readers skip level 0 (a deletion-vector table's; a first-row table's, for Paimon's
readers; a `lookup` table's first stream plan).

When the writer's compaction lost to a concurrent commit (its lookup against a stale base) or was
dropped, or its writer left level 0 (write-only), the committer takes that level 0 up again against
what landed (Paimon's ForceUpLevel0Compaction), a `lookup` table's with the changelog of the level 0
it takes up. Before the commit: a compaction into a DV table must have kept vectors, and a `lookup`
changelog lands only with the compaction taking its level-0 files up.

TableCommit (write/table_commit.py) calls it around its data and compaction commits, and hands it
its commit loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from lakehouse_engine.errors import CommitConflictError, LakehouseError, UnsupportedFeatureError
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.options import CHANGELOG_PRODUCER, MERGE_ENGINE, WRITE_ONLY
from lakehouse_engine.write.commit_message import CommitMessage, delete_message_files
from lakehouse_engine.write.commit_planners import CommitPlanner, CompactPlanner
from lakehouse_engine.write.commit_retry import message_entries, post_commit_error
from lakehouse_engine.write.deletion_vectors import (
    DeletionVectorBase,
    DeletionVectorCompactor,
    deletion_vectors_enabled,
)
from lakehouse_engine.write.first_row_check import BucketLevel0Up, first_row_level0_up
from lakehouse_engine.write.level0_changelog import level0_changelog_of, lookup_level0_up
from lakehouse_engine.write.resequence import Resequencer

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

__all__ = ["Level0Settlement"]

log = logging.getLogger(__name__)


class Level0Settlement:
    """What a committer does about the level 0 of the buckets its commits wrote."""

    def __init__(self, table: FileStore, commit_user: str,
                 try_commit: Callable[[CommitPlanner, int], int | None], max_retries: int):
        """The settlement of `commit_user`'s commits to `table`: `try_commit` commits a planner
        (the committer's commit loop), each settling compaction retried up to `max_retries` times."""
        self.table = table
        self.commit_user = commit_user
        self._try_commit = try_commit
        self.max_retries = max_retries

    def settle(self, messages: list[CommitMessage], identifier: int, written: list[int],
               compacted: int | None, overwrite: bool) -> list[int]:
        """After the commit of `messages` landed `written` (`compacted`: its COMPACT snapshot, None
        when it did not land; `overwrite`: an OVERWRITE), take up the level 0 its buckets kept
        where the table's readers skip it; the ids of the COMPACT snapshots that took."""
        if self.maintains_deletion_vectors():
            return self._settle_level0(messages, identifier, written,
                                       lambda latest: self._deletion_vector_compaction(latest, not overwrite))
        if self._takes_first_row_level0_up() and self._level0_left(messages, compacted):
            # The writer's first-row compaction lost to a concurrent commit or was dropped: take
            # the bucket's level 0 up again against what landed (readers of first-row skip it).
            return self._settle_level0(messages, identifier, written,
                                       lambda _: first_row_level0_up(self.table, self.commit_user),
                                       must_land=False)
        if self._takes_lookup_level0_up() and self._level0_left(messages, compacted):
            # Level 0 the writer did not take up (a write-only writer's, a Spark data source
            # task's, a compaction that lost a race) goes up now with its changelog, as Paimon's
            # write of a `lookup` table compacts (its first stream plan skips level 0). An
            # overwrite's rows give no changelog (streams skip overwrites).
            changelog = not overwrite
            return self._settle_level0(messages, identifier, written,
                                       lambda _: lookup_level0_up(self.table, self.commit_user, changelog),
                                       must_land=False)
        return []

    def maintains_deletion_vectors(self) -> bool:
        """Whether the table keeps deletion vectors (a primary-key table with them enabled, not `write-only`)."""
        opts = self.table.options
        return (self.table.schema.has_primary_key and deletion_vectors_enabled(opts)
                and not opts.get(WRITE_ONLY))

    def check_deletion_vectors_maintained(self, messages: list[CommitMessage]) -> None:
        """A compaction into a DV table that kept no vectors (its writer saw the table without
        them) would show the rows it replaced again: refused before anything lands."""
        for m in messages:
            if (m.compact_before or m.compact_after) and m.deletion_vector_base is None:
                raise UnsupportedFeatureError(
                    f"table {self.table.name}: bucket {m.bucket} was compacted by a writer that did "
                    f"not maintain deletion vectors (the table's 'deletion-vectors.enabled' was "
                    f"turned on since the write started); nothing was committed, write again")

    @staticmethod
    def _level0_left(messages: list[CommitMessage], compacted: int | None) -> bool:
        """Whether a bucket this commit wrote may have kept level-0 files: the COMPACT did not
        land, or a message's new files came without a compaction of their bucket."""
        return compacted is None or any(m.new_files and m.bucket >= 0 and not (m.compact_before or m.compact_after)
                                        for m in messages)

    def _takes_lookup_level0_up(self) -> bool:
        opts = self.table.options
        return (self.table.schema.has_primary_key and opts.require(CHANGELOG_PRODUCER) == "lookup"
                and not opts.get(WRITE_ONLY))

    def drop_changelog_without_compaction(self, messages: list[CommitMessage]) -> None:
        """A `lookup` changelog lands only with the compaction taking its level-0 files up (Paimon's
        invariant: a level-0 file listed has not given its changelog): a message whose compaction
        was skipped or dropped loses its changelog, and its files give it when they go up."""
        if self.table.options.require(CHANGELOG_PRODUCER) != "lookup":
            return
        for m in messages:
            if m.compact_changelog and not (m.compact_before or m.compact_after):
                delete_message_files(self.table, [CommitMessage(m.partition, m.bucket, m.total_buckets,
                                                                compact_changelog=m.compact_changelog)],
                                     compaction_only=True)
                m.compact_changelog = []

    def _takes_first_row_level0_up(self) -> bool:
        opts = self.table.options
        return (self.table.schema.has_primary_key and opts.require(MERGE_ENGINE) == "first-row"
                and not opts.get(WRITE_ONLY))

    def _deletion_vector_compaction(self, latest: Snapshot | None, changelog: bool) -> BucketLevel0Up:
        """A DV bucket's level 0 up through the lookup, vectors marked against `latest`'s (without
        `changelog`: an overwrite's rows, which give none)."""
        bases = DeletionVectorBase.of_snapshot(self.table, latest)
        codec = self.table.partition_codec()
        # The level-0 changelog of a `lookup` table (an overwrite's rows give none).
        level0_changelog = level0_changelog_of(self.table, lambda: latest) if changelog else None

        def compact(key: tuple[bytes, int], total: int, files: list[DataFileMeta]) -> CommitMessage | None:
            base = bases.get(key, DeletionVectorBase())
            done = DeletionVectorCompactor(self.table, codec.from_binary(key[0]), key[1], base,
                                           level0_changelog=level0_changelog).compact(files)
            if done is None:
                return None
            return CommitMessage(key[0], key[1], total, compact_before=done.before, compact_after=done.after,
                                 compact_changelog=done.changelog_files, deletion_vector_files=done.index_files,
                                 deletion_vector_base=(list(base.index_files), list(base.upper_files)),
                                 commit_user=self.commit_user)

        return compact

    def _settle_level0(self, messages: list[CommitMessage], identifier: int, written: list[int],
                       compaction: Callable[[Snapshot | None], BucketLevel0Up], must_land: bool = True) -> list[int]:
        """The buckets this commit wrote must end with no level-0 file where readers skip level 0
        (a DV table's, a first-row table's for Paimon, a `lookup` table's first stream plan): when
        the writer's compaction lost to a concurrent commit (its lookup against a stale base) or was
        dropped, or its writer left level 0 (write-only), compact those buckets again against what
        landed (`compaction(latest)` compacts one, a `lookup` table's giving the changelog of the
        level 0 it takes up), until it lands. Returns the ids of the COMPACT snapshots it
        committed. When it keeps losing: a PostCommitError (`must_land`: our reads of a DV table
        skip level 0), else a warning (the rows stay visible to our batch reads, and level 0
        gives its changelog at the next compaction)."""
        buckets = {(m.partition, m.bucket): m.total_buckets for m in messages if m.new_files and m.bucket >= 0}
        ids: list[int] = []
        if not buckets:
            return ids
        for _ in range(self.max_retries + 1):
            latest = self.table.snapshot_manager().latest_snapshot()
            files: dict[tuple[bytes, int], list[DataFileMeta]] = {}
            for e in self.table.manifest_io().live_entries(latest):
                if (e.partition, e.bucket) in buckets:
                    files.setdefault((e.partition, e.bucket), []).append(e.file)
            pending = sorted(k for k, fs in files.items() if any(f.level == 0 for f in fs))
            if not pending:
                return ids
            compact = compaction(latest)
            again = [m for m in (compact(key, buckets[key], files[key]) for key in pending) if m is not None]
            if not again:
                return ids
            _, entries = message_entries(again)
            planner = CompactPlanner(self.table, entries, again, Resequencer(self.table, again))
            try:
                sid = self._try_commit(planner, identifier)
            except CommitConflictError as exc:
                log.info("table %s: lookup compaction of this commit's buckets retried: %s", self.table.name, exc)
                delete_message_files(self.table, again, compaction_only=True)
                continue
            except (OSError, LakehouseError) as exc:
                delete_message_files(self.table, again, compaction_only=True)
                raise post_commit_error(self.table, written + ids, exc) from exc
            if sid is not None:
                ids.append(sid)
        lost = CommitConflictError(
            f"table {self.table.name}: the lookup compaction of the buckets this commit wrote lost "
            f"to concurrent commits {self.max_retries + 1} times; their new rows stay in level 0, "
            f"invisible to readers that skip it until the next write or compaction of those buckets")
        if not must_land:
            log.warning("%s", lost)
            return ids
        raise post_commit_error(self.table, written + ids, lost) from lost
