"""A `pypaimon` package made only of our names: pypaimon 2.1.0's module paths, each re-exporting
the engine's class or function of the same role, so code written for pypaimon imports ours.

Used by `tools/pypaimon_api_tests.py` to run pypaimon's own tests on this engine. A name pypaimon
has and we do not re-export (its internals: file scanners, row serializers, writers) becomes a
placeholder that raises `PypaimonInternalError` when used, so a test passes only if every name it
touches is ours.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

#: pypaimon module path -> {pypaimon name: "our.module:our_name"}.
MODULES: dict[str, dict[str, str]] = {
    "pypaimon": {
        "CatalogFactory": "lakehouse_engine.catalog:CatalogFactory",
        "Schema": "lakehouse_engine.schema:Schema",
        "TagManager": "lakehouse_engine.maintenance.tags:TagManager",
    },
    "pypaimon.catalog.catalog_factory": {"CatalogFactory": "lakehouse_engine.catalog:CatalogFactory"},
    "pypaimon.catalog.filesystem_catalog": {"FileSystemCatalog": "lakehouse_engine.catalog:Catalog"},
    "pypaimon.catalog.catalog": {"Catalog": "lakehouse_engine.catalog:Catalog"},
    "pypaimon.catalog.database": {"Database": "lakehouse_engine.catalog:Database"},
    "pypaimon.catalog.catalog_exception": {
        "CatalogException": "lakehouse_engine.errors:CatalogException",
        "DatabaseNotExistException": "lakehouse_engine.errors:DatabaseNotExistException",
        "DatabaseAlreadyExistException": "lakehouse_engine.errors:DatabaseAlreadyExistException",
        "TableNotExistException": "lakehouse_engine.errors:TableNotExistException",
        "TableAlreadyExistException": "lakehouse_engine.errors:TableAlreadyExistException",
        "ColumnNotExistException": "lakehouse_engine.errors:ColumnNotExistException",
        "ColumnAlreadyExistException": "lakehouse_engine.errors:ColumnAlreadyExistException",
        "TagNotExistException": "lakehouse_engine.errors:TagNotExistException",
        "TagAlreadyExistException": "lakehouse_engine.errors:TagAlreadyExistException",
        "DatabaseNoPermissionException": "lakehouse_engine.errors:DatabaseNoPermissionException",
        "TableNoPermissionException": "lakehouse_engine.errors:TableNoPermissionException",
    },
    "pypaimon.common.identifier": {
        "Identifier": "lakehouse_engine.identifier:Identifier",
        "DEFAULT_MAIN_BRANCH": "lakehouse_engine.identifier:DEFAULT_MAIN_BRANCH",
        "UNKNOWN_DATABASE": "lakehouse_engine.identifier:UNKNOWN_DATABASE",
    },
    "pypaimon.common.options": {
        "CoreOptions": "lakehouse_engine.options:CoreOptions",
        "Options": "lakehouse_engine.options:Options",
    },
    "pypaimon.common.options.core_options": {
        "CoreOptions": "lakehouse_engine.options:CoreOptions",
        "MergeEngine": "lakehouse_engine.options:MergeEngine",
    },
    "pypaimon.common.options.options": {"Options": "lakehouse_engine.options:Options"},
    "pypaimon.common.predicate": {"Predicate": "lakehouse_engine.read.predicate:Predicate"},
    "pypaimon.common.predicate_builder": {"PredicateBuilder": "lakehouse_engine.read.predicate:PredicateBuilder"},
    "pypaimon.schema.schema": {"Schema": "lakehouse_engine.schema:Schema"},
    "pypaimon.schema.table_schema": {"TableSchema": "lakehouse_engine.schema:TableSchema"},
    "pypaimon.schema.data_types": {
        "DataField": "lakehouse_engine.schema:DataField",
        "AtomicType": "lakehouse_engine.data_types:AtomicType",
        "ArrayType": "lakehouse_engine.data_types:ArrayType",
        "MapType": "lakehouse_engine.data_types:MapType",
        "RowType": "lakehouse_engine.data_types:RowType",
        "DataType": "lakehouse_engine.types:DataType",
    },
    "pypaimon.schema.schema_change": {
        "SchemaChange": "lakehouse_engine.schema_change:SchemaChange",
        "Move": "lakehouse_engine.schema_change:Move",
        "MoveType": "lakehouse_engine.schema_change:MoveType",
    },
    "pypaimon.schema.schema_manager": {"SchemaManager": "lakehouse_engine.store.schema_manager:SchemaManager"},
    "pypaimon.snapshot.snapshot": {
        "Snapshot": "lakehouse_engine.format.snapshot:Snapshot",
        "BATCH_COMMIT_IDENTIFIER": "lakehouse_engine.format.snapshot:BATCH_COMMIT_IDENTIFIER",
    },
    "pypaimon.snapshot.snapshot_manager": {"SnapshotManager": "lakehouse_engine.store.snapshot_manager:SnapshotManager"},
    "pypaimon.table.file_store_table": {"FileStoreTable": "lakehouse_engine.table:FileStoreTable"},
    "pypaimon.table.bucket_mode": {"BucketMode": "lakehouse_engine.schema:BucketMode"},
    "pypaimon.table.row.row_kind": {"RowKind": "lakehouse_engine.read.row_kind:RowKind"},
    "pypaimon.table.row.internal_row": {"RowKind": "lakehouse_engine.read.row_kind:RowKind"},
    "pypaimon.table.row.generic_row": {
        "GenericRowDeserializer": "lakehouse_engine.format.binary_row:BinaryRowDeserializer",
    },
    "pypaimon.tag.tag_manager": {"TagManager": "lakehouse_engine.maintenance.tags:TagManager"},
    "pypaimon.api.api_response": {
        "GetTagResponse": "lakehouse_engine.maintenance.tags:GetTagResponse",
        "PagedList": "lakehouse_engine.maintenance.partitions:PagedList",
    },
    "pypaimon.read.read_builder": {"ReadBuilder": "lakehouse_engine.read.read_builder:ReadBuilder"},
    "pypaimon.read.table_scan": {"TableScan": "lakehouse_engine.read.scan:TableScan"},
    "pypaimon.read.table_read": {"TableRead": "lakehouse_engine.read.table_read:TableRead"},
    "pypaimon.read.plan": {"Plan": "lakehouse_engine.read.scan:Plan"},
    "pypaimon.read.split": {
        "Split": "lakehouse_engine.read.split:DataSplit",
        "DataSplit": "lakehouse_engine.read.split:DataSplit",
    },
    "pypaimon.write.write_builder": {
        "BatchWriteBuilder": "lakehouse_engine.write.write_builder:BatchWriteBuilder",
        "StreamWriteBuilder": "lakehouse_engine.write.write_builder:StreamWriteBuilder",
    },
    "pypaimon.write.table_write": {"TableWrite": "lakehouse_engine.write.table_write:TableWrite"},
    "pypaimon.write.postpone_batch_table_write": {
        "PostponeFixedBucketWriteBuilder": "lakehouse_engine.write.postpone_fixed:PostponeFixedBucketWriteBuilder",
        "PostponeFixedBucketBatchTableWrite": "lakehouse_engine.write.postpone_fixed:PostponeFixedBucketWrite",
    },
    "pypaimon.write.postpone_bucket": {"PostponeBucketPlan": "lakehouse_engine.write.postpone_fixed:PostponeBucketPlan"},
    "pypaimon.write.table_commit": {"TableCommit": "lakehouse_engine.write.table_commit:TableCommit"},
    "pypaimon.write.commit_message": {"CommitMessage": "lakehouse_engine.write.commit_message:CommitMessage"},
    # pyarrow's filesystem module, through which both catalogs open S3 (`pafs.S3FileSystem(...)`):
    # patching `...pyarrow_file_io.pafs.S3FileSystem` sees the arguments our catalog passes.
    "pypaimon.filesystem.pyarrow_file_io": {"pafs": "lakehouse_engine.io_object_store:pafs"},
}

_TESTS = "pypaimon.tests"
# Names pytest and unittest probe modules and objects for; never pypaimon's.
_PROBES = ("__", "pytest", "setup", "teardown", "setUp", "tearDown")


class PypaimonInternalError(NotImplementedError):
    """A pypaimon name this engine does not offer (an internal of pypaimon's) was used."""


class _Missing:
    """Stands for a pypaimon name we do not re-export; any use of it raises."""

    def __init__(self, qualified: str):
        object.__setattr__(self, "_qualified", qualified)

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise PypaimonInternalError(f"{self._qualified} is pypaimon's, not re-exported by the engine")

    __call__ = _fail
    # Patching an attribute of a pypaimon internal (`patch("pypaimon.<module>.pafs.S3FileSystem")`,
    # `DataFileMeta.__init__ = ...`) uses it too.
    __setattr__ = _fail
    __delattr__ = _fail
    __iter__ = _fail
    __eq__ = _fail
    __hash__ = object.__hash__

    def __getattr__(self, name: str) -> Any:
        if name.startswith(_PROBES):
            raise AttributeError(name)
        return _Missing(f"{self._qualified}.{name}")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        # `class X(pypaimon.Internal)` in a test module must import; using X raises.
        return (_MissingBase,)


class _MissingBase:
    """Base of a test's subclass of a pypaimon internal: constructing it raises."""

    def __init__(self, *_: Any, **__: Any):
        raise PypaimonInternalError("subclass of a pypaimon internal, not re-exported by the engine")


def _resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return _Missing(target)


class _ShimModule(types.ModuleType):
    """A pypaimon module: our names where mapped, a raising placeholder for any other name."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith(_PROBES):
            raise AttributeError(name)
        target = MODULES.get(self.__name__, {}).get(name)
        value = _resolve(target) if target else _Missing(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _ShimFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds every `pypaimon.*` module except `pypaimon.tests` (the tests themselves)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith("pypaimon.") or fullname == _TESTS or fullname.startswith(_TESTS + "."):
            return None
        parent, _, name = fullname.rpartition(".")
        if name in MODULES.get(parent, {}):
            return None  # a re-exported name of the parent module (`pafs`), not a module of its own
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _ShimModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install(package: types.ModuleType) -> None:
    """Make `package` (the `pypaimon` package on sys.path) the shim: its own names and a finder for
    its submodules."""
    package.__class__ = _ShimModule
    if not any(isinstance(f, _ShimFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _ShimFinder())
