"""Bucket assignment: dynamic buckets (a hash index), postpone buckets and cross-partition upsert."""
