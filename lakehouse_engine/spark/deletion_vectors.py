"""Rows of parquet data files that deletion vectors mark, removed inside Spark's own file scan.

Spark's parquet reader gives each row its file (`_metadata.file_name`) and its position in that
file (`_metadata.row_index`). Two ways remove the marked rows, both exact:

- The JVM filter (`DeletionVectorFilter.java`, compiled by `make` into `java/lakehouse-spark.jar`,
  which `create_session` puts on the session's classpath): the vectors' bitmaps, checked here on
  the driver, travel once to each executor in a broadcast, and a Java UDF in the scan's filter
  keeps a row unless its file's bitmap holds its position (and, when asked, its row kind is
  kept). The UDF finds the row's file by `_metadata.file_size` when the scan's listing gives
  each marked file a size of its own, by `_metadata.file_name` otherwise. No join, no per-row
  Python; the whole scan is built in one call into the JVM.
- Without the jar (an engine installed without `make`, or a session started elsewhere): a
  broadcast left-anti join on (file name, position) against the marked positions, decoded here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakehouse_engine.read.deletion_vectors import DeletionVectorReader
from lakehouse_engine.read.split import DataSplit
from lakehouse_engine.table import FileStoreTable

__all__ = ["JAR", "FileVector", "file_vectors", "filtered_scan", "jvm_filter_loaded",
           "without_marked_rows"]

# Built by `make` (target `spark-jar`) from `java/DeletionVectorFilter.java`; absent in a source
# checkout until then, and in an install that did not build it.
JAR = Path(__file__).parent / "java" / "lakehouse-spark.jar"

_FILE, _ROW = "__lakehouse_file", "__lakehouse_row"


@dataclass(frozen=True, slots=True)
class FileVector:
    """One data file's deletion vector, checked: its bitmap's bytes (the portable RoaringBitmap
    layout) and the mask of its deleted rows."""

    file_name: str
    bitmap: bytes
    deleted: np.ndarray


def file_vectors(table: FileStoreTable, splits: Sequence[DataSplit]) -> list[FileVector]:
    """The deletion vector of every file of `splits` that has one, read and checked (version, size,
    CRC, magic number, cardinality, positions within the file): CorruptFileError naming the index
    file otherwise, before Spark runs anything."""
    reader = DeletionVectorReader(table.file_io)
    out = []
    for split in splits:
        if split.data_deletion_files is None:
            continue
        for f, deletion in zip(split.files, split.data_deletion_files, strict=True):
            if deletion is None:
                continue
            mask = ~reader.keep_mask(deletion, f.row_count)
            if mask.any():
                out.append(FileVector(f.file_name, reader.bitmap(deletion), mask))
    return out


def jvm_filter_loaded(spark: SparkSession) -> bool:
    """Whether the session's JVM can load `DeletionVectorFilter` (its jar is on the classpath)."""
    jvm = getattr(spark, "_jvm", None)  # a Spark Connect session has no JVM of its own here
    if jvm is None:
        return False
    from py4j.java_gateway import JavaClass

    return isinstance(jvm.lakehouse.spark.DeletionVectorFilter, JavaClass)


def filtered_scan(spark: SparkSession, paths: Sequence[str], schema: StructType, options: Mapping[str, str],
                  columns: Sequence[str], value_kind: str | None, kept_kinds: Sequence[int],
                  vectors: Sequence[FileVector]) -> DataFrame:
    """`columns` of the rows of parquet files `paths` (read as `schema` with reader `options`) whose
    `value_kind` is one of `kept_kinds` (no such filter when None) and which no vector of `vectors`
    marks: the JVM filter, built in one call into the JVM (`jvm_filter_loaded` must hold; no path,
    file name, option or column may hold a line break, the calls' separator)."""
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

    sizes = np.array([len(v.bitmap) for v in vectors], dtype=">i4").tobytes()
    settings = "\n".join(part for item in options.items() for part in item)
    jdf = spark._jvm.lakehouse.spark.DeletionVectorFilter.scan(  # type: ignore[union-attr]
        spark._jsparkSession, "\n".join(paths), schema.json(), settings, "\n".join(columns),
        value_kind or "", bytes(np.array(kept_kinds, dtype=np.int8)), "\n".join(v.file_name for v in vectors),
        sizes, b"".join(v.bitmap for v in vectors))
    return ClassicDataFrame(jdf, spark)


def without_marked_rows(spark: SparkSession, df: DataFrame, vectors: Sequence[FileVector]) -> DataFrame:
    """`df` (a parquet scan) without the rows `vectors` mark: a broadcast left-anti join on (file
    name, position) against the marked positions (the path without the JVM filter)."""
    positions = [np.flatnonzero(v.deleted) for v in vectors]
    names = np.concatenate([np.full(len(p), v.file_name, dtype=object) for v, p in zip(vectors, positions, strict=True)])
    marked = spark.createDataFrame(pa.table({_FILE: pa.array(names, pa.string()),
                                             _ROW: pa.array(np.concatenate(positions), pa.int64())}))
    tagged = df.select("*", F.col("_metadata.file_name").alias(_FILE), F.col("_metadata.row_index").alias(_ROW))
    return tagged.join(F.broadcast(marked), on=[_FILE, _ROW], how="left_anti").drop(_FILE, _ROW)
