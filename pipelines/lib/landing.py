"""The landing area: files of a known format in `dt=` folders, one folder per daily partition.

Layout: `<landing>/dt=YYYY-MM-DD/<any name>.{jsonl,json,ndjson,csv,parquet}`; names starting with
`.` or `_` are never read (a writer's temporary file, the sample's settings).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipelines.lib.events import PARTITION_KEY
from pipelines.lib.partitions import day_of

FORMATS = {".jsonl": "json", ".json": "json", ".ndjson": "json", ".csv": "csv", ".parquet": "parquet"}


@dataclass(frozen=True)
class LandingFile:
    """A file in a `dt=` folder of the landing area."""

    relpath: str   # relative to the landing folder: the ledger's key
    path: str
    dt: str
    format: str
    size: int


def list_landing_files(landing: Path, dts: Iterable[str] | None = None) -> list[LandingFile]:
    """Files of a known format in the `dt=` folders of `landing` (of `dts` only, when given)."""
    wanted = set(dts) if dts is not None else None
    found = []
    for folder in sorted(landing.glob(f"{PARTITION_KEY}=*")):
        dt = day_of(folder.name)
        if not folder.is_dir() or (wanted is not None and dt not in wanted):
            continue
        for path in sorted(folder.iterdir()):
            fmt = FORMATS.get(path.suffix.lower())
            if fmt is None or not path.is_file() or path.name.startswith((".", "_")):
                continue
            found.append(LandingFile(str(path.relative_to(landing)), str(path), dt, fmt,
                                     path.stat().st_size))
    return found
