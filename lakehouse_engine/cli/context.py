"""What every command gets: where to print, whether to draw progress, and how to open the warehouse."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lakehouse_engine.catalog import Catalog
from lakehouse_engine.cli.output import Output
from lakehouse_engine.cli.progress import Progress
from lakehouse_engine.errors import LakehouseError
from lakehouse_engine.table import FileStoreTable


class WarehouseNotFoundError(LakehouseError):
    """The warehouse path given on the command line is not a directory."""


class PartitionNotFoundError(LakehouseError):
    """A `--partitions` spec matches no partition of the table's latest snapshot."""


class FeatureMissingError(Exception):
    """The engine installed here does not implement what a command needs (yet)."""


@dataclass
class Context:
    """The per-invocation settings commands share."""

    out: Output
    show_progress: bool
    catalog_options: dict[str, str] = field(default_factory=dict)  # --option KEY=VALUE

    def progress(self, label: str, total: int | None = None, unit: str = "") -> Progress:
        """A progress line on stderr (inert unless stderr is a terminal or `--progress` was given)."""
        return Progress(self.out.stderr, label, total, unit, enabled=self.show_progress)

    def catalog(self, warehouse: str) -> Catalog:
        """The catalog of `warehouse`; WarehouseNotFoundError when it is not a directory."""
        catalog = Catalog(warehouse, self.catalog_options)
        if not catalog.file_io.is_dir(catalog.root):
            raise WarehouseNotFoundError(
                f"warehouse {warehouse!r} does not exist or is not a directory; check the path")
        return catalog

    def table(self, warehouse: str, identifier: str) -> FileStoreTable:
        return self.catalog(warehouse).get_table(identifier)


def engine_method(table: FileStoreTable, name: str) -> Callable[..., Any]:
    """`table.<name>`, or FeatureMissingError when this engine version has no such method."""
    method = getattr(table, name, None)
    if not callable(method):
        raise FeatureMissingError(f"FileStoreTable.{name}() is not in this engine version")
    return method
