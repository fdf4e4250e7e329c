"""Read only what we understand: the features of a table's files and options that change which
rows a read returns, or what other engines expect a write to produce, checked before a scan
returns a row and before a write or compaction commits.

One function per feature; each raises `UnsupportedFeatureError` naming the table, the file (or
option) and the feature, or returns when the feature is absent. A feature this engine learns to
apply loses its check here: deletion vectors are applied on read (`read/deletion_vectors.py`)
and maintained by writes of primary-key tables, so `deletion_vectors` guards only the writes that
would not maintain them (an append table's, a table whose option is off). `check_readable`
and `check_writable` are what the scan and the writers call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lakehouse_engine.errors import UnsupportedFeatureError
from lakehouse_engine.format.deletion_vectors import DELETION_VECTORS_INDEX
from lakehouse_engine.format.manifest_entries import IndexManifestEntry, ManifestEntry
from lakehouse_engine.format.snapshot import CURRENT_VERSION, Snapshot
from lakehouse_engine.options import DELETION_VECTORS_ENABLED, CoreOptions
from lakehouse_engine.options.support import refusal

#: The newest manifest entry `_VERSION` this engine knows (Paimon 0.9 to 1.x and pypaimon 2.1.0 write 2).
MANIFEST_VERSION = 2
_BLOB_SUFFIX = ".blob"
# Refused options whose refused values change only what a write must produce (changelog files,
# row ids, Iceberg metadata, ...), not which rows the table's files hold: a read of such a table
# is right, a write into it is refused. Every other refused option refuses reads too.
_WRITE_ONLY_REFUSALS = frozenset({
    "changelog-producer", "row-tracking.enabled", "ignore-update-before",
    "write.sequence-number-init-mode", "manifest.sidecar.enabled", "index-file-in-data-file-dir",
    "metadata.iceberg-compatible", "file.compression.per.level", "record-level.expire-time",
    "record-level.time-field", "record-level.time-field-type", "scan.ignore-corrupt-files",
    "scan.ignore-lost-files", "manifest.format", "primary-key", "partition",
})


def _raise(table: str, where: str, feature: str, why: str) -> None:
    raise UnsupportedFeatureError(f"table {table}: {where} uses {feature}, which this engine does "
                                  f"not apply: {why}")


def deletion_vectors(table: str, options: CoreOptions, index_entries: Iterable[IndexManifestEntry],
                     primary_key: bool = True) -> None:
    """A write into a table with deletion vectors this engine does not maintain: vectors of a table
    whose `deletion-vectors.enabled` is off, or of an append table (Paimon's append DV tables; its
    compaction would bring marked rows back). Primary-key DV tables are maintained
    (write/deletion_vectors.py)."""
    enabled = options.require(DELETION_VECTORS_ENABLED)
    if enabled and not primary_key:
        _raise(table, "option 'deletion-vectors.enabled' on an append table", "deletion vectors",
               "this engine maintains deletion vectors of primary-key tables only")
    if enabled:
        return
    for e in index_entries:
        if e.index_type == DELETION_VECTORS_INDEX:
            _raise(table, f"index file {e.file_name} (bucket {e.bucket})", "deletion vectors",
                   "the table's 'deletion-vectors.enabled' is off, so this engine would not maintain them")


def data_evolution(table: str, entry: ManifestEntry) -> None:
    """A data file of some columns only (`_WRITE_COLS`) is merged with others by row id."""
    if entry.file.write_cols is not None:
        _raise(table, f"data file {entry.file.file_name}", "data evolution (a file of columns "
               f"{', '.join(entry.file.write_cols)} only)", "its rows are merged with other files' by row id")


def external_path(table: str, entry: ManifestEntry) -> None:
    """A data file stored outside the table directory (`data-file.external-paths`)."""
    if entry.file.external_path:
        _raise(table, f"data file {entry.file.file_name}", f"an external path ({entry.file.external_path})",
               "the file lives outside the table directory")


def blob_file(table: str, entry: ManifestEntry) -> None:
    """A `.blob` file holds the values of a BLOB column beside the data file of the other columns."""
    if entry.file.file_name.endswith(_BLOB_SUFFIX):
        _raise(table, f"data file {entry.file.file_name}", "a BLOB file", "its values belong to rows of another file")


def manifest_version(file_name: str, version: int) -> None:
    """A manifest entry of a newer layout than this engine knows."""
    if version > MANIFEST_VERSION:
        raise UnsupportedFeatureError(
            f"manifest {file_name} has entries of version {version}; this engine reads versions up "
            f"to {MANIFEST_VERSION} (a newer Paimon wrote it, or the manifest is damaged)")


def snapshot_version(table: str, snapshot: Snapshot) -> None:
    """A snapshot of a newer layout than this engine knows."""
    if snapshot.version > CURRENT_VERSION:
        _raise(table, f"snapshot {snapshot.id}", f"snapshot version {snapshot.version}",
               f"this engine reads versions up to {CURRENT_VERSION}")


def refused_options(table: str, options: Mapping[str, str], for_write: bool) -> None:
    """An option whose value this engine refuses (docs/options.md), set by another engine."""
    for key in options:
        if not for_write and key in _WRITE_ONLY_REFUSALS:
            continue
        why = refusal(options, key)
        if why is not None:
            _raise(table, f"option '{key}' = '{options[key]}'", "a feature this engine refuses", why)


def check_entry(table: str, entry: ManifestEntry) -> None:
    """Every per-file check of a live data file before its rows are read."""
    data_evolution(table, entry)
    external_path(table, entry)
    blob_file(table, entry)


def check_readable(table: str, options: CoreOptions, snapshot: Snapshot,
                   index_entries: Iterable[IndexManifestEntry]) -> None:
    """Every table- and snapshot-wide check before a scan of `snapshot` returns a row."""
    snapshot_version(table, snapshot)
    refused_options(table, options.raw, for_write=False)


def check_writable(table: str, options: CoreOptions, snapshot: Snapshot | None,
                   index_entries: Iterable[IndexManifestEntry], primary_key: bool = True) -> None:
    """Every check before a write or compaction into a table whose latest snapshot is `snapshot`:
    a write must not add files its other readers would misread."""
    refused_options(table, options.raw, for_write=True)
    deletion_vectors(table, options, index_entries, primary_key)
    if snapshot is not None:
        snapshot_version(table, snapshot)
