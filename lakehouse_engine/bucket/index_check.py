"""Reading a partition's HASH index files with every check that keeps a damaged one from being used.

A HASH index file is bare int32s: no header, no checksum. A file that is missing, cut or grown
disagrees with the size and row count its index manifest entry records. A flipped bit changes one
hash: the key it stood for looks new, a writer would give it a second bucket, and the table would
hold the key twice. Only the data can tell: every key in a bucket's data files must have its hash
in that bucket's index file (an index may hold more: keys since deleted). So before a writer uses
a partition's index, the keys of the partition's data files are hashed and looked up.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from lakehouse_engine.bucket.hash_index import PartitionHashIndex, decode_hashes
from lakehouse_engine.errors import CorruptFileError
from lakehouse_engine.format.bucket_hash import hash_rows
from lakehouse_engine.format.manifest_entries import DataFileMeta, IndexManifestEntry
from lakehouse_engine.store.manifest_io import check_file_name

if TYPE_CHECKING:
    from lakehouse_engine.format.snapshot import Snapshot
    from lakehouse_engine.store.file_store import FileStore


def read_hash_index_file(table: FileStore, entry: IndexManifestEntry,
                         index_manifest: str) -> np.ndarray:
    """The key hashes of one HASH index file, checked against the size and row count recorded.

    Raises:
        CorruptFileError: the file is missing, of another size or hash count than its index
            manifest entry records, or not a whole number of hashes. The message names it, and
            the index manifest `index_manifest` too where a flipped bit there would look alike.
    """
    manifest = table.path_factory.manifest_path(index_manifest)
    if not check_file_name(entry.file_name):
        raise CorruptFileError(f"index manifest {manifest} is damaged: it names index file "
                               f"{entry.file_name!r}, which is not a valid file name")
    path = f"{table.path_factory.index_dir}/{entry.file_name}"
    try:
        data = table.file_io.read_bytes(path)
    except FileNotFoundError:
        raise CorruptFileError(f"hash index file {path} is missing, but index manifest {manifest} "
                               f"lists it (one of the two is damaged)") from None
    if len(data) != entry.file_size:
        raise CorruptFileError(f"hash index file {path} has {len(data)} bytes, but index "
                               f"manifest {manifest} records {entry.file_size} (one of the two "
                               f"is damaged)")
    hashes = decode_hashes(data, path)
    if len(hashes) != entry.row_count:
        raise CorruptFileError(f"hash index file {path} holds {len(hashes)} key hashes, but index "
                               f"manifest {manifest} records {entry.row_count} (one of the two is "
                               f"damaged)")
    return hashes


def data_files_by_partition(table: FileStore,
                            snapshot: Snapshot) -> dict[bytes, dict[int, list[DataFileMeta]]]:
    """The live data files of `snapshot`, per partition and bucket (one pass over its manifests)."""
    out: dict[bytes, dict[int, list[DataFileMeta]]] = defaultdict(lambda: defaultdict(list))
    for e in table.manifest_io().live_entries(snapshot):
        out[e.partition][e.bucket].append(e.file)
    return out


def check_index_covers_data(table: FileStore, snapshot: Snapshot, partition: bytes,
                            entries: dict[int, IndexManifestEntry], index: PartitionHashIndex,
                            files_by_bucket: Mapping[int, list[DataFileMeta]]) -> None:
    """Raise CorruptFileError naming the index file when a key of a bucket's data files (the
    partition's live files in `snapshot`, see `data_files_by_partition`) is not in that bucket's
    HASH index (a damaged file that would give the key a second bucket)."""
    if not files_by_bucket:
        return
    schema = table.schema
    keys = schema.trimmed_primary_keys
    types = schema.types_of(keys)
    table_schema = schema.arrow_schema()
    read_schema = pa.schema([table_schema.field(k) for k in keys])
    bucket_dirs = table.path_factory
    spec = table.partition_codec().from_binary(partition).spec
    reader = table.file_reader()
    for bucket, files in sorted(files_by_bucket.items()):
        entry = entries.get(bucket)
        where = f"table {table.name}, partition {spec or '(none)'}, bucket {bucket}"
        if entry is None:
            raise CorruptFileError(
                f"{where} has data files but no HASH index file in index manifest "
                f"{snapshot.index_manifest} (of snapshot {snapshot.id})")
        bucket_dir = bucket_dirs.bucket_dir(spec, bucket)
        for f in files:
            rows = reader.read(f"{bucket_dir}/{f.file_name}", keys, read_schema, f)
            found = index.lookup(hash_rows([rows.column(k) for k in keys], types))
            if (found != bucket).any():
                missing = int(np.count_nonzero(found != bucket))
                raise CorruptFileError(
                    f"hash index file {table.path_factory.index_dir}/{entry.file_name} ({where}) "
                    f"lacks the hashes of {missing} keys of data file {f.file_name}: it is damaged "
                    f"(writing with it would give those keys a second bucket)")
