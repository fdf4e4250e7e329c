"""ManifestIO folds a snapshot's manifests into its live files and, when they contradict each
other, names the manifests (one of them is damaged): the error a reader can act on."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.manifest_entries import FileKind, merge_entries
from tests.lakehouse_engine.conftest import create_table, write


def test_a_file_added_by_two_manifests_names_both_manifests(catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = create_table(catalog, "t", schema, ["id"], options={"bucket": "1"})
    write(t, pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=schema))
    mio = t.store.manifest_io()
    latest = t.latest_snapshot()
    assert latest is not None
    [live] = mio.live_entries(latest)
    # What a bit flipped in an uncompressed manifest can make of a DELETE: a second ADD.
    first, second = mio.write_manifest([live]), mio.write_manifest([live])
    with pytest.raises(CorruptFileError, match=f"added twice.*'{first.file_name}' and '{second.file_name}'"):
        mio.merged_entries([first, second])
    # Without knowing where the entries came from, the file is still named.
    with pytest.raises(CorruptFileError, match=f"{live.file.file_name}.*added twice"):
        merge_entries([live, live])
    # An ADD then a DELETE of the file folds to nothing.
    delete = mio.write_manifest([type(live)(FileKind.DELETE, live.partition, live.bucket, live.total_buckets,
                                            live.file)])
    assert mio.merged_entries([first, delete]) == []
