"""Writing: TableWrite turns Arrow batches into data files and CommitMessages."""
