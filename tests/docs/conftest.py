"""One Spark session for the pages' Spark examples (their `create_session` call gets it), started
as tests/lakehouse_engine/spark and tests/pipelines start theirs (`local[2,2]`: two task threads,
one retry) and left running for them: a pytest worker starts one Spark JVM, not two (the docs'
own `local[2]` session, stopped after the pages, made the worker's later Spark tests start
another: ~10 s)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

#: The master of the other packages' shared session (whichever package starts it first).
MASTER = "local[2,2]"


@pytest.fixture(scope="session")
def doc_spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from lakehouse_engine.spark.session import create_session

    already = SparkSession.getActiveSession()
    session = create_session(MASTER, app_name="docs-examples")
    yield session
    if already is None:
        session.stop()
