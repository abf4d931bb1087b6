"""Retention by size and by log start offset; .deleted files and their delay."""

from __future__ import annotations

from runtime.storage.config import LogConfig
from runtime.storage.fs import MemoryFileSystem
from tests.unit.storage.helpers import BASE_TIME_MS, batch, open_log, read_all


def test_size_retention_deletes_the_oldest_segments_that_fit_the_excess() -> None:
    one = batch(b"x" * 30)
    config = LogConfig(segment_bytes=len(one) * 4, retention_bytes=len(one) * 6, retention_ms=-1)
    log = open_log(MemoryFileSystem(), config=config)
    for _ in range(20):
        log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    assert len(log.segments) == 5
    log.update_high_watermark(20)
    # 20 batches, limit 6: excess 14 -> three 4-batch segments (12) fit it, a fourth would not.
    assert log.delete_old_segments(now_ms=0, wall_clock_ms=BASE_TIME_MS) == 3
    assert log.log_start_offset == 12
    assert [offset for offset, _ in read_all(log)] == list(range(12, 20))


def test_nothing_at_or_above_the_high_watermark_is_deleted() -> None:
    one = batch(b"x")
    log = open_log(MemoryFileSystem(), config=LogConfig(segment_bytes=len(one) * 2, retention_ms=0))
    for _ in range(10):
        log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    log.update_high_watermark(5)
    log.delete_old_segments(now_ms=0, wall_clock_ms=BASE_TIME_MS + 10_000)
    assert log.log_start_offset == 4
    assert log.segments[0].base_offset == 4


def test_segments_below_the_log_start_offset_go_even_without_delete_policy() -> None:
    one = batch(b"x")
    config = LogConfig(segment_bytes=len(one) * 2, cleanup_policy="compact", retention_ms=0)
    log = open_log(MemoryFileSystem(), config=config)
    for _ in range(10):
        log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    log.update_high_watermark(10)
    assert log.delete_old_segments(now_ms=0, wall_clock_ms=BASE_TIME_MS * 2) == 0  # compact: no time rule
    log.maybe_increment_log_start_offset(7)
    assert log.delete_old_segments(now_ms=0, wall_clock_ms=0) == 3
    assert [s.base_offset for s in log.segments] == [6, 8]
    assert log.log_start_offset == 7


def test_deleted_segments_are_renamed_then_removed_after_the_delay() -> None:
    fs = MemoryFileSystem()
    one = batch(b"x")
    log = open_log(
        fs, config=LogConfig(segment_bytes=len(one) * 2, retention_ms=0, file_delete_delay_ms=60_000)
    )
    for _ in range(4):
        log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    log.update_high_watermark(4)
    log.delete_old_segments(now_ms=1000, wall_clock_ms=BASE_TIME_MS + 5)
    names = fs.list_dir(log.directory)
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000000.log" not in names
    assert log.delete_expired_files(60_999) == 0
    assert log.delete_expired_files(61_000) == 6
    assert not any(name.endswith(".deleted") for name in fs.list_dir(log.directory))


def test_when_every_segment_expires_a_new_empty_one_is_rolled() -> None:
    one = batch(b"x")
    log = open_log(MemoryFileSystem(), config=LogConfig(segment_bytes=len(one) * 2, retention_ms=0))
    for _ in range(5):
        log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    log.update_high_watermark(5)
    log.delete_old_segments(now_ms=0, wall_clock_ms=BASE_TIME_MS * 2)
    assert [(s.base_offset, s.size) for s in log.segments] == [(5, 0)]
    assert (log.log_start_offset, log.log_end_offset) == (5, 5)
    log.append_as_leader(one, 0, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    assert read_all(log) == [(5, b"x")]
