"""Paimon's `changelog-file.*` options: a value that asks for what this engine writes anyway (the
data files' format or compression) is accepted, any other is refused by a write that produces a
changelog, naming the option."""

from __future__ import annotations

import pytest

from lakehouse_engine import Catalog
from lakehouse_engine.errors import UnsupportedError
from tests.lakehouse_engine.conftest import create_table
from tests.lakehouse_engine.read.changes_helpers import SCHEMA, change_tuples, put


@pytest.mark.parametrize("options", [
    {"changelog-file.compression": "zstd"},                              # the data files' default
    {"file.compression": "lz4", "changelog-file.compression": "LZ4"},
    {"file.format": "orc", "changelog-file.format": "orc"},
    {"changelog-file.prefix": "changelog-"},
])
def test_a_changelog_file_option_naming_what_the_data_files_use_is_accepted(
        catalog: Catalog, options: dict[str, str]) -> None:
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": "1", "changelog-producer": "input", "rowkind.field": "k", **options})
    put(t, (1, "a", "+I"))  # before: 'changelog-file.compression' = 'zstd' was refused here
    assert change_tuples(t, 0) == [(1, "+I", 1, "a")]


@pytest.mark.parametrize("options,key", [
    ({"changelog-file.compression": "lz4"}, "changelog-file.compression"),
    ({"file.compression": "lz4", "changelog-file.compression": "zstd"}, "changelog-file.compression"),
    ({"changelog-file.format": "orc"}, "changelog-file.format"),
])
def test_a_changelog_file_option_asking_for_other_bytes_is_refused(
        catalog: Catalog, options: dict[str, str], key: str) -> None:
    t = create_table(catalog, "t", SCHEMA, primary_keys=["id"],
                     options={"bucket": "1", "changelog-producer": "input", "rowkind.field": "k", **options})
    with pytest.raises(UnsupportedError, match=key):
        t.new_batch_write_builder().new_write()
