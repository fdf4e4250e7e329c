"""Property: a `lookup` flush whose data files are the after-images of its changelog (a run of adds
on a deduplicate table: the data files carry +I/+U, the -U rows are written apart and listed
first) gives, read as changes, what the flush writing the whole changelog gives: per snapshot,
per key, the same changes in the same order; and the same table."""

from __future__ import annotations

import shutil
import tempfile
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.mergetree.lookup_cache import clear_caches
from lakehouse_engine.write import changelog_producers
from tests.lakehouse_engine.conftest import read

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64()),
                    pa.field("rk", pa.string())])

# Mostly adds (so many runs take the after-image layout), few values (so updates that change
# nothing happen), a delete now and then (so other runs fall back).
row = st.tuples(st.integers(0, 11), st.integers(0, 2), st.sampled_from(["+I"] * 6 + ["+U", "-D"]))
commit = st.tuples(st.lists(st.lists(row, min_size=1, max_size=10), min_size=1, max_size=3),
                   st.sampled_from([None, None, None, False, True]))  # then compact: no, minor, full
scripts = st.lists(commit, min_size=1, max_size=6)

MODES = {
    "fixed": {"bucket": "3"},
    # Several flushes per commit: a later run of the commit looks up the earlier ones.
    "small-buffer": {"bucket": "2", "write-buffer-size": "1 kb"},
    "dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "4"},
    "compacting": {"bucket": "2", "num-sorted-run.compaction-trigger": "2"},
    # Rows a postpone compaction moves into the buckets get their changelog there.
    "postpone": {"bucket": "-2", "postpone.default-bucket-num": "2"},
}


def _changes(options: dict[str, str], script: list[Any]) -> tuple[list[dict[int, list[Any]]], dict[int, int]]:
    """Per snapshot with changes, per key, its changes in read order; and the table's rows at the end."""
    warehouse = tempfile.mkdtemp(prefix="after-images-")
    try:
        clear_caches()
        catalog = Catalog(warehouse)
        catalog.create_database("db")
        catalog.create_table("db.t", Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=["id"],
            options={"rowkind.field": "rk", "changelog-producer": "lookup", **options}))
        table = catalog.get_table("db.t")
        for batches, compact in script:
            wb = table.new_batch_write_builder()
            write, committer = wb.new_write(), wb.new_commit()
            for batch in batches:
                write.write_arrow(pa.table({"id": [k for k, _, _ in batch], "v": [v for _, v, _ in batch],
                                            "rk": [r for _, _, r in batch]}, schema=SCHEMA))
            committer.commit(write.prepare_commit())
            if compact is not None:
                table.compact(full=compact)
        changes = table.changes(0)
        per: dict[int, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
        for sid, kind, k, v in zip(*(changes.column(c).to_pylist() for c in ("_snapshot_id", "_row_kind", "id", "v")),
                                   strict=True):
            per[sid][k].append((kind, v))
        t = read(table)
        rows = dict(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))
        # (In snapshot order, without the ids: the data files' kinds can change their sizes, and
        # so when a compaction picks them, adding a COMPACT snapshot without changes.)
        return [dict(per[s]) for s in sorted(per)], rows
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)
        clear_caches()


@pytest.mark.parametrize("mode", list(MODES))
def test_after_image_runs_read_as_the_whole_changelog_written(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = []
    before_images = changelog_producers.LookupChangelog.before_images

    def counted(self: Any, *args: Any) -> Any:
        images = before_images(self, *args)
        taken.append(images is not None and len(images.rows) > 0)
        return images

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(script=scripts)
    def check(script: list[Any]) -> None:
        with monkeypatch.context() as m:
            m.setattr(changelog_producers.LookupChangelog, "before_images", counted)
            reused = _changes(MODES[mode], script)
        with monkeypatch.context() as m:
            m.setattr(changelog_producers.LookupChangelog, "reuses_run", lambda self, run: False)
            written = _changes(MODES[mode], script)
        assert reused == written

    check()
    # The layout was taken, with before-images, in some of the runs (else this tests nothing new).
    assert any(taken) and not all(taken)
