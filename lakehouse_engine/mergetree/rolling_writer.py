"""A sorted run written as it arrives, range by range, rolling files at `target-file-size`.

A merge of bounded memory (`range_merge`) yields a bucket's merged rows as consecutive key
ranges; this writer appends them to the open parquet file and starts the next file when the open
one reaches the target size, so output files are as large as a whole-section merge would write
them, whatever the range size. A file's manifest entry is computed from a summary of the rows it
received (its first and last rows and those holding each key column's and the sequence number's
extremes), not from the rows themselves, which are gone by then.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_engine.errors import StorageError
from lakehouse_engine.format.float_order import total_order
from lakehouse_engine.format.manifest_entries import DataFileMeta
from lakehouse_engine.io import storage_error
from lakehouse_engine.mergetree.data_file import DataFileWriter
from lakehouse_engine.mergetree.data_file_formats import PARQUET, file_format_of
from lakehouse_engine.mergetree.merge import DELETE, UPDATE_BEFORE
from lakehouse_engine.mergetree.parquet_dictionary import dictionary_columns
from lakehouse_engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakehouse_engine.threads import prefetch


class RollingRunWriter:
    """Writes one sorted run of a primary-key table, given as consecutive key-ordered tables."""

    def __init__(self, writer: DataFileWriter, level: int, file_source: int):
        self.writer = writer
        self.level = level
        self.file_source = file_source
        self.parquet = file_format_of(writer.schema.core_options, level, writer.postpone_avro) == PARQUET
        self.written: list[DataFileMeta] = []
        self._pending: list[pa.Table] = []  # ORC/Avro: rows held until a file's worth
        self._pending_bytes = 0
        self._name: str | None = None
        self._sink: pa.NativeFile | None = None
        self._parquet: pq.ParquetWriter | None = None
        self._chunk_rows = 0
        self._dictionary: bool | list[str] | None = None  # judged on the run's first range, kept
        self._summaries: list[pa.Table] = []
        self._rows = 0
        self._deletes = 0

    def write_all(self, runs: Iterator[pa.Table]) -> list[DataFileMeta]:
        """Write every table of `runs` (the next one made while this one is written, as a merge
        range by range produces them), then finish; a failure aborts (nothing half-written stays)."""
        try:
            for rows in prefetch(runs):
                self.write(rows)
            return self.finish()
        except BaseException:
            self.abort()
            raise

    def write(self, rows: pa.Table) -> None:
        """Append merged rows (table schema plus `_SEQUENCE_NUMBER`, `_VALUE_KIND`), whose keys
        all follow those written before."""
        if not rows.num_rows:
            return
        if not self.parquet:
            # ORC and Avro files are written whole: hold about one file's rows.
            self._pending.append(rows)
            self._pending_bytes += rows.nbytes
            if self._pending_bytes >= self.writer.target_file_size:
                self._flush_pending()
            return
        try:
            self._write_parquet(self.writer.to_file_layout(rows))
        except OSError as e:
            self.abort()
            if isinstance(e, StorageError):
                raise
            raise storage_error("write data file", self._path(), e) from e

    def finish(self) -> list[DataFileMeta]:
        """Close the open file; the manifest entries of every file written, in key order."""
        if self._pending:
            self._flush_pending()
        if self._parquet is not None:
            try:
                self._close_file()
            except OSError as e:
                self.abort()
                if isinstance(e, StorageError):
                    raise
                raise storage_error("write data file", self._path(), e) from e
        return self.written

    def abort(self) -> None:
        """Delete every file this writer wrote or was writing (none is committed yet)."""
        if self._parquet is not None:
            try:
                self._parquet.close()
                assert self._sink is not None
                self._sink.close()
            except Exception:  # the file is deleted next whatever state it is in
                pass
            self._parquet = self._sink = None
        paths = [f.file_name for f in self.written] + ([self._name] if self._name else [])
        for name in paths:
            self.writer.file_io.delete_file(f"{self.writer.bucket_dir}/{name}", quiet=True)
        self.written, self._name = [], None

    # ---- parquet ---------------------------------------------------------------------------
    def _path(self) -> str:
        return f"{self.writer.bucket_dir}/{self._name}"

    def _write_parquet(self, table: pa.Table) -> None:
        start = 0
        while start < table.num_rows:
            if self._parquet is None:
                self._open_file(table)
            assert self._parquet is not None and self._sink is not None
            part = table.slice(start, self._chunk_rows)
            self._parquet.write_table(part, row_group_size=max(self._chunk_rows, 1))
            self._summaries.append(_summary(part, self.writer.key_names))
            self._rows += part.num_rows
            kinds = part.column(VALUE_KIND).combine_chunks().to_numpy(zero_copy_only=False)
            self._deletes += int(np.count_nonzero((kinds == DELETE) | (kinds == UPDATE_BEFORE)))
            start += part.num_rows
            if self._sink.tell() >= self.writer.target_file_size:
                self._close_file()

    def _open_file(self, sample: pa.Table) -> None:
        self._name = self.writer.new_file_name(PARQUET)
        self._sink = self.writer.file_io.open_output(self._path())
        if self._dictionary is None:
            self._dictionary = dictionary_columns(sample, self.writer.options_raw)
        self._parquet = self.writer.parquet_writer(self._sink, sample, self._dictionary)
        # Row groups as `DataFileWriter.write_run` sizes them: about a quarter of a file's rows.
        row_bytes = max(sample.nbytes / max(sample.num_rows, 1), 1.0)
        self._chunk_rows = max(1024, int(self.writer.target_file_size / row_bytes / 4))

    def _close_file(self) -> None:
        assert self._parquet is not None and self._sink is not None and self._name is not None
        self._parquet.close()
        self._sink.close()
        self._parquet = self._sink = None
        size = self.writer.file_io.file_size(self._path())
        summary = pa.concat_tables(self._summaries)
        self.written.append(self.writer.file_meta(
            self._name, size, summary, self.level, None, self.file_source,
            row_count=self._rows, delete_row_count=self._deletes))
        self._name, self._summaries, self._rows, self._deletes = None, [], 0, 0

    # ---- orc, avro ---------------------------------------------------------------------------
    def _flush_pending(self) -> None:
        rows = pa.concat_tables(self._pending)
        self._pending, self._pending_bytes = [], 0
        try:
            self.written += self.writer.write_run(rows, level=self.level, file_source=self.file_source)
        except Exception:
            self.abort()
            raise


def _summary(part: pa.Table, key_names: list[str]) -> pa.Table:
    """The rows of `part` (file layout) that decide its manifest entry: first, last, and those
    holding each key column's and `_SEQUENCE_NUMBER`'s smallest and largest values."""
    n = part.num_rows
    picks = [0]
    for name in [KEY_FIELD_PREFIX + k for k in key_names] + [SEQUENCE_NUMBER]:
        column = part.column(name)
        if pa.types.is_floating(column.type):
            order = total_order(column.to_numpy())
            picks += [int(np.argmin(order)), int(np.argmax(order))]
            continue
        mm = pc.min_max(column)
        picks += [pc.index(column, mm["min"]).as_py(), pc.index(column, mm["max"]).as_py()]
    picks.append(n - 1)
    columns = [KEY_FIELD_PREFIX + k for k in key_names] + [SEQUENCE_NUMBER, VALUE_KIND]
    return part.select(columns).take(pa.array(picks))
