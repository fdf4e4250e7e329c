"""Reading data files back: whole or in bounded batches, any of Paimon's formats, cast to the
schema asked for; a missing file is `DataFileMissingError`, an undecodable one `CorruptFileError`."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Sequence
from typing import Any, cast

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq

from lakehouse_engine.errors import CorruptFileError, DataFileMissingError
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.io import FileIO
from lakehouse_engine.mergetree.data_file_check import (
    check_column_types,
    check_file_size,
    check_row_count,
    listed_in,
)


@contextlib.contextmanager
def _read_errors(path: str, meta: DataFileMeta | None) -> Iterator[None]:
    """A missing data file as DataFileMissingError, an undecodable one as CorruptFileError naming it.

    A damaged footer surfaces as whatever its decoder meets: Arrow errors, a bad UTF-8 column
    name, a cast that finds nulls in a required column.
    """
    try:
        yield
    except FileNotFoundError:
        raise DataFileMissingError(f"data file {path} is missing (deleted or expired?)"
                                   f"{listed_in(meta)}") from None
    except (pa.ArrowException, ValueError, OSError) as e:
        raise CorruptFileError(f"data file {path} cannot be read: {e}") from None


def read_data_file(file_io: FileIO, path: str, columns: Sequence[str] | None = None,
                   schema: pa.Schema | None = None, meta: DataFileMeta | None = None,
                   schema_file: str | None = None) -> pa.Table:
    """Read a data file (optionally only some columns, cast to `schema`).

    The format follows the file name as Paimon names data files: `.orc` and `.avro` (which
    `file.format` and postpone buckets produce, here and in other writers), anything else as
    parquet. Other writers differ in details such as
    nullability flags, so files are cast to the table's view of the columns before they meet
    files of other writers. Parquet page checksums are verified where the writer wrote them;
    with `meta` (the file's manifest entry) the file's size and row count are checked against
    it, and parquet column types against `schema` (see `data_file_check`). CorruptFileError
    names a file that will not decode or fails a check; `schema_file` (the schema the columns
    and `schema` come from) is named too where the file and the schema disagree.
    """
    with _read_errors(path, meta):
        with file_io.open_input(path) as f:
            check_file_size(path, f.size(), meta)
            if path.endswith(".avro"):
                table = _read_avro(f, path, columns, schema, schema_file)
            elif path.endswith(".orc"):
                orc_file = orc.ORCFile(f)
                _check_columns(path, orc_file.schema.names, columns, schema_file)
                table = orc_file.read(columns=list(columns) if columns is not None else None)
                if columns is not None:  # ORC keeps the file's column order
                    table = table.select(list(columns))
            else:
                # Verification is a no-op for pages written without a checksum (other writers).
                pf = pq.ParquetFile(f, page_checksum_verification=True)
                _check_columns(path, pf.schema_arrow.names, columns, schema_file)
                table = pf.read(columns=list(columns) if columns is not None else None, use_threads=True)
                check_column_types(path, table.schema, schema, schema_file)
        check_row_count(path, table.num_rows, meta)
        if schema is not None and not table.schema.equals(schema):
            table = table.cast(schema)
        return table


def read_data_file_batches(file_io: FileIO, path: str, columns: Sequence[str], schema: pa.Schema,
                           meta: DataFileMeta, batch_bytes: int,
                           schema_file: str | None = None) -> Iterator[pa.Table]:
    """The rows of a data file as consecutive batches of about `batch_bytes` decoded bytes each.

    As `read_data_file`, with the same checks, but holding one batch at a time: parquet and Avro
    files are decoded `batch_bytes` at a time (rows sized by the width of a first small batch),
    ORC files a stripe at a time.
    """
    if meta.file_size * _SMALL_FILE_EXPANSION <= batch_bytes:
        # A file that decodes well within the budget is read whole: one read (and on an object
        # store one round of ranged GETs) instead of a probe and a stream of batches.
        yield read_data_file(file_io, path, columns, schema, meta, schema_file)
        return
    if not path.endswith((".orc", ".avro")):
        yield from _parquet_batches(file_io, path, columns, schema, meta, batch_bytes, schema_file)
        return
    rows = 0
    with _read_errors(path, meta):
        with file_io.open_input(path) as f:
            check_file_size(path, f.size(), meta)
            if path.endswith(".avro"):
                for batch in _avro_chunks(f, path, columns, schema, schema_file, batch_bytes):
                    rows += batch.num_rows
                    yield _cast(batch, schema)
            else:
                orc_file = orc.ORCFile(f)
                _check_columns(path, orc_file.schema.names, columns, schema_file)
                for i in range(orc_file.nstripes):
                    batch = pa.Table.from_batches([orc_file.read_stripe(i, columns=list(columns))])
                    rows += batch.num_rows
                    yield _cast(batch.select(list(columns)), schema)
        check_row_count(path, rows, meta)


# How many times its stored size a data file may take decoded, at most, for the reads of bounded
# memory to read it whole (zstd-compressed, dictionary-encoded columns rarely expand further).
_SMALL_FILE_EXPANSION = 16

# Rows a parquet batch holds at least, however tight the memory: below this, per-batch overhead
# (Python, Arrow's kernels) outweighs the rows.
_MIN_BATCH_ROWS = 64


def _parquet_batches(file_io: FileIO, path: str, columns: Sequence[str], schema: pa.Schema,
                     meta: DataFileMeta, batch_bytes: int, schema_file: str | None) -> Iterator[pa.Table]:
    rows = 0
    with _read_errors(path, meta):
        with file_io.open_input(path) as f:
            check_file_size(path, f.size(), meta)
            # No pre-buffering: it would load every row group's pages up front; a 1 MiB read
            # buffer streams a column chunk's pages instead of loading the chunk whole.
            pf = pq.ParquetFile(f, page_checksum_verification=True, pre_buffer=False,
                                buffer_size=1 << 20)
            _check_columns(path, pf.schema_arrow.names, columns, schema_file)
            check_column_types(path, pf.schema_arrow, schema, schema_file)
            wanted = list(columns)
            decoded = decoded_size(pf, wanted)
            if decoded is None:
                # The decoded width of a row is measured on a first small batch: the footer's
                # sizes say little of it (a dictionary-encoded string column is small there).
                probe = next(pf.iter_batches(batch_size=_MIN_BATCH_ROWS, columns=wanted,
                                             use_threads=False), None)
                row_bytes = (max(probe.nbytes / probe.num_rows, 1.0)
                             if probe is not None and probe.num_rows else 1.0)
                del probe
            else:
                row_bytes = max(decoded / max(pf.metadata.num_rows, 1), 1.0)
            if row_bytes * pf.metadata.num_rows <= batch_bytes:
                # The whole file fits in one batch: one read, decoded on Arrow's threads, its
                # column chunks fetched ahead in coalesced reads (pre-buffering: a fifth less
                # wall time than streaming pages through a buffer, measured on local files).
                whole = pq.ParquetFile(f, page_checksum_verification=True, metadata=pf.metadata)
                table = whole.read(columns=wanted, use_threads=True)
                rows = table.num_rows
                yield _cast(table, schema)
            else:
                batch_rows = max(_MIN_BATCH_ROWS, int(batch_bytes / row_bytes))
                for batch in pf.iter_batches(batch_size=batch_rows, columns=wanted, use_threads=True):
                    rows += batch.num_rows
                    yield _cast(pa.Table.from_batches([batch]), schema)
        check_row_count(path, rows, meta)


def decoded_size(pf: pq.ParquetFile, columns: Sequence[str]) -> int | None:
    """The bytes `columns` of a parquet file take decoded, from its footer alone, or None when the
    footer cannot tell (a dictionary-encoded string column, a nested column).

    A fixed-width column takes its width per value whatever its encoding; a plain-encoded string
    column takes about its uncompressed size (a 4-byte length per value there, an offset here).
    """
    meta = pf.metadata
    arrow = pf.schema_arrow
    chunks: dict[str, list[Any]] = {}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            chunks.setdefault(chunk.path_in_schema, []).append(chunk)
    total = 0
    for name in columns:
        index = arrow.get_field_index(name)
        if index < 0 or name not in chunks:
            return None  # nested (its leaves have other paths) or absent
        kind = arrow.field(index).type
        if pa.types.is_boolean(kind):
            total += meta.num_rows // 4  # the values' and the validity bitmaps
        elif pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind) \
                or pa.types.is_large_binary(kind):
            if any(ch.has_dictionary_page for ch in chunks[name]):
                return None
            total += sum(ch.total_uncompressed_size for ch in chunks[name]) + meta.num_rows // 8
        else:
            try:
                width = kind.bit_width
            except ValueError:
                return None  # not fixed-width
            total += meta.num_rows * width // 8 + meta.num_rows // 8
    return total


def _cast(table: pa.Table, schema: pa.Schema) -> pa.Table:
    return table if table.schema.equals(schema) else table.cast(schema)


def _check_columns(path: str, present: Sequence[str], columns: Sequence[str] | None,
                   schema_file: str | None = None) -> None:
    missing = [c for c in columns or () if c not in present]
    if missing:
        # A flipped bit in a field name of the schema file reads as a column no file has.
        where = (f" that schema file {schema_file} names (the schema file or the data file is "
                 f"damaged)" if schema_file else "")
        raise CorruptFileError(f"data file {path} lacks columns {missing}{where}")


def _read_avro(f: Any, path: str, columns: Sequence[str] | None, schema: pa.Schema | None,
               schema_file: str | None) -> pa.Table:
    """An Avro data file as Arrow. fastavro decodes record by record, so Avro suits small files
    (postpone buckets, level 0), not bulk data."""
    return next(_avro_chunks(f, path, columns, schema, schema_file, None))


def _avro_chunks(f: Any, path: str, columns: Sequence[str] | None, schema: pa.Schema | None,
                 schema_file: str | None, batch_bytes: int | None) -> Iterator[pa.Table]:
    """An Avro data file as Arrow tables of about `batch_bytes` each (None: one table)."""
    try:
        reader = fastavro.reader(f)
        writer_schema: Any = reader.writer_schema
        if isinstance(writer_schema, list):  # Paimon's Java writer: ["null", record]
            writer_schema = next(b for b in writer_schema if isinstance(b, dict))
        names = [field["name"] for field in writer_schema["fields"]]
        _check_columns(path, names, columns, schema_file)
    except CorruptFileError:
        raise
    except Exception as e:  # fastavro raises ValueError, EOFError, its own schema errors...
        raise CorruptFileError(f"data file {path} cannot be read as Avro: {e}") from None
    wanted = list(columns) if columns is not None else names
    chunk_rows = _MIN_BATCH_ROWS
    records: list[dict[str, Any]] = []
    done = False
    while not done:
        try:
            if batch_bytes is None:
                records = cast(list[dict[str, Any]], list(reader))
                done = True
            else:
                records = cast(list[dict[str, Any]], list(itertools.islice(reader, chunk_rows)))
                done = len(records) < chunk_rows
        except Exception as e:
            raise CorruptFileError(f"data file {path} cannot be read as Avro: {e}") from None
        arrays = {}
        for name in wanted:
            target = schema.field(name).type if schema is not None and name in schema.names else None
            arrays[name] = pa.array([r[name] for r in records], type=target)
        table = pa.table(arrays)
        if batch_bytes is not None and table.num_rows:
            # The first chunks are small; later ones as many rows as fit the bytes asked for.
            chunk_rows = max(_MIN_BATCH_ROWS, int(batch_bytes / max(table.nbytes / table.num_rows, 1.0)))
        if table.num_rows or batch_bytes is None:
            yield table
