"""Compaction of one bucket's LSM tree: levels, the universal picker, the rewriter."""
