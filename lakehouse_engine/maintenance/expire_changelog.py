"""Changelog expiry, as Paimon's ExpireChangelogImpl: the long-lived changelogs
(`changelog/changelog-<id>`, written by snapshot expiry when `changelog.num-retained.*` or
`changelog.time-retained` keep the changelog longer than the snapshots) go past their own retention.

Which changelogs go (`expire_changelogs`), counted against the latest *snapshot* id as Paimon does:
  1. keep the changes of at most `changelog.num-retained.max` snapshots: older changelogs go
     whatever their age;
  2. keep those of at least `changelog.num-retained.min`, however old;
  3. in between, a changelog goes only when it was committed before now - `changelog.time-retained`,
     and expiry stops at the first younger one;
  4. a consumer's next snapshot and everything after it stay, at most `snapshot.expire.limit` go in
     one run, and the latest long-lived changelog always stays.

How they go (`expire_changelogs_until`): the plan is made first; then the changelog files, oldest
first, then the `changelog/EARLIEST` hint, then the changelog files, manifests and manifest lists
only they read (and, for a table without a changelog producer, the written files their deltas
deleted). An interrupted run leaves a shorter intact run of changelogs plus orphan files.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from lakehouse_engine.errors import CorruptFileError, SnapshotNotExistError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.maintenance.expire import ExpireConfig, current_tags, tagged_data_files
from lakehouse_engine.maintenance.references import (
    DataPaths,
    References,
    changelog_files,
    changelog_metadata,
    delete_files,
    delta_changes,
    metadata_references,
    tag_references,
)

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)


def expire_changelogs(table: FileStore, config: ExpireConfig | None = None) -> int:
    """Expire the long-lived changelogs past the `changelog.*` retention; returns how many went."""
    config = config or ExpireConfig.of(table)
    retain_max = config.changelog_retain_max or config.retain_max
    retain_min = config.changelog_retain_min or config.retain_min
    older_than = config.changelog_older_than_millis
    older_than = config.older_than_millis if older_than is None else older_than
    sm = table.snapshot_manager()
    latest = sm.latest_snapshot_id()
    if latest is None or sm.earliest_snapshot_id() is None:
        return 0
    latest_changelog = sm.latest_long_lived_changelog_id()
    earliest_changelog = sm.earliest_long_lived_changelog_id()
    if latest_changelog is None or earliest_changelog is None:
        return 0
    first_by_age = max(latest - retain_max + 1, earliest_changelog)
    end = latest - retain_min + 1
    consumed = table.consumer_manager().min_next_snapshot()
    if consumed is not None:
        end = min(end, consumed)
    end = min(end, earliest_changelog + config.max_deletes, latest_changelog)
    for cid in range(first_by_age, end + 1):
        try:
            committed = sm.long_lived_changelog(cid).time_millis
        except SnapshotNotExistError:
            continue
        if committed >= older_than:
            end = cid
            break
    return expire_changelogs_until(table, earliest_changelog, end)


def expire_changelogs_until(table: FileStore, begin: int, end: int) -> int:
    """Expire every long-lived changelog with an id in [begin, end) and the files only they read."""
    if end <= begin:
        return 0
    sm = table.snapshot_manager()
    expiring = []
    for cid in (i for i in sm.list_long_lived_changelog_ids() if i < end):
        with contextlib.suppress(SnapshotNotExistError):
            expiring.append(sm.long_lived_changelog(cid))
    if not expiring:
        return 0
    kept: Snapshot | None
    try:
        kept = sm.long_lived_changelog(end)
    except SnapshotNotExistError:
        kept = sm.get_snapshot_by_id(end)
    if kept is None:
        return 0  # a concurrent run moved on: nothing is known to stay, so nothing goes
    tags = current_tags(table)
    doomed = plan_changelog_expiry(table, expiring, kept, list(tags.values()))

    for c in expiring:
        with contextlib.suppress(FileNotFoundError):
            table.file_io.delete_file(table.path_factory.long_lived_changelog_path(c.id), quiet=False)
    sm.commit_long_lived_changelog_earliest_hint(end)
    late = [t for n, t in current_tags(table).items() if n not in tags or tags[n] != t]
    if late:
        doomed = doomed - tag_references(table, late)
    delete_files(table, doomed)
    return len(expiring)


def plan_changelog_expiry(table: FileStore, expiring: list[Snapshot], kept: Snapshot,
                          tags: list[Snapshot]) -> References:
    """The files to delete when the long-lived changelogs `expiring` go and `kept` (the changelog
    or snapshot right after them) stays (Paimon's ChangelogDeletion): their changelog files, the
    files their deltas deleted, and their manifests and lists that neither `kept` nor a tag
    names. Nothing a tag references goes; what cannot be read is left for orphan removal."""
    paths = DataPaths(table)
    data: set[str] = set()
    going = References()
    for c in expiring:
        try:
            data |= changelog_files(table, c, paths)
            if table.file_io.exists(table.path_factory.manifest_path(c.delta_manifest_list)):
                added, deleted = delta_changes(table, c, paths)
                data |= deleted - added
            going.update(changelog_metadata(table, c, True, existing_only=True))
        except CorruptFileError as exc:
            log.warning("table %s: expiring changelog %s: %s; files only it read are left for "
                        "remove_orphan_files", table.name, c.id, exc)
    data -= tagged_data_files(table, tags, expiring[0].id, kept.id, paths)
    keep = changelog_metadata(table, kept, True, existing_only=True)
    keep.update(metadata_references(table, tags))
    going = going - keep
    going.data_files = data
    return going
