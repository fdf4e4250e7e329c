"""The snapshot-N JSON codec: pypaimon-written files, round trips and corrupt input."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot

DATA = Path(__file__).parent / "data"
SNAPSHOT_FILES = sorted(DATA.glob("*/snapshot/snapshot-*"))


def _minimal(**changes: Any) -> Snapshot:
    snapshot = Snapshot(
        id=1,
        schema_id=0,
        base_manifest_list="manifest-list-a-0",
        delta_manifest_list="manifest-list-a-1",
        commit_user="user",
        commit_identifier=BATCH_COMMIT_IDENTIFIER,
        commit_kind="APPEND",
        time_millis=1_795_247_409_923,
        total_record_count=3,
        delta_record_count=3,
    )
    return dataclasses.replace(snapshot, **changes)


def _full() -> Snapshot:
    return _minimal(
        base_manifest_list_size=1234,
        delta_manifest_list_size=1355,
        changelog_manifest_list="manifest-list-a-2",
        changelog_manifest_list_size=99,
        index_manifest="index-manifest-x",
        log_offsets={"0": 5},
        changelog_record_count=2,
        watermark=-9_223_372_036_854_775_808,
        statistics="stats-1",
        next_row_id=10,
        properties={"k": "v"},
        uuid="ac348361-c227-436b-96a1-2eb2faa52b8e",
        writer_version="lakehouse-0.1.0",
        extra={"futureField": [1, {"x": None}]},
    )


def test_fixture_snapshots_are_present() -> None:
    assert len(SNAPSHOT_FILES) == 5


@pytest.mark.parametrize("path", SNAPSHOT_FILES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_pypaimon_snapshot_reads_and_writes_back_byte_for_byte(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert Snapshot.from_json(text, path.name).to_json() == text


def test_reads_pypaimon_snapshot_fields() -> None:
    path = DATA / "pypaimon_table" / "snapshot" / "snapshot-2"
    snapshot = Snapshot.from_json(path.read_text(), path.name)
    assert snapshot == _minimal(
        version=3,
        id=2,
        base_manifest_list="manifest-list-2cb93c01-a3ed-437b-af3f-d228542aae2e-0",
        delta_manifest_list="manifest-list-2cb93c01-a3ed-437b-af3f-d228542aae2e-1",
        commit_user="1eb410b1-2e57-4727-ba0b-7868d9ab8156",
        time_millis=1_795_247_409_950,
        total_record_count=6,
        delta_record_count=3,
        base_manifest_list_size=1355,
        delta_manifest_list_size=1351,
        uuid="d1ac1a05-8c76-4670-b5b9-03ec44e452ae",
        writer_version="python-2.1.0-3a5ffe7870697e2c2605e63413fb5ac5800aae7e",
    )
    assert snapshot.commit_identifier == 2**63 - 1


def test_reads_overwrite_snapshot_with_index_manifest_and_negative_delta() -> None:
    path = DATA / "pypaimon_dynamic_bucket" / "snapshot" / "snapshot-3"
    snapshot = Snapshot.from_json(path.read_bytes(), path.name)
    assert snapshot.commit_kind == "OVERWRITE"
    assert snapshot.index_manifest == "index-manifest-bfc30a9d-aa5d-4f1f-8222-c1014b21dfd2"
    assert (snapshot.total_record_count, snapshot.delta_record_count) == (1, -5)


def test_round_trip_with_every_optional_field_and_an_unknown_key() -> None:
    snapshot = _full()
    text = snapshot.to_json()
    assert Snapshot.from_json(text, "snapshot-1") == snapshot
    assert list(json.loads(text))[-1] == "futureField"


def test_none_optionals_are_omitted() -> None:
    assert list(json.loads(_minimal().to_json())) == [
        "version", "id", "schemaId", "baseManifestList", "deltaManifestList",
        "totalRecordCount", "deltaRecordCount", "commitUser", "commitIdentifier",
        "commitKind", "timeMillis",
    ]  # fmt: skip


def test_to_json_is_pretty_printed_and_keeps_non_ascii() -> None:
    text = _minimal(commit_user="usér").to_json()
    assert text.startswith('{\n  "version": 3,\n  "id": 1,\n')
    assert '"commitUser": "usér"' in text


def test_explicit_null_optionals_read_as_none() -> None:
    doc = json.loads(_minimal().to_json()) | {"indexManifest": None, "watermark": None}
    assert Snapshot.from_json(json.dumps(doc), "snapshot-1") == _minimal()


@pytest.mark.parametrize("kind", ["APPEND", "COMPACT", "OVERWRITE", "ANALYZE"])
def test_every_commit_kind_round_trips(kind: str) -> None:
    snapshot = _minimal(commit_kind=kind)
    assert Snapshot.from_json(snapshot.to_json(), "s") == snapshot


@pytest.mark.parametrize("text", ["", "garbage", "[1, 2]", "null", '{"id": 1', "\ud800"])
def test_garbage_raises_corrupt_file_error_naming_the_file(text: str) -> None:
    with pytest.raises(CorruptFileError, match="snapshot-7"):
        Snapshot.from_json(text, "snapshot-7")


def test_invalid_utf8_raises_corrupt_file_error() -> None:
    with pytest.raises(CorruptFileError, match="snapshot-7"):
        Snapshot.from_json(b'{"id": "\xff"}', "snapshot-7")


def test_every_truncation_raises_corrupt_file_error() -> None:
    text = _full().to_json()
    for cut in range(len(text)):
        with pytest.raises(CorruptFileError, match="snapshot-9"):
            Snapshot.from_json(text[:cut], "snapshot-9")


@pytest.mark.parametrize(
    "key",
    ["version", "id", "schemaId", "baseManifestList", "deltaManifestList", "totalRecordCount",
     "deltaRecordCount", "commitUser", "commitIdentifier", "commitKind", "timeMillis"],
)  # fmt: skip
def test_missing_required_field_raises(key: str) -> None:
    doc = json.loads(_minimal().to_json())
    del doc[key]
    with pytest.raises(CorruptFileError, match=f"snapshot-3.*{key}"):
        Snapshot.from_json(json.dumps(doc), "snapshot-3")


@pytest.mark.parametrize(
    ("key", "value"),
    [("id", "1"), ("id", True), ("id", 1.5), ("schemaId", 2**63), ("commitKind", 5),
     ("commitKind", "MERGE"), ("baseManifestList", 3), ("properties", ["a"]),
     ("baseManifestListSize", "12")],
)  # fmt: skip
def test_wrongly_typed_field_raises(key: str, value: Any) -> None:
    doc = json.loads(_minimal().to_json()) | {key: value}
    with pytest.raises(CorruptFileError, match="snapshot-4"):
        Snapshot.from_json(json.dumps(doc), "snapshot-4")


def test_to_json_rejects_an_unknown_commit_kind() -> None:
    with pytest.raises(ValueError, match="MERGE"):
        _minimal(commit_kind="MERGE").to_json()
