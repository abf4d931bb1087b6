"""One contract, two file systems: MemoryFileSystem must behave like OsFileSystem on real files.

Every test in the first part runs against both (real files in ``tmp_path``). The second part pins
down what only the memory file system can do, simulate a power loss: ``crash()`` must drop exactly
the bytes and directory entries that were never fsynced, and nothing else.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.storage.fs import FileSystem, MemoryFileSystem
from runtime.storage.os_fs import OsFileSystem


@dataclass
class Root:
    fs: FileSystem
    path: str

    def __call__(self, *names: str) -> str:
        return "/".join([self.path, *names])


@pytest.fixture(params=["memory", "os"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Root:
    if request.param == "memory":
        fs: FileSystem = MemoryFileSystem()
        path = "/contract"
    else:
        fs = OsFileSystem()
        path = str(tmp_path / "contract")
    fs.make_dirs(path)
    return Root(fs, path)


# ----------------------------------------------------------------------------------- handles


def test_open_creates_an_empty_file_and_appends(root: Root) -> None:
    handle = root.fs.open(root("a.log"))
    assert handle.size == 0
    assert root.fs.exists(root("a.log"))
    handle.write(b"hello ")
    handle.write(memoryview(b"world"))
    handle.writev([b"!", bytearray(b"?"), memoryview(b"..")[:1]])
    assert handle.size == 14
    assert handle.pread(5, 6) == b"world"
    assert handle.pread(100, 11) == b"!?."
    assert handle.pread(10, 50) == b""
    assert root.fs.read_file(root("a.log")) == b"hello world!?."
    handle.close()
    handle.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        handle.write(b"x")


def test_reopening_keeps_the_content_and_appends_at_the_end(root: Root) -> None:
    first = root.fs.open(root("a.log"))
    first.write(b"abc")
    first.close()
    second = root.fs.open(root("a.log"))
    assert second.size == 3
    second.write(b"def")
    assert root.fs.read_file(root("a.log")) == b"abcdef"
    second.close()


def test_truncate_shrinks_and_appends_continue_at_the_new_end(root: Root) -> None:
    handle = root.fs.open(root("a.log"))
    handle.write(b"0123456789")
    handle.truncate(4)
    assert handle.size == 4
    handle.truncate(40)  # never grows
    assert handle.size == 4
    handle.write(b"xy")
    assert root.fs.read_file(root("a.log")) == b"0123xy"
    assert root.fs.file_size(root("a.log")) == 6
    handle.close()


def test_large_and_many_buffer_gathering_writes(root: Root) -> None:
    handle = root.fs.open(root("big.log"))
    buffers = [bytes([i % 256]) * 3 for i in range(3000)]  # more than IOV_MAX buffers
    handle.writev(buffers)
    handle.write(b"z" * (1 << 20))
    assert handle.size == 9000 + (1 << 20)
    assert root.fs.read_file(root("big.log")) == b"".join(buffers) + b"z" * (1 << 20)
    handle.close()


def test_read_only_handles(root: Root) -> None:
    with pytest.raises(FileNotFoundError):
        root.fs.open_read_only(root("missing.log"))
    root.fs.write_file(root("a.log"), b"data", fsync=False)
    handle = root.fs.open_read_only(root("a.log"))
    assert (handle.size, handle.pread(10, 0)) == (4, b"data")
    with pytest.raises(OSError):
        handle.write(b"x")
    handle.close()


def test_a_handle_follows_its_file_across_rename_and_delete(root: Root) -> None:
    handle = root.fs.open(root("a.log"))
    handle.write(b"abc")
    root.fs.rename(root("a.log"), root("b.log"))
    handle.write(b"d")
    assert root.fs.read_file(root("b.log")) == b"abcd"
    root.fs.delete_file(root("b.log"))
    handle.write(b"e")  # an unlinked file stays usable through open handles
    assert handle.pread(10, 0) == b"abcde"
    assert not root.fs.exists(root("b.log"))
    handle.close()


# ------------------------------------------------------------------------------ whole files


def test_write_file_creates_or_replaces(root: Root) -> None:
    root.fs.write_file(root("f"), b"first", fsync=True)
    root.fs.write_file(root("f"), b"2nd", fsync=False)
    assert root.fs.read_file(root("f")) == b"2nd"
    with pytest.raises(FileNotFoundError):
        root.fs.read_file(root("nope"))
    with pytest.raises(FileNotFoundError):
        root.fs.write_file(root("no-dir", "f"), b"x", fsync=False)


def test_directories_listing_and_deletion(root: Root) -> None:
    root.fs.make_dirs(root("t-0", "deep"))
    root.fs.make_dirs(root("t-0", "deep"))  # idempotent
    root.fs.write_file(root("t-0", "b"), b"", fsync=False)
    root.fs.write_file(root("t-0", "a"), b"", fsync=False)
    assert root.fs.list_dir(root("t-0")) == ["a", "b", "deep"]
    assert root.fs.is_dir(root("t-0", "deep"))
    assert not root.fs.is_dir(root("t-0", "a"))
    assert root.fs.exists(root("t-0", "deep"))
    with pytest.raises(FileNotFoundError):
        root.fs.list_dir(root("nope"))
    with pytest.raises(OSError):
        root.fs.delete_dir(root("t-0"))
    root.fs.delete_dir(root("t-0", "deep"))
    root.fs.delete_file(root("t-0", "a"))
    with pytest.raises(FileNotFoundError):
        root.fs.delete_file(root("t-0", "a"))
    assert root.fs.list_dir(root("t-0")) == ["b"]


def test_rename_replaces_the_target_atomically(root: Root) -> None:
    root.fs.write_file(root("new.tmp"), b"new", fsync=True)
    root.fs.write_file(root("cp"), b"old", fsync=True)
    root.fs.rename(root("new.tmp"), root("cp"))
    assert root.fs.read_file(root("cp")) == b"new"
    assert not root.fs.exists(root("new.tmp"))
    with pytest.raises(FileNotFoundError):
        root.fs.rename(root("new.tmp"), root("cp"))


def test_directories_can_be_renamed_with_their_files(root: Root) -> None:
    root.fs.make_dirs(root("t-0"))
    root.fs.write_file(root("t-0", "x.log"), b"x", fsync=True)
    root.fs.rename(root("t-0"), root("t-0.abc-delete"))
    assert root.fs.read_file(root("t-0.abc-delete", "x.log")) == b"x"
    assert not root.fs.exists(root("t-0"))


def test_fsync_by_handle_by_path_and_of_a_directory(root: Root) -> None:
    handle = root.fs.open(root("a.log"))
    handle.write(b"abc")
    handle.fsync()
    root.fs.fsync_path(root("a.log"))
    root.fs.fsync_dir(root.path)
    with pytest.raises(FileNotFoundError):
        root.fs.fsync_path(root("missing"))
    assert isinstance(root.fs.modified_ms(root("a.log")), int)
    handle.close()


# ----------------------------------------------------------------- the memory file system's crash


def _memory() -> MemoryFileSystem:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    return fs


def test_a_crash_drops_exactly_the_unsynced_bytes() -> None:
    fs = _memory()
    handle = fs.open("/d/a.log")
    handle.write(b"durable")
    handle.fsync()
    fs.fsync_dir("/d")
    handle.write(b"+volatile")
    assert fs.unsynced_bytes() == len(b"+volatile")
    fs.crash()
    assert fs.read_file("/d/a.log") == b"durable"
    assert fs.unsynced_bytes() == 0
    with pytest.raises(OSError, match="invalidated by a simulated crash"):
        handle.write(b"x")


def test_fsync_path_is_as_durable_as_fsync() -> None:
    fs = _memory()
    handle = fs.open("/d/a.log")
    handle.write(b"abc")
    fs.fsync_path("/d/a.log")
    fs.fsync_dir("/d")
    handle.write(b"def")
    fs.crash()
    assert fs.read_file("/d/a.log") == b"abc"


def test_a_file_whose_directory_entry_was_not_synced_vanishes() -> None:
    fs = _memory()
    fs.write_file("/d/a", b"synced data, unsynced name", fsync=True)
    fs.crash()
    assert not fs.exists("/d/a")


def test_a_synced_name_with_unsynced_data_survives_empty() -> None:
    fs = _memory()
    fs.open("/d/a").write(b"data")
    fs.fsync_dir("/d")
    fs.crash()
    assert fs.read_file("/d/a") == b""


def test_unsynced_renames_and_deletions_are_undone() -> None:
    fs = _memory()
    fs.write_file("/d/old", b"1", fsync=True)
    fs.write_file("/d/gone", b"2", fsync=True)
    fs.fsync_dir("/d")
    fs.rename("/d/old", "/d/new")
    fs.delete_file("/d/gone")
    fs.crash()
    assert fs.list_dir("/d") == ["gone", "old"]
    fs.rename("/d/old", "/d/new")
    fs.fsync_dir("/d")
    fs.crash()
    assert fs.list_dir("/d") == ["gone", "new"]


def test_an_unsynced_truncation_is_undone() -> None:
    fs = _memory()
    handle = fs.open("/d/a")
    handle.write(b"0123456789")
    handle.fsync()
    fs.fsync_dir("/d")
    handle.truncate(3)
    fs.crash()
    assert fs.read_file("/d/a") == b"0123456789"


@pytest.mark.parametrize("seed", range(5))
def test_a_torn_tail_keeps_a_prefix_of_the_unsynced_append(seed: int) -> None:
    rng = random.Random(seed)
    fs = _memory()
    handle = fs.open("/d/a")
    handle.write(b"sync")
    handle.fsync()
    fs.fsync_dir("/d")
    handle.write(b"ABCDEFGH")
    kept: list[int] = []

    def torn(path: str, durable: int, visible: int) -> int:
        assert (path, durable, visible) == ("/d/a", 4, 12)
        kept.append(rng.randrange(-5, 20))  # out-of-range answers are clamped
        return kept[-1]

    fs.crash(torn)
    expected = min(max(kept[0], 4), 12)
    assert fs.read_file("/d/a") == b"syncABCDEFGH"[:expected]
