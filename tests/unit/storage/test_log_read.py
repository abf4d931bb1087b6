"""Reads (docs/log.md §3): whole batches, bounds, min-one-message, out of range."""

from __future__ import annotations

import pytest

from runtime.storage.config import LogConfig
from runtime.storage.errors import OffsetOutOfRangeError
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.log import Log
from runtime.storage.records import iterate_batches
from tests.unit.storage.helpers import BASE_TIME_MS, batch, open_log


def _log_with_batches(config: LogConfig | None = None) -> Log:
    """Batches of 3 records: offsets 0-2, 3-5, ..., 27-29."""
    log = open_log(MemoryFileSystem(), config=config)
    for i in range(10):
        log.append_as_leader(
            batch(b"a%d" % i, b"b%d" % i, b"c%d" % i), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS
        )
    return log


def _bases(data: bytes) -> list[int]:
    return [b.header.base_offset for b in iterate_batches(data)]


def test_a_read_starts_at_the_batch_holding_the_offset() -> None:
    log = _log_with_batches()
    result = log.read(4, 1 << 20)
    assert _bases(result.records) == [3, 6, 9, 12, 15, 18, 21, 24, 27]
    assert result.fetch_offset_metadata.message_offset == 4
    assert result.log_end_offset == 30


def test_reading_at_the_log_end_offset_is_empty_and_beyond_is_out_of_range() -> None:
    log = _log_with_batches()
    empty = log.read(30, 1000)
    assert empty.records == b""
    assert empty.fetch_offset_metadata == log.log_end_offset_metadata
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 31 .* range 0 to 30") as raised:
        log.read(31, 1000)
    assert raised.value.error_name == "OFFSET_OUT_OF_RANGE"


def test_reading_below_the_log_start_offset_is_out_of_range() -> None:
    log = _log_with_batches()
    log.maybe_increment_high_watermark(30)
    log.maybe_increment_log_start_offset(9)
    with pytest.raises(OffsetOutOfRangeError, match="offset 8"):
        log.read(8, 1000)
    assert _bases(log.read(9, 1 << 20).records)[0] == 9


def test_max_bytes_may_cut_a_batch_and_min_one_message_returns_at_least_one() -> None:
    log = _log_with_batches()
    size = len(batch(b"a0", b"b0", b"c0"))
    partial = log.read(0, size + 10)
    assert len(partial.records) == size + 10  # one whole batch and the start of the next
    assert _bases(partial.records) == [0]
    tiny = log.read(0, 5)
    assert len(tiny.records) == size
    assert tiny.first_entry_incomplete is False
    strict = log.read(0, 5, min_one_message=False)
    assert len(strict.records) == 5
    assert strict.first_entry_incomplete
    assert log.read(0, 0, min_one_message=False).records == b""


def test_max_offset_bounds_a_consumer_read_to_the_high_watermark() -> None:
    log = _log_with_batches()
    log.maybe_increment_high_watermark(9)
    assert _bases(log.read(0, 1 << 20, max_offset=9).records) == [0, 3, 6]
    assert log.read(9, 1 << 20, max_offset=9).records == b""
    assert log.read(20, 1 << 20, max_offset=9).records == b""  # between HW and LEO: empty, no error
    with pytest.raises(OffsetOutOfRangeError):
        log.read(31, 1 << 20, max_offset=9)


def test_reads_cross_segments() -> None:
    log = _log_with_batches(LogConfig(segment_bytes=300))
    assert len(log.segments) > 3
    seen: list[int] = []
    offset = 0
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        bases = _bases(result.records)
        seen.extend(bases)
        offset = bases[-1] + 3
    assert seen == list(range(0, 30, 3))


def test_a_read_past_a_gap_moves_to_the_next_segment() -> None:
    log = open_log(MemoryFileSystem())
    log.append_as_follower(batch(b"a", base_offset=0, leader_epoch=0), now_ms=0)
    log.roll(now_ms=0, expected_next_offset=10)
    log.append_as_follower(batch(b"b", base_offset=10, leader_epoch=0), now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert _bases(log.read(5, 1000).records) == [10]


def test_offset_metadata_points_at_the_batch_position() -> None:
    log = _log_with_batches(LogConfig(index_interval_bytes=1))
    size = len(batch(b"a0", b"b0", b"c0"))
    metadata = log.convert_to_offset_metadata(7)
    assert (metadata.message_offset, metadata.segment_base_offset, metadata.relative_position_in_segment) == (
        7, 0, 2 * size,
    )  # fmt: skip
