"""Read only what we understand: each feature of a table's files or options that this engine does
not apply raises UnsupportedFeatureError naming the table, the file or option and the feature,
on read, on write and on compaction; nothing is published."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, UnsupportedFeatureError
from lakehouse_engine.format import features
from lakehouse_engine.format.manifest import (
    MANIFEST_ENTRY_SCHEMA,
    decode_manifest_entries,
    encode_manifest_entries,
)
from lakehouse_engine.format.manifest_entries import FileKind, IndexManifestEntry, ManifestEntry
from lakehouse_engine.options import CoreOptions
from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read, write
from tests.lakehouse_engine.format.test_manifest import EMPTY_ROW, _file

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _rows(ids: range, v: str) -> pa.Table:
    return pa.table({"id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def _set_stored_options(table: FileStoreTable, **options: str) -> None:
    """Change the table's latest schema file in place, as another engine's ALTER would have made it."""
    path = Path(table.path) / "schema" / f"schema-{table.schema.id}"
    doc = json.loads(path.read_text())
    doc["options"].update(options)
    path.write_text(json.dumps(doc))


def _dv_entry(name: str = "index-dv-0") -> IndexManifestEntry:
    return IndexManifestEntry(FileKind.ADD, EMPTY_ROW, 0, "DELETION_VECTORS", name, 10, 1)


# ---- one function per feature ---------------------------------------------------------------------
def test_deletion_vector_index_files_raise_naming_the_table_and_the_file() -> None:
    with pytest.raises(UnsupportedFeatureError, match=r"table db\.t: index file index-dv-7 \(bucket 0\) uses deletion vectors"):
        features.deletion_vectors("db.t", CoreOptions({}), [_dv_entry("index-dv-7")])
    hash_index = dataclasses.replace(_dv_entry(), index_type="HASH")
    features.deletion_vectors("db.t", CoreOptions({}), [hash_index])


def test_deletion_vectors_are_written_into_primary_key_tables_only() -> None:
    with pytest.raises(UnsupportedFeatureError, match="deletion-vectors.enabled' on an append table"):
        features.deletion_vectors("db.t", CoreOptions({"deletion-vectors.enabled": "true"}), [],
                                  primary_key=False)
    features.deletion_vectors("db.t", CoreOptions({"deletion-vectors.enabled": "true"}), [_dv_entry()])


@pytest.mark.parametrize(("changes", "feature"), [
    ({"write_cols": ("v",)}, "data evolution"),
    ({"external_path": "s3://elsewhere/data-1.parquet"}, "an external path"),
    ({"file_name": "data-1.blob"}, "a BLOB file"),
])
def test_data_files_with_fields_that_change_visible_rows_raise(changes: dict[str, Any], feature: str) -> None:
    entry = ManifestEntry(FileKind.ADD, EMPTY_ROW, 0, 1, _file(**changes))
    with pytest.raises(UnsupportedFeatureError, match=rf"table db\.t: data file .* uses {feature}"):
        features.check_entry("db.t", entry)


def test_a_first_row_id_alone_changes_no_row_and_is_read() -> None:
    features.check_entry("db.t", ManifestEntry(FileKind.ADD, EMPTY_ROW, 0, 1, _file(first_row_id=100)))


def test_a_manifest_of_a_newer_version_raises_naming_the_manifest() -> None:
    data = encode_manifest_entries([ManifestEntry(FileKind.ADD, EMPTY_ROW, 0, 1, _file())])
    [record] = list(fastavro.reader(io.BytesIO(data)))
    record["_VERSION"] = 3
    buf = io.BytesIO()
    fastavro.writer(buf, MANIFEST_ENTRY_SCHEMA, [record])
    with pytest.raises(UnsupportedFeatureError, match="manifest manifest-x has entries of version 3"):
        decode_manifest_entries(buf.getvalue(), "manifest-x")


# ---- the scan, the writers and compaction call them -------------------------------------------------
def test_a_table_another_engine_turned_deletion_vectors_on_for_reads_as_paimon_and_is_maintained(
        catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", "write-only": "true"})
    write(table, _rows(range(10), "a"))
    _set_stored_options(table, **{"deletion-vectors.enabled": "true", "write-only": "false"})
    table = catalog.get_table("db.t")
    # Its rows are all in level 0, which Paimon's readers of a DV table do not see (nor do we).
    assert read(table).num_rows == 0
    # The next write compacts the bucket's level 0 through the lookup: every row is visible.
    write(table, _rows(range(5), "b"))
    assert read(table).num_rows == 10


def test_a_row_tracking_table_is_read_but_not_written(catalog: Catalog) -> None:
    """Its data files are the table; a write would leave rows without the row ids its readers expect."""
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1"})
    write(table, _rows(range(10), "a"))
    _set_stored_options(table, **{"row-tracking.enabled": "true"})
    table = catalog.get_table("db.t")
    assert read(table).num_rows == 10
    with pytest.raises(UnsupportedFeatureError, match="row-tracking.enabled' = 'true'"):
        table.new_batch_write_builder().new_write()
    with pytest.raises(UnsupportedFeatureError, match="row-tracking.enabled"):
        table.compact(full=True)


def test_a_time_travel_option_stored_by_another_engine_refuses_the_read(catalog: Catalog) -> None:
    """Java reads the snapshot `scan.timestamp` picks; this engine would read the latest."""
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1"})
    write(table, _rows(range(3), "a"))
    _set_stored_options(table, **{"scan.timestamp": "2026-11-27 00:00:00"})
    with pytest.raises(UnsupportedFeatureError, match="scan.timestamp"):
        read(catalog.get_table("db.t"))


def test_a_commit_refuses_when_deletion_vectors_appeared_since_a_compacting_write(catalog: Catalog) -> None:
    table = create_table(catalog, "t", SCHEMA, ["id"], options={"bucket": "1", "full-compaction.delta-commits": "1"})
    write(table, _rows(range(3), "a"))
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(_rows(range(3), "b"))
    messages = w.prepare_commit()
    assert any(m.compact_after for m in messages)  # compacted, with no vectors kept
    _set_stored_options(table, **{"deletion-vectors.enabled": "true"})
    stale = catalog.get_table("db.t")  # the committer sees the latest schema's options
    c2 = stale.new_batch_write_builder().new_commit()
    with pytest.raises(UnsupportedFeatureError, match="did not maintain deletion vectors"):
        c2.commit(messages)
    assert table.latest_snapshot().id == 2  # type: ignore[union-attr]
    w.close()
    c.close()
