"""Checks of a data file against what its manifest entry records, so that damage the format itself
does not detect is caught before its rows are used.

Parquet page checksums (CRC-32 of each page's bytes) catch a flip in the data, but they do not
cover the page headers or the footer. A flipped bit there can still decode: the footer's row
count drops rows, a column's physical or logical type changes (DOUBLE read as FLOAT, a DECIMAL's
scale), a file is cut or grown. Every one of those disagrees with the manifest entry (file size,
row count) or with the table schema (column types), which is what these checks compare.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.binary_row import deserialize_row, serialize_row
from lakehouse_engine.format.manifest_entries import DataFileMeta, ManifestEntry
from lakehouse_engine.schema import SEQUENCE_NUMBER
from lakehouse_engine.types import DataType


def listed_in(meta: DataFileMeta | None) -> str:
    """The manifest that lists a data file, as a clause for errors where the file and its manifest
    entry disagree: either may be the damaged one (a flipped bit in the entry's file name reads as
    a missing file, in its size as a file of another size)."""
    if meta is None or meta.listed_in is None:
        return ""
    return f" (listed in manifest {meta.listed_in}: the manifest or the file is damaged)"


_POSTPONE_BUCKET = -2


def check_entry(entry: ManifestEntry, postpone_table: bool, primary_key: bool) -> None:
    """Raise CorruptFileError, naming the manifest, when a manifest entry's numbers cannot be true.

    Manifests of other writers carry no checksum (this engine's have one per zstd frame), so a
    flipped bit there decodes as another value. Those that would change what a read returns
    without another check noticing: a bucket of -2 (a postpone-bucket file, which readers skip)
    in a table without postpone buckets, and a sequence range with min above max or below 0
    (a flipped sign makes two files' ranges look disjoint in the wrong order, so they would be
    merged without reading `_SEQUENCE_NUMBER`).
    """
    f = entry.file
    problem = None
    if entry.bucket == _POSTPONE_BUCKET and not postpone_table:
        problem = "bucket -2 (postpone), in a table without postpone buckets"
    elif primary_key and not 0 <= f.min_sequence_number <= f.max_sequence_number:
        problem = f"sequence numbers {f.min_sequence_number} to {f.max_sequence_number}"
    if problem is not None:
        raise CorruptFileError(f"manifest {f.listed_in or '(unknown)'} is damaged: its entry for "
                               f"data file {f.file_name} records {problem}")


def check_sequence_range(path: str, sequence: pa.ChunkedArray | pa.Array, meta: DataFileMeta) -> None:
    """Raise CorruptFileError when the `_SEQUENCE_NUMBER` column of a whole data file does not span
    the range its manifest entry records (merge order is decided by that range)."""
    if len(sequence) == 0:
        return
    mm = pc.min_max(sequence)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if (lo, hi) != (meta.min_sequence_number, meta.max_sequence_number):
        raise CorruptFileError(
            f"data file {path}: its sequence numbers run from {lo} to {hi}, but its manifest entry "
            f"records {meta.min_sequence_number} to {meta.max_sequence_number}{listed_in(meta)}")


def check_file_size(path: str, actual: int, meta: DataFileMeta | None) -> None:
    """Raise CorruptFileError when the file's size is not the size its manifest entry records."""
    if meta is not None and actual != meta.file_size:
        raise CorruptFileError(
            f"data file {path} has {actual} bytes, but its manifest entry records {meta.file_size} "
            f"(truncated, grown or replaced){listed_in(meta)}")


def check_row_count(path: str, rows: int, meta: DataFileMeta | None) -> None:
    """Raise CorruptFileError when a whole read of the file returned another number of rows than
    its manifest entry records."""
    if meta is not None and rows != meta.row_count:
        raise CorruptFileError(
            f"data file {path} holds {rows} rows, but its manifest entry records {meta.row_count}"
            f"{listed_in(meta)}")


def _comparable(t: pa.DataType) -> pa.DataType:
    """The type with encodings other writers choose freely folded away (dictionary, large, view
    and fixed-size variants of strings and bytes, a timestamp's time zone), so only a change of
    meaning remains."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_timestamp(t):
        # TIMESTAMP(0) is seconds to us, but parquet has no seconds: Paimon's writers store it as
        # millis. Any other unit is one a writer chose for the column's precision, so a
        # different one is a damaged footer (micros read as millis are 1000 times too late).
        return pa.timestamp("ms" if t.unit == "s" else t.unit)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return pa.binary()  # pypaimon stores BINARY(n) as fixed-size binary
    return t


def check_column_types(path: str, file_schema: pa.Schema, expected: pa.Schema | None,
                       schema_file: str | None = None) -> None:
    """Raise CorruptFileError when a column of the file has another type than the table gives it.

    Nullability is not compared (writers differ: pypaimon marks primary keys nullable). A cast
    would otherwise turn a flipped type into other values silently: a DECIMAL(10, 2) whose footer
    says scale 10 reads as values a hundred million times smaller.
    """
    if expected is None:
        return
    for field in expected:
        index = file_schema.get_field_index(field.name)
        if index < 0:
            continue  # reported by the column check, or added by schema evolution
        found = _comparable(file_schema.field(index).type)
        if found != _comparable(field.type):
            raise CorruptFileError(
                f"data file {path}: column {field.name!r} has type {file_schema.field(index).type} "
                f"in the file, but the table's schema{' ' + schema_file if schema_file else ''} "
                f"says {field.type}")


def check_key_range(path: str, rows: pa.Table, key_names: Sequence[str], key_types: Sequence[DataType],
                    meta: DataFileMeta) -> None:
    """Raise CorruptFileError when the first or last key of a whole primary-key data file lies
    outside the `_MIN_KEY` .. `_MAX_KEY` range its manifest entry records.

    Readers decide from those keys which files overlap and must be merged; a flipped bit there
    would leave two versions of a key unmerged. Rows are sorted by key, so two keys are compared.
    A range wider than the keys is no damage: Paimon 0.9's full-compaction rewrite records the
    key of a delete it drops from the file (tests/java/test_changelog_sweep_java.py, seed 17).
    """
    if rows.num_rows == 0 or not key_names:
        return
    if any(t.root in ("TIMESTAMP", "TIMESTAMP_LTZ") and (t.precision or 0) > 6 for t in key_types):
        # pypaimon 2.1.0 records the nanoseconds of TIMESTAMP(7..9) keys inexactly in
        # `_MIN_KEY`/`_MAX_KEY`: its files would fail a byte comparison (interop tested).
        return
    first_key = [rows.column(k)[0].as_py() for k in key_names]
    last_key = [rows.column(k)[-1].as_py() for k in key_names]
    first, last = serialize_row(first_key, key_types), serialize_row(last_key, key_types)
    if (first != meta.min_key or last != meta.max_key) and not _within(first_key, last_key, key_types, meta):
        raise CorruptFileError(
            f"data file {path}: its keys run from {first.hex()} to {last.hex()}, but its manifest "
            f"entry records {meta.min_key.hex()} to {meta.max_key.hex()}"
            f"{listed_in(meta) or ' (the manifest listing it, or the file, is damaged)'}")


def _within(first: list[object], last: list[object], key_types: Sequence[DataType], meta: DataFileMeta) -> bool:
    """Whether keys `first` .. `last` lie inside the entry's recorded key range (compared by value:
    BinaryRow bytes do not sort as keys do); False when the recorded keys do not even decode."""
    try:
        low = deserialize_row(meta.min_key, key_types)
        high = deserialize_row(meta.max_key, key_types)
        return bool(low <= first and last <= high)
    except (ValueError, TypeError, IndexError, struct.error, UnicodeDecodeError):
        return False


def checked_batches(batches: Iterator[pa.Table], path: str, key_names: Sequence[str],
                    key_types: Sequence[DataType], meta: DataFileMeta) -> Iterator[pa.Table]:
    """`batches` (a whole file, read batch by batch) passed through, checking at the end what
    `check_key_range` and `check_sequence_range` check of a whole read: the first and last keys,
    and the span of `_SEQUENCE_NUMBER` when the batches hold it."""
    first: pa.Table | None = None
    last: pa.Table | None = None
    lo = hi = None
    for batch in batches:
        if batch.num_rows:
            if first is None:
                first = batch.slice(0, 1)
            last = batch.slice(batch.num_rows - 1, 1)
            if SEQUENCE_NUMBER in batch.column_names:
                mm = pc.min_max(batch.column(SEQUENCE_NUMBER))
                lo = mm["min"].as_py() if lo is None else min(lo, mm["min"].as_py())
                hi = mm["max"].as_py() if hi is None else max(hi, mm["max"].as_py())
        yield batch
    if first is None or last is None:
        return
    if key_names and all(k in first.column_names for k in key_names):
        ends = pa.concat_tables([first.select(list(key_names)), last.select(list(key_names))])
        check_key_range(path, ends, key_names, key_types, meta)
    if lo is not None:
        check_sequence_range(path, pa.array([lo, hi], pa.int64()), meta)
