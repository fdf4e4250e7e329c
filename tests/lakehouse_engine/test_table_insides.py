"""One bucket mode and one merge function per table, decided from the table's schema and options."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from lakehouse_engine import Catalog, Schema
from lakehouse_engine.schema import BucketMode

PA = pa.schema([("dt", pa.string()), ("k", pa.int64()), ("v", pa.int64())])


@pytest.mark.parametrize(("partition", "keys", "bucket", "mode"), [
    (["dt"], ["dt", "k"], "2", BucketMode.HASH_FIXED),
    (["dt"], ["dt", "k"], "-1", BucketMode.HASH_DYNAMIC),
    (["dt"], ["k"], "-1", BucketMode.CROSS_PARTITION),
    (["dt"], [], "-1", BucketMode.BUCKET_UNAWARE),
    (["dt"], ["dt", "k"], "-2", BucketMode.POSTPONE_MODE),
])
def test_a_table_knows_its_bucket_mode(tmp_path: object, partition: list[str], keys: list[str],
                                       bucket: str, mode: BucketMode) -> None:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema(PA, partition_keys=partition, primary_keys=keys,
                                        options={"bucket": bucket}))
    table = catalog.get_table("db.t")
    assert table.bucket_mode() is mode
    assert BucketMode.of(table) is mode
    assert mode.assigns_dynamically == (mode in (BucketMode.HASH_DYNAMIC, BucketMode.CROSS_PARTITION))


def test_the_short_names_are_the_same_members() -> None:
    assert BucketMode.FIXED is BucketMode.HASH_FIXED and BucketMode.FIXED.value == "fixed"
    assert BucketMode.DYNAMIC is BucketMode.HASH_DYNAMIC
    assert BucketMode.POSTPONE is BucketMode.POSTPONE_MODE and BucketMode.UNAWARE is BucketMode.BUCKET_UNAWARE


def test_the_merge_function_is_built_once_per_table_from_its_options(tmp_path: object) -> None:
    catalog = Catalog(str(tmp_path))
    catalog.create_database("db")
    catalog.create_table("db.t", Schema(PA, partition_keys=["dt"], primary_keys=["dt", "k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
        "ignore-delete": "true"}))
    table = catalog.get_table("db.t")
    function = table.store.merge_function()
    assert function is table.store.merge_function()
    assert function.engine == "aggregation" and function.ignore_delete
    assert function.key_names == ("k",) and function.primary_keys == ("dt", "k")
    assert function.engine_options is not None and function.engine_options.explicit_functions == {"v": "sum"}
    write = table.new_batch_write_builder().new_write()
    assert write.merge_function is function
    assert table.new_read_builder().new_read().merge_function is function


def test_learning_a_bucket_mode_does_not_load_pyspark() -> None:
    code = ("import sys; from lakehouse_engine.schema import BucketMode; import lakehouse_engine.table; "
            "assert 'pyspark' not in sys.modules, 'pyspark was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
