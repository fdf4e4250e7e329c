"""What a TableWrite is for, as values: how it assigns buckets, what its files are to the commit,
and the lookup a flush may run against the bucket's older levels.

A writer of new rows takes the table's defaults; the table's own jobs choose otherwise:
postpone-bucket compaction writes fixed buckets as compaction output, rescale rewrites partitions
into fixed buckets, a Spark task of a dynamic-bucket table is one assigner of n.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from lakehouse_engine.format.manifest_entries import DataFileMeta, IndexManifestEntry
    from lakehouse_engine.partition import Partition


# ---- bucket assignment ------------------------------------------------------------------------
@dataclass(frozen=True)
class TableBuckets:
    """The table's own bucket mode: fixed hash, dynamic index, cross-partition, postpone or none."""


@dataclass(frozen=True)
class FixedBuckets:
    """Fixed hash buckets whatever the table's mode: `counts[partition]` buckets per partition
    (its binary row), `default` for a partition not in `counts`."""

    counts: Mapping[bytes, int]
    default: int


@dataclass(frozen=True)
class DynamicAssigner:
    """Assigner `assigner_id` of `num_assigners` writing a dynamic-bucket table at once: it only
    receives keys with `abs(hash % num_assigners) == assigner_id` (other modes: the table's)."""

    assigner_id: int
    num_assigners: int


BucketAssignment = TableBuckets | FixedBuckets | DynamicAssigner
#: The default assignment: the table's bucket mode.
TABLE_BUCKETS = TableBuckets()


def assigner_of(assigner_id: int = 0, num_assigners: int = 1) -> BucketAssignment:
    """The assignment of a writer that is assigner `assigner_id` of `num_assigners` (one: the table's)."""
    return TABLE_BUCKETS if num_assigners == 1 and assigner_id == 0 else DynamicAssigner(assigner_id, num_assigners)


# ---- output role ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class OutputRole:
    """What the files of a TableWrite are to its commit."""

    #: The rows replace what their partitions held: dynamic-bucket indexes start empty and the
    #: writer does not compact at commit (what it would compact is being deleted).
    replaces: bool = False
    #: The files come as a compaction's output (`compact_after`), not as new data: the rows were
    #: moved within the table, not written to it.
    compaction_output: bool = False
    #: Compaction inside the writer; None: as the table's `write-only` option says.
    compacts: bool | None = None
    #: A compaction's output whose rows reach the table's buckets for the first time (postpone
    #: compaction): the table's changelog producer makes their changelog, as Paimon's does.
    first_arrival: bool = False


#: New rows (an APPEND commit).
NEW_DATA = OutputRole()
#: New rows replacing partitions (an OVERWRITE commit).
OVERWRITE_DATA = OutputRole(replaces=True)
#: Rows the table holds, rewritten in place of their partitions (rescale); no compaction.
REWRITE = OutputRole(replaces=True, compacts=False)
#: Rows moved into buckets by a compaction (postpone-bucket compaction); no compaction; their
#: changelog is made there.
COMPACTION_OUTPUT = OutputRole(compaction_output=True, compacts=False, first_arrival=True)


# ---- the lookup at flush -------------------------------------------------------------------------
@dataclass
class LookupResult:
    """What a lookup of a flushed run against the bucket's older levels produced for the commit."""

    #: Index files of the bucket to commit (deletion vectors of older files).
    index_files: list[IndexManifestEntry] = field(default_factory=list)
    #: Changelog files of the bucket (the `lookup` changelog producer).
    changelog_files: list[DataFileMeta] = field(default_factory=list)


@dataclass
class BeforeImages:
    """A run whose data files are the after-image half of its `lookup` changelog: the kinds its
    rows take (+U where the key has a live older row, +I else) and the -U rows to write beside it.

    The kinds come first (the keys matched); the -U rows are gathered when first asked for, so the
    run's data files can be encoded while they are."""

    #: Per row of the run, its `_VALUE_KIND` in the data file and in the changelog.
    kinds: np.ndarray
    #: Gathers the -U rows (`rows`).
    gather: Callable[[], pa.Table]
    _rows: pa.Table | None = field(default=None, repr=False)

    @property
    def rows(self) -> pa.Table:
        """The older rows of the updated keys as -U, in the run's key order (file layout)."""
        if self._rows is None:
            self._rows = self.gather()
        return self._rows


class FlushLookup(Protocol):
    """Looks up the keys of a level-0 run just flushed in the bucket's older levels (the deletion
    vectors and the `lookup` changelog producer both need this).

    A lookup whose `takes_run` is true is given the run's rows (`run`) while the writer writes
    its data files on another thread (`flushed` is then empty); else it is given the files after.
    """

    #: Whether `lookup` takes the run's rows while its data files are written.
    takes_run: bool

    def lookup(self, partition: Partition, bucket: int, flushed: list[DataFileMeta],
               older: list[DataFileMeta], run: pa.Table | None = None) -> LookupResult:
        """The index and changelog files that `flushed` makes, given the bucket's `older` files;
        `run`: the flushed rows in file layout when the caller holds them (then `flushed` is not
        read, and may be empty: the files are still being written)."""
        ...

    def before_images(self, partition: Partition, bucket: int, older: list[DataFileMeta],
                      run: pa.Table) -> BeforeImages | None:
        """Where the run's data files can be the after-image half of its changelog, the kinds its
        rows take and the before-images to write beside it; None where they cannot (then
        `lookup` makes the changelog). Asked only of a lookup that `takes_run`."""
        ...
