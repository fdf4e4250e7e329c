"""How a table option is declared, parsed and registered, as Paimon's ConfigOption and its
ConfigOptions builder: an option's key, type, default and description, its status (implemented,
stored only or refused), its fallback keys, the parsing of Paimon's memory sizes (MemorySize) and
durations (TimeUtils), and the bounds of the Java type Paimon reads a number as.

The options themselves are declared, group by group, in `lakehouse_engine.options` (Paimon's
CoreOptions), which re-exports these names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.options.inventory import Status

__all__ = ["FALLBACK_KEYS", "JAVA_INT_MAX", "JAVA_LONG_MAX", "OPTIONS", "ConfigOption", "OptionGroup",
           "OptionKey", "parse_duration_ms", "parse_memory_size"]

T = TypeVar("T")

# Paimon's MemorySize units (with its long names: `64 mebibytes`), and `kib`..`tib`, which this
# engine has always read.
_MEMORY_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "kibibytes": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "mebibytes": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "gibibytes": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40, "tebibytes": 1 << 40,
}
# Paimon's TimeUtils units in nanoseconds (a duration is read in whole milliseconds, truncated,
# as Java's Duration.toMillis: `500 µs` is 0 ms).
_DURATION_UNITS_NS = {
    "": 1_000_000, "ms": 1_000_000, "milli": 1_000_000, "millis": 1_000_000,
    "millisecond": 1_000_000, "milliseconds": 1_000_000,
    "s": 10**9, "sec": 10**9, "secs": 10**9, "second": 10**9, "seconds": 10**9,
    "min": 60 * 10**9, "m": 60 * 10**9, "minute": 60 * 10**9, "minutes": 60 * 10**9,
    "h": 3600 * 10**9, "hour": 3600 * 10**9, "hours": 3600 * 10**9,
    "d": 86400 * 10**9, "day": 86400 * 10**9, "days": 86400 * 10**9,
    "µs": 1000, "micro": 1000, "micros": 1000, "microsecond": 1000, "microseconds": 1000,
    "ns": 1, "nano": 1, "nanos": 1, "nanosecond": 1, "nanoseconds": 1,
}
# As Paimon parses both: digits, then (after optional spaces) the unit, any case.
_QUANTITY_RE = re.compile(r"^\s*(\d+)\s*(.*?)\s*$", re.DOTALL)


def parse_memory_size(text: str) -> int:
    """Parse a Paimon memory size such as `256 mb`, `128MB`, `2 mebibytes` or `1024` (bytes) into bytes."""
    m = _QUANTITY_RE.match(text)
    if not m or m.group(2).lower() not in _MEMORY_UNITS:
        raise ValueError(f"not a memory size: {text!r} (expected e.g. '128 mb')")
    return int(m.group(1)) * _MEMORY_UNITS[m.group(2).lower()]


def parse_duration_ms(text: str) -> int:
    """Parse a Paimon duration such as `1 h`, `10 s`, `100ms` or `500 µs` into milliseconds."""
    m = _QUANTITY_RE.match(text)
    if not m or m.group(2).lower() not in _DURATION_UNITS_NS:
        raise ValueError(f"not a duration: {text!r} (expected e.g. '1 h' or '10 s')")
    return int(m.group(1)) * _DURATION_UNITS_NS[m.group(2).lower()] // 1_000_000


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise ValueError(f"not a boolean: {text!r} (expected 'true' or 'false')")


def _parse_int(text: str) -> int:
    return int(text.strip())


class OptionKey(str):
    """An option's key: a plain string that also answers `key()` (pypaimon's ConfigOption.key())."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One table option: its key, how its string value parses, its default and what it means."""

    key: str
    parse: Callable[[str], T]
    default: T | None
    description: str
    kind: str
    check: Callable[[T], str | None] | None = None
    choices: tuple[str, ...] | None = None
    group: str = ""  # the section of the option reference (docs/options.md) it is listed under
    status: Status = Status.IMPLEMENTED
    why: str = ""  # stored only: why it changes nothing here; refused: what to do instead
    #: Older spellings Paimon still reads (its ConfigOption.withFallbackKeys), tried in order when
    #: the key itself is absent.
    fallback_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # The key is a str that can also be called: pypaimon code writes `CoreOptions.BUCKET.key()`.
        object.__setattr__(self, "key", OptionKey(self.key))

    def default_value(self) -> T | None:
        """pypaimon's name for `default`."""
        return self.default

    def value(self, raw: Mapping[str, str]) -> T | None:
        """The typed value of this option in `raw`, or its default; raises InvalidOptionError."""
        key = next((k for k in (self.key, *self.fallback_keys) if k in raw), None)
        if key is None:
            return self.default
        text = raw[key]
        try:
            if self.choices is not None:
                # Paimon matches an enum's value in any case (OptionsUtils.convertToEnum): a table
                # Java made with 'LOOKUP' reads as 'lookup' here.
                canonical = next((c for c in self.choices if c.lower() == text.lower()), None)
                if canonical is None:
                    raise ValueError(f"expected one of {', '.join(self.choices)}")
                text = canonical
            parsed = self.parse(text)
        except ValueError as e:
            raise InvalidOptionError(f"option '{key}' has invalid value {text!r}: {e}") from None
        if self.check is not None:
            problem = self.check(parsed)
            if problem:
                raise InvalidOptionError(f"option '{key}' has invalid value {text!r}: {problem}")
        return parsed


OPTIONS: dict[str, ConfigOption[Any]] = {}
#: Each fallback key (an older spelling) to the option that reads it.
FALLBACK_KEYS: dict[str, ConfigOption[Any]] = {}

# Paimon reads "int" options as Java ints and sizes and durations as Java longs: a larger value
# would fail (or wrap around) in every other engine that opens the table.
JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1

def _bounded(check: Callable[[int], str | None] | None, java_long: bool) -> Callable[[int], str | None]:
    """`check`, after a check that the number fits the Java type Paimon reads it as."""
    high = JAVA_LONG_MAX if java_long else JAVA_INT_MAX
    low = -high - 1

    def bounded(v: int) -> str | None:
        if not low <= v <= high:
            return f"must be between {low} and {high} (it is read as a {'Java long' if java_long else 'Java int'})"
        return check(v) if check is not None else None
    return bounded


class OptionGroup:
    """Declares the options of one section of the option reference, each typed by its kind.

    Every factory takes `refused=` (what to do instead: a value other than the default is refused)
    or `stored=` (why the option changes nothing here); implementing a refused option is deleting
    its `refused=` line.
    """

    def __init__(self, title: str):
        self.title = title

    def _add(self, option: ConfigOption[T], refused: str | None, stored: str | None) -> ConfigOption[T]:
        if refused is not None:
            option = replace(option, status=Status.REFUSED, why=refused)
        elif stored is not None:
            option = replace(option, status=Status.STORED, why=stored)
        OPTIONS[option.key] = option
        FALLBACK_KEYS.update((k, option) for k in option.fallback_keys)
        return option

    def integer(self, key: str, default: int | None, description: str,
                check: Callable[[int], str | None] | None = None, java_long: bool = False, *,
                refused: str | None = None, stored: str | None = None,
                fallback_keys: tuple[str, ...] = ()) -> ConfigOption[int]:
        """An integer option (a Java int, or a Java long with `java_long`; also read from its
        `fallback_keys`, Paimon's older spellings)."""
        option = ConfigOption(key, _parse_int, default, description, "int", _bounded(check, java_long),
                              None, self.title, fallback_keys=fallback_keys)
        return self._add(option, refused, stored)

    def boolean(self, key: str, default: bool | None, description: str,
                check: Callable[[bool], str | None] | None = None, *,
                refused: str | None = None, stored: str | None = None,
                fallback_keys: tuple[str, ...] = ()) -> ConfigOption[bool]:
        """A `true`/`false` option (also read from its `fallback_keys`, Paimon's older spellings)."""
        option = ConfigOption(key, _parse_bool, default, description, "bool", check, None, self.title,
                              fallback_keys=fallback_keys)
        return self._add(option, refused, stored)

    def string(self, key: str, default: str | None, description: str,
               check: Callable[[str], str | None] | None = None, *,
               refused: str | None = None, stored: str | None = None) -> ConfigOption[str]:
        """A free-text option."""
        option = ConfigOption(key, str, default, description, "string", check, None, self.title)
        return self._add(option, refused, stored)

    def enum(self, key: str, default: str | None, description: str, choices: tuple[str, ...], *,
             refused: str | None = None, stored: str | None = None) -> ConfigOption[str]:
        """An option whose value is one of `choices`."""
        option = ConfigOption(key, str, default, description, "enum", None, choices, self.title)
        return self._add(option, refused, stored)

    def memory(self, key: str, default: int | None, description: str,
               check: Callable[[int], str | None] | None = None, *,
               refused: str | None = None, stored: str | None = None) -> ConfigOption[int]:
        """A memory size (`128 mb`), in bytes."""
        option = ConfigOption(key, parse_memory_size, default, description, "memory",
                              _bounded(check, True), None, self.title)
        return self._add(option, refused, stored)

    def duration(self, key: str, default: int | None, description: str,
                 check: Callable[[int], str | None] | None = None, *,
                 refused: str | None = None, stored: str | None = None) -> ConfigOption[int]:
        """A duration (`1 h`), in milliseconds."""
        option = ConfigOption(key, parse_duration_ms, default, description, "duration",
                              _bounded(check, True), None, self.title)
        return self._add(option, refused, stored)
