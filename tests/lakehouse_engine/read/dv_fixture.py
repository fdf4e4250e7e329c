"""The Java-written deletion-vector table fixture, its manifests re-encoded by us.

Used by the judges' tests (Java 0.9 and pypaimon 2.1.0) to prove which name of the ranges field
each reads: `_DELETIONS_VECTORS_RANGES` (what every writer, ours included, writes) and not
`_DELETION_VECTORS_RANGES` (Paimon 0.9's IndexFileMeta schema's name).
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from pathlib import Path
from typing import Any

import fastavro

from lakehouse_engine.format.manifest import (
    INDEX_MANIFEST_ENTRY_SCHEMA,
    decode_index_manifest_entries,
    decode_manifest_entries,
    decode_manifest_file_metas,
    encode_index_manifest_entries,
    encode_manifest_entries,
    encode_manifest_file_metas,
)

DATA = Path(__file__).parent / "data"
TABLE = DATA / "java_dv_table"
JAVA_READS: dict[int, list[list[Any]]] = {
    int(k): v for k, v in json.loads((DATA / "java_dv_table_reads.json").read_text()).items()}
NEW_NAME, OLD_NAME = "_DELETIONS_VECTORS_RANGES", "_DELETION_VECTORS_RANGES"


def copy_table(warehouse: Path, ranges: str = "ours") -> Path:
    """Copy the fixture as `db.t` under `warehouse`, its index manifests re-encoded by us with the
    ranges under `ranges`: "ours" (`_DELETIONS_VECTORS_RANGES`, as we write) or "old"
    (`_DELETION_VECTORS_RANGES`). The data
    manifests and manifest lists are re-encoded by us too: pypaimon 2.1.0 cannot read 0.9's
    (they lack `_VALUE_STATS_COLS`), and ours are what our tables hold."""
    target = warehouse / "db.db" / "t"
    shutil.copytree(TABLE, target)
    manifests = target / "manifest"
    sizes = {}
    for path in manifests.glob("manifest-*"):
        if path.name.startswith("manifest-list-"):
            continue
        data = encode_manifest_entries(decode_manifest_entries(path.read_bytes(), path.name))
        path.write_bytes(data)
        sizes[path.name] = len(data)
    for path in manifests.glob("manifest-list-*"):
        metas = decode_manifest_file_metas(path.read_bytes(), path.name)
        path.write_bytes(encode_manifest_file_metas(
            [dataclasses.replace(m, file_size=sizes[m.file_name]) for m in metas]))
    for path in (target / "manifest").glob("index-manifest-*"):
        entries = decode_index_manifest_entries(path.read_bytes(), path.name)
        data = encode_index_manifest_entries(entries)
        if ranges == "old":
            data = _renamed(data)
        path.write_bytes(data)
    return target


def _renamed(data: bytes) -> bytes:
    """An index manifest with its ranges field renamed `_DELETION_VECTORS_RANGES`."""
    records = [dict(r) for r in fastavro.reader(io.BytesIO(data))]
    schema = json.loads(json.dumps(INDEX_MANIFEST_ENTRY_SCHEMA))
    for f in schema["fields"]:
        if f["name"] == NEW_NAME:
            f["name"] = OLD_NAME
    for r in records:
        r[OLD_NAME] = r.pop(NEW_NAME)
    out = io.BytesIO()
    fastavro.writer(out, schema, records)
    return out.getvalue()
