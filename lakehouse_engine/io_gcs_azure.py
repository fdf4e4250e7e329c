"""GCS and Azure warehouses: catalog options (Hadoop's connector names, as Paimon takes them) and
the standard environment variables, mapped to pyarrow's filesystems (data files) and obstore's
stores (the conditional put: GCS `ifGenerationMatch=0`, Azure `If-None-Match: *`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from lakehouse_engine.errors import InvalidOptionError

# Hadoop's GCS connector names after `fs.gs.`; `gs.` works as a short prefix too.
_GCS_PREFIXES = ("fs.gs.", "gs.")
_GCS_NAMES: dict[str, tuple[str, ...]] = {
    "keyfile": ("auth.service.account.json.keyfile",),   # a service account's JSON key file
    "endpoint": ("storage.root.url",),                   # an emulator: http://127.0.0.1:4443
    "project": ("project.id",),
}
_GCS_ENV: dict[str, tuple[str, ...]] = {
    "keyfile": ("GOOGLE_APPLICATION_CREDENTIALS",),
    "endpoint": ("STORAGE_EMULATOR_HOST",),
}

# Azure: short `azure.` names; Hadoop ABFS's `fs.azure.account.key[.<account>.dfs.core.windows.net]`
# and OAuth client names are accepted too.
_AZURE_NAMES: dict[str, tuple[str, ...]] = {
    "account_name": ("azure.account-name", "fs.azure.account.name"),
    "account_key": ("azure.account-key", "fs.azure.account.key"),
    "sas_token": ("azure.sas-token", "fs.azure.sas.token"),
    "client_id": ("azure.client-id", "fs.azure.account.oauth2.client.id"),
    "client_secret": ("azure.client-secret", "fs.azure.account.oauth2.client.secret"),
    "tenant_id": ("azure.tenant-id",),
    "endpoint": ("azure.endpoint",),  # an emulator or path-style endpoint: http://127.0.0.1:10000
}
_AZURE_ENV: dict[str, tuple[str, ...]] = {
    "account_name": ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"),
    "account_key": ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_KEY"),
    "sas_token": ("AZURE_STORAGE_SAS_TOKEN",),
    "client_id": ("AZURE_CLIENT_ID",),
    "client_secret": ("AZURE_CLIENT_SECRET",),
    "tenant_id": ("AZURE_TENANT_ID",),
}


def pick_settings(names: Mapping[str, tuple[str, ...]], env_names: Mapping[str, tuple[str, ...]],
                  options: Mapping[str, str], env: Mapping[str, str],
                  prefixes: tuple[str, ...] = ("",)) -> dict[str, str]:
    """Each setting from the first of its option `names` (under each of `prefixes`) that is given,
    else from the first of its environment variables that is set (shared by S3, GCS and Azure)."""
    out: dict[str, str] = {}
    for setting, keys in names.items():
        for key in keys:
            for prefix in prefixes:
                value = options.get(prefix + key)
                if value is not None and setting not in out:
                    out[setting] = str(value)
        for var in env_names.get(setting, ()):
            if setting not in out and env.get(var):
                out[setting] = env[var]
    return out


def gcs_settings(options: Mapping[str, str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The GCS settings (key file, endpoint, project) named by `options`, else by the environment
    (`GOOGLE_APPLICATION_CREDENTIALS`, `STORAGE_EMULATOR_HOST`)."""
    return pick_settings(_GCS_NAMES, _GCS_ENV, options, os.environ if env is None else env, _GCS_PREFIXES)


def azure_settings(options: Mapping[str, str], account: str | None,
                   env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Azure settings (account, key or SAS token or service principal, endpoint) named by
    `options`, else by the environment; `account` is the one the warehouse URI names, if any.

    Raises:
        InvalidOptionError: no account is named, or the options contradict each other.
    """
    env = os.environ if env is None else env
    if account:
        # Hadoop's per-account key name: fs.azure.account.key.<account>.dfs.core.windows.net
        for suffix in (".dfs.core.windows.net", ".blob.core.windows.net"):
            key = options.get(f"fs.azure.account.key.{account}{suffix}")
            if key is not None:
                options = {**options, "azure.account-key": key}
    out = pick_settings(_AZURE_NAMES, _AZURE_ENV, options, env)
    if account:
        if out.get("account_name", account) != account:
            raise InvalidOptionError(f"option azure.account-name={out['account_name']!r} contradicts the "
                                     f"warehouse URI's account {account!r}: give one of them")
        out["account_name"] = account
    if "account_name" not in out:
        raise InvalidOptionError("an Azure warehouse needs its storage account: "
                                 "abfs://<container>@<account>.dfs.core.windows.net/<path>, or option "
                                 "azure.account-name (AZURE_STORAGE_ACCOUNT_NAME)")
    if "account_key" in out and "sas_token" in out:
        raise InvalidOptionError("options azure.account-key and azure.sas-token exclude each other: give one")
    return out


def gcs_filesystem(s: Mapping[str, str]) -> pafs.GcsFileSystem:
    """pyarrow's GCS filesystem for the settings (data files; it retries transient errors)."""
    kwargs: dict[str, Any] = {}
    endpoint = s.get("endpoint")
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"http://{endpoint}")
        kwargs["endpoint_override"] = parsed.netloc
        kwargs["scheme"] = parsed.scheme
        kwargs["anonymous"] = "keyfile" not in s  # emulators take unsigned requests
    if "project" in s:
        kwargs["project_id"] = s["project"]
    if "keyfile" in s:
        # pyarrow's GCS client reads a key file only through this variable.
        os.environ.setdefault("GOOGLE_APPLICATION_CREDENTIALS", s["keyfile"])
    return pafs.GcsFileSystem(**kwargs)


def gcs_store_kwargs(s: Mapping[str, str]) -> dict[str, Any]:
    """obstore `GCSStore` arguments for the settings (the conditional put: `ifGenerationMatch=0`)."""
    kwargs: dict[str, Any] = {}
    if "keyfile" in s:
        kwargs["service_account"] = s["keyfile"]
    endpoint = s.get("endpoint")
    if endpoint:
        url = endpoint if "://" in endpoint else f"http://{endpoint}"
        kwargs["base_url"] = url.rstrip("/")
        kwargs["client_options"] = {"allow_http": url.startswith("http://")}
        if "keyfile" not in s:
            kwargs["skip_signature"] = True
    return kwargs


def _endpoint(s: Mapping[str, str]) -> tuple[str, str] | None:
    endpoint = s.get("endpoint")
    if not endpoint:
        return None
    parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
    return parsed.scheme, parsed.netloc


def azure_filesystem(s: Mapping[str, str]) -> pafs.AzureFileSystem:
    """pyarrow's Azure filesystem for the settings; with `azure.endpoint`, path-style addressing
    (`endpoint/account/container`, as Azurite serves it)."""
    kwargs: dict[str, Any] = {}
    for name in ("account_key", "sas_token", "client_id", "client_secret", "tenant_id"):
        if name in s:
            kwargs[name] = s[name]
    endpoint = _endpoint(s)
    if endpoint is not None:
        scheme, authority = endpoint
        kwargs.update(blob_storage_authority=authority, blob_storage_scheme=scheme,
                      dfs_storage_authority=authority, dfs_storage_scheme=scheme)
    return pafs.AzureFileSystem(s["account_name"], **kwargs)


def azure_store_kwargs(s: Mapping[str, str]) -> dict[str, Any]:
    """obstore `AzureStore` arguments for the settings (the conditional put: `If-None-Match: *`)."""
    kwargs: dict[str, Any] = {"account_name": s["account_name"]}
    for ours, theirs in (("account_key", "account_key"), ("sas_token", "sas_key"),
                         ("client_id", "client_id"), ("client_secret", "client_secret"),
                         ("tenant_id", "tenant_id")):
        if ours in s:
            kwargs[theirs] = s[ours]
    endpoint = _endpoint(s)
    if endpoint is not None:
        scheme, authority = endpoint
        kwargs["endpoint"] = f"{scheme}://{authority}/{s['account_name']}"
        kwargs["client_options"] = {"allow_http": scheme == "http"}
    return kwargs
