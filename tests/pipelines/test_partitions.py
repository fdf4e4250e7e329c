"""Daily partitions and partition names (pipelines.lib.partitions): a window that ends today, and
names parsed in one place."""

from __future__ import annotations

import datetime

import pytest

from pipelines.lib.partitions import (
    DAILY_PARTITIONS,
    WINDOW_DAYS,
    daily_partitions,
    day_of,
    partition_name,
    partition_values,
    window_start,
)


def test_the_window_is_the_same_size_any_day_and_ends_today() -> None:
    for today in (datetime.date(2026, 11, 27), datetime.date(2027, 3, 1), datetime.date(2031, 1, 1)):
        keys = daily_partitions(today).get_partition_keys(
            current_time=datetime.datetime.combine(today, datetime.time(12), datetime.timezone.utc))
        assert len(keys) == WINDOW_DAYS
        assert keys[-1] == today.isoformat()  # end offset 1: today's files can be ingested today
        assert keys[0] == window_start(today).isoformat() == (today - datetime.timedelta(days=6)).isoformat()


def test_the_code_locations_window_starts_six_days_before_today() -> None:
    today = datetime.datetime.now(datetime.timezone.utc).date()
    # (or yesterday's window, when the definitions were loaded before midnight UTC)
    assert DAILY_PARTITIONS.get_first_partition_key() in {
        window_start(today).isoformat(), window_start(today - datetime.timedelta(days=1)).isoformat()}


def test_partition_names_round_trip() -> None:
    assert partition_name("2026-11-21") == "dt=2026-11-21"
    assert day_of("dt=2026-11-21") == "2026-11-21"
    assert partition_values("dt=2026-11-21") == {"dt": "2026-11-21"}
    for bad in ("2026-11-21", "dt=", "day=2026-11-21"):
        with pytest.raises(ValueError, match="is not a daily partition name"):
            day_of(bad)
