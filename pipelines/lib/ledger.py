"""The ingestion ledger: which landing files were ingested, and which staged rows are committed.

One JSON file per table (`<pipeline dir>/ledger/<table>.json`), changed under an exclusive file lock
and replaced atomically. It records each ingested file, and per staged batch and day its rows,
the commit user about to commit them and the snapshot that did. A file is ingested once; a write
that died after its commit but before the ledger said so is found by its commit user.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.lib.events import EVOLUTION_COLUMNS
from pipelines.lib.landing import LandingFile

#: A staged part: (batch, day, rows).
Pending = tuple[str, str, int]


@dataclass
class LedgerState:
    """Ingested files, and per staged batch and day: rows and the snapshot that committed them."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)

    def new_files(self, files: Iterable[LandingFile]) -> list[LandingFile]:
        return [f for f in files if f.relpath not in self.files]

    def pending(self, dts: Iterable[str]) -> list[Pending]:
        """(batch, dt, rows) staged for these days and not committed yet, oldest batch first."""
        wanted = set(dts)
        out = []
        for batch, entry in sorted(self.batches.items(), key=lambda kv: kv[1]["created_at"]):
            for dt, part in sorted(entry["partitions"].items()):
                if dt in wanted and part.get("snapshot_id") is None and part["rows"] > 0:
                    out.append((batch, dt, int(part["rows"])))
        return out

    def columns_of(self, pending: Iterable[Pending]) -> list[str]:
        """The evolution columns the staged batches of these rows carry (values in some row)."""
        carried = {c for batch, _, _ in pending for c in self.batches[batch].get("columns", [])}
        return [c for c in EVOLUTION_COLUMNS if c in carried]

    def mark_committing(self, pending: Iterable[Pending], commit_user: str) -> None:
        """Record the commit user about to commit these rows: a run that dies before it records
        the snapshot leaves it, and the next run asks the table whether that commit landed."""
        for batch, dt, _ in pending:
            self.batches[batch]["partitions"][dt]["commit_user"] = commit_user

    def committing_users(self, pending: Iterable[Pending]) -> dict[str, list[Pending]]:
        """Commit users recorded by earlier runs for these pending rows, with the rows of each."""
        out: dict[str, list[Pending]] = {}
        for entry in pending:
            user = self.batches[entry[0]]["partitions"][entry[1]].get("commit_user")
            if user is not None:
                out.setdefault(user, []).append(entry)
        return out

    def mark_written(self, pending: Iterable[Pending], snapshot_id: int) -> list[str]:
        """Record the snapshot that committed these rows; returns the batches now fully written."""
        batches = set()
        for batch, dt, _ in pending:
            self.batches[batch]["partitions"][dt]["snapshot_id"] = snapshot_id
            batches.add(batch)
        return sorted(b for b in batches if all(
            p.get("snapshot_id") is not None or p["rows"] == 0 for p in self.batches[b]["partitions"].values()))


class Ledger:
    """The ingestion ledger: one JSON file, changed under an exclusive lock and replaced atomically."""

    def __init__(self, path: Path):
        self.path = path

    def read(self) -> LedgerState:
        if not self.path.exists():
            return LedgerState()
        data = json.loads(self.path.read_text())
        return LedgerState(files=data.get("files", {}), batches=data.get("batches", {}))

    @contextmanager
    def update(self) -> Iterator[LedgerState]:
        """The state to change; saved when the block ends without an error. The lock is held
        throughout, so two runs never ingest or commit the same files."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{self.path}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self.read()
            yield state
            self.save(state)

    def save(self, state: LedgerState) -> None:
        """Replace the ledger with `state` atomically (inside `update`, which holds the lock)."""
        payload = json.dumps({"files": state.files, "batches": state.batches}, indent=1, sort_keys=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        with os.fdopen(fd, "w") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
