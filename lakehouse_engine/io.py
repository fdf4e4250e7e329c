"""FileIO over pyarrow.fs: read, write, list, delete, and an atomic put-if-absent for snapshot files."""

from __future__ import annotations

import errno
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from lakehouse_engine.errors import StorageError

# `<warehouse>/<db>.db/<table>/...`: the table a path belongs to, for messages.
_TABLE_IN_PATH = re.compile(r"([^/]+)\.db/([^/]+)")
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}
# A cause's errno, when pyarrow gives it only in the message ("Detail: [errno 28] ...").
_ERRNO_IN_MESSAGE = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)


def storage_error(action: str, path: str, cause: OSError) -> StorageError:
    """A StorageError for `cause`, met while doing `action` on `path`, naming the path and its table."""
    code = cause.errno
    if code is None:
        found = _ERRNO_IN_MESSAGE.search(str(cause))
        code = int(found.group(1)) if found else None
    tables = _TABLE_IN_PATH.findall(path)
    where = f" of table {tables[-1][0]}.{tables[-1][1]}" if tables else ""
    if code in _DISK_FULL:
        reason = f"disk full ({errno.errorcode[code]})"
    elif code is not None and code in errno.errorcode:
        reason = f"{os.strerror(code)} ({errno.errorcode[code]})"
    else:
        reason = "I/O error"
    message = f"cannot {action} {path}{where}: {reason}: {cause.strerror or cause}"
    # OSError's (errno, strerror, filename) form keeps what `except OSError` handlers look at.
    return StorageError(code, message, path) if code is not None else StorageError(message)


@contextmanager
def storage_errors(action: str, path: str) -> Iterator[None]:
    """Turn an OSError of the block into a StorageError; a missing file stays FileNotFoundError,
    which callers treat as a state (no snapshot yet, file expired), not as a failure."""
    try:
        yield
    except (StorageError, FileNotFoundError):
        raise
    except OSError as e:
        raise storage_error(action, path, e) from e


@dataclass(frozen=True)
class FileStatus:
    """A file's path (as this FileIO addresses it), size and modification time in epoch millis."""

    path: str
    size: int
    mtime_millis: int
    is_dir: bool


class FileIO:
    """Filesystem access for one warehouse: a local path or any URI pyarrow.fs understands."""

    def __init__(self, fs: pafs.FileSystem):
        self.fs = fs
        self.is_local = isinstance(fs, pafs.LocalFileSystem)
        # The catalog options this FileIO was made from (endpoint, credentials, lock), so a
        # Spark task can re-open the same warehouse.
        self.options: dict[str, str] = {}

    # ---- reads --------------------------------------------------------------
    def exists(self, path: str) -> bool:
        with storage_errors("look up", path):
            return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        with storage_errors("look up", path):
            return self.fs.get_file_info(path).type == pafs.FileType.Directory

    def read_bytes(self, path: str) -> bytes:
        with storage_errors("read", path), self.fs.open_input_stream(path) as f:
            return f.read()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def read_file_utf8(self, path: str) -> str:
        """pypaimon's name for `read_text`."""
        return self.read_text(path)

    def file_size(self, path: str) -> int:
        with storage_errors("look up", path):
            info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(path)
        return int(info.size or 0)

    def list_status(self, path: str, recursive: bool = False) -> list[FileStatus]:
        """Entries under a directory (empty when it does not exist)."""
        sel = pafs.FileSelector(path, allow_not_found=True, recursive=recursive)
        out = []
        for attempt in range(3):
            try:
                with storage_errors("list", path):
                    infos = self.fs.get_file_info(sel)
                break
            except FileNotFoundError:
                # An entry renamed away between the listing and its stat (a concurrent writer's
                # temporary file, renamed into place): list again; the directory itself is there.
                if attempt == 2:
                    raise
        for info in infos:
            mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
            out.append(FileStatus(info.path, int(info.size or 0), mtime,
                                  info.type == pafs.FileType.Directory))
        return out

    def list_names(self, path: str) -> list[str]:
        return [os.path.basename(s.path) for s in self.list_status(path)]

    # ---- writes -------------------------------------------------------------
    def mkdirs(self, path: str) -> None:
        with storage_errors("create directory", path):
            self.fs.create_dir(path, recursive=True)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a whole file (overwriting); used for files with unique names."""
        with storage_errors("write", path):
            parent = os.path.dirname(path)
            if parent:
                self.fs.create_dir(parent, recursive=True)
            with self.fs.open_output_stream(path) as f:
                f.write(data)

    def overwrite_atomic(self, path: str, data: bytes) -> None:
        """Replace a small file atomically where the filesystem allows it (hint files)."""
        if self.is_local:
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            self.write_bytes(tmp, data)
            with storage_errors("replace", path):
                os.replace(tmp, path)
        else:
            self.write_bytes(path, data)

    def try_put_if_absent(self, path: str, data: bytes) -> bool:
        """Create `path` with `data` only if no file is there; True when this call created it.

        Local filesystems publish a fully written temporary file with `os.link`, which fails
        when the target exists, so two racing committers never both win and a reader never
        sees a half-written snapshot. Other filesystems need a conditional put (see docs).
        """
        if not self.is_local:
            if self.exists(path):
                return False
            self.write_bytes(path, data)
            return True
        with storage_errors("publish", path):
            return self._link_if_absent(path, data)

    @staticmethod
    def _link_if_absent(path: str, data: bytes) -> bool:
        parent = os.path.dirname(path)
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.link(tmp, path)
            return True
        except OSError as e:
            if e.errno == errno.EEXIST:
                return False
            raise
        finally:
            # A full disk can fail the temporary file itself; never leave half of it behind.
            if os.path.exists(tmp):
                os.unlink(tmp)

    def copy_file(self, src: str, dst: str) -> None:
        """Give `src`'s bytes a second name `dst` (a new file): a hard link on a local filesystem
        (no bytes copied; deleting either name leaves the other), a server-side copy elsewhere."""
        with storage_errors("copy", dst):
            if self.is_local:
                try:
                    os.link(src, dst)
                    return
                except OSError as e:
                    if e.errno == errno.EEXIST:
                        raise
            try:
                self.fs.copy_file(src, dst)
            except NotImplementedError:  # (a filesystem without a server-side copy)
                self.write_bytes(dst, self.read_bytes(src))

    def delete_file(self, path: str, quiet: bool = True) -> None:
        try:
            with storage_errors("delete", path):
                self.fs.delete_file(path)
        except OSError:
            if not quiet:
                raise

    def delete_dir(self, path: str) -> None:
        if self.exists(path):
            with storage_errors("delete directory", path):
                self.fs.delete_dir(path)

    def open_output(self, path: str) -> pa.NativeFile:
        """A stream to write `path`; errors while writing to it surface from the stream (see
        `storage_error` to name them)."""
        with storage_errors("write", path):
            parent = os.path.dirname(path)
            if parent:
                self.fs.create_dir(parent, recursive=True)
            return self.fs.open_output_stream(path)

    def open_input(self, path: str) -> pa.NativeFile:
        with storage_errors("read", path):
            return self.fs.open_input_file(path)
