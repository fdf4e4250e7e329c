"""Tables pypaimon 2.1.0 writes with features this engine does not apply: row tracking (first row
ids change no row: read right, writes refused) and data evolution (a file of some columns only:
the read raises naming the file, never a silent read)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, UnsupportedFeatureError
from tests.lakehouse_engine.conftest import read, write

WRITE = """
cat = CatalogFactory.create({"warehouse": ARGS["warehouse"]})
cat.create_database("db", True)
s = pa.schema([("id", pa.int64()), ("v", pa.string())])
cat.create_table("db.t", Schema.from_pyarrow_schema(s, options=ARGS["options"]), False)
t = cat.get_table("db.t")
for ids in ([1, 2], [3]):
    wb = t.new_batch_write_builder(); w = wb.new_write(); c = wb.new_commit()
    w.write_arrow(pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=s))
    c.commit(w.prepare_commit()); w.close(); c.close()
if ARGS["partial"]:
    wb = t.new_batch_write_builder(); w = wb.new_write().with_write_type(["v"]); c = wb.new_commit()
    w.write_arrow(pa.table({"v": ["x"]})); c.commit(w.prepare_commit()); w.close(); c.close()
"""


def test_a_pypaimon_row_tracking_table_reads_right_and_refuses_our_writes(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    pypaimon(WRITE, warehouse=str(tmp_path), options={"row-tracking.enabled": "true"}, partial=False)
    table = Catalog(str(tmp_path)).get_table("db.t")
    files = table.store.manifest_io().live_entries(table.latest_snapshot())
    assert sorted(e.file.first_row_id for e in files) == [0, 2]  # type: ignore[type-var]
    assert sorted(r["id"] for r in read(table).to_pylist()) == [1, 2, 3]
    with pytest.raises(UnsupportedFeatureError, match="row-tracking.enabled' = 'true'.*row ids"):
        write(table, pa.table({"id": [4], "v": ["ours"]}))


def test_a_pypaimon_data_evolution_file_raises_naming_the_file(
        tmp_path: Path, pypaimon: Callable[..., Any]) -> None:
    pypaimon(WRITE, warehouse=str(tmp_path), partial=True,
             options={"row-tracking.enabled": "true", "data-evolution.enabled": "true"})
    table = Catalog(str(tmp_path)).get_table("db.t")
    with pytest.raises(UnsupportedFeatureError, match=r"table db.t: .*data-evolution.enabled|data file data-.* uses data evolution"):
        read(table)
    # Without the option (a table altered back), the file itself still gives it away.
    partial = [e.file.file_name for e in table.store.manifest_io().live_entries(table.latest_snapshot())
               if e.file.write_cols is not None]
    assert len(partial) == 1
    schema_file = Path(table.path) / "schema" / f"schema-{table.schema.id}"
    doc = json.loads(schema_file.read_text())
    del doc["options"]["data-evolution.enabled"]
    schema_file.write_text(json.dumps(doc))
    with pytest.raises(UnsupportedFeatureError, match=rf"data file {partial[0]} uses data evolution \(a file of columns v only\)"):
        read(Catalog(str(tmp_path)).get_table("db.t"))
