"""Render the table option reference (markdown) from `lakehouse_engine.options.OPTIONS`.

`python -m tools.options_doc > docs/options.md` regenerates the checked-in page;
`python -m tools.options_doc --check docs/options.md` exits 1 when it is stale.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from lakehouse_engine.options import OPTIONS, ConfigOption
from lakehouse_engine.options.inventory import INVENTORY, InventoryEntry, Status

REGENERATE = "python -m tools.options_doc > docs/options.md"
OTHER_GROUP = "Other"
REFUSED_TITLE = "Paimon options this engine refuses"
STORED_TITLE = "Paimon options this engine stores only"

_TYPE_NAMES = {"int": "Integer", "bool": "Boolean", "string": "String", "enum": "Enum",
               "memory": "MemorySize", "duration": "Duration"}
# Largest unit first: a default is shown in the largest unit that divides it exactly.
_MEMORY_UNITS = (("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10), ("bytes", 1))
_DURATION_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1))


def option_groups(options: Mapping[str, ConfigOption[Any]] = OPTIONS) -> list[tuple[str, list[ConfigOption[Any]]]]:
    """Options by their declared `group`, groups in order of first declaration; options without
    a group go under "Other" at the end."""
    groups: dict[str, list[ConfigOption[Any]]] = {}
    for option in options.values():
        groups.setdefault(option.group or OTHER_GROUP, []).append(option)
    return sorted(groups.items(), key=lambda kv: kv[0] == OTHER_GROUP)  # stable: declaration order


def format_default(option: ConfigOption[Any]) -> str:
    """The default as a user would write it in the option's own syntax (`256 mb`, `1 h`, `true`)."""
    value = option.default
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif option.kind == "memory" and isinstance(value, int):
        text = _with_unit(value, _MEMORY_UNITS)
    elif option.kind == "duration" and isinstance(value, int):
        text = _with_unit(value, _DURATION_UNITS)
    else:
        text = str(value)
    return f"`{text}`"


def _with_unit(value: int, units: Sequence[tuple[str, int]]) -> str:
    for name, size in units:
        if value and value % size == 0:
            return f"{value // size} {name}"
    return f"{value} {units[-1][0]}"


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def format_type(option: ConfigOption[Any]) -> str:
    return _TYPE_NAMES.get(option.kind, option.kind)


def format_description(option: ConfigOption[Any]) -> str:
    text = option.description
    if option.choices:
        text += " Values: " + ", ".join(f"`{c}`" for c in option.choices) + "."
    if option.fallback_keys:
        text += " Also read from " + ", ".join(f"`{k}`" for k in option.fallback_keys) + " (older spellings)."
    return _cell(text)


def format_status(status: Status, why: str = "") -> str:
    """The status cell: implemented, stored only (and why) or refused (and what to do instead)."""
    if status is Status.IMPLEMENTED:
        return "implemented"
    return _cell(f"**{status.value}**: {why}")


def inventory_groups(inventory: Mapping[str, InventoryEntry] = INVENTORY) -> list[tuple[str, list[InventoryEntry]]]:
    """The options this engine does not implement: refused ones first, then stored-only ones,
    each sorted by key."""
    refused = sorted((e for e in inventory.values() if e.status is Status.REFUSED), key=lambda e: e.key)
    stored = sorted((e for e in inventory.values() if e.status is Status.STORED), key=lambda e: e.key)
    return [(REFUSED_TITLE, refused), (STORED_TITLE, stored)]


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def render(options: Mapping[str, ConfigOption[Any]] = OPTIONS) -> str:
    """The whole markdown page."""
    groups = option_groups(options)
    lines = [
        "# Table options",
        "",
        f"<!-- Generated from lakehouse_engine/options/ by `{REGENERATE}`. Do not edit by hand. -->",
        "",
        "Options are strings set when a table is created (`Schema.from_pyarrow_schema(..., "
        "options={...})`) and stored in its schema file. Keys and defaults are Paimon's. Every "
        "option of Paimon (pypaimon 2.1.0's `CoreOptions`, Paimon's core, Flink and Spark option "
        "references) has a status here:",
        "",
        "- **implemented**: the engine acts on it as Paimon does (and tests say so);",
        "- **stored only**: kept in the schema for the other engines; it changes no byte this engine "
        "writes and no row it returns (the table says why). Where Paimon declares a type for it "
        "(boolean, int, long, float, double, memory size, duration, enum), a value being set that "
        "Paimon and pypaimon could not parse is refused like a refused option "
        "(`options/stored_kinds.py`); Paimon's older spellings of these options "
        "(`changelog-producer.lookup-wait`) are checked the same;",
        "- **refused**: `create_table`, `alter_table` and `table.copy` raise `InvalidOptionError` "
        "naming the option and what to do instead, and write nothing, unless the value asks for what "
        "this engine does anyway (the default). A table another engine made with such an option is "
        "read where its files allow; a write into it is refused (docs/compatibility.md).",
        "",
        "Every implemented option is validated when the table is created (`InvalidOptionError` names "
        "the option). A key Paimon does not know is kept as a user key (`lakehouse show` lists it as "
        "not used by this engine), unless it is a near miss of a known key (`bucket-keys`, "
        "`changelog-prodcer`): that is refused with \"did you mean ...\". The dynamic options a reader "
        "gives are checked the same, before anything is read: `table.copy({...})`, and the options of "
        "Spark's `format(\"lakehouse\")` and `format(\"lakehouse-changes\")` (a near miss of the "
        "source's own options too: `partition` for `partitions`; docs/spark.md).",
        "",
        "Sizes (`MemorySize`) take a unit: `b`, `kb`, `mb`, `gb`, `tb` (`128 mb`; also Paimon's "
        "`kibibytes` .. `tebibytes`); durations take `ms`, `s`, `min`, `h` or `d` (`10 s`, `1 h`; "
        "also Paimon's `µs` and `ns`, read in whole milliseconds), as Paimon's parsers take them.",
        "",
    ]
    inventory = inventory_groups()
    lines += [f"- [{title}](#{_anchor(title)})" for title, _ in [*groups, *inventory]]
    for title, members in groups:
        lines += ["", f"## {title}", "", "| Key | Type | Default | Status | Description |",
                  "|---|---|---|---|---|"]
        lines += [f"| `{o.key}` | {format_type(o)} | {format_default(o)} | {format_status(o.status, o.why)} "
                  f"| {format_description(o)} |" for o in members]
    for title, entries in inventory:
        lines += ["", f"## {title}", "", "| Key | Status | Accepted values | Why |", "|---|---|---|---|"]
        lines += [f"| `{e.key}` | {e.status.value} | {_accepted(e)} | {_cell(e.why)} |" for e in entries]
    return "\n".join(lines) + "\n"


def _accepted(entry: InventoryEntry) -> str:
    if entry.status is Status.STORED:
        return "any"
    values = [f"`{v}`" if v else "(unset)" for v in entry.accepted]
    return ", ".join(values) if values else "none: refused whenever set"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the page, or with `--check PATH` compare it with PATH (exit 1 when they differ)."""
    parser = argparse.ArgumentParser(prog="python -m tools.options_doc",
                                     description="Render the table option reference as markdown.")
    parser.add_argument("--check", metavar="PATH", help="exit 1 if PATH differs from the rendering")
    args = parser.parse_args(argv)
    page = render()
    if args.check is None:
        sys.stdout.write(page)
        return 0
    try:
        with open(args.check, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        current = None
    if current == page:
        return 0
    sys.stderr.write(f"{args.check} is out of date; regenerate it with: {REGENERATE}\n")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
