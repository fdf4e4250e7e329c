"""Daily partitions and partition names, parsed in one place.

A daily partition key `2026-11-21` is the landing folder `dt=2026-11-21/` and the table partition
`dt=2026-11-21` (`{"dt": "2026-11-21"}` as partition values). The daily assets cover a fixed window
of `WINDOW_DAYS` days ending today (UTC): the first partition moves with the calendar, so
`make run`'s sample, one day per partition, is the same size any day.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

import dagster as dg

from pipelines.lib.events import PARTITION_KEY

WINDOW_DAYS = 7


def window_start(today: datetime.date | None = None, days: int = WINDOW_DAYS) -> datetime.date:
    """The first day of the window of `days` days that ends `today` (UTC today by default)."""
    today = today or datetime.datetime.now(datetime.timezone.utc).date()
    return today - datetime.timedelta(days=days - 1)


def daily_partitions(today: datetime.date | None = None, days: int = WINDOW_DAYS) -> dg.DailyPartitionsDefinition:
    """`days` daily partitions ending `today`; end_offset=1 makes today a partition too, so the hourly
    schedule can ingest today's files."""
    return dg.DailyPartitionsDefinition(start_date=window_start(today, days).isoformat(), end_offset=1)


# Evaluated when the code location loads: a long-running `dagster dev` shows yesterday's window
# until it reloads the location (the sample and the schedule ask for today's explicitly).
DAILY_PARTITIONS = daily_partitions()
# A range of days is one run: one Spark session, one commit.
SINGLE_RUN = dg.BackfillPolicy.single_run()


def partition_name(dt: str) -> str:
    """The table partition (and landing folder) of a daily partition key: `2026-11-21` -> `dt=2026-11-21`."""
    return f"{PARTITION_KEY}={dt}"


def day_of(name: str) -> str:
    """The daily partition key of a table partition or landing folder name: `dt=2026-11-21` -> `2026-11-21`.

    ValueError when the name is not `dt=<day>`."""
    prefix = f"{PARTITION_KEY}="
    if not name.startswith(prefix) or len(name) == len(prefix):
        raise ValueError(f"{name!r} is not a daily partition name ({prefix}YYYY-MM-DD)")
    return name[len(prefix):]


def partition_values(name: str) -> dict[str, str]:
    """The engine's partition values of a table partition name: `dt=2026-11-21` -> `{"dt": "2026-11-21"}`."""
    return {PARTITION_KEY: day_of(name)}


def run_days(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> list[str] | None:
    """The daily partitions a run targets (None for a run of no partition)."""
    if context.has_partition_key or context.has_partition_key_range:
        return list(context.partition_keys)
    return None


def per_day_metadata(context: dg.AssetExecutionContext, per_day: dict[str, dict[str, Any]]) -> None:
    """Give each day's materialization that day's figures, over the run's figures for all its days."""
    for dt in context.partition_keys:
        if dt in per_day:
            context.add_asset_metadata(per_day[dt], partition_key=dt)


def names(dts: Iterable[str]) -> list[str]:
    """The table partition names of these days."""
    return [partition_name(d) for d in dts]
