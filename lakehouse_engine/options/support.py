"""Which options a table may hold: a refused option (or a refused value), a stored-only option's
value Paimon could not parse (`options/stored_kinds.py`) and a near miss of a known key are refused
when a table is created or altered or a handle is copied; every other key is kept."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping

from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.options import FALLBACK_KEYS, OPTIONS
from lakehouse_engine.options.inventory import INVENTORY, InventoryEntry, Status
from lakehouse_engine.options.stored_kinds import PAIMON_FALLBACKS, stored_value_problem

# Key families Paimon spells with a field or index name inside (`fields.<f>.aggregate-function`,
# `file-index.bloom-filter.columns`): the merge engines and index options check them, not the
# near-miss check below.
_KEY_FAMILIES = ("fields.", "file-index.", "commit.callback.", "tag.callback.", "parquet.enable.dictionary#")
# How alike an unknown key and a known one must be (difflib's ratio) to call it a typo of it:
# `changelog-prodcer` and `bucket-keys` are 0.97 and 0.95; unrelated user keys stay far below.
_NEAR_MISS_RATIO = 0.85
_FAMILY_NEAR_MISS_RATIO = 0.95


def option_status(key: str) -> Status | None:
    """The status of `key` (implemented, stored only or refused), or None for a key Paimon does not know."""
    if key in OPTIONS:
        return OPTIONS[key].status
    if key in FALLBACK_KEYS:
        return FALLBACK_KEYS[key].status
    entry = INVENTORY.get(PAIMON_FALLBACKS.get(key, key))
    return entry.status if entry is not None else None


def near_miss(key: str, own: Collection[str] = (), ignore_case: bool = False) -> str | None:
    """The known option an unknown `key` is most likely a typo of, or None.

    `own` are the option keys of the entry point that takes `key` besides Paimon's (a Spark data
    source's `warehouse`, `start-snapshot`, ...): a key close to one of them is its typo, even
    when it is a Paimon key the entry point does not read (`partition` for `partitions`).
    `ignore_case` for keys Spark passes lowercased (`read.stream.maxbytespertrigger`)."""
    mine = {k.lower(): k for k in own}
    if key in own or (ignore_case and key.lower() in mine):
        return None
    close = difflib.get_close_matches(key.lower(), mine, n=1, cutoff=_NEAR_MISS_RATIO)
    if close:
        return mine[close[0]]
    if option_status(key) is not None:
        return None
    cutoff = _NEAR_MISS_RATIO
    if key.startswith(_KEY_FAMILIES):
        # `fields.<field>.<property>` names a field: any field name is right. Other family keys
        # only count as a typo when nearly identical to a known key (`file-index.ead.enabled`).
        if key.startswith("fields.") and key.count(".") >= 2:
            return None
        if key.startswith("parquet.enable.dictionary#"):
            return None  # parquet's column config: `#<column>` names a file column
        cutoff = _FAMILY_NEAR_MISS_RATIO
    known = {k.lower(): k for k in (*OPTIONS, *INVENTORY)}
    if key.lower() in known:
        return None if ignore_case else known[key.lower()]
    close = difflib.get_close_matches(key.lower(), known, n=1, cutoff=cutoff)
    return known[close[0]] if close else None


def check_option_keys(keys: Iterable[str], own: Collection[str] = (), ignore_case: bool = False,
                      where: str = "") -> None:
    """Refuse, among `keys`, a near miss of a known key (`near_miss`), before anything is read
    or written: the one check of table options and of the options a reader gives (`table.copy`,
    the Spark data sources). Every other unknown key is kept, as Paimon keeps user keys.

    Raises:
        InvalidOptionError: naming the key and the one it is close to (`where` says who took it).
    """
    for key in keys:
        near = near_miss(key, own, ignore_case)
        if near is not None:
            raise InvalidOptionError(
                f"{where}unknown option '{key}': did you mean '{near}'? (an unknown key is kept as a "
                f"user key, but this one is too close to '{near}' to be anything but a typo)")


def unused_keys(raw: Mapping[str, str]) -> list[str]:
    """The keys of `raw` this engine does not use: stored-only options and keys Paimon does not know."""
    return [k for k in raw if option_status(k) in (None, Status.STORED)
            and not k.startswith(("fields.", "parquet.enable.dictionary#"))]


def refusal(raw: Mapping[str, str], key: str) -> str | None:
    """Why `raw[key]` asks for something this engine does not do and what to do instead, or None."""
    option = OPTIONS.get(key)
    if option is not None:
        if option.status is Status.REFUSED and option.value(raw) != option.default:
            return option.why
        return None
    entry: InventoryEntry | None = INVENTORY.get(PAIMON_FALLBACKS.get(key, key))
    if entry is not None and entry.status is Status.REFUSED and raw[key].strip().lower() not in entry.accepted:
        if key == BUCKET_FUNCTION_TYPE and _postpone_bucket(raw):
            return None
        return entry.why
    return None


#: Paimon's option choosing how a bucket key maps to a bucket (default, mod, hive).
BUCKET_FUNCTION_TYPE = "bucket-function.type"


def _postpone_bucket(raw: Mapping[str, str]) -> bool:
    # A postpone-bucket table's writes go to the postpone bucket, hashing nothing; the writers
    # that would put rows in fixed buckets (its fixed-bucket batch write, compaction, rescale)
    # refuse a function other than the default themselves (write/bucket_router.py), as pypaimon's.
    return str(raw.get("bucket", "")).strip() == "-2"


def check_supported(raw: Mapping[str, str], keys: Iterable[str]) -> None:
    """Refuse, among `keys` of `raw`, an option this engine refuses and a near miss of a known key.

    Raises:
        InvalidOptionError: naming the option, and what to do instead or the key it is close to.
    """
    for key in keys:
        why = refusal(raw, key)
        if why is not None:
            raise InvalidOptionError(
                f"option '{key}' = '{raw[key]}' is not supported by this engine: {why}")
        problem = stored_value_problem(key, raw[key])
        if problem is not None:
            # Stored only, but Paimon (or pypaimon) parses it when it opens the table.
            raise InvalidOptionError(f"option '{key}' has invalid value {raw[key]!r}: {problem}")
        check_option_keys([key])
