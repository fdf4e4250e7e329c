"""Data files: write a sorted run as rolling files with their metadata (read back by data_file_reader)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_engine.errors import StorageError
from lakehouse_engine.format.binary_row import EMPTY_ROW, serialize_row
from lakehouse_engine.format.float_order import total_order
from lakehouse_engine.format.manifest_entries import DataFileMeta, SimpleStats
from lakehouse_engine.io import FileIO, storage_error
from lakehouse_engine.mergetree.data_file_formats import (
    ORC,
    PARQUET,
    check_orc_timestamps,
    file_format_of,
    postpone_files_in_avro,
    write_avro,
    write_orc,
)
from lakehouse_engine.mergetree.merge import DELETE, UPDATE_BEFORE
from lakehouse_engine.mergetree.parquet_dictionary import dictionary_columns
from lakehouse_engine.options import (
    FILE_COMPRESSION,
    FILE_COMPRESSION_ZSTD_LEVEL,
    CoreOptions,
)
from lakehouse_engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, TableSchema

FILE_SOURCE_APPEND = 0
FILE_SOURCE_COMPACT = 1


def paimon_parquet_types(file_schema: pa.Schema) -> dict[str, bool]:
    """The pyarrow writer options that give the parquet physical types Paimon's own writer uses.

    Paimon's parquet writer stores DECIMAL with precision <= 9 as INT32 and <= 18 as INT64
    (Paimon 0.9 cannot read a dictionary-encoded FIXED_LEN_BYTE_ARRAY decimal of that precision),
    and TIMESTAMP with precision > 6 as INT96 (0.9 rejects INT64 nanoseconds). pyarrow's INT96
    switch covers every timestamp column of a file, and 0.9 reads TIMESTAMP(0..6) only as INT64,
    so a file that also holds a TIMESTAMP(0..6) column stays all INT64: 0.9 cannot read it either
    way, and INT96 would read back as nanoseconds, overflowing for TIMESTAMP(0..6) values outside
    1677..2262.
    """
    units = {f.type.unit for f in file_schema if pa.types.is_timestamp(f.type)}
    return {"store_decimal_as_integer": True, "use_deprecated_int96_timestamps": units == {"ns"}}


class DataFileWriter:
    """Writes the data files of one (partition, bucket) directory, rolling at `target-file-size`."""

    def __init__(self, file_io: FileIO, schema: TableSchema, bucket_dir: str,
                 new_file_name: Callable[[str], str], target_file_size: int):
        self.file_io = file_io
        self.schema = schema
        self.bucket_dir = bucket_dir
        self.new_file_name = new_file_name
        self.target_file_size = target_file_size
        opts: CoreOptions = schema.core_options
        self.options_raw = opts.raw
        compression = opts.require(FILE_COMPRESSION)
        self.compression = None if compression in ("none", "uncompressed") else compression
        self.compression_level = opts.require(FILE_COMPRESSION_ZSTD_LEVEL) if compression == "zstd" else None
        self.key_names = schema.trimmed_primary_keys if schema.has_primary_key else []
        self.key_types = schema.types_of(self.key_names)
        self.file_schema = schema.data_file_arrow_schema()
        self.parquet_types = paimon_parquet_types(self.file_schema)
        self.postpone_avro = bucket_dir.endswith("/bucket-postpone") and postpone_files_in_avro(
            opts, {f.name: f.type for f in schema.fields})

    def to_file_layout(self, table: pa.Table) -> pa.Table:
        """Columns in data-file order: `_KEY_*`, `_SEQUENCE_NUMBER`, `_VALUE_KIND`, fields."""
        if not self.schema.has_primary_key:
            return table.select(self.schema.field_names).cast(self.file_schema)
        cols = [table.column(k) for k in self.key_names]
        cols += [table.column(SEQUENCE_NUMBER), table.column(VALUE_KIND)]
        cols += [table.column(n) for n in self.schema.field_names]
        return pa.Table.from_arrays(cols, schema=self.file_schema)

    def write_run(self, table: pa.Table, level: int, min_sequence: int | None = None,
                  file_source: int = FILE_SOURCE_APPEND,
                  dictionary: bool | list[str] | None = None) -> list[DataFileMeta]:
        """Write one sorted run (already merged, sorted by key) as one or more files; `dictionary`:
        the parquet columns to dictionary-encode, when already judged (`dictionary_for`)."""
        if table.num_rows == 0:
            return []
        table = self.to_file_layout(table)
        n = table.num_rows
        # Rows per chunk: a whole file when even uncompressed data stays under target,
        # else chunks small enough that rolling lands near the target size.
        row_bytes = max(table.nbytes / n, 1.0)
        if table.nbytes <= self.target_file_size:
            chunk = n
        else:
            chunk = max(1024, int(self.target_file_size / row_bytes / 4))
        file_format = file_format_of(self.schema.core_options, level, self.postpone_avro)
        if file_format != PARQUET and table.nbytes > self.target_file_size:
            chunk = max(1024, int(self.target_file_size / row_bytes))  # ORC/Avro: one chunk per file
        metas: list[DataFileMeta] = []
        # One dictionary choice for the run (judged on all its rows), not one per rolled file.
        if file_format != PARQUET:
            dictionary = False
        elif dictionary is None:
            dictionary = dictionary_columns(table, self.options_raw)
        start = 0
        while start < n:
            name = self.new_file_name(file_format)
            path = f"{self.bucket_dir}/{name}"
            file_start = start
            try:
                if file_format == PARQUET:
                    start = self._write_file(path, table, start, chunk, dictionary)
                else:
                    start = self._write_other_format(path, file_format, table, start, chunk)
                size = self.file_io.file_size(path)
            except OSError as e:
                # A full disk or a failing store: leave no file of this run behind (none is
                # committed yet) and name the file and table in the error.
                for written in [path] + [f"{self.bucket_dir}/{m.file_name}" for m in metas]:
                    self.file_io.delete_file(written, quiet=True)
                if isinstance(e, StorageError):
                    raise
                raise storage_error("write data file", path, e) from e
            metas.append(self.file_meta(name, size, table.slice(file_start, start - file_start), level,
                                        min_sequence, file_source))
        return metas

    def dictionary_for(self, table: pa.Table) -> bool | list[str]:
        """The dictionary columns `write_run` would judge for the run `table` (its layout: rows
        of the table's fields, `_SEQUENCE_NUMBER` and `_VALUE_KIND`)."""
        return dictionary_columns(self.to_file_layout(table), self.options_raw)

    def _write_file(self, path: str, table: pa.Table, start: int, chunk: int,
                    dictionary: bool | list[str]) -> int:
        """Write rows from `start` into one file until it reaches the target size; the next start."""
        n = table.num_rows
        with self.file_io.open_output(path) as sink:
            writer = self.parquet_writer(sink, table, dictionary)
            try:
                while start < n:
                    part = table.slice(start, chunk)
                    writer.write_table(part, row_group_size=max(chunk, 1))
                    start += part.num_rows
                    if sink.tell() >= self.target_file_size:
                        break
            finally:
                writer.close()
        return start

    def parquet_writer(self, sink: Any, table: pa.Table,
                       dictionary: bool | list[str] | None = None) -> pq.ParquetWriter:
        """A parquet writer of data files shaped like `table` (in file layout) into `sink`;
        `dictionary`: the columns to dictionary-encode, else judged on `table`
        (`parquet_dictionary.dictionary_columns`)."""
        if dictionary is None:
            dictionary = dictionary_columns(table, self.options_raw)
        return pq.ParquetWriter(sink, table.schema, compression=self.compression,
                                compression_level=self.compression_level,
                                write_statistics=False,
                                # CRC-32 per page, verified on read: a flipped bit fails
                                # the read instead of reading as another value.
                                write_page_checksum=True,
                                use_dictionary=dictionary,
                                **self.parquet_types)

    def _write_other_format(self, path: str, file_format: str, table: pa.Table, start: int,
                            chunk: int) -> int:
        """Write `chunk` rows from `start` as one ORC or Avro file; the next start."""
        part = table.slice(start, chunk)
        compression = self.compression or "none"
        if file_format == ORC:
            check_orc_timestamps(part)  # before the file exists: a refused value leaves nothing behind
        with self.file_io.open_output(path) as sink:
            if file_format == ORC:
                write_orc(sink, part, compression)
            else:
                write_avro(sink, part, compression, self.compression_level)
        return start + part.num_rows

    def file_meta(self, name: str, size: int, rows: pa.Table, level: int, min_sequence: int | None,
                  file_source: int, row_count: int | None = None,
                  delete_row_count: int | None = None) -> DataFileMeta:
        """The manifest entry of a file holding `rows` (in file layout).

        A writer that streams a file passes a summary instead (its first and last rows and those
        holding each column's extremes) with the whole file's `row_count` and `delete_row_count`.
        """
        meta = self._meta(name, size, rows, level, min_sequence, file_source)
        if row_count is None and delete_row_count is None:
            return meta
        return dataclasses.replace(
            meta, row_count=meta.row_count if row_count is None else row_count,
            delete_row_count=meta.delete_row_count if delete_row_count is None else delete_row_count)

    def _meta(self, name: str, size: int, rows: pa.Table, level: int, min_sequence: int | None,
              file_source: int) -> DataFileMeta:
        now = int(time.time() * 1000)
        if not self.schema.has_primary_key:
            first = 0 if min_sequence is None else min_sequence
            return DataFileMeta(
                file_name=name, file_size=size, row_count=rows.num_rows,
                min_key=EMPTY_ROW, max_key=EMPTY_ROW, key_stats=SimpleStats.EMPTY,
                value_stats=SimpleStats.EMPTY, min_sequence_number=first,
                max_sequence_number=first + rows.num_rows - 1, schema_id=self.schema.id,
                level=level, extra_files=(), creation_time_millis=now, delete_row_count=0,
                file_source=file_source, value_stats_cols=(),
            )
        key_cols = [rows.column(KEY_FIELD_PREFIX + k) for k in self.key_names]
        first_key = [c[0].as_py() for c in key_cols]
        last_key = [c[-1].as_py() for c in key_cols]
        mins, maxs = [], []
        for c in key_cols:
            if pa.types.is_floating(c.type):
                # Java's order bounds FLOAT/DOUBLE keys: NaN is the largest, -0.0 below 0.0.
                order = total_order(c.to_numpy())
                mins.append(c[int(np.argmin(order))].as_py())
                maxs.append(c[int(np.argmax(order))].as_py())
                continue
            mm = pc.min_max(c)
            mins.append(mm["min"].as_py())
            maxs.append(mm["max"].as_py())
        seq = rows.column(SEQUENCE_NUMBER)
        seq_mm = pc.min_max(seq)
        kinds = rows.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)
        deletes = int(np.count_nonzero((kinds == DELETE) | (kinds == UPDATE_BEFORE)))
        return DataFileMeta(
            file_name=name, file_size=size, row_count=rows.num_rows,
            min_key=serialize_row(first_key, self.key_types),
            max_key=serialize_row(last_key, self.key_types),
            key_stats=SimpleStats(serialize_row(mins, self.key_types), serialize_row(maxs, self.key_types),
                                  [0] * len(self.key_names)),
            value_stats=SimpleStats.EMPTY,
            min_sequence_number=int(seq_mm["min"].as_py()),
            max_sequence_number=int(seq_mm["max"].as_py()),
            schema_id=self.schema.id, level=level, extra_files=(), creation_time_millis=now,
            delete_row_count=deletes, file_source=file_source, value_stats_cols=(),
        )
