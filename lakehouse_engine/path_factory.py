"""Where a table's files live: schema, snapshot, manifest, index and bucket directories."""

from __future__ import annotations

import datetime
import itertools
import random
import uuid
from collections.abc import Callable, Sequence

from lakehouse_engine.errors import InvalidDataError
from lakehouse_engine.types import DataType

POSTPONE_BUCKET = -2


_ESCAPED = frozenset('"#%\'*/:=?\\{}[]^')
_EPOCH_DAY = datetime.date(1970, 1, 1)
# Longest directory name most filesystems accept.
MAX_NAME_BYTES = 255


def escape_path_name(text: str) -> str:
    """Escape a partition key or value as Paimon's PartitionPathUtils does (`/` -> `%2F`, ...)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 32 or ord(c) == 127 else c for c in text)


def _java_local_date_time(value: datetime.datetime) -> str:
    """`java.time.LocalDateTime.toString()`: seconds and fraction only when non-zero."""
    text = value.strftime("%Y-%m-%dT%H:%M")
    if value.second or value.microsecond:
        text += f":{value.second:02d}"
        if value.microsecond:
            text += f".{value.microsecond // 1000:03d}" if value.microsecond % 1000 == 0 else f".{value.microsecond:06d}"
    return text


def format_partition_value(value: object, dtype: DataType, default_name: str) -> str:
    """A partition value as Paimon names its directory (`partition.legacy-name` = true), unescaped.

    Null and blank values use the default partition name; DATE is days since the epoch,
    TIMESTAMP is Java's LocalDateTime text, TIME is milliseconds of the day.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return default_name
    if isinstance(value, bool):
        return "true" if value else "false"
    if dtype.root == "DATE" and isinstance(value, datetime.date):
        return str((value - _EPOCH_DAY).days)
    if dtype.is_timestamp and isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return _java_local_date_time(value)
    if dtype.root == "TIME" and isinstance(value, datetime.time):
        return str(((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000)
    if isinstance(value, bytes):
        raise InvalidDataError("binary values cannot be partition values")
    return str(value)


def partition_path_component(key: str, value: str) -> str:
    """`key=value`, both escaped; InvalidDataError when the name is too long for a directory."""
    name = f"{escape_path_name(key)}={escape_path_name(value)}"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise InvalidDataError(
            f"partition value {value[:40]!r}... of '{key}' is too long: its directory name would be "
            f"{len(name.encode('utf-8'))} bytes, the limit is {MAX_NAME_BYTES}")
    return name


MAIN_BRANCH = "main"
BRANCH_PREFIX = "branch-"


def branch_path(table_path: str, branch: str) -> str:
    """The directory holding branch `branch`'s snapshots, schemas and tags: the table directory
    for the main branch, else `branch/branch-<name>/` under it (Paimon's BranchManager layout)."""
    table_path = table_path.rstrip("/")
    if branch == MAIN_BRANCH:
        return table_path
    return f"{table_path}/branch/{BRANCH_PREFIX}{branch}"


class PathFactory:
    """Paths of one table's files; unique names come from a per-writer uuid and a counter.

    Snapshots, schemas and tags live under the metadata root (the branch's directory); manifests,
    index files and data files under the table directory, which every branch shares.

    Data files are named as Paimon names them, `<data-file.prefix><uuid>-<n>.<format>` with `n`
    counting a writer's data files from 0, per bucket for writes (pypaimon's first file of a
    bucket ends in `-0`); postpone-bucket files as Paimon's postpone writer does,
    `<prefix>-u-<commit user>-s-<n>-w-<uuid>-<n>`.
    """

    def __init__(self, table_path: str, data_file_prefix: str = "data-", branch: str = MAIN_BRANCH):
        self.table_path = table_path.rstrip("/")
        self.branch = branch
        self.metadata_path = branch_path(self.table_path, branch)
        self.data_file_prefix = data_file_prefix
        self._uuid = str(uuid.uuid4())
        self._counter = itertools.count()
        self._data_counter = itertools.count()
        self._bucket_namers: dict[str, Callable[[str], str]] = {}

    # ---- metadata dirs (the branch's) ----------------------------------------------
    @property
    def schema_dir(self) -> str:
        return f"{self.metadata_path}/schema"

    @property
    def snapshot_dir(self) -> str:
        return f"{self.metadata_path}/snapshot"

    @property
    def tag_dir(self) -> str:
        return f"{self.metadata_path}/tag"

    @property
    def changelog_dir(self) -> str:
        """Where long-lived changelogs (Paimon's `changelog/changelog-<id>`) outlive their snapshots."""
        return f"{self.metadata_path}/changelog"

    # ---- shared by every branch -------------------------------------------------------
    @property
    def manifest_dir(self) -> str:
        return f"{self.table_path}/manifest"

    @property
    def index_dir(self) -> str:
        return f"{self.table_path}/index"

    def schema_path(self, schema_id: int) -> str:
        return f"{self.schema_dir}/schema-{schema_id}"

    def snapshot_path(self, snapshot_id: int) -> str:
        return f"{self.snapshot_dir}/snapshot-{snapshot_id}"

    def long_lived_changelog_path(self, snapshot_id: int) -> str:
        return f"{self.changelog_dir}/changelog-{snapshot_id}"

    def manifest_path(self, name: str) -> str:
        return f"{self.manifest_dir}/{name}"

    def new_manifest_name(self) -> str:
        return f"manifest-{uuid.uuid4()}-{next(self._counter)}"

    def new_index_manifest_name(self) -> str:
        return f"index-manifest-{uuid.uuid4()}"

    def new_index_file_name(self) -> str:
        return f"index-{self._uuid}-{next(self._counter)}"

    def new_manifest_list_name(self) -> str:
        return f"manifest-list-{uuid.uuid4()}-{next(self._counter)}"

    # ---- data dirs ---------------------------------------------------------------
    @staticmethod
    def partition_dir(partition_spec: Sequence[tuple[str, str]]) -> str:
        return "/".join(partition_path_component(k, v) for k, v in partition_spec)

    def bucket_dir(self, partition_spec: Sequence[tuple[str, str]], bucket: int) -> str:
        part = self.partition_dir(partition_spec)
        name = "bucket-postpone" if bucket == POSTPONE_BUCKET else f"bucket-{bucket}"
        return f"{self.table_path}/{part}/{name}" if part else f"{self.table_path}/{name}"

    def new_changelog_file_name(self, extension: str = "parquet") -> str:
        """A changelog file's name, `changelog-<uuid>-<n>.<format>` (Paimon's default prefix)."""
        return f"changelog-{self._uuid}-{next(self._counter)}.{extension}"

    def new_data_file_name(self, extension: str = "parquet") -> str:
        return f"{self.data_file_prefix}{self._uuid}-{next(self._data_counter)}.{extension}"

    def data_file_namer(self, bucket_dir: str) -> Callable[[str], str]:
        """Names of this writer's data files in one bucket, as Paimon's per-bucket writer names
        them: a uuid of the bucket's own and a counter from 0."""
        namer = self._bucket_namers.get(bucket_dir)
        if namer is None:
            namer = self._bucket_namers.setdefault(bucket_dir, _namer(f"{self.data_file_prefix}{uuid.uuid4()}"))
        return namer

    def postpone_data_file_namer(self, commit_user: str) -> Callable[[str], str]:
        """Names of one writer's postpone-bucket files: Paimon's prefix with the commit user and a
        random writer number, then a uuid and a counter from 0."""
        return _namer(f"{self.data_file_prefix}-u-{commit_user}-s-{random.randrange(2**31 - 1)}-w-{uuid.uuid4()}")


def _namer(prefix: str) -> Callable[[str], str]:
    """File names `<prefix>-<n>.<extension>`, `n` counting from 0."""
    counter = itertools.count()

    def name(extension: str = "parquet") -> str:
        return f"{prefix}-{next(counter)}.{extension}"
    return name
