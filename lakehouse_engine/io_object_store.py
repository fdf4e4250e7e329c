"""FileIO for object stores (S3 and S3-compatible stores, GCS, Azure): pyarrow for data, a conditional
put (obstore) for the snapshot, schema and tag files that must never be overwritten.

pyarrow's filesystems do the bulk work (multi-part uploads of large data files, ranged reads,
retries with backoff on throttling and 5xx answers), but they cannot send `If-None-Match: *`.
obstore's create-mode put can, on every store we support (S3 `If-None-Match: *`, GCS
`ifGenerationMatch=0`, Azure `If-None-Match: *`), so snapshot publication goes through it, on a
client that never retries on its own: a retried conditional put that had landed would come back
as "already exists" and read as a lost race. We retry it ourselves, after reading the object back.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from lakehouse_engine.errors import InvalidOptionError, LakehouseError
from lakehouse_engine.io import FileIO, storage_error, storage_errors
from lakehouse_engine.io_gcs_azure import (
    azure_filesystem,
    azure_settings,
    azure_store_kwargs,
    gcs_filesystem,
    gcs_settings,
    gcs_store_kwargs,
    pick_settings,
)

S3_SCHEMES = frozenset({"s3", "s3a"})
GCS_SCHEMES = frozenset({"gs", "gcs"})
AZURE_SCHEMES = frozenset({"abfs", "abfss", "az"})
OBJECT_STORE_SCHEMES = S3_SCHEMES | GCS_SCHEMES | AZURE_SCHEMES

# Paimon's (Hadoop S3A's) names after the `s3.` prefix; `s3a.`, `fs.s3.` and `fs.s3a.` prefixes are
# accepted too, as pypaimon does, and so are pypaimon's own `fs.s3.accessKeyId`-style keys.
_S3_PREFIXES = ("s3.", "s3a.", "fs.s3.", "fs.s3a.")
_S3_NAMES: dict[str, tuple[str, ...]] = {
    "endpoint": ("endpoint",),
    "access_key": ("access-key", "access.key", "accessKeyId"),
    "secret_key": ("secret-key", "secret.key", "accessKeySecret"),
    "session_token": ("session-token", "session.token", "securityToken"),
    "region": ("endpoint.region", "region"),
    "path_style": ("path.style.access", "path-style-access"),
    "attempts": ("attempts.maximum",),
}
# The standard AWS environment variables, used when no option names the setting.
_S3_ENV: dict[str, tuple[str, ...]] = {
    "endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "access_key": ("AWS_ACCESS_KEY_ID",),
    "secret_key": ("AWS_SECRET_ACCESS_KEY",),
    "session_token": ("AWS_SESSION_TOKEN",),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
}
DEFAULT_S3_ATTEMPTS = 10  # Hadoop S3A's fs.s3a.attempts.maximum default
_S3_ATTEMPTS_OPTION = "s3.attempts.maximum"
_INIT_BACKOFF_S, _MAX_BACKOFF_S = 0.1, 15.0  # between attempts: doubled each time, jittered
# Our option (Paimon has none: its object-store FileIOs rely on a catalog lock): set it to false
# for an S3-compatible store that ignores If-None-Match; then commits need `lock.enabled`.
CONDITIONAL_PUT = "fs.conditional-put"
LOCK_ENABLED = "lock.enabled"          # Paimon's catalog option
LOCK_DIR = "lock.dir"                  # where the file lock lives (a filesystem every committer shares)
LOCK_ACQUIRE_TIMEOUT = "lock-acquire-timeout"  # Paimon's name; seconds here


class ConditionalPutUnsupportedError(LakehouseError):
    """The store cannot put a file only if absent, and no commit lock is configured: a second
    concurrent committer could overwrite a snapshot, so the engine refuses to commit."""


class CommitLockTimeoutError(LakehouseError):
    """The commit lock was held by another committer for longer than `lock-acquire-timeout`."""


def _flag(value: str, option: str) -> bool:
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise InvalidOptionError(f"option {option}={value!r} must be 'true' or 'false'")
    return text == "true"


def s3_settings(options: Mapping[str, str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The S3 settings (endpoint, credentials, region, path style, attempts) named by `options`, with
    the AWS environment variables filling what the options leave out."""
    out = pick_settings(_S3_NAMES, _S3_ENV, options, os.environ if env is None else env, _S3_PREFIXES)
    if ("access_key" in out) != ("secret_key" in out):
        given, missing = ("s3.access-key", "s3.secret-key") if "access_key" in out else (
            "s3.secret-key", "s3.access-key")
        raise InvalidOptionError(f"option {given} is set but {missing} is not: give both (or neither, "
                                 f"to use AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the instance role)")
    return out


class FileCommitLock:
    """A lock per table on a filesystem every committer shares (`lock.dir`), held around a
    check-then-put of a snapshot file on stores without a conditional put."""

    def __init__(self, directory: str, timeout_s: float):
        self.directory = directory
        self.timeout_s = timeout_s

    @contextmanager
    def hold(self, path: str) -> Iterator[None]:
        """Hold the lock of the table `path` (a snapshot, schema or tag file) belongs to."""
        table_dir = os.path.dirname(os.path.dirname(path))
        name = table_dir.replace("/", "_").replace(":", "_").strip("_") + ".lock"
        os.makedirs(self.directory, exist_ok=True)
        deadline = time.monotonic() + self.timeout_s
        with open(os.path.join(self.directory, name), "a+b") as f:
            while True:
                try:
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise CommitLockTimeoutError(
                            f"commit lock {f.name} for {table_dir} is still held by another committer "
                            f"after {self.timeout_s:.0f} s ({LOCK_ACQUIRE_TIMEOUT}); nothing was committed"
                        ) from None
                    time.sleep(0.02)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _commit_lock(options: Mapping[str, str]) -> FileCommitLock | None:
    if not _flag(options.get(LOCK_ENABLED, "false"), LOCK_ENABLED):
        return None
    directory = options.get(LOCK_DIR)
    if not directory:
        raise InvalidOptionError(f"option {LOCK_ENABLED}=true needs {LOCK_DIR}: a directory on a "
                                 f"filesystem every committer shares, where the commit lock lives")
    timeout = options.get(LOCK_ACQUIRE_TIMEOUT, "480")
    try:
        seconds = float(timeout)
    except ValueError:
        raise InvalidOptionError(f"option {LOCK_ACQUIRE_TIMEOUT}={timeout!r} must be seconds") from None
    return FileCommitLock(directory, seconds)


class ObjectStoreFileIO(FileIO):
    """FileIO on an object store: data through pyarrow, put-if-absent through a conditional put."""

    def __init__(self, fs: pafs.FileSystem, scheme: str, options: Mapping[str, str],
                 azure_account: str | None = None):
        super().__init__(fs)
        self.scheme = scheme
        self.azure_account = azure_account  # the account an abfs:// URI names
        self.options = dict(options)
        self.conditional_put = _flag(self.options.get(CONDITIONAL_PUT, "true"), CONDITIONAL_PUT)
        self.lock = _commit_lock(self.options)
        self._stores: dict[str, Any] = {}

    @staticmethod
    def for_uri(uri: str, options: Mapping[str, str]) -> tuple[ObjectStoreFileIO, str]:
        """The FileIO and root path (`bucket/prefix`) of a warehouse URI such as `s3://bucket/wh`."""
        parsed = urlparse(uri)
        scheme = parsed.scheme.lower()
        if not parsed.netloc:
            raise InvalidOptionError(f"warehouse {uri!r} names no bucket (write {scheme}://bucket/path)")
        if scheme in S3_SCHEMES:
            fs: pafs.FileSystem = _s3_filesystem(s3_settings(options))
            root = f"{parsed.netloc}{parsed.path}"
        elif scheme in GCS_SCHEMES:
            fs = gcs_filesystem(gcs_settings(options))
            root = f"{parsed.netloc}{parsed.path}"
        else:
            # abfs://container@account.dfs.core.windows.net/path, or az://container/path with the
            # account in the options
            container, _, host = parsed.netloc.rpartition("@")
            if not container:
                container, host = host, ""
            account = host.split(".")[0] or None
            fs = azure_filesystem(azure_settings(options, account))
            root = f"{container}{parsed.path}"
            return ObjectStoreFileIO(fs, scheme, options, account), root.rstrip("/")
        return ObjectStoreFileIO(fs, scheme, options), root.rstrip("/")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_stores"] = {}  # clients are re-made where the FileIO lands (a Spark task)
        return state

    # ---- small reads: one request each (pyarrow asks HEAD then GET, and LIST for a miss) -------
    def exists(self, path: str) -> bool:
        """Whether an object (or a directory prefix) is at `path`: one HEAD when it is an object."""
        import obstore
        from obstore.exceptions import BaseError, NotFoundError

        bucket, _, key = path.partition("/")
        try:
            obstore.head(self._store(bucket, retrying=True), key)
            return True
        except (NotFoundError, FileNotFoundError):
            return super().exists(path) if not _looks_like_file(path) else False
        except BaseError as exc:
            raise storage_error("look up", path, OSError(errno.EIO, _first_line(exc))) from exc

    def read_bytes(self, path: str) -> bytes:
        """A whole object in one GET; FileNotFoundError when it is not there."""
        import obstore
        from obstore.exceptions import BaseError, NotFoundError

        bucket, _, key = path.partition("/")
        try:
            return bytes(obstore.get(self._store(bucket, retrying=True), key).bytes())
        except (NotFoundError, FileNotFoundError):
            raise FileNotFoundError(errno.ENOENT, "no such object", path) from None
        except BaseError as exc:
            raise storage_error("read", path, OSError(errno.EIO, _first_line(exc))) from exc

    # ---- writes: no directories on an object store, so no requests for them ----------------
    def mkdirs(self, path: str) -> None:
        # A database is a prefix; a marker object lets listings and `is_dir` see an empty one.
        with storage_errors("create directory", path):
            self.fs.create_dir(path, recursive=True)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole object (one PUT; a large one as a multi-part upload)."""
        with storage_errors("write", path), self.fs.open_output_stream(path) as f:
            f.write(data)

    def overwrite_atomic(self, path: str, data: bytes) -> None:
        """Replace a hint file: a PUT replaces a whole object atomically on every object store."""
        self.write_bytes(path, data)

    def open_output(self, path: str) -> Any:
        with storage_errors("write", path):
            return self.fs.open_output_stream(path)

    def try_put_if_absent(self, path: str, data: bytes) -> bool:
        """Create `path` only if no object is there (a conditional put); False when one is.

        Raises:
            ConditionalPutUnsupportedError: the store has no conditional put and no lock is set.
            StorageError: every attempt went unanswered and the object was not there after any of
                them, or reading it back failed too (whether it landed is unknown).
        """
        if self.conditional_put:
            return self._conditional_put(path, data)
        if self.lock is None:
            raise ConditionalPutUnsupportedError(self._unsupported(path))
        with self.lock.hold(path):
            if self.exists(path):
                return False
            self.write_bytes(path, data)
            return True

    def _unsupported(self, path: str) -> str:
        return (f"cannot publish {path} safely: the store has no conditional put ({CONDITIONAL_PUT}="
                f"false or refused by the server), so a second concurrent committer could overwrite "
                f"it; configure a commit lock ({LOCK_ENABLED}=true, {LOCK_DIR}=<shared directory>) or "
                f"use a store with conditional writes; nothing was committed")

    def _conditional_put(self, path: str, data: bytes) -> bool:
        """Put-if-absent with retries that are never blind: after a put without an answer (a
        timeout, a reset connection, a 5xx or a throttling answer) the object is read back before
        anything else. Ours there: it landed. Another object there: a lost race. Nothing there:
        putting again is safe, since `If-None-Match` refuses it should the first put land late,
        and a refusal that follows an unanswered put is settled by comparing content too."""
        import obstore
        from obstore.exceptions import (
            AlreadyExistsError,
            BaseError,
            NotSupportedError,
            PreconditionError,
        )

        bucket, _, key = path.partition("/")
        attempts = self._attempts()
        unanswered: BaseException | None = None
        for attempt in range(attempts):
            try:
                obstore.put(self._store(bucket), key, data, mode="create")
                return True
            except (AlreadyExistsError, PreconditionError):
                # 412: an object is there; after an unanswered put of ours it may be ours.
                return unanswered is not None and self._holds(path, data)
            except NotSupportedError as exc:
                raise ConditionalPutUnsupportedError(f"{self._unsupported(path)} ({exc})") from exc
            except BaseError as exc:
                unanswered = exc
            try:
                there = self.read_bytes(path)
            except FileNotFoundError:
                # Not there (yet): back off as for any throttling answer, then put again.
                time.sleep(_backoff_s(attempt))
                continue
            return there == data
        assert unanswered is not None
        # Every attempt went unanswered and the object was not there after each: the caller may
        # retry the same commit (nothing of it is published).
        raise storage_error("publish", path, OSError(
            errno.EIO, f"{attempts} attempt(s) ({_S3_ATTEMPTS_OPTION}) went unanswered, the last "
                       f"with: {_first_line(unanswered)}")) from unanswered

    def _holds(self, path: str, data: bytes) -> bool:
        """Whether the object at `path` is `data` (one GET, retrying): a put of ours landed."""
        return self.read_bytes(path) == data

    def _store(self, bucket: str, retrying: bool = False) -> Any:
        """The obstore client of `bucket`, made once; the one for conditional puts never retries
        (see the module doc), the one for reads retries with backoff."""
        store = self._stores.get(f"{bucket}/{retrying}")
        if store is not None:
            return store
        from obstore.store import AzureStore, GCSStore, S3Store

        retry: Any = {"max_retries": self._attempts() - 1 if retrying else 0,
                 "retry_timeout": timedelta(seconds=180),
                 "backoff": {"init_backoff": timedelta(seconds=_INIT_BACKOFF_S),
                             "max_backoff": timedelta(seconds=_MAX_BACKOFF_S), "base": 2.0}}
        if self.scheme in S3_SCHEMES:
            s = s3_settings(self.options)
            kwargs: dict[str, Any] = {"retry_config": retry}
            endpoint = s.get("endpoint")
            if endpoint:
                if "://" not in endpoint:
                    endpoint = f"https://{endpoint}"
                kwargs["endpoint"] = endpoint
                kwargs["client_options"] = {"allow_http": endpoint.startswith("http://")}
            for ours, theirs in (("access_key", "access_key_id"), ("secret_key", "secret_access_key"),
                                 ("session_token", "session_token"), ("region", "region")):
                if ours in s:
                    kwargs[theirs] = s[ours]
            if "path_style" in s:
                kwargs["virtual_hosted_style_request"] = not _flag(s["path_style"], "s3.path.style.access")
            store = S3Store(bucket, **kwargs)
        elif self.scheme in GCS_SCHEMES:
            store = GCSStore(bucket, retry_config=retry, **gcs_store_kwargs(gcs_settings(self.options)))
        else:
            store = AzureStore(bucket, retry_config=retry,
                               **azure_store_kwargs(azure_settings(self.options, self.azure_account)))
        self._stores[f"{bucket}/{retrying}"] = store
        return store

    def _attempts(self) -> int:
        return _attempts(s3_settings(self.options)) if self.scheme in S3_SCHEMES else DEFAULT_S3_ATTEMPTS



def _looks_like_file(path: str) -> bool:
    # Paimon's files: snapshot-N, schema-N, tag-*, LATEST/EARLIEST, manifests and data files.
    # Only a miss on something else may be a directory prefix worth a LIST request.
    name = path.rsplit("/", 1)[-1]
    return name.startswith(("snapshot-", "schema-", "tag-", "manifest", "index-", "data-")) or name in (
        "LATEST", "EARLIEST") or "." in name and not name.endswith(".db")


def _attempts(s: Mapping[str, str]) -> int:
    try:
        attempts = int(s.get("attempts", DEFAULT_S3_ATTEMPTS))
    except ValueError:
        raise InvalidOptionError(f"option s3.attempts.maximum={s.get('attempts')!r} must be an integer") from None
    if attempts < 1:
        raise InvalidOptionError(f"option s3.attempts.maximum={attempts} must be at least 1")
    return attempts


def _backoff_s(attempt: int) -> float:
    """Seconds to wait after failed attempt `attempt` (0-based): exponential with full jitter."""
    return min(_MAX_BACKOFF_S, _INIT_BACKOFF_S * 2.0 ** attempt) * random.uniform(0.5, 1.0)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _s3_filesystem(s: Mapping[str, str]) -> pafs.S3FileSystem:
    """pyarrow's S3 filesystem for the settings: retries with backoff (AWS standard strategy: 5xx,
    throttling, timeouts), multi-part uploads for large files, path style when asked."""
    kwargs: dict[str, Any] = {}
    endpoint = s.get("endpoint")
    if endpoint:
        # The endpoint as given (`http://host:9000`), as pypaimon passes it: the AWS SDK takes the
        # scheme from it; `scheme` says the same for an endpoint given without one.
        parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        kwargs["endpoint_override"] = endpoint
        kwargs["scheme"] = parsed.scheme
    for ours in ("access_key", "secret_key", "session_token", "region"):
        if ours in s:
            kwargs[ours] = s[ours]
    if "path_style" in s:
        kwargs["force_virtual_addressing"] = not _flag(s["path_style"], "s3.path.style.access")
    kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=_attempts(s))
    # A small file (snapshot, manifest, hint) is one PutObject, not a three-request multi-part
    # upload; a large data file still uploads in parts.
    kwargs["allow_delayed_open"] = True
    if "access_key" in s:
        # Explicit keys: no multi-second probe of the EC2 metadata service off AWS.
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    return pafs.S3FileSystem(**kwargs)
