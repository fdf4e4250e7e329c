"""A FileIO that fails on purpose, for crash-safety tests (Paimon's tests use a FailingFileIO alike).

It counts mutating operations (write, open for write, put-if-absent, atomic overwrite, which is a
rename, and delete) and fails the k-th with an `InjectedFault` (an OSError):

  - `before`: the operation does nothing and raises;
  - `partial`: a write leaves half its bytes behind (a data file stream fails mid-way, an atomic
    write leaves its temporary file) and raises; other operations behave as `before`;
  - `after`: the operation takes effect, then raises (the caller cannot tell it landed).

With `crash=True` (the default) every later mutating operation fails too, as if the process had
died at the k-th: nothing the code does after the fault, such as cleaning up, reaches the disk.
Reads always work. Build a table on it with `FileStoreTable(fio, name, path, schema)`.

`full_disk_file_io` fails one level lower, in the pyarrow filesystem, with a real errno (ENOSPC),
to check what FileIO and its callers make of the operating system's errors.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Callable
from typing import Literal

import pyarrow as pa
import pyarrow.fs as pafs

from lakehouse_engine.io import FileIO

FaultMode = Literal["before", "partial", "after"]
FAULT_MODES: tuple[FaultMode, ...] = ("before", "partial", "after")


class InjectedFault(OSError):
    """The I/O error a FaultInjectingFileIO raises on purpose."""


class FaultInjectingFileIO(FileIO):
    """Fails the `fail_at`-th mutating operation (1-based); `None` only counts and records them."""

    def __init__(self, fs: pafs.FileSystem, fail_at: int | None = None, mode: FaultMode = "before",
                 crash: bool = True):
        super().__init__(fs)
        if mode not in FAULT_MODES:
            raise ValueError(f"fault mode must be one of {FAULT_MODES}, not {mode!r}")
        self.fail_at = fail_at
        self.mode = mode
        self.crash = crash
        self.operations: list[tuple[str, str]] = []  # (kind, path) of every mutating call seen
        self.fault: tuple[str, str] | None = None  # the operation that failed
        self.crashed = False

    @staticmethod
    def local(fail_at: int | None = None, mode: FaultMode = "before", crash: bool = True) -> FaultInjectingFileIO:
        return FaultInjectingFileIO(pafs.LocalFileSystem(), fail_at, mode, crash)

    @property
    def count(self) -> int:
        return len(self.operations)

    def _fails(self, kind: str, path: str) -> bool:
        """Record an operation; True when it is the one to fail. After a crash, raise at once."""
        if self.crashed:
            raise InjectedFault(f"injected: process already crashed, {kind} {path} not done")
        self.operations.append((kind, path))
        if self.fail_at is not None and len(self.operations) == self.fail_at:
            self.fault = (kind, path)
            self.crashed = self.crash
            return True
        return False

    def _raise(self, kind: str, path: str) -> InjectedFault:
        return InjectedFault(f"injected fault at operation {self.fail_at} ({self.mode}): {kind} {path}")

    # ---- writes ---------------------------------------------------------------------------
    def write_bytes(self, path: str, data: bytes) -> None:
        if not self._fails("write", path):
            super().write_bytes(path, data)
            return
        if self.mode == "partial":
            super().write_bytes(path, data[: len(data) // 2])
        elif self.mode == "after":
            super().write_bytes(path, data)
        raise self._raise("write", path)

    def open_output(self, path: str) -> pa.NativeFile:
        if not self._fails("write", path):
            return super().open_output(path)
        if self.mode == "before":
            raise self._raise("write", path)
        stream = super().open_output(path)
        if self.mode == "after":
            # The stream works; the failure comes when it is closed (the data is on disk).
            return pa.PythonFile(_FailingStream(stream, self._raise("write", path), on_close=True), mode="w")
        return pa.PythonFile(_FailingStream(stream, self._raise("write", path), on_close=False), mode="w")

    def overwrite_atomic(self, path: str, data: bytes) -> None:
        if not self._fails("rename", path):
            super().overwrite_atomic(path, data)
            return
        if self.mode == "partial":
            self._leave_temp_file(f"{path}.{uuid.uuid4().hex}.tmp", data)
        elif self.mode == "after":
            super().overwrite_atomic(path, data)
        raise self._raise("rename", path)

    def try_put_if_absent(self, path: str, data: bytes) -> bool:
        if not self._fails("put-if-absent", path):
            return super().try_put_if_absent(path, data)
        if self.mode == "partial":
            parent, name = os.path.split(path)
            self._leave_temp_file(os.path.join(parent, f".{name}.{uuid.uuid4().hex}.tmp"), data)
        elif self.mode == "after":
            super().try_put_if_absent(path, data)
        raise self._raise("put-if-absent", path)

    def _leave_temp_file(self, tmp: str, data: bytes) -> None:
        super().write_bytes(tmp, data[: len(data) // 2])

    # ---- deletes ----------------------------------------------------------------------------
    def delete_file(self, path: str, quiet: bool = True) -> None:
        # A fault is raised even when `quiet`: a dead process does not carry on.
        if not self._fails("delete", path):
            super().delete_file(path, quiet)
            return
        if self.mode == "after":
            super().delete_file(path, quiet=True)
        raise self._raise("delete", path)

    def delete_dir(self, path: str) -> None:
        if not self._fails("delete", path):
            super().delete_dir(path)
            return
        if self.mode == "after":
            super().delete_dir(path)
        raise self._raise("delete", path)


class _FailingStream:
    """A writable file object over an Arrow stream that fails on its second write (half written),
    or, with `on_close`, when it is closed."""

    def __init__(self, inner: pa.NativeFile, error: InjectedFault, on_close: bool):
        self.inner = inner
        self.error = error
        self.on_close = on_close
        self.writes = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self.writes += 1
        if not self.on_close and self.writes >= 2:
            chunk = bytes(data)
            self.inner.write(chunk[: len(chunk) // 2])
            raise self.error
        return int(self.inner.write(data))

    def tell(self) -> int:
        return int(self.inner.tell())

    def flush(self) -> None:
        self.inner.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.inner.close()
        if self.on_close:
            raise self.error


class _FullDiskHandler(pafs.FileSystemHandler):
    """A local filesystem on which writes to the paths `full(path)` selects fail with ENOSPC."""

    def __init__(self, full: Callable[[str], bool], code: int):
        self.local = pafs.LocalFileSystem()
        self.full = full
        self.code = code

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def _error(self, path: str) -> OSError:
        return OSError(self.code, os.strerror(self.code), path)

    def get_type_name(self) -> str:
        return "full-disk"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self.local.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.local.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.local.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise OSError(errno.EPERM, "refusing to empty the root directory")

    def delete_file(self, path: str) -> None:
        self.local.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        if self.full(dest):
            raise self._error(dest)
        self.local.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        if self.full(dest):
            raise self._error(dest)
        self.local.copy_file(src, dest)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.local.open_input_stream(path)

    def open_input_file(self, path: str) -> pa.NativeFile:
        return self.local.open_input_file(path)

    def open_output_stream(self, path: str, metadata: object) -> pa.NativeFile:
        stream = self.local.open_output_stream(path)
        if not self.full(path):
            return stream
        # As a real full disk does: the file is created, then its first write fails.
        return pa.PythonFile(_FullStream(stream, self._error(path)), mode="w")

    def open_append_stream(self, path: str, metadata: object) -> pa.NativeFile:
        if self.full(path):
            raise self._error(path)
        return self.local.open_append_stream(path)


class _FullStream(_FailingStream):
    """A writable file object that fails every write with the given error (a full disk)."""

    def __init__(self, inner: pa.NativeFile, error: OSError):
        super().__init__(inner, error, on_close=False)  # type: ignore[arg-type]

    def write(self, data: bytes) -> int:
        raise self.error


def full_disk_file_io(full: Callable[[str], bool], code: int = errno.ENOSPC) -> FileIO:
    """A FileIO over local disk whose filesystem fails writes to paths `full(path)` selects with an
    OSError of errno `code` (ENOSPC: disk full), as pyarrow's own filesystems report it."""
    return FileIO(pafs.PyFileSystem(_FullDiskHandler(full, code)))
