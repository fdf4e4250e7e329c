"""The FileIO of a warehouse: a local path, an object store (s3, gs, abfs, ...) or any URI
pyarrow.fs understands."""

from __future__ import annotations

import os
from collections.abc import Mapping

import pyarrow.fs as pafs

from lakehouse_engine.io import FileIO
from lakehouse_engine.io_object_store import OBJECT_STORE_SCHEMES, ObjectStoreFileIO


def warehouse_file_io(warehouse: str, options: Mapping[str, str] | None = None) -> tuple[FileIO, str]:
    """The FileIO and the root path inside it for a warehouse path or URI; `options` carry an
    object store's endpoint, credentials and commit settings (see docs/deploying.md)."""
    scheme = warehouse.split("://", 1)[0].lower() if "://" in warehouse else ""
    if scheme in OBJECT_STORE_SCHEMES:
        return ObjectStoreFileIO.for_uri(warehouse, options or {})
    if "://" in warehouse and not warehouse.startswith("file://"):
        fs, root = pafs.FileSystem.from_uri(warehouse)
        return FileIO(fs), root.rstrip("/")
    if warehouse.startswith("file://"):
        warehouse = warehouse[len("file://"):]
    return FileIO(pafs.LocalFileSystem()), os.path.abspath(warehouse)
