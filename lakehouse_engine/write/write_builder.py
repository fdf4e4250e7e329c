"""BatchWriteBuilder and StreamWriteBuilder: pypaimon's entry points for writes and their commits."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from lakehouse_engine.options import COMMIT_USER_PREFIX
from lakehouse_engine.write.commit_message import CommitMessage
from lakehouse_engine.write.commit_retry import filter_committed
from lakehouse_engine.write.table_commit import BATCH_COMMIT_IDENTIFIER, TableCommit
from lakehouse_engine.write.table_write import TableWrite
from lakehouse_engine.write.write_roles import NEW_DATA, OVERWRITE_DATA, assigner_of

if TYPE_CHECKING:
    from lakehouse_engine.store.file_store import FileStore


class BatchWriteBuilder:
    """Creates the TableWrite and TableCommit of one batch write; they share a commit user."""

    def __init__(self, table: FileStore, expire: Callable[[], None] | None = None):
        """Writes to `table`'s store; `expire` runs after each commit that landed (the facade
        passes its snapshot expiry)."""
        self.table = table
        self.expire = expire
        prefix = table.options.get(COMMIT_USER_PREFIX)
        self.commit_user = f"{prefix}_{uuid.uuid4()}" if prefix else str(uuid.uuid4())
        self.static_partition: dict[str, object] | None = None
        self._restored = False

    def with_commit_user(self, commit_user: str) -> BatchWriteBuilder:
        """Commit as `commit_user` (one that committed before, to retry its commit from a new
        process: a commit of this user that already landed is recognised and not repeated)."""
        self.commit_user = commit_user
        self._restored = True
        return self

    def overwrite(self, static_partition: Mapping[str, object] | None = None) -> BatchWriteBuilder:
        """Make the commit an OVERWRITE of `static_partition` (the whole table when empty or None)."""
        self.static_partition = dict(static_partition or {})
        return self

    def new_write(self, num_assigners: int = 1, assigner_id: int = 0) -> TableWrite:
        """A writer; dynamic-bucket tables written by n processes give each its assigner id."""
        return TableWrite(self.table, self.commit_user, assigner_of(assigner_id, num_assigners),
                          NEW_DATA if self.static_partition is None else OVERWRITE_DATA)

    def new_commit(self) -> TableCommit:
        """The committer: commits once (a retry after an error is recognised, see `commit`)."""
        return TableCommit(self.table, self.commit_user, self.static_partition, restored=self._restored,
                           expire=self.expire)


class StreamWriteBuilder(BatchWriteBuilder):
    """Creates the TableWrite and StreamTableCommit of a stream of commits, each with its own
    increasing commit identifier (pypaimon's StreamWriteBuilder)."""

    def overwrite(self, static_partition: Mapping[str, object] | None = None) -> BatchWriteBuilder:
        raise NotImplementedError("a stream write appends; use new_batch_write_builder().overwrite()")

    def with_commit_user(self, commit_user: str) -> StreamWriteBuilder:
        """Commit as `commit_user`, to go on from the commits it made before (as a restored job)."""
        super().with_commit_user(commit_user)
        return self

    def new_commit(self) -> StreamTableCommit:
        """A committer for many commits, each `commit(messages, commit_identifier)`."""
        return StreamTableCommit(self.table, self.commit_user, restored=self._restored,
                                 expire=self.expire)


class StreamTableCommit(TableCommit):
    """Commits rounds of messages, each under a commit identifier that increases (a checkpoint id);
    a round whose identifier already landed for this commit user is skipped (exactly once)."""

    def __init__(self, table: FileStore, commit_user: str, *, restored: bool = False,
                 expire: Callable[[], None] | None = None):
        """A reusable committer for `commit_user`."""
        super().__init__(table, commit_user, None, restored=restored, once=False, expire=expire)

    def commit(self, messages: Sequence[CommitMessage],
               commit_identifier: int = BATCH_COMMIT_IDENTIFIER) -> list[int]:
        """Commit one round; returns the snapshots it landed in (also when it had landed before)."""
        return super().commit(messages, commit_identifier)

    def filter_committed(self, commit_identifiers: Iterable[int]) -> set[int]:
        """The identifiers not committed yet by this commit user (Paimon's filterCommitted)."""
        return filter_committed(self.table, self.commit_user, commit_identifiers)
