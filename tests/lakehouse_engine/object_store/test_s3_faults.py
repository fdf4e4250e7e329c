"""A conditional put whose answer is lost: after it landed the commit recognises its own snapshot,
before it landed it is put again once a read-back shows nothing there; never a blind re-put."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import obstore
import pyarrow as pa
import pytest
from obstore.exceptions import GenericError

from lakehouse_engine.table import FileStoreTable
from tests.lakehouse_engine.conftest import create_table, read
from tests.lakehouse_engine.object_store.conftest import S3Warehouse

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


@pytest.fixture
def snapshot_puts(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Makes the next conditional put of a snapshot fail `after` it landed or `before` it is sent."""
    state: dict[str, Any] = {"mode": None, "calls": []}
    real_put = obstore.put

    def put(store: Any, key: str, data: Any, **kwargs: Any) -> Any:
        if "/snapshot/snapshot-" in f"/{key}" and kwargs.get("mode") == "create":
            state["calls"].append(key)
            mode, state["mode"] = state["mode"], None
            if mode == "before":
                raise GenericError("connection reset before the request was sent")
            if mode == "after":
                real_put(store, key, data, **kwargs)
                raise GenericError("timed out waiting for the answer")
        return real_put(store, key, data, **kwargs)

    monkeypatch.setattr(obstore, "put", put)
    yield state


def _commit(table: FileStoreTable, ids: list[int]) -> Any:
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": ids, "v": [str(i) for i in ids]}, schema=SCHEMA))
    return c, w.prepare_commit()


def test_a_snapshot_put_that_fails_after_landing_is_recognised_as_committed(
        s3_warehouse: S3Warehouse, snapshot_puts: dict[str, Any]) -> None:
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "1"})
    commit, messages = _commit(table, [1, 2, 3])
    snapshot_puts["mode"] = "after"
    assert commit.commit(messages) == [1]
    # One put only: the lost answer was resolved by reading snapshot-1 back, not by a second put.
    assert snapshot_puts["calls"] == ["warehouse/db.db/t/snapshot/snapshot-1"]
    assert table.snapshot_manager().latest_snapshot_id() == 1
    assert sorted(read(table).column("id").to_pylist()) == [1, 2, 3]


def test_a_snapshot_put_that_fails_before_landing_is_put_again_once_it_is_known_absent(
        s3_warehouse: S3Warehouse, snapshot_puts: dict[str, Any]) -> None:
    table = create_table(s3_warehouse.catalog(), "t", SCHEMA, ["id"], options={"bucket": "1"})
    commit, messages = _commit(table, [1, 2, 3])
    snapshot_puts["mode"] = "before"
    assert commit.commit(messages) == [1]
    assert snapshot_puts["calls"] == ["warehouse/db.db/t/snapshot/snapshot-1"] * 2
    assert sorted(read(table).column("id").to_pylist()) == [1, 2, 3]
    assert table.snapshot_manager().latest_snapshot_id() == 1
