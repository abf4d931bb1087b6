"""The FileSystem port, and MemoryFileSystem: a verified fake that can lose what was never fsynced.

The storage engine touches files only through ``FileSystem`` and the ``FileHandle``s it opens;
``runtime.storage.os_fs.OsFileSystem`` is the real adapter, and the contract suite
(tests/contract/test_filesystem_contract.py) runs the same tests over both.

The port's rules (both implementations keep them):

* Paths are POSIX strings. Missing files raise ``FileNotFoundError``; ``rename`` atomically replaces
  the target; ``list_dir`` returns sorted names.
* ``FileHandle.write`` appends *all* the bytes at the end of the file and hands them to the OS before
  it returns (no user-space buffering): after it, the bytes survive a crash of this process, though
  not a power loss. ``fsync`` makes the file's *content* durable; ``fsync_dir`` makes the directory's
  *entries* (creations, renames, deletions) durable.
* ``fsync_path`` fsyncs a file by name so that a flush can run on another thread without sharing file
  descriptors with the event loop; a file deleted meanwhile raises ``FileNotFoundError``.

MemoryFileSystem's crash model ("power loss"): every file keeps the bytes the process sees and the
bytes that were durable at its last ``fsync``; every directory keeps its visible entries and the
entries that were durable at its last ``fsync_dir``. ``crash()`` throws away everything not durable:
unsynced bytes (optionally keeping a torn prefix of unsynced appends), files created or renamed
without a directory sync, and it resurrects files deleted without one. Directories themselves are
durable once created (a simplification: the engine never relies on losing a directory).
A process crash (SIGKILL) keeps every written byte, as the OS page cache does: ``process_exit()``
only makes the dead process's handles unusable, so a broker killed mid-shutdown cannot write a
clean-shutdown marker afterwards.

Disk faults (the simulation's): ``inject_fault`` makes every later write (``EIO``), every write
past a full disk (``ENOSPC``) or every fsync (``EIO``) fail until ``clear_fault``.
"""

from __future__ import annotations

import enum
import errno
import posixpath
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

__all__ = ["DiskFault", "FileHandle", "FileSystem", "MemoryFileSystem", "TornTail"]


class DiskFault(enum.Enum):
    """What an injected disk fault fails."""

    WRITE_ERROR = "write-error"
    DISK_FULL = "disk-full"
    FSYNC_ERROR = "fsync-error"
    # The process using the file system was killed or lost power: whatever its cancelled tasks still
    # try (a shutdown path writing checkpoints or the clean-shutdown marker) never reaches the disk.
    PROCESS_DEAD = "process-dead"


class FileHandle(Protocol):
    """An open file: appends at the end, reads anywhere."""

    @property
    def path(self) -> str: ...

    @property
    def size(self) -> int:
        """Current length in bytes (as this process sees it)."""
        ...

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append every byte of ``data`` at the end, handed to the OS before returning."""
        ...

    def writev(self, buffers: Sequence[bytes | bytearray | memoryview], total: int | None = None) -> None:
        """Append the buffers back to back (one gathering write where the OS offers it).
        ``total``, their summed length, when the caller knows it (the append path does)."""
        ...

    def pread(self, size: int, position: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (fewer at the end of the file)."""
        ...

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes (never grows it)."""
        ...

    def fsync(self) -> None: ...

    def close(self) -> None:
        """Idempotent."""
        ...


class FileSystem(Protocol):
    def open(self, path: str) -> FileHandle:
        """Open ``path`` for reading and appending, creating an empty file if it does not exist."""
        ...

    def open_read_only(self, path: str) -> FileHandle:
        """Open an existing file for reading only (``FileNotFoundError`` if missing); writes raise."""
        ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes, *, fsync: bool) -> None:
        """Create or replace ``path`` with ``data`` (not atomic; see checkpoint.py for that)."""
        ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def list_dir(self, path: str) -> list[str]: ...

    def make_dirs(self, path: str) -> None:
        """Create ``path`` and its parents; no error if it exists."""
        ...

    def rename(self, source: str, target: str) -> None: ...

    def delete_file(self, path: str) -> None: ...

    def delete_dir(self, path: str) -> None:
        """Remove an empty directory."""
        ...

    def file_size(self, path: str) -> int: ...

    def modified_ms(self, path: str) -> int:
        """Last modification time, Unix-epoch milliseconds."""
        ...

    def fsync_path(self, path: str) -> None: ...

    def fsync_dir(self, path: str) -> None: ...


TornTail = Callable[[str, int, int], int]
"""``(path, durable_length, visible_length) -> length kept`` for files whose unsynced change was a
pure append; the result is clamped to ``[durable_length, visible_length]``."""


class _Inode:
    __slots__ = ("data", "durable", "modified_ms")

    def __init__(self, modified_ms: int) -> None:
        self.data = bytearray()
        self.durable = b""
        self.modified_ms = modified_ms


class _MemoryHandle:
    __slots__ = ("_closed", "_fs", "_inode", "_path", "_read_only")

    def __init__(self, fs: MemoryFileSystem, path: str, inode: _Inode, *, read_only: bool = False) -> None:
        self._fs = fs
        self._path = path
        self._inode = inode
        self._closed = False
        self._read_only = read_only

    @property
    def path(self) -> str:
        return self._path

    @property
    def size(self) -> int:
        return len(self._inode.data)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"I/O on closed file {self._path}")
        if self._fs.generation_of(self._inode) is None:
            raise OSError(f"{self._path}: handle invalidated by a simulated crash")

    def _check_writable(self) -> None:
        self._check_open()
        if self._read_only:
            raise OSError(f"{self._path} is open read-only")

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._check_writable()
        self._fs.check_write(self._path)
        self._inode.data += data
        self._inode.modified_ms = self._fs.wall_clock_ms()

    def writev(self, buffers: Sequence[bytes | bytearray | memoryview], total: int | None = None) -> None:
        self._check_writable()
        self._fs.check_write(self._path)
        data = self._inode.data
        for buffer in buffers:
            data += buffer
        self._inode.modified_ms = self._fs.wall_clock_ms()

    def pread(self, size: int, position: int) -> bytes:
        self._check_open()
        if size < 0 or position < 0:
            raise ValueError(f"pread size {size} position {position}")
        return bytes(self._inode.data[position : position + size])

    def truncate(self, size: int) -> None:
        self._check_writable()
        if size < len(self._inode.data):
            del self._inode.data[size:]
            self._inode.modified_ms = self._fs.wall_clock_ms()

    def fsync(self) -> None:
        self._check_open()
        self._fs.check_fsync(self._path)
        with self._fs.lock:
            self._inode.durable = bytes(self._inode.data)

    def close(self) -> None:
        self._closed = True


class MemoryFileSystem:
    """In-memory FileSystem with explicit durability and ``crash()``. Thread-safe enough for flush
    jobs that ``fsync_path`` from a worker thread while the loop appends (one lock guards the
    namespace and the durable copies; appends are single bytearray operations under the GIL)."""

    def __init__(self, wall_clock_ms: Callable[[], int] | None = None) -> None:
        self.lock = threading.Lock()
        self._files: dict[str, _Inode] = {}
        self._durable_files: dict[str, _Inode] = {}
        self._dirs: set[str] = {"/"}
        self._live: set[int] = set()
        self._wall_clock = wall_clock_ms if wall_clock_ms is not None else (lambda: 0)
        self.fsync_count = 0
        self.fault: DiskFault | None = None

    # ---------------------------------------------------------------------------- helpers

    def wall_clock_ms(self) -> int:
        return self._wall_clock()

    def generation_of(self, inode: _Inode) -> int | None:
        return id(inode) if id(inode) in self._live else None

    @staticmethod
    def _norm(path: str) -> str:
        normalized = posixpath.normpath(path)
        if not normalized.startswith("/"):
            normalized = "/" + normalized
        return normalized

    def _parent(self, path: str) -> str:
        parent = posixpath.dirname(path)
        if parent not in self._dirs:
            raise FileNotFoundError(f"no such directory: {parent}")
        return parent

    def _inode(self, path: str) -> _Inode:
        inode = self._files.get(self._norm(path))
        if inode is None:
            raise FileNotFoundError(f"no such file: {path}")
        return inode

    def _new_inode(self) -> _Inode:
        inode = _Inode(self._wall_clock())
        self._live.add(id(inode))
        return inode

    # ------------------------------------------------------------------------- the port

    def open(self, path: str) -> FileHandle:
        path = self._norm(path)
        with self.lock:
            if path in self._dirs:
                raise IsADirectoryError(path)
            inode = self._files.get(path)
            if inode is None:
                self._parent(path)
                inode = self._new_inode()
                self._files[path] = inode
        return _MemoryHandle(self, path, inode)

    def open_read_only(self, path: str) -> FileHandle:
        path = self._norm(path)
        if path in self._dirs:
            raise IsADirectoryError(path)
        return _MemoryHandle(self, path, self._inode(path), read_only=True)

    def read_file(self, path: str) -> bytes:
        return bytes(self._inode(path).data)

    def write_file(self, path: str, data: bytes, *, fsync: bool) -> None:
        path = self._norm(path)
        self.check_write(path)
        if fsync:
            self.check_fsync(path)
        with self.lock:
            if path in self._dirs:
                raise IsADirectoryError(path)
            inode = self._files.get(path)
            if inode is None:
                self._parent(path)
                inode = self._new_inode()
                self._files[path] = inode
            inode.data = bytearray(data)
            inode.modified_ms = self._wall_clock()
            if fsync:
                inode.durable = bytes(data)
                self.fsync_count += 1

    def exists(self, path: str) -> bool:
        path = self._norm(path)
        return path in self._files or path in self._dirs

    def is_dir(self, path: str) -> bool:
        return self._norm(path) in self._dirs

    def list_dir(self, path: str) -> list[str]:
        path = self._norm(path)
        if path not in self._dirs:
            raise FileNotFoundError(f"no such directory: {path}")
        names = {posixpath.basename(p) for p in self._files if posixpath.dirname(p) == path}
        names.update(posixpath.basename(d) for d in self._dirs if d != path and posixpath.dirname(d) == path)
        return sorted(names)

    def make_dirs(self, path: str) -> None:
        path = self._norm(path)
        with self.lock:
            if path in self._files:
                raise FileExistsError(path)
            while path not in self._dirs:
                self._dirs.add(path)
                path = posixpath.dirname(path)

    def rename(self, source: str, target: str) -> None:
        source, target = self._norm(source), self._norm(target)
        with self.lock:
            if source in self._dirs:
                if target in self._dirs or target in self._files:
                    raise FileExistsError(target)
                self._parent(target)
                moved = {d for d in self._dirs if d == source or d.startswith(source + "/")}
                for directory in moved:
                    self._dirs.discard(directory)
                    self._dirs.add(target + directory[len(source) :])
                for path in [p for p in self._files if p.startswith(source + "/")]:
                    self._files[target + path[len(source) :]] = self._files.pop(path)
                for path in [p for p in self._durable_files if p.startswith(source + "/")]:
                    # Directory renames are treated as durable at once, like directory creation.
                    self._durable_files[target + path[len(source) :]] = self._durable_files.pop(path)
                return
            inode = self._files.get(source)
            if inode is None:
                raise FileNotFoundError(f"no such file: {source}")
            self._parent(target)
            if target in self._dirs:
                raise IsADirectoryError(target)
            self._files[target] = self._files.pop(source)

    def delete_file(self, path: str) -> None:
        path = self._norm(path)
        with self.lock:
            if path not in self._files:
                raise FileNotFoundError(f"no such file: {path}")
            del self._files[path]

    def delete_dir(self, path: str) -> None:
        path = self._norm(path)
        with self.lock:
            if path not in self._dirs:
                raise FileNotFoundError(f"no such directory: {path}")
            if any(posixpath.dirname(p) == path for p in (*self._files, *self._dirs) if p != path):
                raise OSError(f"directory not empty: {path}")
            self._dirs.discard(path)
            for durable in [p for p in self._durable_files if posixpath.dirname(p) == path]:
                del self._durable_files[durable]

    def file_size(self, path: str) -> int:
        return len(self._inode(path).data)

    def modified_ms(self, path: str) -> int:
        return self._inode(path).modified_ms

    def fsync_path(self, path: str) -> None:
        inode = self._inode(path)
        self.check_fsync(path)
        with self.lock:
            inode.durable = bytes(inode.data)
            self.fsync_count += 1

    def fsync_dir(self, path: str) -> None:
        path = self._norm(path)
        self.check_fsync(path)
        with self.lock:
            if path not in self._dirs:
                raise FileNotFoundError(f"no such directory: {path}")
            for durable in [p for p in self._durable_files if posixpath.dirname(p) == path]:
                del self._durable_files[durable]
            for visible, inode in self._files.items():
                if posixpath.dirname(visible) == path:
                    self._durable_files[visible] = inode
            self.fsync_count += 1

    # ------------------------------------------------------------------------ fault injection

    def inject_fault(self, fault: DiskFault) -> None:
        self.fault = fault

    def clear_fault(self) -> None:
        self.fault = None

    def check_write(self, path: str) -> None:
        if self.fault is DiskFault.WRITE_ERROR or self.fault is DiskFault.PROCESS_DEAD:
            raise OSError(errno.EIO, "Input/output error (injected)", path)
        if self.fault is DiskFault.DISK_FULL:
            raise OSError(errno.ENOSPC, "No space left on device (injected)", path)

    def check_fsync(self, path: str) -> None:
        if self.fault is DiskFault.FSYNC_ERROR or self.fault is DiskFault.PROCESS_DEAD:
            raise OSError(errno.EIO, "Input/output error on fsync (injected)", path)

    def process_exit(self) -> None:
        """The process using this file system died (SIGKILL): its handles become unusable, and
        every byte it wrote stays, durable or not, as in the OS page cache."""
        with self.lock:
            renewed: dict[int, _Inode] = {}

            def renew(old: _Inode) -> _Inode:
                inode = renewed.get(id(old))
                if inode is None:
                    inode = renewed[id(old)] = _Inode(old.modified_ms)
                    inode.data = bytearray(old.data)
                    inode.durable = old.durable
                return inode

            self._files = {path: renew(inode) for path, inode in self._files.items()}
            self._durable_files = {path: renew(inode) for path, inode in self._durable_files.items()}
            self._live = {id(inode) for inode in renewed.values()}

    def unsynced_bytes(self) -> int:
        """Bytes a crash would lose from files that would survive it (for tests' assertions)."""
        lost = 0
        for inode in self._durable_files.values():
            lost += max(len(inode.data) - len(inode.durable), 0)
        return lost

    def crash(self, torn_tail: TornTail | None = None) -> None:
        """Simulate a power loss: keep only what was fsynced (see the module docstring).
        Every open handle becomes unusable."""
        with self.lock:
            survivors: dict[str, _Inode] = {}
            for path, old in self._durable_files.items():
                inode = _Inode(old.modified_ms)
                kept = old.durable
                if (
                    torn_tail is not None
                    and len(old.data) > len(old.durable)
                    and old.data.startswith(old.durable)
                ):
                    length = torn_tail(path, len(old.durable), len(old.data))
                    length = min(max(length, len(old.durable)), len(old.data))
                    kept = bytes(old.data[:length])
                inode.data = bytearray(kept)
                inode.durable = kept
                survivors[path] = inode
            self._live = {id(inode) for inode in survivors.values()}
            self._files = dict(survivors)
            self._durable_files = dict(survivors)
