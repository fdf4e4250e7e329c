"""Tags: a snapshot kept under a name, stored as Paimon stores it (`tag/tag-<name>`, the snapshot's JSON).

A tag keeps its snapshot readable after the snapshot itself expires: expiry never deletes a file a
tag references, rollback can return to a tag, and deleting a tag whose snapshot has expired deletes
the files only that tag kept.
"""

from __future__ import annotations

import datetime
import logging
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from lakehouse_engine.errors import CorruptFileError, InvalidOptionError, SnapshotNotExistError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.maintenance.references import (
    DataPaths,
    References,
    delete_files,
    long_lived_changelog_references,
    long_lived_changelogs,
    snapshot_references,
    tag_references,
)
from lakehouse_engine.options import parse_duration_ms
from lakehouse_engine.store.tag_files import (
    TAG_ONLY_FIELDS,
    TAG_PREFIX,
    InvalidTagNameError,
    TagAlreadyExistError,
    TagAlreadyExistException,
    TagNotExistError,
    TagNotExistException,
    as_snapshot,
    list_tags,
    read_tag,
    tag_path,
    tag_snapshot,
    validate_tag_name,
)

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

log = logging.getLogger(__name__)

__all__ = [
    "TAG_ONLY_FIELDS", "TAG_PREFIX", "InvalidTagNameError", "TagAlreadyExistError", "TagAlreadyExistException",
    "TagNotExistError", "TagNotExistException", "as_snapshot", "list_tags", "read_tag", "tag_path", "tag_snapshot",
    "validate_tag_name", "create_tag", "delete_tag", "get_tag", "rename_tag", "replace_tag", "TagManager",
]


def create_tag(table: FileStore, name: str, snapshot_id: int | None = None, *,
               ignore_if_exists: bool = False, time_retained: str | None = None) -> None:
    """Keep snapshot `snapshot_id` (the latest when None) under `name`.

    `ignore_if_exists`: an existing tag of that name is left as it is (pypaimon's flag).
    `time_retained` (a Paimon duration such as `1 d` or `12h`): the tag file also records when it
    was made and how long it is kept (`tagCreateTime`, `tagTimeRetained`, as Java Paimon writes).

    Raises:
        InvalidTagNameError: the name cannot name a tag.
        InvalidOptionError: `time_retained` is not a duration.
        SnapshotNotExistError: the snapshot does not exist (or the table has none).
        TagAlreadyExistError: a tag of that name exists (and `ignore_if_exists` is False).
    """
    path = tag_path(table, name)
    if time_retained is not None:
        _retained_seconds(time_retained)  # a bad duration fails before anything else
    if ignore_if_exists and table.file_io.exists(path):
        return
    snapshot = _snapshot_to_tag(table, snapshot_id)
    content = tag_json(snapshot, time_retained)
    if not table.file_io.try_put_if_absent(path, content):
        if ignore_if_exists:
            return
        existing = read_tag(table, path)
        held = f" (it keeps snapshot {existing.id})" if existing is not None else ""
        raise TagAlreadyExistError(
            f"tag {name!r} of table {table.name} already exists{held}; delete it first or "
            f"choose another name", name)
    _check_still_there(table, name, snapshot, path)


def _snapshot_to_tag(table: FileStore, snapshot_id: int | None) -> Snapshot:
    snapshots = table.snapshot_manager()
    if snapshot_id is None:
        snapshot = snapshots.latest_snapshot()
        if snapshot is None:
            raise SnapshotNotExistError(
                f"table {table.name} has no snapshot to tag yet: commit something first")
        return snapshot
    return snapshots.snapshot(snapshot_id)


def _check_still_there(table: FileStore, name: str, snapshot: Snapshot, path: str) -> None:
    # Expiry deletes a snapshot file first and reads the tags afterwards (see expire.py). If the
    # snapshot is still there now, any expiry of it will see this tag and keep its files; if it
    # is gone, an expiry may already be deleting them, so the tag would keep nothing.
    if not table.snapshot_manager().snapshot_exists(snapshot.id):
        table.file_io.delete_file(path)
        raise SnapshotNotExistError(
            f"snapshot {snapshot.id} of table {table.name} expired while tag {name!r} was being "
            f"created; nothing was tagged")


def tag_json(snapshot: Snapshot, time_retained: str | None) -> bytes:
    """A tag file's bytes: the snapshot's JSON, plus Paimon's tag-only fields when it has a
    retention (`tagCreateTime` as a LocalDateTime array, `tagTimeRetained` in seconds)."""
    if time_retained is None:
        return snapshot.to_json().encode("utf-8")
    retained = _retained_seconds(time_retained)
    now = datetime.datetime.now()
    created = [now.year, now.month, now.day, now.hour, now.minute, now.second, now.microsecond * 1000]
    extra = dict(snapshot.extra, tagCreateTime=created, tagTimeRetained=retained)
    return replace(snapshot, extra=extra).to_json().encode("utf-8")


# Java's TimeUtils units finer than a millisecond, in nanoseconds (the option parser stops at ms).
_SUB_MILLI_UNITS_NS = {
    "ns": 1, "nano": 1, "nanosecond": 1, "nanoseconds": 1,
    "µs": 1_000, "micro": 1_000, "microsecond": 1_000, "microseconds": 1_000,
}
_SUB_MILLI_RE = re.compile(r"^\s*(\d+)\s*(\S+?)\s*$")


def _retained_seconds(time_retained: str) -> float:
    """A tag's retention in seconds. Microseconds are kept (pypaimon writes `500micro` as 0.0005);
    a retention finer than a microsecond is refused, as pypaimon refuses it, rather than written
    as a tag that expires at once."""
    text = str(time_retained)
    m = _SUB_MILLI_RE.match(text)
    if m and m.group(2).lower() in _SUB_MILLI_UNITS_NS:
        nanos = int(m.group(1)) * _SUB_MILLI_UNITS_NS[m.group(2).lower()]
        if nanos % 1_000:
            raise InvalidOptionError(
                f"time_retained {time_retained!r} of a tag is finer than a microsecond; give whole "
                f"microseconds or a coarser unit")
        return nanos / 1_000_000_000
    try:
        return parse_duration_ms(text) / 1000
    except ValueError as e:
        raise InvalidOptionError(f"time_retained {time_retained!r} of a tag: {e}") from None


def get_tag(table: FileStore, name: str) -> Snapshot:
    """Tag `name` as stored, with its tag-only fields in `extra` (TagNotExistError when missing)."""
    tag = read_tag(table, tag_path(table, name))
    if tag is None:
        tag_snapshot(table, name)  # raises, naming the known tags
    assert tag is not None
    return tag


def replace_tag(table: FileStore, name: str, snapshot_id: int | None = None,
                time_retained: str | None = None) -> None:
    """Point the existing tag `name` at snapshot `snapshot_id` (the latest when None).

    Files only the old target kept are left to `remove_orphan_files` (as Paimon does).

    Raises:
        TagNotExistError: there is no tag `name`.
        SnapshotNotExistError: the snapshot does not exist.
    """
    path = tag_path(table, name)
    tag_snapshot(table, name)
    old = table.file_io.read_bytes(path)
    snapshot = _snapshot_to_tag(table, snapshot_id)
    table.file_io.overwrite_atomic(path, tag_json(snapshot, time_retained))
    if not table.snapshot_manager().snapshot_exists(snapshot.id):
        # Expired meanwhile (see _check_still_there): the tag keeps what it kept before.
        table.file_io.overwrite_atomic(path, old)
        raise SnapshotNotExistError(
            f"snapshot {snapshot.id} of table {table.name} expired while tag {name!r} was being "
            f"replaced; the tag is unchanged")


def rename_tag(table: FileStore, old_name: str, new_name: str) -> None:
    """Rename tag `old_name` to `new_name`; the new file is complete before the old one goes.

    Raises:
        InvalidTagNameError: either name cannot name a tag.
        TagNotExistError: there is no tag `old_name`.
        TagAlreadyExistError: a tag `new_name` exists.
    """
    new_path = tag_path(table, new_name)
    old_path = tag_path(table, old_name)
    tag = read_tag(table, old_path)
    if tag is None:
        tag_snapshot(table, old_name)  # raises
    assert tag is not None
    if not table.file_io.try_put_if_absent(new_path, tag.to_json().encode("utf-8")):
        raise TagAlreadyExistError(
            f"cannot rename tag {old_name!r} of table {table.name} to {new_name!r}: a tag of "
            f"that name already exists", new_name)
    table.file_io.delete_file(old_path, quiet=False)


def delete_tag(table: FileStore, name: str) -> None:
    """Delete tag `name`, and the files only it kept when its snapshot has expired (as Paimon does).

    The tag file is deleted before those files: if anything fails in between, what is left are
    orphan files that `remove_orphan_files` deletes.
    """
    tag = tag_snapshot(table, name)
    try:
        doomed = _files_only_tag_keeps(table, name, tag)
    except CorruptFileError as exc:
        # The tag goes anyway; what it kept is left for orphan removal to judge.
        log.warning("table %s: cannot tell which files only tag %r kept (%s); deleting the tag "
                    "and leaving its files to remove_orphan_files", table.name, name, exc)
        doomed = None
    table.file_io.delete_file(tag_path(table, name), quiet=False)
    if doomed is not None:
        delete_files(table, doomed)


def _files_only_tag_keeps(table: FileStore, name: str, tag: Snapshot) -> References | None:
    """Files tag `name` references that no retained snapshot and no other tag does (None: keep all)."""
    snapshots = table.snapshot_manager()
    ids = snapshots.list_snapshot_ids()  # not the EARLIEST hint: every snapshot counts here
    earliest_id = ids[0] if ids else None
    if earliest_id is None or tag.id >= earliest_id:
        # Its snapshot is retained (and references every file the tag does), or the history is
        # not the plain chain this cleanup relies on: leave any leftovers to orphan removal.
        return None
    # The tag is older than every retained snapshot. A file it shares with any of them is live
    # in the earliest one too (a deleted file never comes back), so that snapshot and the other
    # tags are everything to keep.
    paths = DataPaths(table)
    keep = snapshot_references(table, [snapshots.snapshot(earliest_id)], paths)
    others = [t for n, t in list_tags(table).items() if n != name]
    keep = keep | tag_references(table, others, paths)
    # What the long-lived changelogs read stays too (a tag of an expired snapshot shares its
    # changelog files and manifests with that snapshot's changelog).
    keep.update(long_lived_changelog_references(table, long_lived_changelogs(table), paths))
    return tag_references(table, [tag], paths) - keep


@dataclass(frozen=True)
class GetTagResponse:
    """pypaimon's `GetTagResponse`: a tag's name, its snapshot, and when it was made and for how
    long it is kept (`tag_create_time` in epoch ms, `tag_time_retained` as an ISO-8601 duration;
    both None for a tag made without a retention)."""

    tag_name: str
    snapshot: Snapshot
    tag_create_time: int | None = None
    tag_time_retained: str | None = None


def get_tag_response(table: FileStore, name: str) -> GetTagResponse:
    tag = get_tag(table, name)
    created, retained = tag.extra.get("tagCreateTime"), tag.extra.get("tagTimeRetained")
    create_ms = None
    if isinstance(created, list) and len(created) >= 5:
        parts = [int(v) for v in created] + [0] * (7 - len(created))
        y, mo, d, h, mi, sec, nanos = parts[:7]
        local = datetime.datetime(y, mo, d, h, mi, sec, nanos // 1000)
        create_ms = int(local.timestamp() * 1000)  # a LocalDateTime, read in this host's zone
    return GetTagResponse(name, as_snapshot(tag), create_ms,
                          None if retained is None else iso8601_duration(float(retained)))


def iso8601_duration(seconds: float) -> str:
    """A duration as Java's `Duration.toString()` writes it (`PT24H`, `PT30M`, `PT1.5S`)."""
    if seconds <= 0:
        return "PT0S"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = "PT"
    if hours:
        out += f"{int(hours)}H"
    if minutes:
        out += f"{int(minutes)}M"
    if secs:
        out += f"{secs:g}S"
    return out


class TagManager:
    """pypaimon's `TagManager` of one table: the same calls, on this module's functions."""

    def __init__(self, table: FileStore):
        self.table = table

    def tag_directory(self) -> str:
        return self.table.path_factory.tag_dir

    def tag_path(self, tag_name: str) -> str:
        return tag_path(self.table, tag_name)

    def tag_exists(self, tag_name: str) -> bool:
        return self.table.file_io.exists(tag_path(self.table, tag_name))

    def get(self, tag_name: str) -> Snapshot | None:
        """The tag as stored (tag-only fields in `extra`), or None when there is none."""
        return read_tag(self.table, tag_path(self.table, tag_name))

    def get_or_throw(self, tag_name: str) -> Snapshot:
        return get_tag(self.table, tag_name)

    def list_tags(self) -> list[str]:
        return sorted(list_tags(self.table))

    def create_tag(self, snapshot: Snapshot, tag_name: str, ignore_if_exists: bool = False,
                   time_retained: str | None = None) -> None:
        create_tag(self.table, tag_name, snapshot.id, ignore_if_exists=ignore_if_exists,
                   time_retained=time_retained)

    def replace_tag(self, snapshot: Snapshot, tag_name: str, time_retained: str | None = None) -> None:
        replace_tag(self.table, tag_name, snapshot.id, time_retained)

    def delete_tag(self, tag_name: str) -> bool:
        try:
            delete_tag(self.table, tag_name)
        except TagNotExistError:
            return False
        return True

    def rename_tag(self, old_name: str, new_name: str) -> None:
        rename_tag(self.table, old_name, new_name)
