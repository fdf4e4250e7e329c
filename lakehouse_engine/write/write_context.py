"""WriteContext: what the bucket writers of one TableWrite share, as Paimon's KeyValueFileStoreWrite
holds what each of its MergeTreeWriters is made with: the table and commit user, what the files are
to the commit, and how a flush merges its rows, makes changelog, looks up and caches its run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse_engine.write.bucket_router import RestoredState
from lakehouse_engine.write.commit_cycles import CommitCycles
from lakehouse_engine.write.write_roles import FlushLookup, OutputRole

if TYPE_CHECKING:
    from lakehouse_engine.mergetree.lookup_cache import CachedFileReader
    from lakehouse_engine.mergetree.merge import MergeFunction
    from lakehouse_engine.options import CoreOptions
    from lakehouse_engine.schema import TableSchema
    from lakehouse_engine.store.file_store import FileStore

__all__ = ["WriteContext"]


@dataclass(frozen=True)
class WriteContext:
    """What the bucket writers of one TableWrite share: the table and commit user, what the files
    are to the commit, and how a flush merges its rows, makes changelog, looks up and caches its run."""

    table: FileStore
    commit_user: str
    role: OutputRole
    #: What the latest snapshot holds (read on first use, once per TableWrite).
    restored: Callable[[], RestoredState]
    merge_function: MergeFunction | None
    changelog_producer: str
    flush_lookup: FlushLookup | None
    key_names: list[str]
    target_file_size: int
    #: No compaction inside the writer (a DV table's compaction at commit aside).
    write_only: bool
    #: Paimon's `num-sorted-run.stop-trigger`: a bucket with this many sorted runs compacts at flush.
    stop_trigger: int
    #: Every this many commits, the compaction at commit is a full one (None: never).
    full_compaction_delta_commits: int | None
    deletion_vectors: bool
    #: A DV table's writer compacts each bucket's level 0 at commit (write/deletion_vectors.py).
    dv_compacts: bool
    #: The lookup cache the flush puts its runs in (a table whose commits look keys up).
    run_cache: CachedFileReader | None
    #: `changelog-producer` = lookup or `merge-engine` = first-row (not DV): the compaction at commit
    #: takes level 0 up (Paimon's ForceUpLevel0Compaction), as Paimon's readers of such tables skip
    #: level 0; a first-row table's drops the level-0 rows of keys already above (BucketCompactor).
    force_up_level0: bool = False
    #: What the latest snapshot holds now (read at most once per commit cycle): a stream writer's
    #: later lookups check their levels against it.
    current: Callable[[], RestoredState] | None = None
    #: A first-row table with `changelog-producer` = lookup whose writer takes level 0 up at every
    #: commit: the flush looks nothing up; the compaction that takes level 0 up writes the `+I`
    #: changelog of its new keys (`mergetree.compact.first_row_lookup.FirstRowChangelog`).
    first_row_changelog: bool = False
    #: The TableWrite's commit cycles: in a later one, the levels are checked against the table.
    cycles: CommitCycles | None = None
    #: A DV writer's flush lookup: what the latest snapshot holds at the cycle's first flush (its
    #: levels and the vectors the lookup applies come from there; `BucketLevels.levels`).
    flush_state: Callable[[], RestoredState] | None = None

    @property
    def schema(self) -> TableSchema:
        """The table's schema."""
        return self.table.schema

    @property
    def options(self) -> CoreOptions:
        """The table's options."""
        return self.table.schema.core_options

    @property
    def primary_key(self) -> bool:
        """Whether the table has a primary key."""
        return self.table.schema.has_primary_key
