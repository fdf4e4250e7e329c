"""Snapshot expiry, as Paimon's ExpireSnapshotsImpl: keep the newest snapshots, delete older ones and
the files only they reference.

Which snapshots go (`expire_snapshots`):
  1. keep at most `retain_max`: older ones go whatever their age;
  2. keep at least `retain_min`, however old;
  3. in between, a snapshot goes only when it was committed before `older_than`
     (now - `snapshot.time-retained`), and expiry stops at the first younger one;
  4. at most `max_deletes` (`snapshot.expire.limit`) snapshots go in one run.

How they go (`expire_until`): the plan (which files to delete) is made first, from the expiring
snapshots, the first retained one and the tags. Then the snapshot files are deleted, oldest first,
then the EARLIEST hint moves, then the tags are read again, then the data, index and manifest
files are deleted. Every snapshot file that exists at any moment is therefore complete: a reader
of any snapshot still there, retained or not yet expired, never meets a missing file, and an
expiry interrupted at any point leaves a shorter intact chain plus orphan files (which the next
expiry of the following snapshots or `remove_orphan_files` deletes). Paimon deletes the data
files before the snapshot files so that a rerun can finish the job; here an interrupted run
never leaves a snapshot pointing at deleted files, at the price of leaving orphans instead.

With changelog retention longer than the snapshots' (`changelog.*` options, `ExpireConfig`), each
expiring snapshot is first written as a long-lived changelog and what it reads stays
(`plan_expiry`); `maintenance/expire_changelog.py` expires those.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from lakehouse_engine.errors import (
    CorruptFileError,
    InvalidOptionError,
    LakehouseError,
    SnapshotNotExistError,
)
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.maintenance.references import (
    DataPaths,
    References,
    changelog_files,
    changelog_metadata,
    delete_files,
    delta_changes,
    live_data_files,
    metadata_references,
    produces_changelog,
    tag_references,
)
from lakehouse_engine.options import (
    CHANGELOG_NUM_RETAINED_MAX,
    CHANGELOG_NUM_RETAINED_MIN,
    CHANGELOG_TIME_RETAINED,
    CONSUMER_EXPIRATION_TIME,
    SNAPSHOT_EXPIRE_LIMIT,
    SNAPSHOT_NUM_RETAINED_MAX,
    SNAPSHOT_NUM_RETAINED_MIN,
    SNAPSHOT_TIME_RETAINED,
)

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)
_T = TypeVar("_T")


@dataclass(frozen=True)
class ExpireConfig:
    """How many snapshots (and changelogs) to keep and which are old enough to go (Paimon's
    ExpireConfig). The changelog bounds default to the snapshot ones; when one of them keeps more
    than its snapshot bound, the changelog is *decoupled*: it outlives its snapshots as a
    long-lived changelog (`changelog/changelog-<id>`), which `expire_changelogs` expires."""

    retain_max: int
    retain_min: int
    older_than_millis: int
    max_deletes: int
    #: The changelog's bounds; None: the snapshot bounds (the changelog goes with its snapshot).
    changelog_retain_max: int | None = None
    changelog_retain_min: int | None = None
    changelog_older_than_millis: int | None = None

    @property
    def changelog_decoupled(self) -> bool:
        """Whether the changelog is kept longer than the snapshots (Paimon's changelogDecoupled)."""
        return ((self.changelog_retain_max or 0) > self.retain_max
                or (self.changelog_retain_min or 0) > self.retain_min
                or (self.changelog_older_than_millis is not None
                    and self.changelog_older_than_millis < self.older_than_millis))

    @staticmethod
    def of(table: FileStore, retain_max: int | None = None, retain_min: int | None = None,
           older_than: int | None = None, max_deletes: int | None = None) -> ExpireConfig:
        """Arguments given win; the others come from the table's `snapshot.*` options. The
        changelog bounds are the snapshot bounds in effect, unless the table sets a `changelog.*`
        option: then they are its `changelog.*` options, each defaulting to its `snapshot.*` one.

        Raises:
            InvalidOptionError: a bound is below 1, or a minimum is above its maximum.
        """
        opts = table.options
        now = int(time.time() * 1000)
        if retain_min is None:
            retain_min = opts.require(SNAPSHOT_NUM_RETAINED_MIN)
            if retain_max is not None:
                # `expire_snapshots(retain_max=2)` means "keep 2", not "fail: the default min is 10".
                retain_min = min(retain_min, retain_max)
        if retain_max is None:
            retain_max = max(opts.require(SNAPSHOT_NUM_RETAINED_MAX), retain_min)
        if older_than is None:
            older_than = now - opts.require(SNAPSHOT_TIME_RETAINED)
        if max_deletes is None:
            max_deletes = opts.require(SNAPSHOT_EXPIRE_LIMIT)
        changelog_min, changelog_max, changelog_older = retain_min, retain_max, older_than
        if any(o.key in opts.raw for o in (CHANGELOG_NUM_RETAINED_MIN, CHANGELOG_NUM_RETAINED_MAX,
                                           CHANGELOG_TIME_RETAINED)):
            # The table's changelog retention: each unset bound is its snapshot option (Paimon's
            # CoreOptions), whatever this run keeps of the snapshots.
            changelog_min = opts.get(CHANGELOG_NUM_RETAINED_MIN) or opts.require(SNAPSHOT_NUM_RETAINED_MIN)
            changelog_max = opts.get(CHANGELOG_NUM_RETAINED_MAX) or opts.require(SNAPSHOT_NUM_RETAINED_MAX)
            changelog_older = now - (opts.get(CHANGELOG_TIME_RETAINED) or opts.require(SNAPSHOT_TIME_RETAINED))
        for what, value in (("retain_min (snapshot.num-retained.min)", retain_min),
                            ("retain_max (snapshot.num-retained.max)", retain_max),
                            ("max_deletes (snapshot.expire.limit)", max_deletes)):
            if value < 1:
                raise InvalidOptionError(f"expiring snapshots of table {table.name}: {what} is "
                                         f"{value}, it must be at least 1")
        if retain_min > retain_max:
            raise InvalidOptionError(
                f"expiring snapshots of table {table.name}: retain_min ({retain_min}) is above "
                f"retain_max ({retain_max}); snapshot.num-retained.min must not exceed "
                f"snapshot.num-retained.max")
        if changelog_min > changelog_max:
            raise InvalidOptionError(
                f"expiring changelogs of table {table.name}: changelog.num-retained.min "
                f"({changelog_min}) is above changelog.num-retained.max ({changelog_max})")
        return ExpireConfig(retain_max, retain_min, older_than, max_deletes, changelog_max,
                            changelog_min, changelog_older)




def expire_snapshots(table: FileStore, retain_max: int | None = None, retain_min: int | None = None,
                     older_than: int | None = None, max_deletes: int | None = None) -> int:
    """Expire snapshots past the retention bounds; returns how many snapshot files were deleted.

    `older_than` is epoch milliseconds; unset arguments come from the `snapshot.*` options.
    """
    config = ExpireConfig.of(table, retain_max, retain_min, older_than, max_deletes)
    snapshots = table.snapshot_manager()
    latest = snapshots.latest_snapshot_id()
    earliest = snapshots.earliest_snapshot_id()
    if latest is None or earliest is None:
        return 0
    # 1. retain_max: below this id, snapshots go whatever their age.
    first_by_age = max(latest - config.retain_max + 1, earliest)
    # 2. retain_min and 4. max_deletes: nothing at or after this id goes.
    end = min(latest - config.retain_min + 1, earliest + config.max_deletes)
    if end <= earliest:
        return 0  # nothing may go: no need to list the consumers (a commit stays listing-free)
    # A consumer's next snapshot and everything after it stay: a streaming reader reads them.
    consumed = table.consumer_manager().min_next_snapshot()
    if consumed is not None:
        end = min(end, consumed)
    # 3. older_than: from `first_by_age` on, stop at the first snapshot young enough to keep.
    for sid in range(first_by_age, end):
        try:
            committed = snapshots.snapshot(sid).time_millis
        except SnapshotNotExistError:
            continue
        if committed >= config.older_than_millis:
            end = sid
            break
    return expire_until(table, earliest, end, config.changelog_decoupled)


def expire_after_commit(table: FileStore) -> None:
    """Expire snapshots beyond the table's retention options after a commit.

    The commit has landed when this runs, so a failure is logged, never raised: raising would
    make the caller believe the commit failed and write its data twice. The next commit (or an
    explicit `expire_snapshots`) tries again.
    """
    try:
        expire_consumers(table)
        expire_snapshots(table)
        if ExpireConfig.of(table).changelog_decoupled:
            from lakehouse_engine.maintenance.expire_changelog import expire_changelogs

            expire_changelogs(table)
    except (LakehouseError, OSError) as exc:
        log.warning("table %s: expiring snapshots after a commit failed (%s); the commit itself "
                    "succeeded and the next commit will try again", table.name, exc)


def expire_consumers(table: FileStore) -> list[str]:
    """Remove consumers not written for `consumer.expiration-time` (none when it is unset), as
    Paimon's commit does before it expires snapshots; returns their ids."""
    ttl = table.options.get(CONSUMER_EXPIRATION_TIME)
    if ttl is None:
        return []
    return table.consumer_manager().expire(int(time.time() * 1000) - ttl)


def expire_until(table: FileStore, begin: int, end: int, changelog_decoupled: bool = False) -> int:
    """Expire every snapshot with an id below `end` and the files only they reference.

    `begin` is the earliest snapshot as the hints tell it; nothing happens unless end > begin.
    With `changelog_decoupled` each snapshot is first written as a long-lived changelog, and
    what that changelog reads stays (`plan_expiry`).
    """
    if end <= begin:
        return 0
    snapshots = table.snapshot_manager()
    expiring = []
    # Listed rather than counted from `begin`: a snapshot below a hole in the ids (an
    # interrupted rollback to a tag leaves one) is older than `end` too, and must not be left
    # behind pointing at files this run deletes.
    for sid in (i for i in snapshots.list_snapshot_ids() if i < end):
        try:
            expiring.append(snapshots.snapshot(sid))
        except SnapshotNotExistError:
            continue  # expired by a concurrent run since the listing
    retained = _first_snapshot_from(table, end)
    if not expiring or retained is None:
        return 0  # never expire the latest snapshot
    tags = current_tags(table)
    try:
        doomed = plan_expiry(table, expiring, retained, tags.values(), changelog_decoupled)
    except CorruptFileError:
        if snapshots.snapshot_exists(retained.id):
            raise  # what stays cannot be read: real damage, never guessed around
        # A concurrent expiry deleted `retained`, and the metadata only it and older snapshots
        # used, after this run read it: that run expires further than this one would, so this
        # one has nothing left to do (the missing file is expired, not corrupt).
        log.info("table %s: snapshot %s was expired by a concurrent expiry; leaving it the work",
                 table.name, retained.id)
        return 0

    # 1. Snapshot files, oldest first: an interrupted run leaves a shorter, intact chain. A
    #    decoupled changelog is written before its snapshot goes: a streaming reader always finds
    #    one of the two.
    for s in expiring:
        if changelog_decoupled:
            snapshots.commit_long_lived_changelog(s)
        with contextlib.suppress(FileNotFoundError):
            table.file_io.delete_file(table.path_factory.snapshot_path(s.id), quiet=False)
    snapshots.commit_earliest_hint(retained.id)
    # 2. A tag created since the plan was made keeps its files (create_tag checks its snapshot
    #    still exists after writing the tag; one of the two always sees the other).
    late = [t for n, t in current_tags(table).items() if n not in tags or tags[n] != t]
    if late:
        doomed = doomed - tag_references(table, late)
    # 3. The files no snapshot or tag references any more.
    delete_files(table, doomed)
    return len(expiring)


def plan_expiry(table: FileStore, expiring: list[Snapshot], retained: Snapshot,
                tags: Iterable[Snapshot], changelog_decoupled: bool = False) -> References:
    """The files to delete when `expiring` go and `retained` (and every later snapshot) stays.

    Data files: those a delta from the first expiring snapshot up to `retained` deleted (and did
    not re-add at another level), as Paimon's SnapshotDeletion finds them; a file deleted by a
    delta is not live in that snapshot or any later one. Manifests, manifest lists and index
    files: those of the expiring snapshots that neither `retained` nor a tag names (a later
    snapshot only names ones `retained` names, or new ones). Nothing a tag references goes.

    With `changelog_decoupled` (Paimon's SnapshotDeletion), what the long-lived changelogs read
    stays for `expire_changelogs`: the changelog files and changelog manifest lists; without a
    changelog producer (a streaming read reads the deltas) also the delta and base manifest lists
    and the files a writer added (file source APPEND) that a compaction deleted.
    """
    tags = sorted(tags, key=lambda t: t.id)
    paths = DataPaths(table)
    data: set[str] = set()
    nothing: set[str] = set()
    # The first expiring snapshot's own delta too: what it deleted was live only in snapshots
    # already expired, and a run interrupted before deleting those files left them behind.
    keep_appends = changelog_decoupled and not produces_changelog(table)
    for s in [*expiring, retained]:
        added, deleted = _tolerant(table, s, lambda snap: delta_changes(table, snap, paths, keep_appends),
                                   (nothing, nothing))
        data |= deleted - added
    if not changelog_decoupled:
        for s in expiring:
            data |= _tolerant(table, s, lambda snap: changelog_files(table, snap, paths), nothing)
    data -= tagged_data_files(table, tags, expiring[0].id, retained.id, paths)

    going = References()
    for s in expiring:
        going.update(_tolerant(table, s, lambda snap: metadata_references(table, [snap]),
                               References()))
    keep = metadata_references(table, [retained, *tags])
    if changelog_decoupled:
        for s in expiring:
            keep.update(_tolerant(table, s, lambda snap: changelog_metadata(table, snap, keep_appends),
                                  References()))
    going = going - keep
    going.data_files = data
    return going


def tagged_data_files(table: FileStore, tags: list[Snapshot], first: int, retained: int,
                       paths: DataPaths) -> set[str]:
    """Data files of the tags that can hold a file the deltas of [first, retained] delete.

    A file deleted by the delta of snapshot k was live in k - 1; a tag at t <= k - 1 that holds
    it holds a file live from t to k - 1, so the newest tag at or before k - 1 holds it too. Tags
    at or after `retained` hold none of them. So only the tags in [first - 1, retained) and the
    newest one before `first - 1` are read, however many old tags a table keeps.
    """
    ids = sorted({t.id for t in tags if t.id < retained})
    wanted = {i for i in ids if i >= first - 1}
    older = [i for i in ids if i < first - 1]
    if older:
        wanted.add(older[-1])
    out: set[str] = set()
    for t in tags:
        if t.id in wanted:
            out |= live_data_files(table, t, paths) | changelog_files(table, t, paths)
            wanted.discard(t.id)
    return out


# ---- helpers --------------------------------------------------------------------------------------
def _first_snapshot_from(table: FileStore, sid: int) -> Snapshot | None:
    """The snapshot `sid`, or the next one that exists (None when there is none)."""
    snapshots = table.snapshot_manager()
    latest = snapshots.latest_snapshot_id()
    while latest is not None and sid <= latest:
        try:
            return snapshots.snapshot(sid)
        except SnapshotNotExistError:
            sid += 1
    return None


def current_tags(table: FileStore) -> dict[str, Snapshot]:
    """The table's tags now (read again after a plan: a tag made meanwhile keeps its files)."""
    from lakehouse_engine.maintenance.tags import list_tags

    return list_tags(table)


def _tolerant(table: FileStore, snapshot: Snapshot, read: Callable[[Snapshot], _T],
              default: _T) -> _T:
    """Read what an expiring snapshot references; an unreadable part is skipped, not fatal.

    Only what goes is read this way: missing a file here leaves an orphan, never deletes a file
    something still needs. What is kept (`retained`, the tags) is always read strictly.
    """
    try:
        return read(snapshot)
    except CorruptFileError as exc:
        log.warning("table %s: expiring snapshot %s: %s; files only it referenced are left for "
                    "remove_orphan_files", table.name, snapshot.id, exc)
        return default
