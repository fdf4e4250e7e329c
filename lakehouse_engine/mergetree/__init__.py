"""The per-bucket LSM tree: sorted runs, the merge function and data files."""
