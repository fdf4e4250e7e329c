"""The formats data files are written in: parquet (the default), orc and avro, as Paimon lays them out.

`file.format` picks the format, `file.format.per.level` overrides it per LSM level ("0:avro,5:orc"),
and postpone-bucket files are Avro unless `file.format` is set, as pypaimon writes them. Avro
schemas follow Paimon's `AvroSchemaConverter`: record `org.apache.paimon.avro.generated.record`,
nested records named `record_<field>`, nullable types as `["null", type]` unions with a null default.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.orc as orc

from lakehouse_engine.errors import InvalidOptionError, UnsupportedError
from lakehouse_engine.mergetree.parquet_dictionary import check_dictionary_options
from lakehouse_engine.options import (
    FILE_COMPRESSION,
    FILE_FORMAT,
    FILE_FORMAT_PER_LEVEL,
    CoreOptions,
)
from lakehouse_engine.types import MAP, DataType

PARQUET = "parquet"
ORC = "orc"
AVRO = "avro"
FORMATS = (PARQUET, ORC, AVRO)

_AVRO_NAMESPACE = "org.apache.paimon.avro.generated"
_AVRO_CODECS = {"zstd": "zstandard", "gzip": "deflate", "none": "null", "uncompressed": "null"}
# Snappy in Avro (as Paimon and pypaimon write it) needs fastavro's snappy codec: the `cramjam`
# package (the `snappy` extra), which the engine does not install by default.
_AVRO_SNAPPY = "snappy"


def _avro_codecs() -> dict[str, str]:
    try:
        import cramjam  # noqa: F401
    except ImportError:
        return _AVRO_CODECS
    return {**_AVRO_CODECS, _AVRO_SNAPPY: "snappy"}
_ORC_CODECS = {"zstd": "zstd", "snappy": "snappy", "lz4": "lz4", "gzip": "zlib",
               "none": "uncompressed", "uncompressed": "uncompressed"}


def format_per_level(options: CoreOptions) -> dict[int, str]:
    """`file.format.per.level` as {level: format}; InvalidOptionError names a bad entry."""
    text = options.get(FILE_FORMAT_PER_LEVEL)
    result: dict[int, str] = {}
    for entry in (text or "").split(","):
        if not entry.strip():
            continue
        level, sep, fmt = entry.partition(":")
        fmt = fmt.strip().lower()
        if not sep or not level.strip().isdigit() or fmt not in FORMATS:
            raise InvalidOptionError(
                f"option '{FILE_FORMAT_PER_LEVEL.key}' has invalid entry {entry.strip()!r}: expected "
                f"'<level>:<format>' with a format of {', '.join(FORMATS)}")
        result[int(level)] = fmt
    return result


def file_format_of(options: CoreOptions, level: int, postpone_avro: bool = False) -> str:
    """The format a data file of `level` is written in; `postpone_avro` for a postpone-bucket
    file (see `postpone_files_in_avro`)."""
    per_level = format_per_level(options)
    if level in per_level:
        return per_level[level]
    if postpone_avro:
        return AVRO
    return str(options.require(FILE_FORMAT))


def postpone_files_in_avro(options: CoreOptions, types: dict[str, DataType]) -> bool:
    """pypaimon writes postpone-bucket files as Avro unless `file.format` is set; so do we, when
    Avro can hold the columns and the compression (else they take the table's format)."""
    if FILE_FORMAT.key in options.raw or str(options.require(FILE_COMPRESSION)) not in _avro_codecs():
        return False
    return not any(_avro_problem(t) for t in types.values())


def check_format_fits(options: CoreOptions, types: dict[str, DataType]) -> None:
    """Refuse, at table creation, a format that cannot hold a column type or compression:
    InvalidOptionError names the column or option."""
    check_dictionary_options(options.raw)
    formats = {str(options.require(FILE_FORMAT)), *format_per_level(options).values()}
    compression = str(options.require(FILE_COMPRESSION))
    if AVRO in formats:
        if compression not in _avro_codecs():
            hint = ("; snappy needs the cramjam package: pip install 'lakehouse-engine[snappy]'"
                    if compression == _AVRO_SNAPPY else "")
            raise InvalidOptionError(
                f"option 'file.compression' = {compression!r} cannot compress avro data files "
                f"(use one of {', '.join(_avro_codecs())}){hint}")
        for name, t in types.items():
            problem = _avro_problem(t)
            if problem:
                raise InvalidOptionError(f"column '{name}' ({t}) cannot be stored in avro: {problem}")
    if ORC in formats and compression not in _ORC_CODECS:
        raise InvalidOptionError(
            f"option 'file.compression' = {compression!r} cannot compress orc data files "
            f"(use one of {', '.join(_ORC_CODECS)})")


def _avro_problem(t: DataType) -> str | None:
    if t.is_timestamp and (t.precision if t.precision is not None else 6) > 6:
        return "Avro holds timestamps of precision 6 at most"
    if t.root == MAP and t.key is not None and not t.key.is_string:
        return "Avro maps need string keys"
    for child in t.children():
        problem = _avro_problem(child)
        if problem:
            return problem
    return None


# ---- orc -------------------------------------------------------------------------------------
# Units of an Arrow timestamp per millisecond: below-millisecond parts exist only in these.
_PER_MILLI = {"us": 1_000, "ns": 1_000_000}
_KEY_PREFIX = "_KEY_"


def check_orc_timestamps(table: pa.Table) -> None:
    """Refuse a timestamp before 1970 with a part below a millisecond in an ORC file.

    ORC stores a timestamp as seconds and nanoseconds. Paimon's Java ORC reader (ORC 1.9) rebuilds
    `millis = seconds * 1000 + nanos / 10^6` and gives Paimon `Timestamp.fromEpochMillis(millis,
    nanos % 10^6)`, which needs that remainder in [0, 999999]. Arrow's ORC writer (ours) stores a
    value before 1970 as truncated seconds and negative nanoseconds: a whole millisecond reads
    right in Java, a sub-millisecond part raises IllegalArgumentException. Java's own encoding
    (truncated seconds of the floor millisecond, positive nanoseconds) cannot be produced through
    Arrow, and misreads values between -1 s and -1 ms even in Java's own files. So such values are
    refused, naming the column; every value of precision 3 or less, and every value from 1970 on,
    is written.

    Raises:
        UnsupportedError: naming the column and the first such value.
    """
    for field, column in zip(table.schema, table.columns, strict=True):
        for chunk in column.chunks:
            _check_orc_timestamp_array(field.name.removeprefix(_KEY_PREFIX), chunk)


def _check_orc_timestamp_array(name: str, array: pa.Array) -> None:
    t = array.type
    if pa.types.is_timestamp(t) and t.unit in _PER_MILLI:
        values = array.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero((values < 0) & (values % _PER_MILLI[t.unit] != 0))
        if len(bad):
            raise UnsupportedError(
                f"column '{name}' holds {array[int(bad[0])]}, a TIMESTAMP before 1970 with a part "
                f"below a millisecond, which Paimon's Java ORC reader cannot read; write this table "
                f"as parquet or avro ('file.format') or round such values to milliseconds")
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            _check_orc_timestamp_array(f"{name}.{t.field(i).name}", array.field(i))
    elif pa.types.is_map(t):
        _check_orc_timestamp_array(name, array.keys)
        _check_orc_timestamp_array(name, array.items)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        _check_orc_timestamp_array(name, array.flatten())


def write_orc(sink: BinaryIO, table: pa.Table, compression: str) -> None:
    """One ORC file; TIME columns as their int millis, as Paimon's ORC writer stores them.
    Call `check_orc_timestamps` first (before the file is opened)."""
    columns, fields = [], []
    for f, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_time(f.type):
            column, f = column.cast(pa.int32()), pa.field(f.name, pa.int32(), f.nullable)
        elif pa.types.is_nested(f.type) and any(chunk.offset for chunk in column.chunks):
            # pyarrow's ORC writer reads a sliced ROW's null bitmap from its start, not from the
            # slice's offset (a range merge's rows are slices): copy such a column out first.
            column = pa.chunked_array([pa.concat_arrays(column.chunks)], f.type)
        columns.append(column)
        fields.append(f)
    table = pa.Table.from_arrays(columns, schema=pa.schema(fields))
    orc.write_table(table, sink, compression=_ORC_CODECS[compression])


# ---- avro ------------------------------------------------------------------------------------
def avro_schema(arrow_schema: pa.Schema) -> dict[str, Any]:
    """The Avro schema Paimon writes for these columns (see the module docstring)."""
    return _avro_record(list(arrow_schema), "record", top=True)


def _avro_record(fields: list[pa.Field], name: str, top: bool = False) -> dict[str, Any]:
    out = []
    for f in fields:
        avro = _avro_type(f.type, f"{name}_{f.name}")
        if f.nullable:
            out.append({"name": f.name, "type": ["null", avro], "default": None})
        else:
            out.append({"name": f.name, "type": avro})
    record: dict[str, Any] = {"type": "record", "name": name, "fields": out}
    if top:
        record["namespace"] = _AVRO_NAMESPACE
    return record


def _nullable(t: Any, nullable: bool) -> Any:
    return ["null", t] if nullable else t


def _avro_type(t: pa.DataType, row_name: str) -> Any:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytes"
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_time(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_timestamp(t):
        millis = t.unit in ("s", "ms")
        if t.tz is None:
            logical = "timestamp-millis" if millis else "timestamp-micros"
        else:
            logical = "local-timestamp-millis" if millis else "local-timestamp-micros"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_map(t):
        return {"type": "map", "values": _nullable(_avro_type(t.item_type, row_name), t.item_field.nullable)}
    if pa.types.is_list(t):
        return {"type": "array", "items": _nullable(_avro_type(t.value_type, row_name), t.value_field.nullable)}
    if pa.types.is_struct(t):
        return _avro_record([t.field(i) for i in range(t.num_fields)], row_name)
    raise InvalidOptionError(f"Arrow type {t} cannot be stored in avro")


def write_avro(sink: BinaryIO, table: pa.Table, compression: str, zstd_level: int | None) -> None:
    """One Avro file. fastavro encodes record by record: Avro suits small files (postpone-bucket
    files, level 0), not bulk data."""
    columns = []
    for f, column in zip(table.schema, table.columns, strict=True):
        values = column.to_pylist()
        if _has_map(f.type):
            values = [_maps_as_dicts(v, f.type) for v in values]
        columns.append(values)
    names = table.column_names
    records = (dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True))
    codec = _avro_codecs()[compression]
    kwargs: dict[str, Any] = {}
    if codec == "zstandard" and zstd_level is not None:
        kwargs["codec_compression_level"] = zstd_level
    fastavro.writer(sink, fastavro.parse_schema(avro_schema(table.schema)), records, codec=codec, **kwargs)


def _has_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_list(t):
        return _has_map(t.value_type)
    if pa.types.is_struct(t):
        return any(_has_map(t.field(i).type) for i in range(t.num_fields))
    return False


def _maps_as_dicts(value: Any, t: pa.DataType) -> Any:
    """Arrow's Python maps are lists of (key, value) pairs; Avro's are dicts."""
    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: _maps_as_dicts(v, t.item_type) for k, v in value}
    if pa.types.is_list(t):
        return [_maps_as_dicts(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return {t.field(i).name: _maps_as_dicts(value[t.field(i).name], t.field(i).type)
                for i in range(t.num_fields)}
    return value

