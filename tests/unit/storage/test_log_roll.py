"""Rolling (docs/log.md §5) beyond scenarios 31 and 35, and the write-before-count rule."""

from __future__ import annotations

import ast
import random
from pathlib import Path

from runtime.storage.config import LogConfig
from runtime.storage.fs import FileHandle, MemoryFileSystem
from runtime.storage.log import Log
from runtime.storage.segment import segment_file_name
from tests.unit.storage.helpers import BASE_TIME_MS, batch, open_log, read_all


def test_a_full_offset_index_rolls_the_segment() -> None:
    log = open_log(MemoryFileSystem(), config=LogConfig(segment_index_bytes=24, index_interval_bytes=1))
    for _ in range(8):
        log.append_as_leader(batch(b"x"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    # Entries are made from the second append on; 3 entries fill the index, the next append rolls.
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert [s.offset_index.entries for s in log.segments] == [3, 3]


def test_an_offset_that_does_not_fit_the_segment_rolls_to_it() -> None:
    log = open_log(MemoryFileSystem())
    log.append_as_follower(batch(b"a", base_offset=0, leader_epoch=0), now_ms=0)
    far = 2**31 + 10
    log.append_as_follower(batch(b"b", base_offset=far, leader_epoch=0), now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, far]
    assert read_all(log, far) == [(far, b"b")]
    assert log.fs.exists(f"{log.directory}/{segment_file_name(far, '.log')}")


def test_roll_jitter_is_drawn_per_segment_from_the_given_random() -> None:
    config = LogConfig(segment_ms=1000, segment_jitter_ms=400)
    jitters = {
        Log.open(
            MemoryFileSystem(), "/l/t-0", config, now_ms=0, rng=random.Random(seed)
        ).active_segment.roll_jitter_ms
        for seed in range(20)
    }
    assert all(0 <= j < 400 for j in jitters)
    assert len(jitters) > 5
    log = Log.open(MemoryFileSystem(), "/l/t-0", config, now_ms=0, rng=random.Random(3))
    jitter = log.active_segment.roll_jitter_ms
    log.append_as_leader(batch(b"a", timestamp=-1), 0, now_ms=0, wall_clock_ms=0)
    log.append_as_leader(batch(b"b", timestamp=-1), 0, now_ms=1000 - jitter, wall_clock_ms=0)
    assert len(log.segments) == 1
    log.append_as_leader(batch(b"c", timestamp=-1), 0, now_ms=1001 - jitter, wall_clock_ms=0)
    assert len(log.segments) == 2


def test_rolling_to_the_offset_of_the_empty_active_segment_replaces_it() -> None:
    log = open_log(MemoryFileSystem())
    log.roll(now_ms=0)
    log.roll(now_ms=0)
    assert [s.base_offset for s in log.segments] == [0]
    log.append_as_leader(batch(b"a"), 0, now_ms=0, wall_clock_ms=0)
    log.roll(now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 1]


class _WatchingFileSystem(MemoryFileSystem):
    """Records the log end offset the log reports at the moment each write reaches the 'OS'."""

    def __init__(self) -> None:
        super().__init__()
        self.log: Log | None = None
        self.seen: list[tuple[int, int]] = []

    def open(self, path: str) -> FileHandle:
        handle = super().open(path)
        if not path.endswith(".log"):
            return handle
        fs = self

        class Watching:
            def __getattr__(self, name: str) -> object:
                return getattr(handle, name)

            def write(self, data: bytes | bytearray | memoryview) -> None:
                assert fs.log is not None
                fs.seen.append((fs.log.log_end_offset, len(data)))
                handle.write(data)

            def writev(self, buffers: list[bytes | bytearray | memoryview], total: int | None = None) -> None:
                assert fs.log is not None
                fs.seen.append((fs.log.log_end_offset, sum(len(b) for b in buffers)))
                handle.writev(buffers, total)

        return Watching()  # type: ignore[return-value]


def test_bytes_reach_the_os_before_the_log_end_offset_moves() -> None:
    fs = _WatchingFileSystem()
    log = open_log(fs)
    fs.log = log
    log.append_as_leader(batch(b"a", b"b"), 0, now_ms=0, wall_clock_ms=0)
    log.append_as_follower(batch(b"c", base_offset=2, leader_epoch=0), now_ms=0)
    assert [end for end, _size in fs.seen] == [0, 2]  # each write happened while the old LEO stood
    assert log.log_end_offset == 3


def test_only_os_fs_touches_the_real_file_system() -> None:
    """No module of runtime/storage but os_fs.py imports os/io/shutil/pathlib/tempfile or calls open()."""
    banned = {"os", "io", "shutil", "pathlib", "tempfile", "mmap"}
    storage = Path(__file__).resolve().parents[3] / "runtime" / "storage"
    offenders: list[str] = []
    for path in sorted(storage.glob("*.py")):
        if path.name == "os_fs.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                offenders += [
                    f"{path.name}: import {a.name}" for a in node.names if a.name.split(".")[0] in banned
                ]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in banned:
                offenders.append(f"{path.name}: from {node.module}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                offenders.append(f"{path.name}: open()")
    assert offenders == []


def test_a_config_change_applies_to_later_appends() -> None:
    log = open_log(MemoryFileSystem())
    one = batch(b"x" * 20)
    log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=0)
    log.update_config(LogConfig(segment_bytes=len(one) * 2, max_message_bytes=len(one)))
    log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=0)
    log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.config.segment_bytes == len(one) * 2
