"""Compaction: Paimon's universal compaction for primary-key buckets, and append-table compaction."""
