"""How the CLI prints: aligned tables and field lists for people, one JSON document for scripts."""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

_CONTROL_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


# ---- cell formatting ---------------------------------------------------------------------------
def clean_cell(text: str) -> str:
    """One line of text: newlines, tabs and other control characters escaped so columns stay aligned."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch in _CONTROL_ESCAPES:
            out.append(_CONTROL_ESCAPES[ch])
        elif not ch.isprintable() and ch != " ":
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def format_value(value: Any, null: str = "") -> str:
    """A value as a person reads it in a table cell (NULL shown as `null`)."""
    if value is None:
        return null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={format_value(v, null)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v, null) for v in value)
    return clean_cell(str(value))


def format_bytes(size: int | None) -> str:
    """A byte count for people: `812 B`, `1.5 KiB`, `120.0 MiB`."""
    if size is None:
        return ""
    amount = float(size)
    for unit in _BYTE_UNITS:
        if abs(amount) < 1024 or unit == _BYTE_UNITS[-1]:
            return f"{int(amount)} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


def format_millis(millis: int | None) -> str:
    """Epoch milliseconds as local time, `YYYY-MM-DD HH:MM:SS` (the form `--older-than` accepts)."""
    if millis is None:
        return ""
    return datetime.datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S")


def iso_millis(millis: int | None) -> str | None:
    """Epoch milliseconds as an ISO-8601 local time with its UTC offset, for JSON."""
    if millis is None:
        return None
    return datetime.datetime.fromtimestamp(millis / 1000).astimezone().isoformat(timespec="milliseconds")


# ---- aligned text ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    """One column of a human table: the record key it shows, its header, how a value reads."""

    key: str
    header: str
    fmt: Callable[[Any], str] = format_value
    right: bool = False


def render_table(records: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> list[str]:
    """Records as lines of a table: a header, a rule, then one aligned line per record.

    rich lays the columns out (two spaces apart, numbers right-aligned); cells are plain text,
    never markup, and never wrapped: a wide table stays one line per record.
    """
    cells = [[clean_cell(c.fmt(r.get(c.key))) for c in columns] for r in records]
    headers = [c.header for c in columns]
    widths = [max([cell_len(h)] + [cell_len(row[i]) for row in cells]) for i, h in enumerate(headers)]
    table = RichTable(box=None, show_header=False, pad_edge=False, padding=(0, 1, 0, 1))
    for c, w in zip(columns, widths, strict=True):
        table.add_column(justify="right" if c.right else "left", no_wrap=True, min_width=w)
    for row in [headers, ["-" * w for w in widths], *cells]:
        table.add_row(*(Text(v) for v in row))
    out = io.StringIO()
    Console(file=out, width=sum(widths) + 2 * len(widths) + 1, color_system=None, force_terminal=False,
            highlight=False, emoji=False, markup=False, soft_wrap=False).print(table)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def render_fields(pairs: Iterable[tuple[str, str]], indent: str = "") -> list[str]:
    """`name   value` lines with the values aligned, for a record shown vertically."""
    items = list(pairs)
    width = max((len(k) for k, _ in items), default=0)
    return [f"{indent}{k.ljust(width)}  {clean_cell(v)}".rstrip() for k, v in items]


# ---- JSON --------------------------------------------------------------------------------------
def to_jsonable(value: Any) -> Any:
    """A value JSON can carry without loss or invalid tokens.

    Decimals become strings (exact), dates and times ISO-8601 strings, bytes base64, and floats
    that are not finite the strings `NaN`, `Infinity` and `-Infinity`.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return str(value)


class Output:
    """Writes a command's result: a JSON document with `--json`, else text for people.

    Only the result goes to stdout; warnings, progress and errors go to stderr, so that with
    `--json` stdout always holds exactly one valid JSON document.
    """

    def __init__(self, json_mode: bool, stdout: TextIO, stderr: TextIO):
        self.json_mode = json_mode
        self.stdout = stdout
        self.stderr = stderr

    def emit(self, document: Mapping[str, Any], human: Callable[[], Iterable[str]]) -> None:
        """Print `document` as JSON, or the lines `human()` gives."""
        if self.json_mode:
            self.stdout.write(json.dumps(to_jsonable(document), indent=2, allow_nan=False) + "\n")
            return
        for text in human():
            self.stdout.write(text + "\n")

    def warn(self, message: str) -> None:
        self.stderr.write(f"lakehouse: warning: {message}\n")


def table_or_note(records: Sequence[Mapping[str, Any]], columns: Sequence[Column], empty: str) -> list[str]:
    """An aligned table, or `empty` when there are no records."""
    return render_table(records, columns) if records else [empty]


def plural(count: int, noun: str) -> str:
    """`1 file`, `3 files`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
