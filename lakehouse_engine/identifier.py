"""A table's name in a catalog: `database.object`, as Paimon's (Java) and pypaimon's `Identifier`.

The object part may encode a branch and a system table after `$` (`orders$branch_dev$snapshots`),
as both encode them; the catalog refuses those until it serves branches and system tables. Parsing
follows Java: parts may be quoted in backticks (`` `db.name`.`table.name` ``), else the text is
split on its first period (`mydb.my.table` is table `my.table` of database `mydb`).
"""

from __future__ import annotations

import re
from typing import Any

from lakehouse_engine.errors import InvalidIdentifierError
from lakehouse_engine.invisible_chars import invisible_character, printable

SYSTEM_TABLE_SPLITTER = "$"
SYSTEM_BRANCH_PREFIX = "branch_"
DEFAULT_MAIN_BRANCH = "main"
#: Java's database of objects created without one; their full name is the object alone.
UNKNOWN_DATABASE = "unknown"

# A name becomes a directory: no path separators, no '$' (the object's own separator), no control
# characters. Periods are allowed, as in Paimon, except a name made of periods only ('.', '..').
_BAD_NAME_RE = re.compile(r"[/\\$\x00-\x1f\x7f]")


def validate_name(name: str, what: str) -> str:
    """Check a database or table name: no path separators, `$`, control, format (bidirectional,
    zero-width) characters, blanks, or periods only."""
    bad = invisible_character(name) if isinstance(name, str) else None
    if bad is not None:
        raise InvalidIdentifierError(
            f"{what} name {printable(name)} contains the invisible character {bad}; "
            f"use printable characters only")
    if not isinstance(name, str) or not name or name != name.strip():
        raise InvalidIdentifierError(f"{what} name {name!r} is empty or has surrounding blanks")
    if len(name) > 255 or _BAD_NAME_RE.search(name) or not name.strip("."):
        raise InvalidIdentifierError(
            f"{what} name {name!r} is invalid: names may not contain '/', '\\', '$' or control "
            f"characters, may not be periods only, and are at most 255 characters")
    return name


class Identifier:
    """A `database.object` name (pypaimon's and Java's `Identifier`), each part checked.

    Built as pypaimon builds it: `Identifier(database, object)` with the encoded object, or
    `Identifier(database, table, branch=..., system_table=...)`, which encodes them.
    """

    def __init__(self, database: str, object: str | None = None, branch: str | None = None,
                 system_table: str | None = None, *, table: str | None = None):
        if object is None:
            object = table  # our keyword form, Identifier(database=..., table=...)
        if not isinstance(object, str):
            raise InvalidIdentifierError(f"identifier of database {database!r} has no object name")
        self.database = validate_name(database, "database")
        if branch is not None or system_table is not None:
            encoded = object
            if branch is not None and branch.lower() != DEFAULT_MAIN_BRANCH:
                encoded += SYSTEM_TABLE_SPLITTER + SYSTEM_BRANCH_PREFIX + branch
            if system_table is not None:
                encoded += SYSTEM_TABLE_SPLITTER + system_table
            object = encoded
        self.object = object
        # The table name is checked now (a name is never a path); the branch and system-table
        # parts are split on first use, as Java's and pypaimon's Identifier do: a malformed
        # object (`t$a$b`) builds, and raises when its parts are asked for (the catalog asks first).
        validate_name(object.split(SYSTEM_TABLE_SPLITTER)[0], "table")
        self._parts: tuple[str, str | None, str | None] | None = None

    def _split(self) -> tuple[str, str | None, str | None]:
        if self._parts is None:
            self._parts = self._split_object()
        return self._parts

    @property
    def _table(self) -> str:
        return self._split()[0]

    @property
    def _branch(self) -> str | None:
        return self._split()[1]

    @property
    def _system_table(self) -> str | None:
        return self._split()[2]

    def _split_object(self) -> tuple[str, str | None, str | None]:
        parts = self.object.split(SYSTEM_TABLE_SPLITTER)
        branch = system = None
        if len(parts) == 2:
            if parts[1].startswith(SYSTEM_BRANCH_PREFIX):
                branch = parts[1][len(SYSTEM_BRANCH_PREFIX):]
            else:
                system = parts[1]
        elif len(parts) == 3:
            if not parts[1].startswith(SYSTEM_BRANCH_PREFIX):
                raise InvalidIdentifierError(
                    f"system table can only contain one '$' separator, but this is: {self.object}")
            branch, system = parts[1][len(SYSTEM_BRANCH_PREFIX):], parts[2]
        elif len(parts) > 3:
            raise InvalidIdentifierError(f"invalid object name: {self.object}")
        return (validate_name(parts[0], "table"),
                validate_name(branch, "branch") if branch is not None else None,
                validate_name(system, "system table") if system is not None else None)

    # ---- construction ------------------------------------------------------------------
    @staticmethod
    def parse(identifier: str | Identifier) -> Identifier:
        """An Identifier from `database.object` (Java's rules, see the module) or itself."""
        if isinstance(identifier, Identifier):
            return identifier
        if not isinstance(identifier, str) or not identifier.strip():
            raise InvalidIdentifierError(f"table identifier {identifier!r} is empty")
        parts = _split_backticks(identifier) if "`" in identifier else identifier.split(".", 1)
        if len(parts) != 2:
            raise InvalidIdentifierError(
                f"table identifier {identifier!r} must look like 'database.table'")
        return Identifier(parts[0], parts[1])

    @staticmethod
    def create(database: str, table: str, branch: str | None = None,
               system_table: str | None = None) -> Identifier:
        """pypaimon's `Identifier.create(database, object)`: a checked identifier."""
        return Identifier(database, table, branch=branch, system_table=system_table)

    @staticmethod
    def from_string(full_name: str) -> Identifier:
        """pypaimon's `Identifier.from_string("db.table")` (InvalidIdentifierError, a ValueError)."""
        return Identifier.parse(full_name)

    # ---- parts -------------------------------------------------------------------------
    @property
    def table(self) -> str:
        """The table's name, without branch or system table."""
        return self._table

    @property
    def branch(self) -> str | None:
        """The branch encoded in the object (None: the main branch); settable, as in pypaimon."""
        return self._branch

    @branch.setter
    def branch(self, value: str | None) -> None:
        rebuilt = Identifier(self.database, self._table, branch=value, system_table=self._system_table)
        self.object, self._parts = rebuilt.object, None

    def get_database_name(self) -> str:
        return self.database

    def get_table_name(self) -> str:
        return self._table

    def get_object_name(self) -> str:
        return self.object

    def get_branch_name(self) -> str | None:
        return self._branch

    def get_branch_name_or_default(self) -> str:
        return self._branch if self._branch is not None else DEFAULT_MAIN_BRANCH

    def get_system_table_name(self) -> str | None:
        return self._system_table

    def is_system_table(self) -> bool:
        return self._system_table is not None

    def main_identifier(self) -> Identifier:
        """The identifier of the table's main branch (no branch, no system table)."""
        return Identifier(self.database, self._table)

    def get_full_name(self) -> str:
        """`database.object`; the object alone in Java's `unknown` database."""
        if self.database == UNKNOWN_DATABASE:
            return self.object
        return f"{self.database}.{self.object}"

    def full_name(self) -> str:
        return self.get_full_name()

    def quoted_full_name(self) -> str:
        """`database.object` that parses back to this identifier (parts with a period in backticks)."""
        return ".".join(f"`{p}`" if "." in p else p for p in (self.database, self.object))

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Identifier):
            return NotImplemented
        return (self.database, self.object) == (other.database, other.object)

    def __hash__(self) -> int:
        return hash((self.database, self.object))

    def __repr__(self) -> str:
        return f"Identifier(database={self.database!r}, object={self.object!r})"

    def __str__(self) -> str:
        return self.get_full_name()


def _split_backticks(text: str) -> list[str]:
    """Split `text` on the periods outside backticks, dropping the backticks (as Java does)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == "`":
            quoted = not quoted
        elif char == "." and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if current:
        parts.append("".join(current))
    if quoted:
        raise InvalidIdentifierError(f"unclosed backtick in identifier: {text}")
    return parts
