"""Characters a name must not hold because a reader cannot see them: control and format characters
(bidirectional overrides and isolates, zero-width ones), line and paragraph separators and lone
surrogates. A name holding one can pass for another name in a listing, or reorder and recolour the
terminal that prints it."""

from __future__ import annotations

import unicodedata

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def invisible_character(name: str) -> str | None:
    """The first invisible character of `name` as `U+XXXX (NAME)`, or None when it has none."""
    for ch in name:
        if unicodedata.category(ch) in _INVISIBLE_CATEGORIES:
            return f"U+{ord(ch):04X} ({unicodedata.name(ch, 'control character')})"
    return None


def printable(name: str) -> str:
    """`name` quoted with invisible characters escaped, for an error message."""
    return repr(name.encode("unicode_escape").decode("ascii"))
