"""Finding and reading snapshots: LATEST/EARLIEST are hints only, the snapshot files are the truth."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable
from typing import Any

from lakehouse_engine.errors import CorruptFileError, SnapshotNotExistError
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.io import FileIO
from lakehouse_engine.path_factory import PathFactory

log = logging.getLogger(__name__)
_SNAPSHOT_RE = re.compile(r"^snapshot-(\d+)$")
_CHANGELOG_RE = re.compile(r"^changelog-(\d+)$")
LATEST = "LATEST"
EARLIEST = "EARLIEST"


class SnapshotManager:
    """Reads a table's snapshot directory; never trusts a hint file without checking it."""

    def __init__(self, file_io: Any, paths: PathFactory | None = None, table_name: str = ""):
        """`SnapshotManager(file_io, path_factory, table_name)`, or pypaimon's `SnapshotManager(table)`."""
        if paths is None:
            table = file_io  # pypaimon's form: anything with file_io, path_factory and name
            file_io, paths, table_name = table.file_io, table.path_factory, table.name
        self.file_io: FileIO = file_io
        self.paths: PathFactory = paths
        self.table_name = table_name

    # ---- pypaimon's names ----------------------------------------------------------------
    def get_latest_snapshot(self) -> Snapshot | None:
        """The newest snapshot, None when the table has none."""
        return self.latest_snapshot()

    def get_snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        """Snapshot `snapshot_id`, or None when it was never written or has expired."""
        try:
            return self.snapshot(snapshot_id)
        except SnapshotNotExistError:
            return None

    def try_get_earliest_snapshot(self) -> Snapshot | None:
        """The oldest retained snapshot, None when the table has none."""
        sid = self.earliest_snapshot_id()
        return None if sid is None else self.get_snapshot_by_id(sid)

    def list_snapshots(self) -> list[Snapshot]:
        """Every retained snapshot, oldest first."""
        out = []
        for sid in self.list_snapshot_ids():
            snapshot = self.get_snapshot_by_id(sid)
            if snapshot is not None:
                out.append(snapshot)
        return out

    def earlier_or_equal_time_mills(self, timestamp_millis: int) -> Snapshot | None:
        """The newest retained snapshot committed at or before `timestamp_millis` (epoch ms).

        Snapshot times grow with their ids, so this is a binary search over the retained ids.
        """
        ids = self.list_snapshot_ids()
        lo, hi, found = 0, len(ids) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            snapshot = self.get_snapshot_by_id(ids[mid])
            if snapshot is None:  # expired meanwhile: drop it and search again
                ids.pop(mid)
                hi -= 1
                continue
            if snapshot.time_millis <= timestamp_millis:
                found, lo = snapshot, mid + 1
            else:
                hi = mid - 1
        return found

    def snapshot_exists(self, snapshot_id: int) -> bool:
        return self.file_io.exists(self.paths.snapshot_path(snapshot_id))

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Read snapshot `snapshot_id`; SnapshotNotExistError when it was never written or expired."""
        path = self.paths.snapshot_path(snapshot_id)
        try:
            text = self.file_io.read_text(path)
        except FileNotFoundError:
            earliest = self.earliest_snapshot_id()
            why = f" (earliest retained is {earliest})" if earliest else ""
            raise SnapshotNotExistError(
                f"snapshot {snapshot_id} of table {self.table_name} doesn't exist{why}") from None
        except UnicodeDecodeError:
            raise CorruptFileError(f"snapshot file {path} is not UTF-8 JSON") from None
        return Snapshot.from_json(text, path)

    def list_snapshot_ids(self) -> list[int]:
        ids = []
        for name in self.file_io.list_names(self.paths.snapshot_dir):
            m = _SNAPSHOT_RE.match(name)
            if m:
                ids.append(int(m.group(1)))
        return sorted(ids)

    def _read_hint(self, name: str, directory: str | None = None) -> int | None:
        try:
            text = self.file_io.read_text(f"{directory or self.paths.snapshot_dir}/{name}").strip()
            return int(text) if text else None
        except (FileNotFoundError, ValueError, UnicodeDecodeError, OSError):
            return None

    def latest_snapshot_id(self) -> int | None:
        """The newest snapshot id: the LATEST hint, checked and walked forward, or a directory listing."""
        hint = self._read_hint(LATEST)
        if hint is not None and hint > 0 and self.snapshot_exists(hint):
            nxt = hint + 1
            while self.snapshot_exists(nxt):
                nxt += 1
            # (A walk that raced an expiry may stop at a gap it opened: a commit on such a stale
            # id is caught after its put, see `reused_expired_id`.)
            return nxt - 1
        ids = self.list_snapshot_ids()
        return ids[-1] if ids else None

    def reused_expired_id(self, snapshot_id: int, put_millis: int) -> bool:
        """True when the snapshot just put at `snapshot_id` (the put began at `put_millis`) took
        an id a concurrent expiry had freed rather than the next one.

        Put-if-absent alone cannot tell: a committer whose base snapshot N-1 expired while it
        wrote its manifests finds snapshot-N absent too. Checked only when N-1 is gone (rare):
        the lowest snapshot above N then shows whether it was committed before the put began
        (a chain that had moved on; the new snapshot is outside it) or after (a successor that
        read the new snapshot, so it was stamped after the put).
        """
        if snapshot_id <= 1 or self.snapshot_exists(snapshot_id - 1):
            return False
        # The expiry that freed the id may still be sweeping the snapshots just above it: one
        # listed here may be gone when read. Skip those (never take a vanished successor as "no
        # chain above"); expiry never deletes the latest snapshot, so one above stays readable.
        for _ in range(3):
            above = [i for i in self.list_snapshot_ids() if i > snapshot_id]
            if not above:
                return False
            for sid in above:
                try:
                    successor = self.snapshot(sid)
                except SnapshotNotExistError:
                    continue
                if sid > snapshot_id + 1 and self.snapshot_exists(snapshot_id):
                    # The snapshots between ours and `sid` are gone while ours is still there.
                    # Expiry deletes oldest first, so they went before ours was put: an expiry
                    # sweeping past its listing, which ours landed behind. (Checking times here
                    # would take `sid`, committed after the put began, for a successor of ours.)
                    return True
                return successor.time_millis < put_millis
        # Every snapshot listed above vanished, three times over: the chain is far beyond this id.
        return True

    def earliest_snapshot_id(self) -> int | None:
        """The oldest retained snapshot id: the EARLIEST hint when it checks out, else a listing."""
        hint = self._read_hint(EARLIEST)
        if hint is not None and hint > 0 and self.snapshot_exists(hint) and not self.snapshot_exists(hint - 1):
            return hint
        if hint is None and self.snapshot_exists(1):
            # Ids start at 1, so before the first expiry writes the hint, snapshot-1 is the earliest:
            # one lookup instead of listing the snapshot directory on every commit.
            return 1
        ids = self.list_snapshot_ids()
        return ids[0] if ids else None

    def latest_snapshot(self) -> Snapshot | None:
        sid = self.latest_snapshot_id()
        return None if sid is None else self.snapshot(sid)

    def commit_latest_hint(self, snapshot_id: int) -> None:
        """Move the LATEST hint forward (never backward); a failure is logged, never raised: the
        snapshot has landed and readers verify the hint anyway."""
        try:
            current = self._read_hint(LATEST)
            if current is None or current < snapshot_id:
                self.file_io.overwrite_atomic(f"{self.paths.snapshot_dir}/{LATEST}", str(snapshot_id).encode())
        except OSError as exc:
            log.warning("table %s: snapshot %s is committed, but moving the LATEST hint failed (%s); "
                        "readers find the snapshot without it", self.table_name, snapshot_id, exc)

    def commit_earliest_hint(self, snapshot_id: int) -> None:
        with contextlib.suppress(OSError):
            self.file_io.overwrite_atomic(f"{self.paths.snapshot_dir}/{EARLIEST}", str(snapshot_id).encode())

    # ---- long-lived changelogs (`changelog/`): a snapshot's changelog kept past the snapshot ----
    def long_lived_changelog_exists(self, snapshot_id: int) -> bool:
        return self.file_io.exists(self.paths.long_lived_changelog_path(snapshot_id))

    def long_lived_changelog(self, snapshot_id: int) -> Snapshot:
        """Read `changelog/changelog-<id>` (the expired snapshot's own JSON); SnapshotNotExistError
        when there is none."""
        path = self.paths.long_lived_changelog_path(snapshot_id)
        try:
            text = self.file_io.read_text(path)
        except FileNotFoundError:
            raise SnapshotNotExistError(
                f"changelog {snapshot_id} of table {self.table_name} doesn't exist") from None
        except UnicodeDecodeError:
            raise CorruptFileError(f"changelog file {path} is not UTF-8 JSON") from None
        return Snapshot.from_json(text, path)

    def list_long_lived_changelog_ids(self) -> list[int]:
        ids = []
        for name in self.file_io.list_names(self.paths.changelog_dir):
            m = _CHANGELOG_RE.match(name)
            if m:
                ids.append(int(m.group(1)))
        return sorted(ids)

    def earliest_long_lived_changelog_id(self) -> int | None:
        """The oldest long-lived changelog: the `changelog/EARLIEST` hint when it checks out, else
        a listing (None when there is none)."""
        hint = self._read_hint(EARLIEST, self.paths.changelog_dir)
        if (hint is not None and self.long_lived_changelog_exists(hint)
                and not self.long_lived_changelog_exists(hint - 1)):
            return hint
        ids = self.list_long_lived_changelog_ids()
        return ids[0] if ids else None

    def latest_long_lived_changelog_id(self) -> int | None:
        """The newest long-lived changelog (None when there is none)."""
        hint = self._read_hint(LATEST, self.paths.changelog_dir)
        if (hint is not None and self.long_lived_changelog_exists(hint)
                and not self.long_lived_changelog_exists(hint + 1)):
            return hint
        ids = self.list_long_lived_changelog_ids()
        return ids[-1] if ids else None

    def commit_long_lived_changelog(self, snapshot: Snapshot) -> None:
        """Write `snapshot` as `changelog/changelog-<id>` and move `changelog/LATEST` (Paimon's
        commitChangelog then commitLongLivedChangelogLatestHint); an existing file is kept."""
        self.file_io.try_put_if_absent(self.paths.long_lived_changelog_path(snapshot.id),
                                       snapshot.to_json().encode())
        with contextlib.suppress(OSError):
            self.file_io.overwrite_atomic(f"{self.paths.changelog_dir}/{LATEST}", str(snapshot.id).encode())

    def commit_long_lived_changelog_earliest_hint(self, snapshot_id: int) -> None:
        with contextlib.suppress(OSError):
            self.file_io.overwrite_atomic(f"{self.paths.changelog_dir}/{EARLIEST}", str(snapshot_id).encode())

    def delete_long_lived_changelogs(self, ids: Iterable[int], quiet: bool = True) -> None:
        """Delete the long-lived changelogs `ids`, newest first (a reader walking back never meets a
        gap below one still there), then point `changelog/LATEST` at the newest left, or drop both
        hints when none is (hints only: readers check them). `quiet`: a failed delete is ignored."""
        newest_first = sorted(ids, reverse=True)
        for cid in newest_first:
            self.file_io.delete_file(self.paths.long_lived_changelog_path(cid), quiet=quiet)
        if not newest_first:
            return
        with contextlib.suppress(OSError):
            remaining = self.list_long_lived_changelog_ids()
            if remaining:
                self.file_io.overwrite_atomic(f"{self.paths.changelog_dir}/{LATEST}", str(remaining[-1]).encode())
            else:
                for hint in (LATEST, EARLIEST):
                    self.file_io.delete_file(f"{self.paths.changelog_dir}/{hint}")

    def long_lived_changelog_at_or_before(self, timestamp_millis: int) -> Snapshot | None:
        """The newest long-lived changelog committed at or before `timestamp_millis` (a binary
        search over the changelog ids, as over the snapshots)."""
        ids = self.list_long_lived_changelog_ids()
        lo, hi, found = 0, len(ids) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            try:
                changelog = self.long_lived_changelog(ids[mid])
            except SnapshotNotExistError:  # expired meanwhile: drop it and search again
                ids.pop(mid)
                hi -= 1
                continue
            if changelog.time_millis <= timestamp_millis:
                found, lo = changelog, mid + 1
            else:
                hi = mid - 1
        return found

    def earliest_readable_id(self) -> int | None:
        """The oldest snapshot whose changes can still be read: the earliest long-lived changelog,
        else the earliest snapshot (Paimon's earliest id of a decoupled changelog)."""
        earliest = self.earliest_long_lived_changelog_id()
        return earliest if earliest is not None else self.earliest_snapshot_id()

    def snapshot_or_changelog(self, snapshot_id: int) -> Snapshot | None:
        """Snapshot `snapshot_id`, or its long-lived changelog once the snapshot has expired (Paimon's
        NextSnapshotFetcher); None when neither exists. The changelog directory is only looked at
        for an id below the earliest snapshot, so polling for a snapshot not yet committed costs
        one lookup."""
        snapshot = self.get_snapshot_by_id(snapshot_id)
        if snapshot is not None:
            return snapshot
        earliest = self.earliest_snapshot_id()
        if earliest is None or earliest <= snapshot_id:
            return None
        try:
            return self.long_lived_changelog(snapshot_id)
        except SnapshotNotExistError:
            return None
