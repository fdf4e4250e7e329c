"""Spark for the engine: distributed writes and compaction, and the `lakehouse` data source.

The only package of the engine that imports pyspark; everything it runs on executors is the
engine itself (TableWrite, compaction, TableRead), re-opened from the warehouse in each task.
`write` handles every bucket mode (fixed, bucket-unaware append, dynamic, cross-partition
upsert, postpone); `compact` compacts all buckets, some partitions or exactly the buckets named;
`read` hands the splits that need no merge to Spark's own parquet reader.
"""

from lakehouse_engine.spark.changes import read_changes, register_changes_source
from lakehouse_engine.spark.compact import compact
from lakehouse_engine.spark.datasource import register_data_source
from lakehouse_engine.spark.read import read
from lakehouse_engine.spark.routing import bucket_column
from lakehouse_engine.spark.session import create_session, credentials_conf
from lakehouse_engine.spark.tables import TableRef
from lakehouse_engine.spark.write import write

__all__ = ["TableRef", "bucket_column", "compact", "create_session", "credentials_conf", "read", "read_changes",
           "register_changes_source", "register_data_source", "write"]
