"""GCS and Azure warehouses: Hadoop's option names and the standard environment variables map to
pyarrow's filesystems and obstore's stores (whose create-mode put is the conditional put)."""

from __future__ import annotations

import pytest

from lakehouse_engine.errors import InvalidOptionError
from lakehouse_engine.io_gcs_azure import (
    azure_settings,
    azure_store_kwargs,
    gcs_settings,
    gcs_store_kwargs,
)
from lakehouse_engine.io_object_store import ObjectStoreFileIO
from lakehouse_engine.io_warehouse import warehouse_file_io


def test_gcs_options_take_hadoops_names_then_the_environment() -> None:
    options = {"fs.gs.auth.service.account.json.keyfile": "/keys/sa.json", "gs.project.id": "p1"}
    env = {"GOOGLE_APPLICATION_CREDENTIALS": "/other.json", "STORAGE_EMULATOR_HOST": "http://127.0.0.1:4443"}
    assert gcs_settings(options, env) == {"keyfile": "/keys/sa.json", "project": "p1",
                                          "endpoint": "http://127.0.0.1:4443"}
    assert gcs_settings({}, {"GOOGLE_APPLICATION_CREDENTIALS": "/env.json"}) == {"keyfile": "/env.json"}


def test_gcs_store_signs_with_the_key_file_and_an_emulator_goes_unsigned_over_http() -> None:
    assert gcs_store_kwargs({"keyfile": "/keys/sa.json"}) == {"service_account": "/keys/sa.json"}
    assert gcs_store_kwargs({"endpoint": "http://127.0.0.1:4443/"}) == {
        "base_url": "http://127.0.0.1:4443", "client_options": {"allow_http": True}, "skip_signature": True}


def test_azure_account_comes_from_the_uri_and_hadoops_per_account_key_is_found() -> None:
    options = {"fs.azure.account.key.acct.dfs.core.windows.net": "a2V5"}
    assert azure_settings(options, "acct", env={}) == {"account_name": "acct", "account_key": "a2V5"}
    s = azure_settings({"azure.account-name": "acct", "azure.sas-token": "sv=1&sig=x",
                        "azure.endpoint": "http://127.0.0.1:10000"}, None, env={})
    assert azure_store_kwargs(s) == {"account_name": "acct", "sas_key": "sv=1&sig=x",
                                     "endpoint": "http://127.0.0.1:10000/acct",
                                     "client_options": {"allow_http": True}}
    from_env = azure_settings({}, "acct", env={"AZURE_CLIENT_ID": "c", "AZURE_CLIENT_SECRET": "s",
                                                "AZURE_TENANT_ID": "t"})
    assert azure_store_kwargs(from_env) == {"account_name": "acct", "client_id": "c", "client_secret": "s",
                                            "tenant_id": "t"}


@pytest.mark.parametrize(("options", "account", "message"), [
    ({}, None, "needs its storage account"),
    ({"azure.account-name": "other"}, "acct", "contradicts the warehouse URI's account 'acct'"),
    ({"azure.account-key": "k", "azure.sas-token": "t"}, "acct", "exclude each other"),
])
def test_contradicting_or_missing_azure_options_are_refused_naming_the_option(
        options: dict[str, str], account: str | None, message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        azure_settings(options, account, env={})


def test_warehouse_uris_of_gcs_and_azure_open_an_object_store_file_io() -> None:
    fio, root = warehouse_file_io("gs://bucket/wh/", {"gs.storage.root.url": "http://127.0.0.1:1"})
    assert isinstance(fio, ObjectStoreFileIO) and fio.scheme == "gs" and root == "bucket/wh"
    fio, root = warehouse_file_io("abfs://lake@acct.dfs.core.windows.net/wh",
                                     {"azure.account-key": "a2V5", "azure.endpoint": "http://127.0.0.1:1"})
    assert isinstance(fio, ObjectStoreFileIO) and fio.azure_account == "acct" and root == "lake/wh"
    with pytest.raises(InvalidOptionError, match="storage account"):
        warehouse_file_io("az://lake/wh", {"azure.account-key": "a2V5"})


def test_azure_keys_and_sas_tokens_never_travel_in_a_spark_task() -> None:
    pytest.importorskip("pyspark")
    from lakehouse_engine.spark.tables import shippable_options

    shipped = dict(shippable_options({
        "azure.account-key": "k", "fs.azure.account.key.acct.dfs.core.windows.net": "k",
        "azure.sas-token": "t", "azure.client-secret": "s", "azure.endpoint": "http://127.0.0.1:1",
        "fs.gs.auth.service.account.json.keyfile": "/keys/sa.json"}))
    assert shipped == {"azure.endpoint": "http://127.0.0.1:1",
                       "fs.gs.auth.service.account.json.keyfile": "/keys/sa.json"}  # a path, not a key
