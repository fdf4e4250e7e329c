"""Options and foreign table features: honour them or refuse them, never keep and ignore.

Options: every option this engine refuses (docs/options.md), set to a value it refuses, at
create_table, alter_table and table.copy, and near misses of every known key (one letter dropped,
'-' and '.' swapped) at create_table: each must raise InvalidOptionError naming the key and leave
the warehouse's bytes as they were.

Foreign table features: a table written here, then given each refused option by "another engine"
(its schema file changed in place, as a Java ALTER would leave it), is read, written and compacted.
A read either returns exactly the rows written (options that change only what a write must
produce) or raises UnsupportedFeatureError naming the table and the option; every write and
compaction raises it and publishes no snapshot. A row returned otherwise counts as wrong, a
missing one as lost, any other error as unclear.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import pyarrow as pa

from bench.reliability import Outcome
from lakehouse_engine import Catalog, InvalidOptionError, Schema, UnsupportedFeatureError
from lakehouse_engine.options import OPTIONS
from lakehouse_engine.options.inventory import INVENTORY, Status
from lakehouse_engine.options.support import option_status
from lakehouse_engine.schema_change import SchemaChange
from lakehouse_engine.table import FileStoreTable

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
ROWS = pa.table({"id": list(range(20)), "v": [f"v{i}" for i in range(20)]}, schema=SCHEMA)


def _refused() -> dict[str, str]:
    """Every refused option and a value of it this engine refuses."""
    out = {}
    for key, option in OPTIONS.items():
        if option.status is Status.REFUSED:
            out[key] = ("false" if option.default else "true") if option.kind == "bool" else \
                next(c for c in option.choices or () if c != option.default)
    for key, entry in INVENTORY.items():
        if entry.status is Status.REFUSED:
            out[key] = "false" if "true" in entry.accepted else "true" if "false" in entry.accepted else "x-1"
    return out


def _near_misses() -> list[tuple[str, str]]:
    """(typo, key) pairs: a letter dropped from the middle of each known key, and '-' for '.'."""
    pairs = []
    for key in sorted((*OPTIONS, *INVENTORY)):
        for typo in (key[:len(key) // 2] + key[len(key) // 2 + 1:], key.replace(".", "-", 1)):
            if typo != key and option_status(typo) is None and len(key) >= 8:
                pairs.append((typo, key))
    return pairs


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _write(table: FileStoreTable, data: pa.Table) -> None:
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    try:
        w.write_arrow(data)
        c.commit(w.prepare_commit())
    finally:
        w.close()
        c.close()


def _read(table: FileStoreTable) -> pa.Table:
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def _options_outcome(catalog: Catalog, root: Path) -> Outcome:
    refused = _refused()
    catalog.create_table("db.base", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={"bucket": "1"}))
    base = catalog.get_table("db.base")
    _write(base, ROWS)
    calls = []
    for key, value in refused.items():
        calls.append((key, lambda k=key, v=value: catalog.create_table(
            "db.new", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={k: v}))))
        calls.append((key, lambda k=key, v=value: catalog.alter_table("db.base", [SchemaChange.set_option(k, v)])))
        calls.append((key, lambda k=key, v=value: base.copy({k: v})))
    misses = _near_misses()
    for typo, _ in misses:
        calls.append((typo, lambda t=typo: catalog.create_table(
            "db.new", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={t: "1"}))))
    unclear = 0
    for key, call in calls:
        before = _tree_hash(root)
        try:
            call()
            unclear += 1
        except InvalidOptionError as e:
            unclear += f"'{key}'" not in str(e)
        except Exception:  # noqa: BLE001 - any other error is what this campaign counts
            unclear += 1
        unclear += _tree_hash(root) != before
    return Outcome("options", f"each of {len(refused)} refused options at create_table, alter_table and "
                   f"table.copy, and {len(misses)} near misses of known keys at create_table", len(calls),
                   unclear_errors=unclear,
                   result=f"{len(calls) - unclear} InvalidOptionError naming the key; warehouses changed: 0"
                   if not unclear else f"{unclear} accepted, unclear or changed the warehouse")


def _features_outcome(catalog: Catalog) -> Outcome:
    expected = sorted(ROWS.to_pylist(), key=lambda r: r["id"])
    trials = lost = wrong = unclear = read_exact = read_refused = 0
    for i, (key, value) in enumerate(_refused().items()):
        name = f"db.f{i}"
        catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={"bucket": "1"}))
        table = catalog.get_table(name)
        _write(table, ROWS)
        path = Path(table.path) / "schema" / "schema-0"
        doc = json.loads(path.read_text())
        doc["options"][key] = value
        path.write_text(json.dumps(doc))
        table = catalog.get_table(name)
        snapshots = sorted(p.name for p in (Path(table.path) / "snapshot").iterdir())
        trials += 3
        try:
            rows = sorted(_read(table).to_pylist(), key=lambda r: r["id"])
            read_exact += rows == expected
            lost += len([r for r in expected if r not in rows])
            wrong += len([r for r in rows if r not in expected])
        except UnsupportedFeatureError as e:
            read_refused += 1
            unclear += name not in str(e) or key not in str(e)
        except Exception:  # noqa: BLE001
            unclear += 1
        for attempt in (lambda t=table: _write(t, ROWS.slice(0, 3)), lambda t=table: t.compact(full=True)):
            try:
                attempt()
                unclear += 1
            except UnsupportedFeatureError as e:
                unclear += key not in str(e)
            except Exception:  # noqa: BLE001
                unclear += 1
        unclear += sorted(p.name for p in (Path(table.path) / "snapshot").iterdir()) != snapshots
    return Outcome("foreign table features", "a table given each refused option by another engine (its "
                   "schema file changed in place), then read, written and compacted", trials, lost, wrong, unclear,
                   f"reads: {read_exact} exact, {read_refused} UnsupportedFeatureError; every write and "
                   f"compaction UnsupportedFeatureError naming the option, no snapshot published")


def run(quick: bool) -> list[Outcome]:
    """Both campaigns, on one warehouse each (the same in quick and full mode: they are exhaustive)."""
    with tempfile.TemporaryDirectory(prefix="trust-options-") as tmp:
        catalog = Catalog(str(Path(tmp) / "warehouse"))
        catalog.create_database("db")
        options = _options_outcome(catalog, Path(catalog.root))
    with tempfile.TemporaryDirectory(prefix="trust-features-") as tmp:
        catalog = Catalog(str(Path(tmp) / "warehouse"))
        catalog.create_database("db")
        features = _features_outcome(catalog)
    return [options, features]
