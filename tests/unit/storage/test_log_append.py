"""Appends: leader offset assignment and stamping, compression paths, follower checks, errors."""

from __future__ import annotations

import struct

import crc32c
import pytest

from runtime.storage.compression import CompressionType
from runtime.storage.config import CompressionConfig, FlushPolicy, LogConfig, RecordsValidation
from runtime.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from runtime.storage.fs import MemoryFileSystem
from runtime.storage.log import Log
from runtime.storage.record_builder import SimpleRecord, build_batch, encode_record
from runtime.storage.records import HEADER_STRUCT, TimestampType, iterate_batches, read_header
from tests.unit.storage.helpers import BASE_TIME_MS, batch, decode_all, open_log


def _log(config: LogConfig | None = None) -> Log:
    return open_log(MemoryFileSystem(), config=config)


def _stored(log: Log) -> bytes:
    return log.read(log.log_start_offset, 1 << 30).records


def test_the_leader_assigns_offsets_from_the_log_end_offset_and_stamps_the_epoch() -> None:
    log = _log()
    producer_batch = batch(b"a", b"b", b"c")
    first = log.append_as_leader(producer_batch, 4, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    second = log.append_as_leader(producer_batch, 5, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    assert (first.first_offset, first.last_offset, first.record_count) == (0, 2, 3)
    assert (second.first_offset, second.last_offset) == (3, 5)
    assert log.log_end_offset == 6
    stored = list(iterate_batches(_stored(log)))
    assert [(b.header.base_offset, b.header.partition_leader_epoch) for b in stored] == [(0, 4), (3, 5)]
    for stored_batch in stored:
        stored_batch.ensure_valid()
        # CreateTime: only baseOffset and the epoch changed, both outside the CRC.
        assert stored_batch.header.crc == read_header(producer_batch, 0).crc
    assert [(r.offset, r.value) for r in decode_all(_stored(log))] == [
        (0, b"a"), (1, b"b"), (2, b"c"), (3, b"a"), (4, b"b"), (5, b"c"),
    ]  # fmt: skip
    assert log.leader_epoch_cache.end_offset_for(4) == (4, 3)


def test_several_uncompressed_batches_in_one_append_are_stamped_in_place() -> None:
    log = _log()
    data = batch(b"a", b"b") + batch(b"c")
    info = log.append_as_leader(data, 1, now_ms=0, wall_clock_ms=BASE_TIME_MS)
    assert (info.first_offset, info.last_offset, info.valid_bytes) == (0, 2, len(data))
    assert [(b.header.base_offset, b.header.last_offset) for b in iterate_batches(_stored(log))] == [
        (0, 1),
        (2, 2),
    ]


def test_log_append_time_stamps_now_and_recomputes_the_crc() -> None:
    log = _log(LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME))
    info = log.append_as_leader(batch(b"a", b"b"), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS + 999)
    assert info.log_append_time_ms == BASE_TIME_MS + 999
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (BASE_TIME_MS + 999, 1)
    (stored,) = list(iterate_batches(_stored(log)))
    stored.ensure_valid()
    assert stored.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert stored.header.max_timestamp == BASE_TIME_MS + 999


def test_create_time_reports_the_max_timestamp() -> None:
    log = _log()
    info = log.append_as_leader(batch(b"a", b"b", b"c"), 0, now_ms=0, wall_clock_ms=0)
    assert (info.max_timestamp, info.offset_of_max_timestamp, info.log_append_time_ms) == (
        BASE_TIME_MS + 2,
        2,
        -1,
    )


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_compressed_batches_with_the_same_codec_are_kept_in_place(codec: CompressionType) -> None:
    log = _log()
    log.append_as_leader(batch(b"x"), 0, now_ms=0, wall_clock_ms=0)
    producer_batch = batch(b"a" * 100, b"b" * 100, compression=codec)
    info = log.append_as_leader(producer_batch, 2, now_ms=0, wall_clock_ms=0)
    assert (info.first_offset, info.last_offset, info.target_codec) == (1, 2, codec)
    stored = list(iterate_batches(_stored(log)))[1]
    stored.ensure_valid()
    assert stored.header.compression == codec
    assert bytes(stored.data[61:]) == producer_batch[61:]  # the compressed blob is untouched
    assert [(r.offset, r.value) for r in stored.records()] == [(1, b"a" * 100), (2, b"b" * 100)]


def test_a_different_topic_codec_rebuilds_one_batch() -> None:
    log = _log(LogConfig(compression_type=CompressionConfig.ZSTD))
    data = batch(
        b"a", b"b", compression=CompressionType.GZIP, producer_id=3, producer_epoch=1, base_sequence=0
    )
    info = log.append_as_leader(data, 7, now_ms=0, wall_clock_ms=0)
    assert info.target_codec == CompressionType.ZSTD
    (stored,) = list(iterate_batches(_stored(log)))
    stored.ensure_valid()
    header = stored.header
    assert (header.compression, header.partition_leader_epoch, header.producer_id, header.base_sequence) == (
        CompressionType.ZSTD, 7, 3, 0,
    )  # fmt: skip
    assert [(r.offset, r.value) for r in stored.records()] == [(0, b"a"), (1, b"b")]


def test_uncompressed_input_on_a_compressed_topic_is_compressed() -> None:
    log = _log(LogConfig(compression_type=CompressionConfig.GZIP))
    log.append_as_leader(batch(b"a" * 50, b"b") + batch(b"c"), 0, now_ms=0, wall_clock_ms=0)
    (stored,) = list(iterate_batches(_stored(log)))
    assert stored.header.compression == CompressionType.GZIP
    assert [r.value for r in stored.records()] == [b"a" * 50, b"b", b"c"]


def _raw_batch(offset_deltas: list[int], codec: CompressionType = CompressionType.NONE) -> bytes:
    area = bytearray()
    for delta in offset_deltas:
        encode_record(area, delta, 0, None, b"payload-" * 8)
    from runtime.storage.compression import compress

    body = compress(codec, area)
    size = 61 + len(body)
    buffer = bytearray(size)
    count = len(offset_deltas)
    HEADER_STRUCT.pack_into(buffer, 0, 0, size - 12, -1, 2, 0, int(codec), count - 1, 1, 1, -1, -1, -1, count)
    buffer[61:] = body
    struct.pack_into(">I", buffer, 17, crc32c.crc32c(buffer[21:]))
    return bytes(buffer)


def test_compressed_inner_offsets_must_be_consecutive() -> None:
    with pytest.raises(InvalidRecordError, match="has offset delta 2, expected 1") as raised:
        _log().append_as_leader(_raw_batch([0, 2, 3], CompressionType.GZIP), 0, now_ms=0, wall_clock_ms=0)
    assert raised.value.error_name == "INVALID_RECORD"


def test_full_record_validation_checks_uncompressed_offset_deltas_too() -> None:
    data = _raw_batch([0, 0, 1])
    _log().append_as_leader(data, 0, now_ms=0, wall_clock_ms=0)  # header-level validation accepts it
    strict = _log(LogConfig(records_validation=RecordsValidation.FULL))
    with pytest.raises(InvalidRecordError, match=r"record 1 .* has offset delta 0, expected 1"):
        strict.append_as_leader(data, 0, now_ms=0, wall_clock_ms=0)


def test_a_batch_over_max_message_bytes_is_message_too_large() -> None:
    log = _log(LogConfig(max_message_bytes=100))
    data = batch(b"x" * 200)
    with pytest.raises(
        RecordTooLargeError, match=f"is {len(data)} bytes, larger than max.message.bytes 100"
    ) as raised:
        log.append_as_leader(data, 0, now_ms=0, wall_clock_ms=0)
    assert raised.value.error_name == "MESSAGE_TOO_LARGE"
    with pytest.raises(RecordTooLargeError):
        log.append_as_follower(batch(b"x" * 200), now_ms=0)
    assert log.log_end_offset == 0


def test_an_append_over_segment_bytes_is_record_list_too_large() -> None:
    log = _log(LogConfig(segment_bytes=150))
    with pytest.raises(RecordBatchTooLargeError, match=r"larger than segment\.bytes 150") as raised:
        log.append_as_follower(batch(b"x" * 40) + batch(b"y" * 40, base_offset=1), now_ms=0)
    assert raised.value.error_name == "RECORD_LIST_TOO_LARGE"


def test_a_bad_crc_is_corrupt_message_and_nothing_is_written() -> None:
    log = _log()
    data = bytearray(batch(b"hello"))
    data[-2] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="stored CRC") as raised:
        log.append_as_leader(bytes(data), 0, now_ms=0, wall_clock_ms=0)
    assert raised.value.error_name == "CORRUPT_MESSAGE"
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bytes(data), now_ms=0)
    assert log.size_in_bytes == 0


def test_a_bad_magic_or_length_is_corrupt() -> None:
    data = bytearray(batch(b"x"))
    data[16] = 0
    with pytest.raises(CorruptRecordError, match="magic 0"):
        _log().append_as_leader(bytes(data), 0, now_ms=0, wall_clock_ms=0)
    data = bytearray(batch(b"x"))
    struct.pack_into(">i", data, 8, 3)
    with pytest.raises(CorruptRecordError, match="declares length 3"):
        _log().append_as_follower(bytes(data), now_ms=0)


def test_a_trailing_partial_batch_is_trimmed() -> None:
    log = _log()
    whole = batch(b"a")
    info = log.append_as_leader(whole + batch(b"b")[:30], 0, now_ms=0, wall_clock_ms=0)
    assert (info.valid_bytes, log.log_end_offset, log.size_in_bytes) == (len(whole), 1, len(whole))
    nothing = log.append_as_leader(batch(b"c")[:20], 0, now_ms=0, wall_clock_ms=0)
    assert nothing.first_offset == -1
    assert log.log_end_offset == 1


@pytest.mark.parametrize(
    ("mutate", "error", "message"),
    [
        (lambda d: struct.pack_into(">q", d, 0, 5), InvalidRecordError, "should be 0, but it is 5"),
        (
            lambda d: struct.pack_into(">i", d, 57, 3),
            InvalidRecordError,
            "has 3 records but its offset delta implies 2",
        ),
        (
            lambda d: struct.pack_into(">h", d, 21, 0x20),
            InvalidRecordError,
            "not allowed to write control records",
        ),
        (
            lambda d: struct.pack_into(">h", d, 21, 0x08),
            InvalidTimestampError,
            "should not set the timestamp type",
        ),
        (
            lambda d: struct.pack_into(">q", d, 43, 9),
            InvalidRecordError,
            "producer id 9 with invalid base sequence -1",
        ),
    ],
)
def test_client_batches_are_checked(mutate: object, error: type[Exception], message: str) -> None:
    data = bytearray(batch(b"a", b"b"))
    mutate(data)  # type: ignore[operator]
    struct.pack_into(">I", data, 17, crc32c.crc32c(data[21:]))
    with pytest.raises(error, match=message):
        _log().append_as_leader(bytes(data), 0, now_ms=0, wall_clock_ms=0)


def test_create_time_bounds_are_enforced_when_configured() -> None:
    log = _log(LogConfig(message_timestamp_difference_max_ms=1000))
    log.append_as_leader(batch(b"ok", timestamp=BASE_TIME_MS), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS + 900)
    with pytest.raises(InvalidTimestampError, match="differs from the broker time") as raised:
        log.append_as_leader(
            batch(b"old", timestamp=BASE_TIME_MS), 0, now_ms=0, wall_clock_ms=BASE_TIME_MS + 5000
        )
    assert raised.value.error_name == "INVALID_TIMESTAMP"


def test_follower_appends_keep_offsets_and_bytes() -> None:
    leader = _log()
    for epoch in (1, 1, 3):
        leader.append_as_leader(batch(b"a", b"b"), epoch, now_ms=0, wall_clock_ms=0)
    fetched = leader.read(0, 1 << 20).records
    follower = _log()
    info = follower.append_as_follower(fetched, now_ms=0)
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert _stored(follower) == fetched
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries


def test_follower_offsets_must_be_monotonic_and_not_below_the_log_end_offset() -> None:
    follower = _log()
    follower.append_as_follower(batch(b"a", base_offset=0), now_ms=0)
    with pytest.raises(UnexpectedAppendOffsetError, match="first offset 0 is less than the next offset 1"):
        follower.append_as_follower(batch(b"a", base_offset=0), now_ms=0)
    with pytest.raises(OffsetsOutOfOrderError, match="out of order offsets"):
        follower.append_as_follower(batch(b"c", base_offset=5) + batch(b"b", base_offset=2), now_ms=0)
    follower.append_as_follower(batch(b"z", base_offset=10), now_ms=0)  # a gap is allowed
    assert follower.log_end_offset == 11


def test_flush_is_requested_per_batch_by_count_and_on_roll() -> None:
    per_batch = _log(LogConfig(flush_policy=FlushPolicy.PER_BATCH))
    assert per_batch.append_as_leader(batch(b"a"), 0, now_ms=0, wall_clock_ms=0).flush_up_to_offset == 1
    counted = _log(LogConfig(flush_messages=3))
    requests = [
        counted.append_as_leader(batch(b"a"), 0, now_ms=0, wall_clock_ms=0).flush_up_to_offset
        for _ in range(4)
    ]
    assert requests == [None, None, 3, 4]
    counted.flush(now_ms=0)
    assert counted.append_as_leader(batch(b"a"), 0, now_ms=0, wall_clock_ms=0).flush_up_to_offset is None
    rolling = _log(LogConfig(segment_bytes=250))
    infos = [rolling.append_as_leader(batch(b"x" * 40), 0, now_ms=0, wall_clock_ms=0) for _ in range(3)]
    assert [i.flush_up_to_offset for i in infos] == [None, None, 2]
    assert [s.base_offset for s in rolling.segments] == [0, 2]


def test_records_built_with_kafka_sizes_round_trip_through_the_log() -> None:
    log = _log()
    records = [SimpleRecord(bytes([i]) * i, str(i).encode(), (), BASE_TIME_MS + i) for i in range(50)]
    log.append_as_leader(build_batch(records), 0, now_ms=0, wall_clock_ms=0)
    assert [(r.offset, r.key, r.value) for r in decode_all(_stored(log))] == [
        (i, str(i).encode(), bytes([i]) * i) for i in range(50)
    ]
