"""Snapshot expiry (placeholder until the lifecycle lands: expiry after commit does nothing yet)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakehouse_engine.table import FileStoreTable


def expire_after_commit(table: FileStoreTable) -> None:
    """Expire snapshots beyond the table's retention options after a commit."""
