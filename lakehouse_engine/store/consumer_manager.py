"""Consumers: a streaming reader's cursor, `consumer/consumer-<id>` holding `{"nextSnapshot": N}`.

The file format and the manager's calls are Paimon's (ConsumerManager) and pypaimon 2.1.0's
(`consumer_manager()`): snapshot expiry never removes snapshot N or later while a consumer's next
snapshot is N, and `consumer.expiration-time` drops consumers whose file was not touched for that
long. Our streams also record `lastSnapshotTimeMillis`, the commit time of snapshot N - 1 as they
read it, so a stream restarted from the consumer sees that the table was rolled back and written
again past its position (Paimon 0.9's Consumer ignores unknown fields, pypaimon 2.1.0 reads only
`nextSnapshot`; both drop the field when they move the consumer).
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass

from lakehouse_engine.errors import CorruptFileError, InvalidOptionError, TableNotExistError
from lakehouse_engine.io import FileIO

CONSUMER_PREFIX = "consumer-"
# `FileIO.overwrite_atomic` writes `<name>.<32 hex>.tmp` next to the file it replaces.
_TEMP_SUFFIX = re.compile(r"\.[0-9a-f]{32}\.tmp$")
# The longest file name most file systems (and object stores' keys' last part) take.
_MAX_NAME_BYTES = 255
# Our field: the commit time of snapshot nextSnapshot - 1 when the consumer's stream read it.
_LAST_SNAPSHOT_MILLIS = "lastSnapshotTimeMillis"


@dataclass(frozen=True)
class Consumer:
    """Where a consumer reads next: the id of the first snapshot it has not consumed, and (when
    known) the commit time of the snapshot before it, as the consumer read it."""

    next_snapshot: int
    last_snapshot_millis: int | None = None

    def to_json(self) -> str:
        """The consumer file's text, as Paimon writes it (plus `lastSnapshotTimeMillis` when known)."""
        doc: dict[str, int] = {"nextSnapshot": self.next_snapshot}
        if self.last_snapshot_millis is not None:
            doc[_LAST_SNAPSHOT_MILLIS] = self.last_snapshot_millis
        return json.dumps(doc)

    @staticmethod
    def from_json(text: str, path: str = "consumer file") -> Consumer:
        """Parse a consumer file; CorruptFileError naming `path` when it is not one."""
        try:
            doc = json.loads(text)
            value = doc["nextSnapshot"]
        except (ValueError, TypeError, KeyError):
            raise CorruptFileError(f"{path} is not a consumer file (expected {{\"nextSnapshot\": N}}): "
                                   f"{text[:80]!r}") from None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            # Ids start at 1 (reset_consumer refuses less): a 0 is a flipped bit, not a position.
            raise CorruptFileError(f"{path}: nextSnapshot is {value!r}, not a snapshot id")
        millis = doc.get(_LAST_SNAPSHOT_MILLIS)
        if millis is not None and (isinstance(millis, bool) or not isinstance(millis, int) or millis < 0
                                   or value == 1):
            raise CorruptFileError(f"{path}: {_LAST_SNAPSHOT_MILLIS} is {millis!r}, not the commit time "
                                   f"of snapshot {value - 1}")
        return Consumer(value, millis)


def check_consumer_id(consumer_id: str) -> str:
    """`consumer_id` when it can name a consumer file (no path separators, not empty, not '.' or
    '..'); InvalidOptionError otherwise."""
    if (not isinstance(consumer_id, str) or not consumer_id or "/" in consumer_id or "\\" in consumer_id
            or consumer_id in (".", "..") or any(ord(c) < 0x20 or ord(c) == 0x7F for c in consumer_id)):
        raise InvalidOptionError(f"consumer id {consumer_id!r} is not valid: it names the file "
                                 f"consumer/consumer-<id>, so it must be non-empty, without path "
                                 f"separators or control characters, and not '.' or '..'")
    if _TEMP_SUFFIX.search(consumer_id):
        # Listing skips such names as half-written files: expiry would not see the consumer.
        raise InvalidOptionError(f"consumer id {consumer_id!r} is not valid: it ends like the temporary "
                                 f"file of an atomic write ('.<32 hex digits>.tmp'), which listing skips")
    size = len(f"{CONSUMER_PREFIX}{consumer_id}.{'0' * 32}.tmp".encode())
    if size > _MAX_NAME_BYTES:
        raise InvalidOptionError(f"consumer id {consumer_id[:40]!r}... is not valid: its file name (with the "
                                 f"temporary name of an atomic write) is {size} bytes, more than "
                                 f"{_MAX_NAME_BYTES}")
    return consumer_id


class ConsumerManager:
    """The consumer files of one table (or branch): read, reset, delete, list and expire them."""

    def __init__(self, file_io: FileIO, table_path: str, table_name: str = ""):
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")
        self.table_name = table_name or table_path

    @property
    def consumer_dir(self) -> str:
        return f"{self.table_path}/consumer"

    def consumer_path(self, consumer_id: str) -> str:
        return f"{self.consumer_dir}/{CONSUMER_PREFIX}{check_consumer_id(consumer_id)}"

    def consumer(self, consumer_id: str) -> Consumer | None:
        """The consumer `consumer_id`, None when there is no such consumer."""
        path = self.consumer_path(consumer_id)
        try:
            text = self.file_io.read_text(path)
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            raise CorruptFileError(f"consumer file {path} of table {self.table_name} is not UTF-8") from None
        return Consumer.from_json(text, f"consumer file {path} of table {self.table_name}")

    def modified_millis(self, consumer_id: str) -> int | None:
        """When consumer `consumer_id` was last written (epoch milliseconds, the file's time, as
        `consumer.expiration-time` judges it); None when there is no such consumer."""
        name = f"{CONSUMER_PREFIX}{check_consumer_id(consumer_id)}"
        for status in self.file_io.list_status(self.consumer_dir):
            if status.path.rstrip("/").rsplit("/", 1)[-1] == name and not status.is_dir:
                return status.mtime_millis
        return None

    def reset_consumer(self, consumer_id: str, consumer: Consumer | int) -> None:
        """Set consumer `consumer_id` to read snapshot `consumer` next (created when absent)."""
        if isinstance(consumer, int):
            consumer = Consumer(consumer)
        if consumer.next_snapshot < 1:
            raise InvalidOptionError(f"consumer {consumer_id!r} of table {self.table_name}: next snapshot "
                                     f"{consumer.next_snapshot} is not a snapshot id (ids start at 1)")
        if not self.file_io.exists(f"{self.table_path}/schema"):
            # A stream still running on a dropped branch (or table) would bring its directory
            # back with only a consumer in it: a branch listed that cannot be opened or created.
            raise TableNotExistError(f"cannot move consumer {consumer_id!r}: table {self.table_name} (at "
                                     f"{self.table_path}) no longer exists; its branch or the table was "
                                     f"dropped", name=self.table_name)
        self.file_io.overwrite_atomic(self.consumer_path(consumer_id), consumer.to_json().encode())

    def delete_consumer(self, consumer_id: str) -> None:
        """Remove consumer `consumer_id` (nothing happens when it does not exist)."""
        self.file_io.delete_file(self.consumer_path(consumer_id), quiet=True)

    def list_all_ids(self) -> list[str]:
        """Every consumer id, sorted."""
        ids = []
        for name in self.file_io.list_names(self.consumer_dir):
            if name.startswith(CONSUMER_PREFIX) and not _TEMP_SUFFIX.search(name):
                ids.append(name[len(CONSUMER_PREFIX):])
        return sorted(ids)

    def consumers(self) -> dict[str, int]:
        """Consumer id -> next snapshot, for every consumer."""
        out = {}
        for cid in self.list_all_ids():
            c = self.consumer(cid)
            if c is not None:
                out[cid] = c.next_snapshot
        return out

    def min_next_snapshot(self) -> int | None:
        """The smallest next snapshot of all consumers (None without consumers): snapshot expiry
        keeps this snapshot and every later one."""
        values = list(self.consumers().values())
        return min(values) if values else None

    def expire(self, expire_before: datetime.datetime | int) -> list[str]:
        """Delete the consumers whose file was last written before `expire_before` (a datetime,
        or epoch milliseconds); returns their ids."""
        if isinstance(expire_before, datetime.datetime):
            if expire_before.tzinfo is None:
                expire_before = expire_before.astimezone()
            cutoff = int(expire_before.timestamp() * 1000)
        else:
            cutoff = int(expire_before)
        gone = []
        for status in self.file_io.list_status(self.consumer_dir):
            name = status.path.rstrip("/").rsplit("/", 1)[-1]
            if not name.startswith(CONSUMER_PREFIX) or _TEMP_SUFFIX.search(name) or status.is_dir:
                continue
            if status.mtime_millis < cutoff:
                self.file_io.delete_file(f"{self.consumer_dir}/{name}", quiet=True)
                gone.append(name[len(CONSUMER_PREFIX):])
        return sorted(gone)

    def clear_consumers(self, including_pattern: str = ".*", excluding_pattern: str | None = None) -> list[str]:
        """Delete the consumers whose id matches `including_pattern` and not `excluding_pattern`
        (regular expressions matched from the start, as pypaimon); returns their ids."""
        try:
            including = re.compile(including_pattern)
            excluding = re.compile(excluding_pattern) if excluding_pattern else None
        except re.error as exc:
            raise InvalidOptionError(f"consumers of table {self.table_name}: {including_pattern!r} / "
                                     f"{excluding_pattern!r} is not a regular expression: {exc}") from None
        gone = []
        for cid in self.list_all_ids():
            if including.match(cid) and not (excluding is not None and excluding.match(cid)):
                self.delete_consumer(cid)
                gone.append(cid)
        return gone
