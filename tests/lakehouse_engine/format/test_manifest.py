"""Manifest Avro codecs: round trips, pypaimon-written files, corrupt input and entry merging."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import fastavro
import pytest

from lakehouse_engine.errors import CorruptFileError, LakehouseError
from lakehouse_engine.format.manifest import (
    INDEX_MANIFEST_ENTRY_SCHEMA,
    MANIFEST_ENTRY_SCHEMA,
    MANIFEST_FILE_META_SCHEMA,
    decode_index_manifest_entries,
    decode_manifest_entries,
    decode_manifest_file_metas,
    encode_index_manifest_entries,
    encode_manifest_entries,
    encode_manifest_file_metas,
)
from lakehouse_engine.format.manifest_entries import (
    DataFileMeta,
    DeletionVectorMeta,
    FileKind,
    GlobalIndexMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
    live_files,
    merge_entries,
)

DATA = Path(__file__).parent / "data"
FIXED = DATA / "pypaimon_table"
DYNAMIC = DATA / "pypaimon_dynamic_bucket"
SHARED_SCHEMAS = Path("/work/shared/format/paimon_avro_schemas.json")

EMPTY_ROW = b"\x00" * 12
PARTITION_A = b"\x00\x00\x00\x01" + b"\x00" * 8 + b"a" + b"\x00" * 6 + b"\x81"
KEY_1 = b"\x00\x00\x00\x01" + b"\x00" * 8 + b"\x01" + b"\x00" * 7


def _file(name: str = "data-1.parquet", level: int = 0, **changes: Any) -> DataFileMeta:
    meta = DataFileMeta(
        file_name=name, file_size=100, row_count=3, min_key=KEY_1, max_key=KEY_1,
        key_stats=SimpleStats(KEY_1, KEY_1, [0]), value_stats=SimpleStats.EMPTY,
        min_sequence_number=0, max_sequence_number=2, schema_id=0, level=level,
    )  # fmt: skip
    return dataclasses.replace(meta, **changes)


def _entry(kind: FileKind, name: str = "data-1.parquet", level: int = 0, bucket: int = 0,
           partition: bytes = EMPTY_ROW) -> ManifestEntry:  # fmt: skip
    return ManifestEntry(kind, partition, bucket, 2, _file(name, level))


def _full_file() -> DataFileMeta:
    return _file(
        "data-full.parquet", level=5, extra_files=("data-full.parquet.index",),
        creation_time_millis=1_795_247_409_947, delete_row_count=1, embedded_index=b"\x01\x02",
        file_source=1, value_stats_cols=("a", "b"), external_path="s3://bucket/x.parquet",
        first_row_id=42, write_cols=("a", "b", "c"), write_cols_sequences=(1, 2, 3),
        value_stats=SimpleStats(b"min", b"max", [None, 3]),
    )  # fmt: skip


def _raw_records(data: bytes) -> list[Any]:
    return list(fastavro.reader(io.BytesIO(data)))


def _fixture_files(kind: str) -> list[Path]:
    paths = sorted((FIXED / "manifest").iterdir()) + sorted((DYNAMIC / "manifest").iterdir())
    return [p for p in paths if _writer_schema(p.read_bytes())["name"] == kind]


def _writer_schema(data: bytes) -> Any:
    return fastavro.reader(io.BytesIO(data)).writer_schema


# ---- round trips ---------------------------------------------------------------------------------
def test_manifest_entries_round_trip_with_every_optional_field_set() -> None:
    entries = [ManifestEntry(FileKind.DELETE, PARTITION_A, 3, 8, _full_file()),
               ManifestEntry(FileKind.ADD, EMPTY_ROW, -1, -1, _file())]  # fmt: skip
    assert decode_manifest_entries(encode_manifest_entries(entries), "m") == entries


def test_manifest_entries_round_trip_with_optional_fields_absent() -> None:
    entry = ManifestEntry(
        FileKind.ADD, EMPTY_ROW, 0, 1, _file(value_stats=SimpleStats(b"", b"", None))
    )
    [decoded] = decode_manifest_entries(encode_manifest_entries([entry]), "m")
    assert decoded == entry
    assert decoded.file.creation_time_millis is None and decoded.file.value_stats_cols is None


def test_manifest_is_written_with_zstandard_and_version_2() -> None:
    data = encode_manifest_entries([_entry(FileKind.ADD)])
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.codec == "zstandard"
    records: list[Any] = list(reader)
    assert [r["_VERSION"] for r in records] == [2]


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_decoding_accepts_other_codecs(codec: str) -> None:
    entries = [_entry(FileKind.ADD, "a"), _entry(FileKind.DELETE, "b")]
    data = encode_manifest_entries(entries, codec=codec)
    assert fastavro.reader(io.BytesIO(data)).codec == codec
    assert decode_manifest_entries(data, "m") == entries


def test_creation_time_is_stored_as_avro_timestamp_millis() -> None:
    millis = 1_795_247_409_947
    [record] = _raw_records(encode_manifest_entries([ManifestEntry(
        FileKind.ADD, EMPTY_ROW, 0, 1, _file(creation_time_millis=millis))]))  # fmt: skip
    expected = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=millis)
    assert record["_FILE"]["_CREATION_TIME"] == expected


def test_manifest_file_metas_round_trip() -> None:
    metas = [
        ManifestFileMeta("manifest-a-0", 2402, 2, 1, SimpleStats(PARTITION_A, PARTITION_A, [0]),
                         0, 0, 1, 0, 5, total_buckets=2, min_row_id=0, max_row_id=9,
                         extra_files=("x",)),
        ManifestFileMeta("manifest-b-0", 10, 0, 0, SimpleStats.EMPTY, 1, None, None, None, None),
    ]  # fmt: skip
    data = encode_manifest_file_metas(metas)
    assert [r["_VERSION"] for r in _raw_records(data)] == [2, 2]
    assert decode_manifest_file_metas(data, "list") == metas


def test_empty_manifest_list_round_trips() -> None:
    assert decode_manifest_file_metas(encode_manifest_file_metas([]), "list") == []


def test_index_manifest_entries_round_trip_with_dv_ranges_and_global_index() -> None:
    entries = [
        IndexManifestEntry(FileKind.ADD, EMPTY_ROW, 0, "HASH", "index-1", 16, 4),
        IndexManifestEntry(
            FileKind.DELETE, PARTITION_A, 1, "DELETION_VECTORS", "index-2", 99, 2,
            dv_ranges=(DeletionVectorMeta("data-1.parquet", 1, 20, 5),
                       DeletionVectorMeta("data-2.parquet", 21, 30)),
            external_path="s3://b/index-2",
            global_index=GlobalIndexMeta(0, 99, 3, (4, 5), b"meta", None),
        ),
    ]  # fmt: skip
    data = encode_index_manifest_entries(entries)
    assert [r["_VERSION"] for r in _raw_records(data)] == [1, 1]
    assert decode_index_manifest_entries(data, "index-manifest") == entries


def _with_ranges_named(entry: IndexManifestEntry, names: list[str], second: Any = None) -> bytes:
    """`entry` encoded with its deletion-vector ranges under each of `names` (the second one
    holding `second` when given)."""
    [record] = _raw_records(encode_index_manifest_entries([entry]))
    ranges = record.pop("_DELETIONS_VECTORS_RANGES")
    schema = json.loads(json.dumps(INDEX_MANIFEST_ENTRY_SCHEMA))
    field = next(f for f in schema["fields"] if f["name"] == "_DELETIONS_VECTORS_RANGES")
    fields = [f for f in schema["fields"] if f is not field]
    for i, name in enumerate(names):
        items = field["type"][1]["items"] if i == 0 else "DeletionVectorMeta"
        fields.append({"name": name, "type": ["null", {"type": "array", "items": items}], "default": None})
        record[name] = second if i and second is not None else ranges
    out = io.BytesIO()
    fastavro.writer(out, dict(schema, fields=fields), [record])
    return out.getvalue()


DV_ENTRY = IndexManifestEntry(FileKind.ADD, EMPTY_ROW, 0, "DELETION_VECTORS", "index-2", 29, 1,
                              dv_ranges=(DeletionVectorMeta("data-1.parquet", 1, 20, None),))


@pytest.mark.parametrize("names", [["_DELETIONS_VECTORS_RANGES"], ["_DELETION_VECTORS_RANGES"],
                                   ["_DELETION_VECTORS_RANGES", "_DELETIONS_VECTORS_RANGES"]])
def test_index_manifest_ranges_are_read_under_either_name(names: list[str]) -> None:
    # Every writer we know (Paimon 0.9 and 1.x, pypaimon) names the field `_DELETIONS_VECTORS_RANGES`;
    # Paimon 0.9's IndexFileMeta schema says `_DELETION_VECTORS_RANGES`: a file with it reads too.
    assert decode_index_manifest_entries(_with_ranges_named(DV_ENTRY, names), "m") == [DV_ENTRY]


def test_index_manifest_with_two_different_range_lists_is_corrupt() -> None:
    data = _with_ranges_named(DV_ENTRY, ["_DELETIONS_VECTORS_RANGES", "_DELETION_VECTORS_RANGES"],
                              second=[{"f0": "data-1.parquet", "f1": 1, "f2": 21, "_CARDINALITY": None}])
    with pytest.raises(CorruptFileError, match="different deletion-vector ranges"):
        decode_index_manifest_entries(data, "m")


# ---- files written by pypaimon -------------------------------------------------------------------
def test_decodes_pypaimon_manifest_of_partitioned_fixed_bucket_table() -> None:
    path = FIXED / "manifest" / "manifest-23353010-adfd-4223-a3a9-00346994c7cc-0"
    first, second = decode_manifest_entries(path.read_bytes(), path.name)
    assert (first.kind, first.partition) == (FileKind.ADD, PARTITION_A)
    assert (first.bucket, first.total_buckets) == (0, 2)
    f = first.file
    assert f.file_name == "data-702a994a-913e-4732-a62a-962f14307da7-0.parquet"
    assert (f.file_size, f.row_count, f.level, f.schema_id) == (2543, 2, 0, 0)
    assert (f.min_sequence_number, f.max_sequence_number) == (4, 5)
    assert f.key_stats == SimpleStats(KEY_1, f.max_key, [0])
    assert f.value_stats == SimpleStats.EMPTY
    assert f.creation_time_millis == 1_795_247_409_947
    assert (f.delete_row_count, f.file_source, f.value_stats_cols, f.extra_files) == (0, 0, (), ())
    assert (f.embedded_index, f.external_path, f.first_row_id, f.write_cols) == (None,) * 4
    assert second.bucket == 1 and second.partition.endswith(b"b\x00\x00\x00\x00\x00\x00\x81")


def test_decodes_pypaimon_manifest_lists_including_an_empty_base_list() -> None:
    base = FIXED / "manifest" / "manifest-list-04cc0c00-b99f-412e-a479-06c89658776d-0"
    delta = FIXED / "manifest" / "manifest-list-04cc0c00-b99f-412e-a479-06c89658776d-1"
    assert decode_manifest_file_metas(base.read_bytes(), base.name, expected_size=1234) == []
    [meta] = decode_manifest_file_metas(delta.read_bytes(), delta.name, expected_size=1355)
    assert meta == ManifestFileMeta(
        "manifest-5248eed9-7f13-4db1-9192-2a8cb788d65b-0", 2402, 2, 0,
        SimpleStats(PARTITION_A, PARTITION_A[:-8] + b"b\x00\x00\x00\x00\x00\x00\x81", [0]),
        0, 0, 1, 0, 0, total_buckets=2,
    )  # fmt: skip


def test_dynamic_bucket_overwrite_cancels_earlier_files() -> None:
    snapshot = json.loads((DYNAMIC / "snapshot" / "snapshot-3").read_text())
    entries: list[ManifestEntry] = []
    for list_name in (snapshot["baseManifestList"], snapshot["deltaManifestList"]):
        list_bytes = (DYNAMIC / "manifest" / list_name).read_bytes()
        for meta in decode_manifest_file_metas(list_bytes, list_name):
            assert meta.total_buckets is None  # pypaimon leaves it null for dynamic buckets
            data = (DYNAMIC / "manifest" / meta.file_name).read_bytes()
            entries += decode_manifest_entries(data, meta.file_name, expected_size=meta.file_size)
    assert [e.kind for e in entries] == [FileKind.ADD] * 2 + [FileKind.DELETE] * 2 + [FileKind.ADD]
    assert {e.total_buckets for e in entries} == {-1}
    [live] = live_files(entries)
    assert live.file.file_name == "data-7fb81346-41c2-4658-a152-41177b9e10eb-0.parquet"


def test_decodes_pypaimon_hash_index_manifest() -> None:
    name = json.loads((DYNAMIC / "snapshot" / "snapshot-3").read_text())["indexManifest"]
    [entry] = decode_index_manifest_entries((DYNAMIC / "manifest" / name).read_bytes(), name)
    assert entry == IndexManifestEntry(
        FileKind.ADD, EMPTY_ROW, 0, "HASH", "index-0cbf51fb-d18f-4f95-b2d9-f02a9b44e7cd-0", 4, 1
    )
    assert (DYNAMIC / "index" / entry.file_name).stat().st_size == entry.file_size


@pytest.mark.parametrize(
    ("kind", "decode", "encode"),
    [
        ("ManifestEntry", decode_manifest_entries, encode_manifest_entries),
        ("ManifestFileMeta", decode_manifest_file_metas, encode_manifest_file_metas),
        ("IndexManifestEntry", decode_index_manifest_entries, encode_index_manifest_entries),
    ],
)
def test_reencoding_pypaimon_files_gives_the_same_header_and_record_bytes(
    kind: str, decode: Any, encode: Any
) -> None:
    # The blocks differ only in how they are framed: ours are zstd frames with a checksum.
    paths = _fixture_files(kind)
    assert paths
    for path in paths:
        data = path.read_bytes()
        again = encode(decode(data, path.name))
        assert _header(again) == _header(data), path
        assert _records_bytes(again) == _records_bytes(data), path


def _header(data: bytes) -> bytes:
    """The Avro container header without its (random) sync marker."""
    return data[: data.index(data[-16:])]


def _records_bytes(data: bytes) -> bytes:
    """The decompressed bytes of every block: the records as Avro encodes them."""
    return b"".join(block.bytes_.getvalue() for block in fastavro.block_reader(io.BytesIO(data)))


def test_our_manifest_blocks_carry_a_checksum_that_catches_a_flipped_bit() -> None:
    # A flipped bit inside a compressed block still decompresses without a checksum; with one,
    # every zstd decoder (ours, pypaimon's fastavro, Java's zstd-jni) refuses the block.
    entries = decode_manifest_entries(_fixture_files("ManifestEntry")[0].read_bytes(), "m")
    data = encode_manifest_entries(entries)
    header = len(_header(data)) + 16
    caught = 0
    for byte in range(header, len(data) - 16):
        damaged = bytearray(data)
        damaged[byte] ^= 1 << (byte % 8)
        with contextlib.suppress(CorruptFileError):
            assert decode_manifest_entries(bytes(damaged), "m") == entries, byte
            continue
        caught += 1
    assert caught == len(data) - 16 - header


# ---- schemas -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "schema"),
    [("ManifestEntry", MANIFEST_ENTRY_SCHEMA), ("ManifestFileMeta", MANIFEST_FILE_META_SCHEMA),
     ("IndexManifestEntry", INDEX_MANIFEST_ENTRY_SCHEMA)],
)  # fmt: skip
def test_writer_schema_matches_pypaimon_field_by_field(name: str, schema: dict[str, Any]) -> None:
    if not SHARED_SCHEMAS.exists():
        pytest.skip(f"{SHARED_SCHEMAS} is absent")
    expected = json.loads(SHARED_SCHEMAS.read_text())[name]
    ours = json.loads(json.dumps(schema))
    assert [f["name"] for f in ours["fields"]] == [f["name"] for f in expected["fields"]]
    for mine, theirs in zip(ours["fields"], expected["fields"], strict=True):
        assert mine == theirs, mine["name"]
    assert ours == expected


def test_file_header_carries_the_schema_text_pypaimon_writes() -> None:
    for kind, data in [("ManifestEntry", encode_manifest_entries([])),
                       ("ManifestFileMeta", encode_manifest_file_metas([])),
                       ("IndexManifestEntry", encode_index_manifest_entries([]))]:  # fmt: skip
        theirs = fastavro.reader(io.BytesIO(_fixture_files(kind)[0].read_bytes())).metadata
        assert fastavro.reader(io.BytesIO(data)).metadata == theirs


def test_decodes_older_writer_schema_without_newer_optional_fields() -> None:
    # Java Paimon names records differently and older versions lack the trailing optional fields.
    file_schema = dict(MANIFEST_ENTRY_SCHEMA["fields"][5]["type"])
    file_schema["name"] = "org.apache.paimon.avro.generated.record__FILE"
    file_schema["fields"] = [f for f in file_schema["fields"] if f["name"] in {
        "_FILE_NAME", "_FILE_SIZE", "_ROW_COUNT", "_MIN_KEY", "_MAX_KEY", "_KEY_STATS",
        "_VALUE_STATS", "_MIN_SEQUENCE_NUMBER", "_MAX_SEQUENCE_NUMBER", "_SCHEMA_ID", "_LEVEL",
        "_EXTRA_FILES", "_CREATION_TIME"}]  # fmt: skip
    old_schema = {"type": "record", "name": "org.apache.paimon.avro.generated.record",
                  "fields": [*MANIFEST_ENTRY_SCHEMA["fields"][:5], {"name": "_FILE", "type": file_schema}]}  # fmt: skip
    record = {"_VERSION": 2, "_KIND": 1, "_PARTITION": EMPTY_ROW, "_BUCKET": 3, "_TOTAL_BUCKETS": 4,
              "_FILE": {"_FILE_NAME": "old.orc", "_FILE_SIZE": 1, "_ROW_COUNT": 2, "_MIN_KEY": KEY_1,
                        "_MAX_KEY": KEY_1, "_KEY_STATS": {"_MIN_VALUES": KEY_1, "_MAX_VALUES": KEY_1,
                        "_NULL_COUNTS": [0]}, "_VALUE_STATS": {"_MIN_VALUES": EMPTY_ROW,
                        "_MAX_VALUES": EMPTY_ROW, "_NULL_COUNTS": None}, "_MIN_SEQUENCE_NUMBER": 7,
                        "_MAX_SEQUENCE_NUMBER": 8, "_SCHEMA_ID": 0, "_LEVEL": 2, "_EXTRA_FILES": [],
                        "_CREATION_TIME": 5}}  # fmt: skip
    buf = io.BytesIO()
    fastavro.writer(buf, old_schema, [record], codec="deflate")
    [entry] = decode_manifest_entries(buf.getvalue(), "java-manifest")
    assert entry.kind == FileKind.DELETE and entry.file.level == 2
    assert entry.file.creation_time_millis == 5
    f = entry.file
    assert (f.delete_row_count, f.file_source, f.value_stats_cols, f.external_path) == (None,) * 4


def test_decodes_older_manifest_list_without_bucket_and_level_ranges() -> None:
    old_schema = {"type": "record", "name": "org.apache.paimon.avro.generated.record",
                  "fields": MANIFEST_FILE_META_SCHEMA["fields"][:7]}  # fmt: skip
    record = {"_VERSION": 2, "_FILE_NAME": "manifest-x-0", "_FILE_SIZE": 9, "_NUM_ADDED_FILES": 1,
              "_NUM_DELETED_FILES": 0, "_SCHEMA_ID": 0, "_PARTITION_STATS": {
                  "_MIN_VALUES": EMPTY_ROW, "_MAX_VALUES": EMPTY_ROW, "_NULL_COUNTS": []}}  # fmt: skip
    buf = io.BytesIO()
    fastavro.writer(buf, old_schema, [record], codec="null")
    [meta] = decode_manifest_file_metas(buf.getvalue(), "java-list")
    assert meta == ManifestFileMeta(
        "manifest-x-0", 9, 1, 0, SimpleStats.EMPTY, 0, None, None, None, None
    )


# ---- corrupt input -------------------------------------------------------------------------------
DECODERS = [decode_manifest_entries, decode_manifest_file_metas, decode_index_manifest_entries]


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize(
    "data", [b"", b"garbage", b"Obj\x01" + b"\xff" * 40, bytes(range(256)) * 4]
)
def test_garbage_raises_corrupt_file_error_naming_the_file(decode: Any, data: bytes) -> None:
    with pytest.raises(CorruptFileError, match="manifest-broken-0"):
        decode(data, "manifest-broken-0")


def test_every_truncation_raises_or_leaves_a_header_only_file() -> None:
    data = (FIXED / "manifest" / "manifest-23353010-adfd-4223-a3a9-00346994c7cc-0").read_bytes()
    for cut in range(len(data)):
        try:
            result = decode_manifest_entries(data[:cut], "manifest-cut")
        except CorruptFileError as exc:
            assert "manifest-cut" in str(exc)
        else:
            assert result == [], cut  # a cut right after the header is a valid empty container
        with pytest.raises(CorruptFileError, match="manifest-cut"):
            decode_manifest_entries(data[:cut], "manifest-cut", expected_size=len(data))


def test_flipped_bytes_never_escape_as_other_exceptions() -> None:
    data = bytearray(encode_manifest_entries([_entry(FileKind.ADD, f"f{i}") for i in range(20)]))
    for pos in range(0, len(data), 3):
        corrupted = bytearray(data)
        corrupted[pos] ^= 0xFF
        with contextlib.suppress(CorruptFileError):
            decode_manifest_entries(bytes(corrupted), "m")


def test_decoding_a_manifest_list_as_a_manifest_raises() -> None:
    data = encode_manifest_file_metas(
        [ManifestFileMeta("m", 1, 1, 0, SimpleStats.EMPTY, 0, 0, 0, 0, 0)]
    )
    with pytest.raises(CorruptFileError, match="manifest-list-x"):
        decode_manifest_entries(data, "manifest-list-x")


def test_unknown_entry_kind_raises() -> None:
    [raw] = _raw_records(encode_manifest_entries([_entry(FileKind.ADD)]))
    raw["_KIND"] = 7
    buf = io.BytesIO()
    fastavro.writer(buf, MANIFEST_ENTRY_SCHEMA, [raw])
    with pytest.raises(CorruptFileError, match="manifest-kind"):
        decode_manifest_entries(buf.getvalue(), "manifest-kind")


# ---- records and merging -------------------------------------------------------------------------
def test_empty_simple_stats_is_the_empty_binary_row() -> None:
    empty_row = b"\x00\x00\x00\x00" + bytes(8)  # arity 0, then an 8-byte header
    assert SimpleStats.EMPTY.min_values == empty_row
    assert SimpleStats.EMPTY.max_values == empty_row
    assert SimpleStats.EMPTY.null_counts == []


def test_upgrade_moves_the_same_file_to_a_higher_level() -> None:
    upgraded = _full_file().upgrade(6)
    assert upgraded == dataclasses.replace(_full_file(), level=6)
    with pytest.raises(ValueError):
        _full_file().upgrade(5)


def test_identifier_is_paimon_file_entry_identifier() -> None:
    entry = ManifestEntry(FileKind.ADD, PARTITION_A, 3, 4, _full_file())
    assert entry.identifier == (PARTITION_A, 3, 5, "data-full.parquet",
                                ("data-full.parquet.index",), b"\x01\x02", "s3://bucket/x.parquet")  # fmt: skip
    assert hash(entry.identifier) == hash(
        ManifestEntry(FileKind.DELETE, PARTITION_A, 3, 9, _full_file()).identifier
    )


def test_add_then_delete_cancels_out() -> None:
    assert merge_entries([_entry(FileKind.ADD, "a"), _entry(FileKind.DELETE, "a")]) == []


def test_delete_without_add_is_kept_for_older_manifests_to_cancel() -> None:
    delete = _entry(FileKind.DELETE, "a")
    assert merge_entries([delete, _entry(FileKind.ADD, "b")]) == [delete, _entry(FileKind.ADD, "b")]
    assert merge_entries([_entry(FileKind.ADD, "a"), *merge_entries([delete])]) == []


def test_merge_keeps_first_seen_order() -> None:
    entries = [_entry(FileKind.ADD, n) for n in "cab"]
    assert merge_entries([*entries, _entry(FileKind.DELETE, "a")]) == [entries[0], entries[2]]


def test_same_file_name_at_another_level_or_bucket_is_another_file() -> None:
    entries = [_entry(FileKind.ADD, "a", level=0), _entry(FileKind.DELETE, "a", level=1),
               _entry(FileKind.DELETE, "a", bucket=1), _entry(FileKind.DELETE, "a", partition=PARTITION_A)]  # fmt: skip
    assert merge_entries(entries) == entries


def test_adding_a_file_twice_raises() -> None:
    with pytest.raises(CorruptFileError, match="data-dup.parquet") as info:
        merge_entries([_entry(FileKind.ADD, "data-dup.parquet")] * 2)
    assert isinstance(info.value, LakehouseError)


def test_live_files_follow_an_upgrade_and_drop_unmatched_deletes() -> None:
    log = [_entry(FileKind.ADD, "a"), _entry(FileKind.ADD, "b"),
           _entry(FileKind.DELETE, "a"), _entry(FileKind.ADD, "a", level=3),
           _entry(FileKind.DELETE, "gone")]  # fmt: skip
    assert live_files(log) == [_entry(FileKind.ADD, "b"), _entry(FileKind.ADD, "a", level=3)]


def test_thousands_of_entries_round_trip_and_merge() -> None:
    entries = [_entry(FileKind.ADD, f"data-{i}.parquet", bucket=i % 7) for i in range(5000)]
    decoded = decode_manifest_entries(encode_manifest_entries(entries), "big")
    assert decoded == entries
    assert live_files(decoded + [_entry(FileKind.DELETE, "data-0.parquet")]) == entries[1:]
