"""Where a table's files live: schema, snapshot, manifest, index and bucket directories."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence

from lakehouse_engine.errors import InvalidDataError
from lakehouse_engine.types import DataType

POSTPONE_BUCKET = -2


def format_partition_value(value: object, dtype: DataType, default_name: str) -> str:
    """A partition value as Paimon writes it in a directory name (`dt=2026-11-21`)."""
    if value is None or value == "":
        return default_name
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if dtype.is_timestamp:
        text = text.replace("T", " ")
    if "/" in text or text in (".", "..") or "\x00" in text:
        raise InvalidDataError(f"partition value {text!r} cannot be a directory name")
    return text


class PathFactory:
    """Paths of one table's files; unique names come from a per-writer uuid and a counter."""

    def __init__(self, table_path: str, data_file_prefix: str = "data-"):
        self.table_path = table_path.rstrip("/")
        self.data_file_prefix = data_file_prefix
        self._uuid = str(uuid.uuid4())
        self._counter = itertools.count()

    # ---- metadata dirs ---------------------------------------------------------
    @property
    def schema_dir(self) -> str:
        return f"{self.table_path}/schema"

    @property
    def snapshot_dir(self) -> str:
        return f"{self.table_path}/snapshot"

    @property
    def manifest_dir(self) -> str:
        return f"{self.table_path}/manifest"

    @property
    def index_dir(self) -> str:
        return f"{self.table_path}/index"

    @property
    def tag_dir(self) -> str:
        return f"{self.table_path}/tag"

    def schema_path(self, schema_id: int) -> str:
        return f"{self.schema_dir}/schema-{schema_id}"

    def snapshot_path(self, snapshot_id: int) -> str:
        return f"{self.snapshot_dir}/snapshot-{snapshot_id}"

    def manifest_path(self, name: str) -> str:
        return f"{self.manifest_dir}/{name}"

    def new_manifest_name(self) -> str:
        return f"manifest-{uuid.uuid4()}-{next(self._counter)}"

    def new_manifest_list_name(self) -> str:
        return f"manifest-list-{uuid.uuid4()}-{next(self._counter)}"

    # ---- data dirs ---------------------------------------------------------------
    @staticmethod
    def partition_dir(partition_spec: Sequence[tuple[str, str]]) -> str:
        return "/".join(f"{k}={v}" for k, v in partition_spec)

    def bucket_dir(self, partition_spec: Sequence[tuple[str, str]], bucket: int) -> str:
        part = self.partition_dir(partition_spec)
        name = "bucket-postpone" if bucket == POSTPONE_BUCKET else f"bucket-{bucket}"
        return f"{self.table_path}/{part}/{name}" if part else f"{self.table_path}/{name}"

    def new_data_file_name(self, extension: str = "parquet") -> str:
        return f"{self.data_file_prefix}{self._uuid}-{next(self._counter)}.{extension}"
