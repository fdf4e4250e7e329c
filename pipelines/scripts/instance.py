"""The one Dagster instance `make run` and `make dev` share: `DAGSTER_HOME`, by default the
project's `.dagster_home`, holding the runs, materializations and check results the UI shows.

    python -m pipelines.scripts.instance      # prints the home, creating it with the project's dagster.yaml
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_HOME = REPO / ".dagster_home"
SETTINGS = REPO / "dagster.yaml"


def dagster_home() -> Path:
    """`$DAGSTER_HOME` when set, else the project-local `.dagster_home` (absolute either way)."""
    return Path(os.environ.get("DAGSTER_HOME") or DEFAULT_HOME).absolute()


def prepare_home(home: Path | None = None) -> Path:
    """Create the home with the project's `dagster.yaml` (no telemetry, no community pop-up) when
    it has no settings of its own, export it as `DAGSTER_HOME`, and return it."""
    home = (home or dagster_home()).absolute()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        shutil.copyfile(SETTINGS, home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


if __name__ == "__main__":
    print(prepare_home(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
