"""The `snapshot-N` JSON file of a Paimon table: one committed version and the manifests it reads."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.json_spec import JsonKey, JsonObject, dumps

CURRENT_VERSION = 3
#: The commit identifier of a batch (non-streaming) commit: Java's Long.MAX_VALUE.
BATCH_COMMIT_IDENTIFIER = 0x7FFF_FFFF_FFFF_FFFF


def is_full_compacted_identifier(identifier: int, delta_commits: int) -> bool:
    """Paimon's FullCompactedStartingScanner.isFullCompactedIdentifier: with
    `full-compaction.delta-commits` = N, a writer compacts fully at each commit whose identifier
    is a multiple of N, and at every batch commit (identifier Long.MAX_VALUE)."""
    return identifier == BATCH_COMMIT_IDENTIFIER or identifier % delta_commits == 0


#: Fields a Paimon tag file may add to the snapshot JSON (tags with a retention time).
TAG_ONLY_FIELDS = ("tagCreateTime", "tagTimeRetained")


class CommitKind(str, Enum):
    """What a snapshot's commit did (Paimon's `Snapshot.CommitKind`, the `commitKind` JSON value).

    A `str` enum: a member equals its JSON text, so snapshots read from files compare with it.
    """

    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"
    ANALYZE = "ANALYZE"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


COMMIT_KINDS = frozenset(k.value for k in CommitKind)

# The keys of a snapshot file in the order pypaimon 2.1.0 writes them; `logOffsets` (Java only)
# is placed where Java puts it. Optional keys are left out when None.
SNAPSHOT_JSON = JsonObject("snapshot", (
    JsonKey("version", "version", "int"),
    JsonKey("id", "id", "int"),
    JsonKey("schemaId", "schema_id", "int"),
    JsonKey("baseManifestList", "base_manifest_list", "str"),
    JsonKey("deltaManifestList", "delta_manifest_list", "str"),
    JsonKey("totalRecordCount", "total_record_count", "int"),
    JsonKey("deltaRecordCount", "delta_record_count", "int"),
    JsonKey("commitUser", "commit_user", "str"),
    JsonKey("commitIdentifier", "commit_identifier", "int"),
    JsonKey("commitKind", "commit_kind", "str"),
    JsonKey("timeMillis", "time_millis", "int"),
    JsonKey("logOffsets", "log_offsets", "map", required=False),
    JsonKey("baseManifestListSize", "base_manifest_list_size", "int", required=False),
    JsonKey("deltaManifestListSize", "delta_manifest_list_size", "int", required=False),
    JsonKey("changelogManifestList", "changelog_manifest_list", "str", required=False),
    JsonKey("changelogManifestListSize", "changelog_manifest_list_size", "int", required=False),
    JsonKey("indexManifest", "index_manifest", "str", required=False),
    JsonKey("changelogRecordCount", "changelog_record_count", "int", required=False),
    JsonKey("watermark", "watermark", "int", required=False),
    JsonKey("statistics", "statistics", "str", required=False),
    JsonKey("nextRowId", "next_row_id", "int", required=False),
    JsonKey("properties", "properties", "map", required=False),
    JsonKey("uuid", "uuid", "str", required=False),
    JsonKey("writerVersion", "writer_version", "str", required=False),
))


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

    def trim_to_snapshot(self) -> Snapshot:
        """The snapshot a tag keeps, without the tag-only fields (pypaimon's `Tag.trim_to_snapshot`;
        what a restored snapshot file holds). A snapshot that is no tag returns itself."""
        if not any(k in self.extra for k in TAG_ONLY_FIELDS):
            return self
        return replace(self, extra={k: v for k, v in self.extra.items() if k not in TAG_ONLY_FIELDS})

    def to_json(self) -> str:
        """Serialize as Paimon does: camelCase keys, None optionals omitted, indent 2, UTF-8 text."""
        if self.commit_kind not in COMMIT_KINDS:
            raise ValueError(f"unknown commit kind {self.commit_kind!r}")
        values = {k.attr: getattr(self, k.attr) for k in SNAPSHOT_JSON.keys}
        return dumps(SNAPSHOT_JSON.write(values, self.extra))

    @classmethod
    def from_json(cls, text: str | bytes, file_name: str) -> Snapshot:
        """Parse a snapshot file; raise CorruptFileError naming `file_name` if it is not a valid one."""
        doc = SNAPSHOT_JSON.load(text, file_name)
        values = SNAPSHOT_JSON.read(doc, file_name)
        if values["commit_kind"] not in COMMIT_KINDS:
            raise CorruptFileError(
                f"snapshot file {file_name!r} has unknown commitKind {values['commit_kind']!r}"
            )
        return cls(**values, extra=SNAPSHOT_JSON.extra(doc), file=file_name)
