"""One Spark session for the pages' Spark examples (their `create_session` call gets it), stopped
afterwards when these tests started it: the other packages' fixtures start theirs with their own
master and settings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="package")
def doc_spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from lakehouse_engine.spark.session import create_session

    already = SparkSession.getActiveSession()
    session = create_session("local[2]", app_name="docs-examples")
    yield session
    if already is None:
        session.stop()
