"""The options that say where a read starts, checked together as Paimon's SchemaValidation
(validateStartupMode) checks them: each `scan.mode` takes its own options and no other's, so a
table handle never keeps one of them and reads past it."""

from __future__ import annotations

from collections.abc import Mapping

from lakehouse_engine.errors import InvalidOptionError

SNAPSHOT_ID, TAG_NAME, TIMESTAMP_MILLIS = "scan.snapshot-id", "scan.tag-name", "scan.timestamp-millis"
BETWEEN, BETWEEN_TIMESTAMP = "incremental-between", "incremental-between-timestamp"
_ALL = (SNAPSHOT_ID, TAG_NAME, TIMESTAMP_MILLIS, BETWEEN, BETWEEN_TIMESTAMP)

#: Per resolved mode: (options of which exactly one is needed, the other options it allows).
_TAKES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "from-timestamp": ((TIMESTAMP_MILLIS,), ()),
    "from-snapshot": ((SNAPSHOT_ID, TAG_NAME), ()),
    "from-snapshot-full": ((SNAPSHOT_ID,), ()),
    "incremental": ((BETWEEN, BETWEEN_TIMESTAMP), ()),
}

__all__ = ["check_startup_options", "check_stored_startup_options", "resolved_mode"]


def resolved_mode(raw: Mapping[str, str]) -> str:
    """`scan.mode`, `default` resolved as Paimon's CoreOptions.startupMode resolves it."""
    mode = raw.get("scan.mode", "default").lower()  # Paimon reads the enum in any case
    if mode == "full":
        return "latest-full"
    if mode != "default":
        return mode
    if TIMESTAMP_MILLIS in raw:
        return "from-timestamp"
    if SNAPSHOT_ID in raw or TAG_NAME in raw:
        return "from-snapshot"
    if BETWEEN in raw or BETWEEN_TIMESTAMP in raw:
        return "incremental"
    return "latest-full"


def check_startup_options(raw: Mapping[str, str]) -> None:
    """InvalidOptionError naming the options when the start options conflict with `scan.mode` or
    with each other (a mode's own option missing is left to the read that needs it)."""
    mode = resolved_mode(raw)
    one_of, _ = _TAKES.get(mode, ((), ()))
    given = [k for k in one_of if k in raw]
    if len(given) > 1:
        raise InvalidOptionError(f"options {' and '.join(repr(k) for k in given)} are both set: set only one "
                                 f"of them with scan.mode '{mode}'")
    stray = [k for k in _ALL if k in raw and k not in one_of]
    if stray:
        why = f"scan.mode '{mode}'" + (" (what the other options resolve 'default' to)"
                                       if raw.get("scan.mode", "default").lower() == "default" else "")
        raise InvalidOptionError(f"option {', '.join(repr(k) for k in stray)} must not be set with {why}: "
                                 f"a read would follow one and pass over the other (Paimon refuses the combination)")


def check_stored_startup_options(stored: Mapping[str, str], table: str) -> None:
    """`check_startup_options` on a table's stored options when it is opened, as Paimon's
    FileStoreTableFactory validates the schema at every load: a schema another engine wrote with
    conflicting start options is refused naming `table`, the options and how to mend it."""
    try:
        check_startup_options(stored)
    except InvalidOptionError as exc:
        raise InvalidOptionError(f"table {table} stores conflicting start options: {exc}; reset one of them "
                                 f"(alter_table with SchemaChange.remove_option) to open it") from exc
