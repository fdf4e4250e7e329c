"""Tags as Paimon stores them (`tag/tag-<name>`, the snapshot's JSON): names, reading, listing.

Reading a tag is what every read by tag needs, so it sits beside the snapshots; creating and
deleting tags (which must protect and free data files) is in `maintenance.tags`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from lakehouse_engine.errors import (
    CorruptFileError,
    InvalidIdentifierError,
    LakehouseError,
    SnapshotNotExistError,
)
from lakehouse_engine.format.snapshot import Snapshot
from lakehouse_engine.invisible_chars import invisible_character, printable

if TYPE_CHECKING:
    from lakehouse_engine.io import FileIO
    from lakehouse_engine.path_factory import PathFactory


class TagFiles(Protocol):
    """What reading tags needs of a store (a TagFiles has it): its FileIO, paths and name."""

    file_io: FileIO
    path_factory: PathFactory
    name: str

TAG_PREFIX = "tag-"
#: Fields a Paimon tag file may add to the snapshot JSON (tags with a retention time).
TAG_ONLY_FIELDS = ("tagCreateTime", "tagTimeRetained")
_MAX_FILE_NAME_BYTES = 255
_BAD_TAG_CHARS = re.compile(r"[/\\\x00-\x1f\x7f]")


class TagNotExistError(SnapshotNotExistError):
    """The named tag does not exist (a ValueError, as pypaimon raises)."""


class TagAlreadyExistError(LakehouseError, ValueError):
    """A tag of that name already exists (a ValueError, as pypaimon raises)."""


#: pypaimon's catalog exception names for the same errors.
TagNotExistException = TagNotExistError
TagAlreadyExistException = TagAlreadyExistError


class InvalidTagNameError(InvalidIdentifierError):
    """A tag name is blank, numeric only, too long, or contains a path separator or control character."""


def validate_tag_name(name: str) -> str:
    """Return `name` if it can name a tag file, else raise InvalidTagNameError saying why."""
    bad = invisible_character(name) if isinstance(name, str) else None
    if bad is not None:
        raise InvalidTagNameError(
            f"tag name {printable(name)} contains the invisible character {bad}; use printable characters only")
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise InvalidTagNameError(f"tag name {name!r} is blank or has surrounding blanks")
    if name.isdigit():
        # As Paimon: `scan.version` reads a number as a snapshot id, so a tag may not be one.
        raise InvalidTagNameError(f"tag name {name!r} is numeric only; use e.g. 'v{name}'")
    if _BAD_TAG_CHARS.search(name):
        raise InvalidTagNameError(
            f"tag name {name!r} may not contain '/', '\\' or control characters")
    if len((TAG_PREFIX + name).encode("utf-8")) > _MAX_FILE_NAME_BYTES:
        raise InvalidTagNameError(
            f"tag name {name[:40]!r}... is too long: at most "
            f"{_MAX_FILE_NAME_BYTES - len(TAG_PREFIX)} bytes")
    return name


def tag_path(store: TagFiles, name: str) -> str:
    return f"{store.path_factory.tag_dir}/{TAG_PREFIX}{validate_tag_name(name)}"


def as_snapshot(tag: Snapshot) -> Snapshot:
    """The snapshot a tag keeps, without the tag-only fields (what a restored snapshot file holds)."""
    if not any(k in tag.extra for k in TAG_ONLY_FIELDS):
        return tag
    return replace(tag, extra={k: v for k, v in tag.extra.items() if k not in TAG_ONLY_FIELDS})


def read_tag(store: TagFiles, path: str) -> Snapshot | None:
    try:
        text = store.file_io.read_text(path)
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CorruptFileError(f"tag file {path} is not UTF-8 JSON") from None
    return Snapshot.from_json(text, path)


def tag_snapshot(store: TagFiles, name: str) -> Snapshot:
    """The snapshot tag `name` keeps; TagNotExistError (a SnapshotNotExistError) when there is none."""
    tag = read_tag(store, tag_path(store, name))
    if tag is None:
        known = sorted(list_tags(store))
        listing = f"known tags: {', '.join(known)}" if known else "the table has no tags"
        raise TagNotExistError(f"tag {name!r} of table {store.name} does not exist ({listing})")
    return as_snapshot(tag)


def list_tags(store: TagFiles) -> dict[str, Snapshot]:
    """Every tag of the table by name (sorted), with the snapshot it keeps.

    A tag file that cannot be decoded raises CorruptFileError: expiry and orphan removal must not
    delete files while they cannot tell what a tag keeps.
    """
    tags: dict[str, Snapshot] = {}
    for file_name in sorted(store.file_io.list_names(store.path_factory.tag_dir)):
        if not file_name.startswith(TAG_PREFIX) or len(file_name) == len(TAG_PREFIX):
            continue  # temporary files of an unfinished write start with '.'
        tag = read_tag(store, f"{store.path_factory.tag_dir}/{file_name}")
        if tag is not None:  # deleted since the listing
            tags[file_name[len(TAG_PREFIX):]] = as_snapshot(tag)
    return tags
