"""The bucket mode of a table, decided from its `bucket` option and primary key (no pyspark)."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from lakehouse_engine.path_factory import POSTPONE_BUCKET

if TYPE_CHECKING:
    from lakehouse_engine.table import FileStoreTable


class BucketMode(Enum):
    """How rows of a table find their bucket (Paimon's bucket modes)."""

    FIXED = "fixed"        # bucket > 0: hash of the bucket key modulo the partition's bucket count
    UNAWARE = "unaware"    # append table with bucket = -1: no buckets, rows written where they are
    DYNAMIC = "dynamic"    # primary key with bucket = -1: assigners keep a key -> bucket index
    POSTPONE = "postpone"  # bucket = -2: rows wait in bucket-postpone until compaction assigns them

    @staticmethod
    def of(table: FileStoreTable) -> BucketMode:
        bucket = table.options.bucket
        if bucket > 0:
            return BucketMode.FIXED
        if bucket == POSTPONE_BUCKET:
            return BucketMode.POSTPONE
        return BucketMode.DYNAMIC if table.schema.has_primary_key else BucketMode.UNAWARE
