"""The Avro form of Paimon's manifest records (ManifestEntry, ManifestFileMeta, IndexManifestEntry;
the dataclasses are in `manifest_entries`): schemas, record <-> dataclass, codecs.

Writers use the exact schemas pypaimon 2.1.0 writes (zstandard codec). Readers look fields up by
name with defaults, so files from Java Paimon whose schemas lack newer optional fields still decode.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar, cast

import fastavro

from lakehouse_engine.errors import CorruptFileError, UnsupportedError
from lakehouse_engine.format.manifest_entries import (
    DataFileMeta,
    DeletionVectorMeta,
    FileKind,
    GlobalIndexMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

_T = TypeVar("_T")
_MANIFEST_VERSION = 2
_INDEX_MANIFEST_VERSION = 1
DEFAULT_CODEC = "zstandard"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_MS = timedelta(milliseconds=1)
_KIND_BY_VALUE = {0: FileKind.ADD, 1: FileKind.DELETE}


# ---- Avro schemas, field for field as pypaimon 2.1.0 writes them ----------------------------
def _req(name: str, avro_type: Any) -> dict[str, Any]:
    return {"name": name, "type": avro_type}


def _opt(name: str, avro_type: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro_type], "default": None}


def _array(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _record(name: str, *fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields)}


def _stats_schema(record_name: str) -> dict[str, Any]:
    return _record(
        record_name,
        _req("_MIN_VALUES", "bytes"),
        _req("_MAX_VALUES", "bytes"),
        _opt("_NULL_COUNTS", _array(["null", "long"])),
    )


# fmt: off
_DATA_FILE_META_SCHEMA = _record(
    "DataFileMeta",
    _req("_FILE_NAME", "string"), _req("_FILE_SIZE", "long"), _req("_ROW_COUNT", "long"),
    _req("_MIN_KEY", "bytes"), _req("_MAX_KEY", "bytes"),
    _req("_KEY_STATS", _stats_schema("record_KEY_STATS")),
    _req("_VALUE_STATS", _stats_schema("record_VALUE_STATS")),
    _req("_MIN_SEQUENCE_NUMBER", "long"), _req("_MAX_SEQUENCE_NUMBER", "long"),
    _req("_SCHEMA_ID", "long"), _req("_LEVEL", "int"), _req("_EXTRA_FILES", _array("string")),
    _opt("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
    _opt("_DELETE_ROW_COUNT", "long"), _opt("_EMBEDDED_FILE_INDEX", "bytes"),
    _opt("_FILE_SOURCE", "int"), _opt("_VALUE_STATS_COLS", _array("string")),
    _opt("_EXTERNAL_PATH", "string"), _opt("_FIRST_ROW_ID", "long"),
    _opt("_WRITE_COLS", _array("string")), _opt("_WRITE_COLS_SEQUENCES", _array("long")),
)

MANIFEST_ENTRY_SCHEMA = _record(
    "ManifestEntry",
    _req("_VERSION", "int"), _req("_KIND", "int"), _req("_PARTITION", "bytes"),
    _req("_BUCKET", "int"), _req("_TOTAL_BUCKETS", "int"), _req("_FILE", _DATA_FILE_META_SCHEMA),
)

MANIFEST_FILE_META_SCHEMA = _record(
    "ManifestFileMeta",
    _req("_VERSION", "int"), _req("_FILE_NAME", "string"), _req("_FILE_SIZE", "long"),
    _req("_NUM_ADDED_FILES", "long"), _req("_NUM_DELETED_FILES", "long"),
    _req("_PARTITION_STATS", _stats_schema("record_PARTITION_STATS")), _req("_SCHEMA_ID", "long"),
    _opt("_MIN_BUCKET", "int"), _opt("_MAX_BUCKET", "int"),
    _opt("_MIN_LEVEL", "int"), _opt("_MAX_LEVEL", "int"),
    _opt("_MIN_ROW_ID", "long"), _opt("_MAX_ROW_ID", "long"),
    _opt("_TOTAL_BUCKETS", "int"), _opt("_EXTRA_FILES", _array("string")),
)

_DV_META_SCHEMA = _record(
    "DeletionVectorMeta",
    _req("f0", "string"), _req("f1", "int"), _req("f2", "int"), _opt("_CARDINALITY", "long"),
)

_GLOBAL_INDEX_META_SCHEMA = _record(
    "GlobalIndexMeta",
    _req("_ROW_RANGE_START", "long"), _req("_ROW_RANGE_END", "long"),
    _req("_INDEX_FIELD_ID", "int"), _opt("_EXTRA_FIELD_IDS", _array("int")),
    _opt("_INDEX_META", "bytes"), _opt("_SOURCE_META", "bytes"),
)

INDEX_MANIFEST_ENTRY_SCHEMA = _record(
    "IndexManifestEntry",
    _req("_VERSION", "int"), _req("_KIND", "int"), _req("_PARTITION", "bytes"),
    _req("_BUCKET", "int"), _req("_INDEX_TYPE", "string"), _req("_FILE_NAME", "string"),
    _req("_FILE_SIZE", "long"), _req("_ROW_COUNT", "long"),
    _opt("_DELETIONS_VECTORS_RANGES", _array(_DV_META_SCHEMA)),
    _opt("_EXTERNAL_PATH", "string"), _opt("_GLOBAL_INDEX", _GLOBAL_INDEX_META_SCHEMA),
)
# fmt: on

# The deletion-vector ranges' field. Index manifests of Paimon 0.9 (its IndexManifestEntry.SCHEMA),
# 1.x and pypaimon 2.1.0 all name it `_DELETIONS_VECTORS_RANGES`, and each reads it by name (0.9
# finds no vectors under any other name: tests/java/test_deletion_vectors_java.py). Paimon 0.9's
# IndexFileMeta.SCHEMA, which never reaches an index manifest, says `_DELETION_VECTORS_RANGES`;
# a file carrying only that name is read too.
DV_RANGES_FIELDS = ("_DELETIONS_VECTORS_RANGES", "_DELETION_VECTORS_RANGES")


# ---- record <-> dataclass ----------------------------------------------------------------------
# Dense on purpose: one line per group of fields reads better than one line per field.
# fmt: off
def _stats_to_record(s: SimpleStats) -> dict[str, Any]:
    return {"_MIN_VALUES": s.min_values, "_MAX_VALUES": s.max_values, "_NULL_COUNTS": s.null_counts}


def _stats_from_record(r: dict[str, Any]) -> SimpleStats:
    return SimpleStats(r["_MIN_VALUES"], r["_MAX_VALUES"], r.get("_NULL_COUNTS"))


def _opt_tuple(value: list[Any] | None) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


def _opt_list(value: tuple[Any, ...] | None) -> list[Any] | None:
    return None if value is None else list(value)


def _millis(value: Any) -> int | None:
    # fastavro turns timestamp-millis into aware datetimes and local-timestamp-millis into naive ones.
    if value is None:
        return None
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
        return (aware - _EPOCH) // _ONE_MS
    return int(value)


def _entry_to_record(e: ManifestEntry) -> dict[str, Any]:
    f = e.file
    return {
        "_VERSION": _MANIFEST_VERSION, "_KIND": int(e.kind), "_PARTITION": e.partition,
        "_BUCKET": e.bucket, "_TOTAL_BUCKETS": e.total_buckets,
        "_FILE": {
            "_FILE_NAME": f.file_name, "_FILE_SIZE": f.file_size, "_ROW_COUNT": f.row_count,
            "_MIN_KEY": f.min_key, "_MAX_KEY": f.max_key,
            "_KEY_STATS": _stats_to_record(f.key_stats),
            "_VALUE_STATS": _stats_to_record(f.value_stats),
            "_MIN_SEQUENCE_NUMBER": f.min_sequence_number,
            "_MAX_SEQUENCE_NUMBER": f.max_sequence_number,
            "_SCHEMA_ID": f.schema_id, "_LEVEL": f.level, "_EXTRA_FILES": list(f.extra_files),
            "_CREATION_TIME": f.creation_time_millis, "_DELETE_ROW_COUNT": f.delete_row_count,
            "_EMBEDDED_FILE_INDEX": f.embedded_index, "_FILE_SOURCE": f.file_source,
            "_VALUE_STATS_COLS": _opt_list(f.value_stats_cols), "_EXTERNAL_PATH": f.external_path,
            "_FIRST_ROW_ID": f.first_row_id, "_WRITE_COLS": _opt_list(f.write_cols),
            "_WRITE_COLS_SEQUENCES": _opt_list(f.write_cols_sequences),
        },
    }


def _entry_from_record(r: dict[str, Any], listed_in: str | None = None) -> ManifestEntry:
    f = r["_FILE"]
    g = f.get  # optional fields: absent from older (Java) writer schemas
    meta = DataFileMeta(
        f["_FILE_NAME"], f["_FILE_SIZE"], f["_ROW_COUNT"], f["_MIN_KEY"], f["_MAX_KEY"],
        _stats_from_record(f["_KEY_STATS"]), _stats_from_record(f["_VALUE_STATS"]),
        f["_MIN_SEQUENCE_NUMBER"], f["_MAX_SEQUENCE_NUMBER"], f["_SCHEMA_ID"], f["_LEVEL"],
        tuple(g("_EXTRA_FILES") or ()), _millis(g("_CREATION_TIME")), g("_DELETE_ROW_COUNT"),
        g("_EMBEDDED_FILE_INDEX"), g("_FILE_SOURCE"), _opt_tuple(g("_VALUE_STATS_COLS")),
        g("_EXTERNAL_PATH"), g("_FIRST_ROW_ID"), _opt_tuple(g("_WRITE_COLS")),
        _opt_tuple(g("_WRITE_COLS_SEQUENCES")), listed_in,
    )
    return ManifestEntry(
        _KIND_BY_VALUE[r["_KIND"]], r["_PARTITION"], r["_BUCKET"], r["_TOTAL_BUCKETS"], meta
    )


def _file_meta_to_record(m: ManifestFileMeta) -> dict[str, Any]:
    return {
        "_VERSION": _MANIFEST_VERSION, "_FILE_NAME": m.file_name, "_FILE_SIZE": m.file_size,
        "_NUM_ADDED_FILES": m.num_added_files, "_NUM_DELETED_FILES": m.num_deleted_files,
        "_PARTITION_STATS": _stats_to_record(m.partition_stats), "_SCHEMA_ID": m.schema_id,
        "_MIN_BUCKET": m.min_bucket, "_MAX_BUCKET": m.max_bucket,
        "_MIN_LEVEL": m.min_level, "_MAX_LEVEL": m.max_level,
        "_MIN_ROW_ID": m.min_row_id, "_MAX_ROW_ID": m.max_row_id,
        "_TOTAL_BUCKETS": m.total_buckets, "_EXTRA_FILES": _opt_list(m.extra_files),
    }


def _file_meta_from_record(r: dict[str, Any]) -> ManifestFileMeta:
    g = r.get
    return ManifestFileMeta(
        r["_FILE_NAME"], r["_FILE_SIZE"], r["_NUM_ADDED_FILES"], r["_NUM_DELETED_FILES"],
        _stats_from_record(r["_PARTITION_STATS"]), r["_SCHEMA_ID"],
        g("_MIN_BUCKET"), g("_MAX_BUCKET"), g("_MIN_LEVEL"), g("_MAX_LEVEL"),
        g("_TOTAL_BUCKETS"), g("_MIN_ROW_ID"), g("_MAX_ROW_ID"), _opt_tuple(g("_EXTRA_FILES")),
    )


def _index_entry_to_record(e: IndexManifestEntry) -> dict[str, Any]:
    dv = None if e.dv_ranges is None else [
        {"f0": d.data_file_name, "f1": d.offset, "f2": d.length, "_CARDINALITY": d.cardinality}
        for d in e.dv_ranges
    ]
    gi = e.global_index
    gi_record = None if gi is None else {
        "_ROW_RANGE_START": gi.row_range_start, "_ROW_RANGE_END": gi.row_range_end,
        "_INDEX_FIELD_ID": gi.index_field_id, "_EXTRA_FIELD_IDS": _opt_list(gi.extra_field_ids),
        "_INDEX_META": gi.index_meta, "_SOURCE_META": gi.source_meta,
    }
    return {
        "_VERSION": _INDEX_MANIFEST_VERSION, "_KIND": int(e.kind), "_PARTITION": e.partition,
        "_BUCKET": e.bucket, "_INDEX_TYPE": e.index_type, "_FILE_NAME": e.file_name,
        "_FILE_SIZE": e.file_size, "_ROW_COUNT": e.row_count, "_DELETIONS_VECTORS_RANGES": dv,
        "_EXTERNAL_PATH": e.external_path, "_GLOBAL_INDEX": gi_record,
    }


def _dv_ranges(records: list[dict[str, Any]] | None) -> tuple[DeletionVectorMeta, ...] | None:
    if records is None:
        return None
    return tuple(DeletionVectorMeta(d["f0"], d["f1"], d["f2"], d.get("_CARDINALITY")) for d in records)


def _index_entry_from_record(r: dict[str, Any]) -> IndexManifestEntry:
    ranges = [_dv_ranges(r.get(name)) for name in DV_RANGES_FIELDS]
    dv = ranges[0] if ranges[0] is not None else ranges[1]
    where = [None if rs is None else [(m.data_file_name, m.offset, m.length) for m in rs] for rs in ranges]
    if None not in where and where[0] != where[1]:
        raise ValueError(f"index file {r['_FILE_NAME']}: {DV_RANGES_FIELDS[0]} and "
                         f"{DV_RANGES_FIELDS[1]} list different deletion-vector ranges")
    gi = r.get("_GLOBAL_INDEX")
    gi_meta = None if gi is None else GlobalIndexMeta(
        gi["_ROW_RANGE_START"], gi["_ROW_RANGE_END"], gi["_INDEX_FIELD_ID"],
        _opt_tuple(gi.get("_EXTRA_FIELD_IDS")), gi.get("_INDEX_META"), gi.get("_SOURCE_META"),
    )
    return IndexManifestEntry(
        _KIND_BY_VALUE[r["_KIND"]], r["_PARTITION"], r["_BUCKET"], r["_INDEX_TYPE"],
        r["_FILE_NAME"], r["_FILE_SIZE"], r["_ROW_COUNT"], dv, r.get("_EXTERNAL_PATH"), gi_meta,
    )
# fmt: on


# ---- codecs ------------------------------------------------------------------------------------
def _encode(schema: dict[str, Any], records: Iterable[dict[str, Any]], codec: str) -> bytes:
    # Hand fastavro the unparsed schema: the header then carries it with pypaimon's key order.
    buf = io.BytesIO()
    if codec != "zstandard":
        fastavro.writer(buf, schema, records, codec=codec)
        return buf.getvalue()
    # Avro blocks carry no checksum: a flipped bit in a `_MAX_SEQUENCE_NUMBER` or a `_BUCKET`
    # still decodes, as another value. A zstd frame can carry one (XXH64 of the decompressed
    # bytes, checked by every zstd decoder: Java's zstd-jni, fastavro's), which fastavro does not
    # ask for; so fastavro writes the header and the blocks are framed here, with checksums.
    fastavro.writer(buf, schema, [], codec=codec)
    sync = buf.getvalue()[-16:]
    parsed = fastavro.parse_schema(schema)
    block = io.BytesIO()
    count = 0
    for record in records:
        fastavro.schemaless_writer(block, parsed, record)
        count += 1
        if block.tell() >= _BLOCK_BYTES:
            _write_block(buf, block.getvalue(), count, sync)
            block, count = io.BytesIO(), 0
    if count:
        _write_block(buf, block.getvalue(), count, sync)
    return buf.getvalue()


_BLOCK_BYTES = 1 << 20
_CHECKSUM: dict[int, int] = {zstd.CompressionParameter.checksum_flag: 1}


def _avro_long(n: int) -> bytes:
    """An Avro `long`: zig-zag, then base-128 varint."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _write_block(buf: io.BytesIO, raw: bytes, count: int, sync: bytes) -> None:
    """One Avro block of `count` records, zstd-compressed with a content checksum."""
    data = zstd.compress(raw, options=_CHECKSUM)
    buf.write(_avro_long(count) + _avro_long(len(data)) + data + sync)


def _decode(
    data: bytes, file_name: str, what: str, build: Callable[[Any], _T], expected_size: int | None
) -> list[_T]:
    if expected_size is not None and len(data) != expected_size:
        raise CorruptFileError(
            f"{what} file {file_name!r} has {len(data)} bytes, but {expected_size} were recorded"
        )
    try:
        return [build(record) for record in _records(data, file_name, what)]
    except CorruptFileError:
        raise
    except KeyError as exc:
        raise CorruptFileError(
            f"{what} file {file_name!r} is not a valid {what} (missing or bad value for {exc})"
        ) from exc
    except (ValueError, ImportError) as exc:
        if "you need to install" in str(exc) or isinstance(exc, ImportError):
            raise UnsupportedError(f"cannot read {what} file {file_name!r}: {exc}") from exc
        raise CorruptFileError(f"cannot decode {what} file {file_name!r}: {exc}") from exc
    except Exception as exc:  # fastavro and the codecs raise many types on garbage input
        raise CorruptFileError(f"cannot decode {what} file {file_name!r}: {exc!r}") from exc


def _records(data: bytes, file_name: str, what: str) -> Iterator[dict[str, Any]]:
    """The records of an Avro file, block by block, checking each block is decoded to its end.

    Avro blocks carry no checksum. A flipped bit in a block's record count makes a reader decode
    fewer records and drop the rest silently (a manifest list that forgets a manifest reads as
    a table without its rows); the bytes left over in the block give it away.
    """
    for block in fastavro.block_reader(io.BytesIO(data)):
        yield from cast(Iterator[dict[str, Any]], iter(block))
        decoded = cast(io.BytesIO, block.bytes_)  # type: ignore[attr-defined]  # untyped in stubs
        left = len(decoded.getbuffer()) - decoded.tell()
        if left:
            raise CorruptFileError(
                f"{what} file {file_name!r}: an Avro block at offset {block.offset} records "
                f"{block.num_records} records but holds {left} more bytes")


def encode_manifest_entries(entries: Iterable[ManifestEntry], codec: str = DEFAULT_CODEC) -> bytes:
    """Serialize entries as a Paimon manifest file (Avro, `_VERSION` 2)."""
    return _encode(MANIFEST_ENTRY_SCHEMA, map(_entry_to_record, entries), codec)


def decode_manifest_entries(
    data: bytes, file_name: str, expected_size: int | None = None
) -> list[ManifestEntry]:
    """Parse a manifest file; raise CorruptFileError naming `file_name` if it cannot be decoded.

    Pass `expected_size` (the size a manifest list recorded) to also catch a file truncated at an
    Avro block boundary, which otherwise decodes as a shorter, valid file.
    """
    return _decode(data, file_name, "manifest", lambda r: _entry_from_record(r, file_name),
                   expected_size)


def encode_manifest_file_metas(
    metas: Iterable[ManifestFileMeta], codec: str = DEFAULT_CODEC
) -> bytes:
    """Serialize manifest file metas as a Paimon manifest list (Avro, `_VERSION` 2)."""
    return _encode(MANIFEST_FILE_META_SCHEMA, map(_file_meta_to_record, metas), codec)


def decode_manifest_file_metas(
    data: bytes, file_name: str, expected_size: int | None = None
) -> list[ManifestFileMeta]:
    """Parse a manifest list; raise CorruptFileError naming `file_name` if it cannot be decoded."""
    return _decode(data, file_name, "manifest list", _file_meta_from_record, expected_size)


def encode_index_manifest_entries(
    entries: Iterable[IndexManifestEntry], codec: str = DEFAULT_CODEC
) -> bytes:
    """Serialize index manifest entries as a Paimon index manifest (Avro, `_VERSION` 1)."""
    return _encode(INDEX_MANIFEST_ENTRY_SCHEMA, map(_index_entry_to_record, entries), codec)


def decode_index_manifest_entries(
    data: bytes, file_name: str, expected_size: int | None = None
) -> list[IndexManifestEntry]:
    """Parse an index manifest; raise CorruptFileError naming `file_name` if it cannot be decoded."""
    return _decode(data, file_name, "index manifest", _index_entry_from_record, expected_size)
