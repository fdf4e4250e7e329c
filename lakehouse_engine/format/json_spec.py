"""Declarative descriptions of Paimon's JSON metadata files (`snapshot-N`, `schema-N`).

One `JsonObject` per kind of object lists its keys in the order Paimon writes them, each with its
JSON type, whether it is required, and whether a null is written or left out. The same
description reads (type checks that raise CorruptFileError naming the file and the key) and
writes (key order, omitted optionals), so reader and writer cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lakehouse_engine.errors import CorruptFileError

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and _INT64_MIN <= value <= _INT64_MAX


def _string_map(value: Any) -> dict[str, str] | None:
    """Jackson reads JSON scalars into Map<String, String> as their text; so do we."""
    if not isinstance(value, dict):
        return None
    result: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            result[key] = "true" if item else "false"
        elif isinstance(item, str):
            result[key] = item
        elif isinstance(item, int):
            result[key] = repr(item)
        else:
            return None
    return result


# kind -> (what the error calls it, the checked value or None when the value is not of the kind)
KINDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "int": ("an integer", lambda v: v if _is_int(v) else None),
    "str": ("a string", lambda v: v if isinstance(v, str) else None),
    "map": ("a JSON object", lambda v: v if isinstance(v, dict) else None),
    "list": ("a list", lambda v: v if isinstance(v, list) else None),
    "str_list": ("a list of strings",
                 lambda v: v if isinstance(v, list) and all(isinstance(s, str) for s in v) else None),
    "str_map": ("a JSON object of strings", _string_map),
    "any": ("a JSON value", lambda v: v),
}


@dataclass(frozen=True)
class JsonKey:
    """One key of a JSON object: Paimon's name, our attribute name, its kind and presence."""

    key: str
    attr: str
    kind: str
    required: bool = True
    #: a missing or null optional key reads as this value
    default: Any = None
    #: written as null when None (Paimon writes `"comment": null`); otherwise left out
    write_null: bool = False


@dataclass(frozen=True)
class JsonObject:
    """A kind of JSON object (`snapshot`, `schema`, `schema field`) as an ordered list of keys."""

    what: str
    keys: tuple[JsonKey, ...]

    def __post_init__(self) -> None:
        unknown = [k.kind for k in self.keys if k.kind not in KINDS]
        if unknown:
            raise ValueError(f"{self.what}: unknown kinds {unknown}")

    @property
    def known_keys(self) -> frozenset[str]:
        return frozenset(k.key for k in self.keys)

    def load(self, text: str | bytes, file_name: str) -> dict[str, Any]:
        """The JSON document of a file: an object, else CorruptFileError naming the file."""
        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptFileError(f"{self.what} file {file_name!r} is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise CorruptFileError(f"{self.what} file {file_name!r} does not hold a JSON object")
        return doc

    def read(self, doc: Any, file_name: str, where: str = "") -> dict[str, Any]:
        """attribute -> checked value for every key (defaults for missing optionals)."""
        if not isinstance(doc, dict):
            raise CorruptFileError(f"{self.what} file {file_name!r}: {where or 'the document'} "
                                   f"should be a JSON object, got {doc!r}")
        values: dict[str, Any] = {}
        for k in self.keys:
            value = doc.get(k.key)
            if value is None:
                if k.required:
                    raise CorruptFileError(
                        f"{self.what} file {file_name!r} lacks required field {where + k.key!r}")
                values[k.attr] = k.default() if callable(k.default) else k.default
                continue
            name, check = KINDS[k.kind]
            checked = check(value)
            if checked is None:
                raise CorruptFileError(f"{self.what} file {file_name!r}: field {where + k.key!r} "
                                       f"should be {name}, got {value!r}")
            values[k.attr] = checked
        return values

    def extra(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """The keys of `doc` this description does not know (kept on a read-modify-write)."""
        known = self.known_keys
        return {key: value for key, value in doc.items() if key not in known}

    def write(self, values: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The JSON object of `values` (by attribute), keys in Paimon's order, then `extra`."""
        doc: dict[str, Any] = {}
        for k in self.keys:
            value = values.get(k.attr)
            if value is not None or k.write_null:
                doc[k.key] = value
        known = self.known_keys
        for key, value in (extra or {}).items():
            if key not in known:
                doc[key] = value
        return doc


def dumps(doc: Mapping[str, Any]) -> str:
    """Paimon's JSON text: indent 2, UTF-8 characters unescaped."""
    return json.dumps(doc, indent=2, ensure_ascii=False)
