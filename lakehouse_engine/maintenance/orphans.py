"""Orphan files: files under a table's directory that no snapshot and no tag references, as Paimon's
`remove_orphan_files` finds them.

Orphans come from writes that were never committed (a failed or killed writer, a lost commit
race), from interrupted expiries and rollbacks, and from temporary files of interrupted atomic
writes. Only files older than a cutoff are touched (default: one day), so the files of a write
still in progress are safe. Candidates are data files in `bucket-*` directories, files in
`manifest/` and `index/`, and temporary files anywhere; schema, snapshot, tag and hint files,
and anything this engine does not recognise, are never deleted.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING

from lakehouse_engine.maintenance.references import branch_stores, used_paths

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore

DEFAULT_OLDER_THAN_MS = 24 * 60 * 60 * 1000
#: `.<name>.<uuid>.tmp` (put-if-absent, ours and Paimon's) and `<name>.<uuid>.tmp` (hint files).
_TEMP_FILE = re.compile(r"^\.?[^/]+\.[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                        r"[0-9a-fA-F]{12}\.tmp$")
_METADATA_PREFIXES = ("manifest-", "index-manifest-")


def remove_orphan_files(table: FileStore, older_than: int | None = None,
                        dry_run: bool = False) -> list[str]:
    """Delete (or with `dry_run`, only list) orphan files last modified before `older_than`.

    `older_than` is epoch milliseconds, default one day ago. Returns the orphans' paths, sorted.
    What the snapshots and tags reference is read first and strictly: a file that cannot be
    decoded raises CorruptFileError and nothing is deleted.
    """
    cutoff = older_than if older_than is not None else int(time.time() * 1000) - DEFAULT_OLDER_THAN_MS
    used = {_normal(p) for p in used_files(table)}
    root = _normal(table.path).rstrip("/")
    orphans = []
    for status in table.file_io.list_status(root, recursive=True):
        if status.is_dir or status.mtime_millis >= cutoff:
            continue
        path = _normal(status.path)
        if not path.startswith(root + "/") or path in used:
            continue
        if is_orphan_candidate(path[len(root) + 1:]):
            orphans.append(status.path)
    orphans.sort()
    if not dry_run:
        for path in orphans:
            table.file_io.delete_file(path)
    return orphans


def used_files(table: FileStore) -> set[str]:
    """Paths of every file some snapshot or tag of any branch of the table references (branches
    share the table's data and manifest files)."""
    used: set[str] = set()
    for store in branch_stores(table):
        used |= used_paths(store)
    return used


def is_orphan_candidate(relative: str) -> bool:
    """Whether a file at this path inside the table directory may be deleted when unreferenced."""
    parts = relative.split("/")
    name = parts[-1]
    if _TEMP_FILE.match(name):
        return True
    if len(parts) == 2 and parts[0] == "manifest":
        return name.startswith(_METADATA_PREFIXES)
    if len(parts) == 2 and parts[0] == "index":
        return True
    # Data files: [k=v/...]bucket-<n>/<file>; never under metadata directories.
    return (len(parts) >= 2 and parts[-2].startswith("bucket-")
            and all("=" in p for p in parts[:-2]))


def _normal(path: str) -> str:
    return os.path.normpath(path) if path.startswith("/") else path
