"""The `snapshot-N` JSON file of a Paimon table: one committed version and the manifests it reads."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lakehouse_engine.errors import CorruptFileError

CURRENT_VERSION = 3
#: The commit identifier of a batch (non-streaming) commit: Java's Long.MAX_VALUE.
BATCH_COMMIT_IDENTIFIER = 0x7FFF_FFFF_FFFF_FFFF
COMMIT_KINDS = frozenset({"APPEND", "COMPACT", "OVERWRITE", "ANALYZE"})

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# (attribute, JSON key, kind, required) in the order pypaimon 2.1.0 writes the keys; `logOffsets`
# (Java only) is placed where Java puts it. Kinds: "int", "str", "map" (a JSON object).
_FIELDS: tuple[tuple[str, str, str, bool], ...] = (
    ("version", "version", "int", True),
    ("id", "id", "int", True),
    ("schema_id", "schemaId", "int", True),
    ("base_manifest_list", "baseManifestList", "str", True),
    ("delta_manifest_list", "deltaManifestList", "str", True),
    ("total_record_count", "totalRecordCount", "int", True),
    ("delta_record_count", "deltaRecordCount", "int", True),
    ("commit_user", "commitUser", "str", True),
    ("commit_identifier", "commitIdentifier", "int", True),
    ("commit_kind", "commitKind", "str", True),
    ("time_millis", "timeMillis", "int", True),
    ("log_offsets", "logOffsets", "map", False),
    ("base_manifest_list_size", "baseManifestListSize", "int", False),
    ("delta_manifest_list_size", "deltaManifestListSize", "int", False),
    ("changelog_manifest_list", "changelogManifestList", "str", False),
    ("changelog_manifest_list_size", "changelogManifestListSize", "int", False),
    ("index_manifest", "indexManifest", "str", False),
    ("changelog_record_count", "changelogRecordCount", "int", False),
    ("watermark", "watermark", "int", False),
    ("statistics", "statistics", "str", False),
    ("next_row_id", "nextRowId", "int", False),
    ("properties", "properties", "map", False),
    ("uuid", "uuid", "str", False),
    ("writer_version", "writerVersion", "str", False),
)
_KNOWN_KEYS = frozenset(key for _, key, _, _ in _FIELDS)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One snapshot of a table: its schema, manifest lists, counts and commit metadata.

    `extra` keeps JSON keys this engine does not know, so a read-modify-write preserves them.
    """

    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: str
    time_millis: int
    total_record_count: int
    delta_record_count: int
    version: int = CURRENT_VERSION
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    log_offsets: dict[str, int] | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    statistics: str | None = None
    next_row_id: int | None = None
    properties: dict[str, str] | None = None
    uuid: str | None = None
    writer_version: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The file this snapshot was read from (a snapshot or a tag file), named in errors about what
    #: it references; not part of the JSON.
    file: str | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> str:
        """Serialize as Paimon does: camelCase keys, None optionals omitted, indent 2, UTF-8 text."""
        if self.commit_kind not in COMMIT_KINDS:
            raise ValueError(f"unknown commit kind {self.commit_kind!r}")
        doc: dict[str, Any] = {}
        for attr, key, _, _ in _FIELDS:
            value = getattr(self, attr)
            if value is not None:
                doc[key] = value
        for key, value in self.extra.items():
            if key not in _KNOWN_KEYS:
                doc[key] = value
        return json.dumps(doc, indent=2, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes, file_name: str) -> Snapshot:
        """Parse a snapshot file; raise CorruptFileError naming `file_name` if it is not a valid one."""
        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptFileError(f"snapshot file {file_name!r} is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise CorruptFileError(f"snapshot file {file_name!r} does not hold a JSON object")
        values: dict[str, Any] = {}
        for attr, key, kind, required in _FIELDS:
            value = doc.get(key)
            if value is None:
                if required:
                    raise CorruptFileError(
                        f"snapshot file {file_name!r} lacks required field {key!r}"
                    )
                continue
            values[attr] = _checked(value, kind, key, file_name)
        if values["commit_kind"] not in COMMIT_KINDS:
            raise CorruptFileError(
                f"snapshot file {file_name!r} has unknown commitKind {values['commit_kind']!r}"
            )
        extra = {k: v for k, v in doc.items() if k not in _KNOWN_KEYS}
        return cls(**values, extra=extra, file=file_name)


def _checked(value: Any, kind: str, key: str, file_name: str) -> Any:
    """Return `value` if it has the JSON type `kind`, else raise CorruptFileError."""
    if kind == "int":
        ok = (
            isinstance(value, int)
            and not isinstance(value, bool)
            and _INT64_MIN <= value <= _INT64_MAX
        )
    elif kind == "str":
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, dict)
    if not ok:
        raise CorruptFileError(
            f"snapshot file {file_name!r}: field {key!r} should be {kind}, got {value!r}"
        )
    return value
