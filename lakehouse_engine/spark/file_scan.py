"""Writes of a plain parquet scan: the packing tasks read the files themselves.

`write(spark.read.parquet(path), table)` would hand every row from the JVM to Python: Spark
decodes the parquet columns, turns them into rows and the rows into Arrow batches, one by one,
and that hand-off alone costs about as much as Spark's own whole shuffle-sort-write of the rows.
When the DataFrame is nothing but a scan of local parquet files (`spark.read.parquet(...)`, no
filter, projection or read option), the packing tasks instead read the files with pyarrow and
pack the rows as they would have packed Spark's batches (`routing.RowPacker`): Spark then runs
one task per piece of the input (`plan_pieces`: whole row groups, about 128 MiB each) and moves
only the packed Arrow streams.

The rows are the ones Spark would have handed over: the scan is used only when every file's
columns read, with pyarrow, as the Arrow types of the DataFrame's schema (`same_arrow_types`),
and TIMESTAMP WITH LOCAL TIME ZONE values are given the session time zone, as Spark's batches
carry it. Rows of one file keep their order, so a key's rows within a file keep their order, as
in Spark's scan; rows of different files have no defined order in either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql.types import ArrayType, MapType, StructType

# A piece of the input (one packing task) holds whole row groups up to about this many bytes.
PIECE_BYTES = 128 << 20
# Above this many files the driver does not read every footer: Spark's scan is used.
MAX_FILES = 4096
# Rows per batch a packing task reads.
_BATCH_ROWS = 131_072
# The read options that do not change what a parquet scan returns.
_NEUTRAL_OPTIONS = ("path", "paths")


@dataclass(frozen=True)
class FilePiece:
    """Some consecutive row groups of one local parquet file."""

    path: str
    row_groups: tuple[int, ...]


def scanned_parquet_files(df: DataFrame) -> list[str] | None:
    """The local files of a DataFrame that is only a parquet scan, else None.

    None for anything Spark does more than read the files' columns as they are: a filter, a
    projection, a join; read options (`mergeSchema`, rebase modes, ...); partition columns
    taken from directory names; files not on the local file system; Spark Connect.
    """
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    try:
        plan = jdf.queryExecution().optimizedPlan()
        if plan.getClass().getSimpleName() != "LogicalRelation":
            return None
        relation = plan.relation()
        if (relation.getClass().getSimpleName() != "HadoopFsRelation"
                or relation.fileFormat().getClass().getSimpleName() != "ParquetFileFormat"
                or relation.partitionSchema().length() != 0):
            return None
        options = relation.options()
        if options.size() != sum(1 for key in _NEUTRAL_OPTIONS if options.contains(key)):
            return None
    except Exception:  # another Spark's plan classes: let Spark read the rows
        return None
    files = df.inputFiles()
    if not files or len(files) > MAX_FILES:
        return None
    paths = []
    for uri in files:
        parsed = urlparse(uri)
        if parsed.scheme not in ("", "file"):
            return None
        paths.append(unquote(parsed.path))
    return paths


def _comparable(dtype: pa.DataType) -> object:
    """A type as far as the rows it holds go: offset widths and time zone names aside."""
    if pa.types.is_large_string(dtype) or pa.types.is_string(dtype):
        return "string"
    if pa.types.is_large_binary(dtype) or pa.types.is_binary(dtype):
        return "binary"
    if pa.types.is_timestamp(dtype):
        return ("timestamp", dtype.unit, dtype.tz is not None)
    return dtype


def read_footers(paths: Sequence[str]) -> list[tuple[str, pq.FileMetaData]] | None:
    """Each file's parquet footer, read once for both `same_arrow_types` and `plan_pieces`;
    None when one cannot be read (Spark's own read then reports it)."""
    try:
        return [(path, pq.read_metadata(path)) for path in paths]
    except (OSError, pa.ArrowException):
        return None


def same_arrow_types(df: DataFrame, footers: Sequence[tuple[str, pq.FileMetaData]]) -> bool:
    """Whether pyarrow reads every file's columns as the Arrow types Spark hands Python for `df`.

    Nested columns are left to Spark (list and map layouts differ between writers).
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    if any(isinstance(f.dataType, (ArrayType, MapType, StructType)) for f in df.schema.fields):
        return False
    try:
        expected = to_arrow_schema(df.schema, timezone="UTC")
    except Exception:  # a type Arrow cannot carry: Spark's path names the problem
        return False
    wanted = {f.name: _comparable(f.type) for f in expected}
    for _, meta in footers:
        found = {f.name: _comparable(f.type) for f in meta.schema.to_arrow_schema()}
        if any(found.get(name) != kind for name, kind in wanted.items()):
            return False
    return True


def plan_pieces(footers: Sequence[tuple[str, pq.FileMetaData]], piece_bytes: int = PIECE_BYTES) -> list[FilePiece]:
    """The files cut into pieces of consecutive row groups of about `piece_bytes` each."""
    pieces = []
    for path, meta in footers:
        group: list[int] = []
        size = 0
        for i in range(meta.num_row_groups):
            if group and size + meta.row_group(i).total_byte_size > piece_bytes:
                pieces.append(FilePiece(path, tuple(group)))
                group, size = [], 0
            group.append(i)
            size += meta.row_group(i).total_byte_size
        if group:
            pieces.append(FilePiece(path, tuple(group)))
    return pieces


def read_piece(piece: FilePiece, columns: Sequence[str], time_zone: str) -> Iterator[pa.RecordBatch]:
    """The rows of one piece as Spark would hand them over: `columns`, and timestamps with a time
    zone in the session's (`time_zone`)."""
    reader = pq.ParquetFile(piece.path)
    for batch in reader.iter_batches(batch_size=_BATCH_ROWS, row_groups=list(piece.row_groups),
                                     columns=list(columns)):
        for i, field in enumerate(batch.schema):
            if pa.types.is_timestamp(field.type) and field.type.tz is not None:
                batch = batch.set_column(i, field.name, batch.column(i).cast(pa.timestamp(field.type.unit, time_zone)))
        yield batch


class PieceReader:
    """mapInArrow function over `spark.range(len(pieces))`: reads the pieces whose index it gets
    and passes their rows to `consume` (a `RowPacker`), yielding what that yields."""

    def __init__(self, pieces: Sequence[FilePiece], columns: Sequence[str], time_zone: str,
                 consume: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]):
        self.pieces = list(pieces)
        self.columns = list(columns)
        self.time_zone = time_zone
        self.consume = consume

    def _rows(self, ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in ids:
            for i in batch.column(0).to_pylist():
                yield from read_piece(self.pieces[i], self.columns, self.time_zone)

    def __call__(self, ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return self.consume(self._rows(ids))
