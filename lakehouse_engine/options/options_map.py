"""pypaimon's `Options` (a table's raw option map read through `ConfigOption`s) and its
`MergeEngine` enum, so code written for pypaimon builds `CoreOptions(Options({...}))` and compares
`options.merge_engine()` with `MergeEngine.FIRST_ROW`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import Enum
from typing import Any, Protocol


class _Option(Protocol):
    key: str

    def value(self, raw: Mapping[str, str]) -> Any: ...


class MergeEngine(str, Enum):
    """How rows of one primary key merge (option `merge-engine`), by Paimon's names."""

    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    AGGREGATE = "aggregation"
    FIRST_ROW = "first-row"


class Options(Mapping[str, str]):
    """A raw option map, as pypaimon's `Options(dict)`: `get(CoreOptions.X)` parses the value (or
    gives the default); it is also a read-only mapping of the raw strings."""

    def __init__(self, data: Mapping[str, Any] | None = None):
        self.data: dict[str, str] = {str(k): str(v) for k, v in (data or {}).items()}

    @classmethod
    def from_none(cls) -> Options:
        """An empty map."""
        return cls({})

    def to_map(self) -> dict[str, str]:
        """The raw strings by key."""
        return self.data

    def get(self, key: Any, default: Any = None) -> Any:
        """The typed value of an option (a `ConfigOption`), or a raw string by key."""
        if isinstance(key, str):
            return self.data.get(key, default)
        option: _Option = key
        value = option.value(self.data)
        return default if value is None else value

    def set(self, key: Any, value: Any) -> None:
        """Set an option (a `ConfigOption` or a key) to `value`'s text (booleans as true/false)."""
        text = str(value).lower() if isinstance(value, bool) else str(value)
        self.data[str(getattr(key, "key", key))] = text

    def contains(self, key: Any) -> bool:
        """Whether the option (a `ConfigOption` or a key) is set."""
        return str(getattr(key, "key", key)) in self.data

    def contains_key(self, key: str) -> bool:
        """Whether the raw key is set."""
        return key in self.data

    def copy(self) -> Options:
        """An independent copy."""
        return Options(dict(self.data))

    def __getitem__(self, key: str) -> str:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)
