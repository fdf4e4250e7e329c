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


def rewrite_vectors(table_dir: Path, target_size: int) -> int:
    """Rewrite every snapshot's deletion vectors with our index-file writer (rolling at
    `target_size`) under new index manifests; returns how many index files were written."""
    import pyarrow.fs as pafs

    from lakehouse_engine.format.deletion_vectors import DELETION_VECTORS_INDEX
    from lakehouse_engine.format.roaring import decode_roaring
    from lakehouse_engine.io import FileIO
    from lakehouse_engine.mergetree.deletion_vector_files import write_deletion_vector_files

    file_io = FileIO(pafs.LocalFileSystem())
    written = 0
    counter = iter(range(10**6))
    for snap_path in sorted((table_dir / "snapshot").glob("snapshot-*")):
        snapshot = json.loads(snap_path.read_text())
        name = snapshot.get("indexManifest")
        if not name:
            continue
        entries = decode_index_manifest_entries((table_dir / "manifest" / name).read_bytes(), name)
        kept = [e for e in entries if e.index_type != DELETION_VECTORS_INDEX]
        buckets: dict[tuple[bytes, int], dict[str, Any]] = {}
        for e in entries:
            if e.index_type != DELETION_VECTORS_INDEX:
                continue
            data = (table_dir / "index" / e.file_name).read_bytes()
            vectors = buckets.setdefault((e.partition, e.bucket), {})
            for r in e.dv_ranges or ():
                vectors[r.data_file_name] = decode_roaring(data[r.offset + 8:r.offset + 4 + r.length])
        for (partition, bucket), vectors in buckets.items():
            new = write_deletion_vector_files(
                file_io, str(table_dir / "index"), lambda: f"index-ours-{next(counter)}", partition, bucket,
                vectors, target_size)
            written += len(new)
            kept += new
        new_name = f"index-manifest-ours-{snap_path.name}"
        (table_dir / "manifest" / new_name).write_bytes(encode_index_manifest_entries(kept))
        snapshot["indexManifest"] = new_name
        snap_path.write_text(json.dumps(snapshot))
    return written
