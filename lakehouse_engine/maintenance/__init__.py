"""Snapshot lifecycle: expiry, tags, rollback and orphan-file removal."""
