"""Partitions of a batch: which rows go to which partition, its BinaryRow and its directory."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_engine.errors import InvalidDataError, LakehouseError
from lakehouse_engine.format.binary_row import deserialize_row, serialize_row
from lakehouse_engine.options import PARTITION_DEFAULT_NAME
from lakehouse_engine.path_factory import format_partition_value, partition_path_component
from lakehouse_engine.schema import TableSchema


@dataclass(frozen=True)
class Partition:
    """One partition: its values, the BinaryRow that manifests store, and its directory spec."""

    values: tuple[object, ...]
    binary: bytes
    spec: tuple[tuple[str, str], ...]

    def as_dict(self) -> dict[str, object]:
        return {k: v for (k, _), v in zip(self.spec, self.values, strict=True)}

    def matches(self, specs: Sequence[Mapping[str, object]] | None) -> bool:
        """True when this partition matches any of the partial specs (`{}` matches all; None: all).

        Values compare as text, so `{"dt": "2026-11-21"}` matches a DATE or STRING partition alike.
        """
        if specs is None:
            return True
        values = self.as_dict()
        return any(all(values.get(k) == v or str(values.get(k)) == str(v) for k, v in spec.items())
                   for spec in specs)

    def path_string(self) -> str:
        """The partition as `k=v/...` (unescaped, for people)."""
        return "/".join(f"{k}={v}" for k, v in self.spec)


class PartitionCodec:
    """Turns partition values into BinaryRows and directory names for one table schema."""

    def __init__(self, schema: TableSchema):
        self.keys = list(schema.partition_keys)
        self.types = schema.types_of(self.keys)
        self.default_name = schema.core_options.require(PARTITION_DEFAULT_NAME)
        self._cache: dict[bytes, Partition] = {}

    def check_spec_keys(self, specs: Iterable[Mapping[str, object]], table_name: str, action: str) -> None:
        """LakehouseError naming `action` when a partition spec names a field that is not a partition key."""
        unknown = sorted({k for spec in specs for k in spec} - set(self.keys))
        if unknown:
            raise LakehouseError(f"{action}: {unknown} are not partition keys of table {table_name} "
                                 f"(they are {self.keys})")

    def from_values(self, values: tuple[object, ...]) -> Partition:
        try:
            binary = serialize_row(list(values), self.types)
        except (ValueError, TypeError, OverflowError) as e:
            raise InvalidDataError(f"partition value {values!r} cannot be encoded: {e}") from None
        spec = tuple(
            (k, format_partition_value(v, t, self.default_name))
            for k, v, t in zip(self.keys, values, self.types, strict=True)
        )
        for k, v in spec:
            partition_path_component(k, v)  # fail early on a name no directory can have
        part = Partition(tuple(values), binary, spec)
        self._cache.setdefault(binary, part)
        return part

    def from_binary(self, binary: bytes) -> Partition:
        """Decode a manifest's partition bytes (cached: a scan meets the same few partitions often)."""
        part = self._cache.get(binary)
        if part is None:
            values = tuple(deserialize_row(binary, self.types)) if self.keys else ()
            part = self.from_values(values)
            self._cache[binary] = part
        return part

    def group_rows(self, table: pa.Table) -> tuple[np.ndarray, list[Partition]]:
        """Group id per row (int64) and the partition of each group, without a Python loop per row."""
        n = table.num_rows
        if not self.keys:
            return np.zeros(n, dtype=np.int64), [self.from_values(())]
        combined = np.zeros(n, dtype=np.int64)
        dictionaries = []
        for key in self.keys:
            encoded = pc.dictionary_encode(table.column(key), null_encoding="encode").combine_chunks()
            indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            size = max(len(encoded.dictionary), 1)
            combined = combined * size + indices
            dictionaries.append((encoded.dictionary, size))
        uniques, inverse = np.unique(combined, return_inverse=True)
        partitions = []
        for code in uniques.tolist():
            values = []
            for dictionary, size in reversed(dictionaries):
                values.append(dictionary[code % size].as_py())
                code //= size
            partitions.append(self.from_values(tuple(reversed(values))))
        return inverse.astype(np.int64), partitions
