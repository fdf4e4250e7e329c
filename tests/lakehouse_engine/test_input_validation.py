"""Bad names, out-of-range options and mixed-type pandas columns are rejected with an error that
names the culprit, and nothing stored changes."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, InvalidIdentifierError, Schema
from tests.lakehouse_engine.conftest import snapshot_files

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])

INVISIBLE = {
    "right-to-left override": ("\u202e", "U+202E"),
    "left-to-right embedding": ("\u202a", "U+202A"),
    "first strong isolate": ("\u2068", "U+2068"),
    "pop directional isolate": ("\u2069", "U+2069"),
    "zero width space": ("\u200b", "U+200B"),
    "zero width joiner": ("\u200d", "U+200D"),
    "byte order mark": ("\ufeff", "U+FEFF"),
    "C1 control": ("\x85", "U+0085"),
    "escape": ("\x1b", "U+001B"),
    "line separator": ("\u2028", "U+2028"),
}


def _warehouse_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", sorted(INVISIBLE))
def test_names_with_invisible_characters_are_rejected_naming_the_code_point(catalog: Catalog, case: str):
    char, code_point = INVISIBLE[case]
    root = Path(catalog.root)
    before = _warehouse_files(root)
    with pytest.raises(InvalidIdentifierError, match=rf"table name .* {re.escape(code_point)} "):
        catalog.create_table(f"db.ord{char}ers", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"]))
    with pytest.raises(InvalidIdentifierError, match=rf"database name .* {re.escape(code_point)} "):
        catalog.create_database(f"sh{char}op")
    assert _warehouse_files(root) == before
    assert catalog.list_databases() == ["db"]


def test_printable_unicode_names_are_accepted(catalog: Catalog):
    catalog.create_table("db.bestellungen_ü_日本", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"]))
    table = catalog.get_table("db.bestellungen_ü_日本")
    assert snapshot_files(table)  # its schema file was written
