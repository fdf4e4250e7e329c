"""Re-sequencing a late commit (write/resequence.py): what it drops with a bucket's writer compaction."""

from __future__ import annotations

import pyarrow as pa

from lakehouse_engine import Catalog
from tests.lakehouse_engine.conftest import create_table, read, write


def test_a_re_sequenced_bucket_commits_none_of_its_dropped_compactions_vectors(catalog: Catalog) -> None:
    # Writer A prepares its commit (its buckets compacted, their vectors in new index files);
    # writer B's new files of one of A's keys land first, without a compaction yet (write-only).
    # A's commit re-sequences that bucket's files and drops its compaction, index files and all:
    # the COMPACT that follows must not commit those vectors (their files are deleted, and they
    # were computed for files no longer there). Before, it did: every later read raised
    # "deletion-vector index file ... is missing".
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    t = create_table(catalog, "dvrace", schema, ["id"], options={"bucket": "2", "deletion-vectors.enabled": "true"})
    write(t, pa.table({"id": list(range(20)), "v": ["a"] * 20}, schema=schema))
    a = t.new_batch_write_builder()
    wa = a.new_write()
    wa.write_arrow(pa.table({"id": list(range(20)), "v": ["b"] * 20}, schema=schema))
    messages = wa.prepare_commit()
    assert sum(bool(m.deletion_vector_files) for m in messages) == 2
    b = t.copy({"write-only": "true"}).new_batch_write_builder()
    wb = b.new_write()
    wb.write_arrow(pa.table({"id": [0], "v": ["c"]}, schema=schema))
    b.new_commit().commit(wb.prepare_commit())
    a.new_commit().commit(messages)
    rows = {r["id"]: r["v"] for r in read(catalog.get_table("db.dvrace")).to_pylist()}
    assert rows == {i: "b" for i in range(20)}  # A committed after B: its rows win
