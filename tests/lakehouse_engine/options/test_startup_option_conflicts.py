"""The options that say where a read starts are checked together, as Paimon's SchemaValidation
(validateStartupMode) checks them: before, a handle kept the one a read did not follow, and a batch
read and a stream of the same handle started at different places."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import InvalidOptionError
from tests.lakehouse_engine.read.changes_helpers import keyed_table, put


@pytest.fixture
def table(catalog: Catalog) -> Any:
    t = keyed_table(catalog, **{"changelog-producer": "lookup"})
    for x in "abc":
        put(t, (1, x, "+I"))
    t.create_tag("t2", 2)
    return t


@pytest.mark.parametrize(("options", "named"), [
    # Before: a batch read went to snapshot 2, a stream started after the latest.
    ({"scan.mode": "latest", "scan.snapshot-id": "2"}, "'scan.snapshot-id' must not be set with scan.mode 'latest'"),
    ({"scan.mode": "latest-full", "scan.tag-name": "t2"}, "'scan.tag-name' must not be set"),
    ({"scan.mode": "compacted-full", "scan.snapshot-id": "2"}, "'scan.snapshot-id' must not be set"),
    ({"scan.mode": "from-timestamp", "scan.timestamp-millis": "1", "scan.snapshot-id": "2"},
     "'scan.snapshot-id' must not be set with scan.mode 'from-timestamp'"),
    # Defaults resolve first: a time wins over a snapshot, a snapshot over a range.
    ({"scan.snapshot-id": "2", "scan.timestamp-millis": "1"}, "what the other options resolve 'default' to"),
    ({"scan.snapshot-id": "2", "incremental-between": "1,3"}, "'incremental-between' must not be set"),
    ({"scan.snapshot-id": "2", "scan.tag-name": "t2"}, "'scan.snapshot-id' and 'scan.tag-name' are both set"),
    ({"incremental-between": "1,3", "incremental-between-timestamp": "1,2"}, "are both set"),
    ({"scan.mode": "from-snapshot-full", "scan.snapshot-id": "2", "scan.tag-name": "t2"},
     "'scan.tag-name' must not be set with scan.mode 'from-snapshot-full'"),
])
def test_conflicting_start_options_are_refused_naming_them(table: Any, options: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidOptionError, match=named):
        table.copy(options)


def test_each_mode_with_its_own_options_is_accepted(table: Any) -> None:
    for options in ({"scan.snapshot-id": "2"}, {"scan.tag-name": "t2"}, {"scan.mode": "latest"},
                    {"scan.mode": "from-snapshot", "scan.snapshot-id": "2"}, {"incremental-between": "1,3"},
                    {"scan.mode": "from-snapshot-full", "scan.snapshot-id": "2"},
                    {"scan.mode": "incremental", "incremental-between-timestamp": "1,2"}):
        table.copy(options)
