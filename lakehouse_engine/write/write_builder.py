"""BatchWriteBuilder: pypaimon's entry point for a batch write (optionally an overwrite)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lakehouse_engine.commit import TableCommit
from lakehouse_engine.write.table_write import TableWrite

if TYPE_CHECKING:
    from lakehouse_engine.table import FileStoreTable


class BatchWriteBuilder:
    """Creates the TableWrite and TableCommit of one batch write; they share a commit user."""

    def __init__(self, table: FileStoreTable):
        self.table = table
        prefix = table.schema.core_options.raw.get("commit.user-prefix")
        self.commit_user = f"{prefix}_{uuid.uuid4()}" if prefix else str(uuid.uuid4())
        self.static_partition: dict[str, object] | None = None

    def overwrite(self, static_partition: Mapping[str, object] | None = None) -> BatchWriteBuilder:
        """Make the commit an OVERWRITE of `static_partition` (the whole table when empty or None)."""
        self.static_partition = dict(static_partition or {})
        return self

    def new_write(self, num_assigners: int = 1, assigner_id: int = 0) -> TableWrite:
        """A writer; dynamic-bucket tables written by n processes give each its assigner id."""
        return TableWrite(self.table, self.commit_user, num_assigners=num_assigners,
                          assigner_id=assigner_id, overwrite=self.static_partition is not None)

    def new_commit(self) -> TableCommit:
        return TableCommit(self.table, self.commit_user, self.static_partition)
