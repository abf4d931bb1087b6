"""Record batch v2 framing, headers, CRC, record decoding and the in-place setters."""

from __future__ import annotations

import struct

import crc32c
import pytest

from runtime.storage.compression import CompressionType
from runtime.storage.errors import CorruptRecordError, InvalidRecordError
from runtime.storage.record_builder import RecordBatchBuilder, SimpleRecord, build_batch, encode_record
from runtime.storage.records import (
    HEADER_STRUCT,
    RecordHeader,
    TimestampType,
    complete_batches_extent,
    increment_sequence,
    iterate_batches,
    read_header,
    scan_uncompressed_records,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)


def test_a_one_record_batch_is_laid_out_byte_for_byte() -> None:
    data = build_batch(
        [SimpleRecord(b"v", b"k", timestamp=1000)],
        base_offset=5,
        partition_leader_epoch=7,
        producer_id=42,
        producer_epoch=3,
        base_sequence=9,
    )
    records_area = bytes([0x10, 0x00, 0x00, 0x00, 0x02, ord("k"), 0x02, ord("v"), 0x00])
    assert data[61:] == records_area
    assert len(data) == 61 + len(records_area)
    assert struct.unpack(">q", data[0:8]) == (5,)
    assert struct.unpack(">i", data[8:12]) == (len(data) - 12,)
    assert struct.unpack(">i", data[12:16]) == (7,)
    assert data[16] == 2
    assert struct.unpack(">I", data[17:21]) == (crc32c.crc32c(data[21:]),)
    assert struct.unpack(">hiqqqhii", data[21:61]) == (0, 0, 1000, 1000, 42, 3, 9, 1)


def test_header_fields_are_parsed() -> None:
    data = build_batch(
        [
            SimpleRecord(b"a", timestamp=10),
            SimpleRecord(b"b", timestamp=30),
            SimpleRecord(b"c", timestamp=20),
        ],
        base_offset=100,
        compression=CompressionType.GZIP,
        producer_id=1,
        producer_epoch=2,
        base_sequence=2_147_483_646,
        is_transactional=True,
    )
    header = read_header(data, 0)
    assert header.base_offset == 100
    assert header.last_offset == 102
    assert header.next_offset == 103
    assert header.records_count == 3
    assert header.base_timestamp == 10
    assert header.max_timestamp == 30
    assert header.compression == CompressionType.GZIP
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert header.is_transactional
    assert not header.is_control_batch
    assert header.has_producer_id
    assert header.last_sequence == 0  # 2147483646 + 2 wraps past Int.MAX to 0
    assert header.size_in_bytes == len(data)


def test_sequence_numbers_wrap_at_int_max() -> None:
    assert increment_sequence(2_147_483_647, 1) == 0
    assert increment_sequence(2_147_483_640, 10) == 2
    assert increment_sequence(5, 3) == 8


def test_records_round_trip_with_headers_nulls_and_negative_deltas() -> None:
    records = [
        SimpleRecord(b"value", b"key", (RecordHeader("h1", b"x"), RecordHeader("h2", None)), 5000),
        SimpleRecord(None, None, (), 4000),
        SimpleRecord(b"", b"", (), 6000),
    ]
    data = build_batch(records, base_offset=10)
    (decoded_batch,) = list(iterate_batches(data))
    decoded_batch.ensure_valid()
    decoded = decoded_batch.records(check_offset_deltas=True)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (10, 5000, b"key", b"value", (RecordHeader("h1", b"x"), RecordHeader("h2", None))),
        (11, 4000, None, None, ()),
        (12, 6000, b"", b"", ()),
    ]


def test_a_flipped_bit_fails_the_crc_and_names_both_values() -> None:
    data = bytearray(build_batch([SimpleRecord(b"payload", timestamp=1)]))
    data[-3] ^= 0x04
    (corrupt,) = list(iterate_batches(data))
    assert not corrupt.is_valid()
    with pytest.raises(CorruptRecordError, match=r"stored CRC 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}"):
        corrupt.ensure_valid()


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    data = bytearray(build_batch([SimpleRecord(b"x", timestamp=1)]))
    set_base_offset(data, 0, 123_456)
    set_partition_leader_epoch(data, 0, 99)
    (stamped,) = list(iterate_batches(data))
    assert stamped.is_valid()
    assert (stamped.header.base_offset, stamped.header.partition_leader_epoch) == (123_456, 99)


def test_set_max_timestamp_recomputes_the_crc_only_when_something_changes() -> None:
    data = bytearray(build_batch([SimpleRecord(b"x", timestamp=50)]))
    crc_before = read_header(data, 0).crc
    assert not set_max_timestamp(data, 0, TimestampType.CREATE_TIME, 50)
    assert read_header(data, 0).crc == crc_before
    assert set_max_timestamp(data, 0, TimestampType.LOG_APPEND_TIME, 777)
    header = read_header(data, 0)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == 777
    assert header.crc != crc_before
    assert next(iterate_batches(data)).is_valid()


def test_iteration_stops_quietly_at_a_partial_batch() -> None:
    first = build_batch([SimpleRecord(b"a", timestamp=1)], base_offset=0)
    second = build_batch([SimpleRecord(b"b", timestamp=1)], base_offset=1)
    for cut in (1, 11, 12, 30, len(second) - 1):
        batches = list(iterate_batches(first + second[:cut]))
        assert [b.header.base_offset for b in batches] == [0]
    assert complete_batches_extent(first + second[:20]) == (len(first), 1)
    assert complete_batches_extent(first + second) == (len(first) + len(second), 2)
    assert complete_batches_extent(b"") == (0, -1)


def test_a_length_below_the_header_size_is_corrupt() -> None:
    data = bytearray(build_batch([SimpleRecord(b"a", timestamp=1)]))
    struct.pack_into(">i", data, 8, 10)
    with pytest.raises(CorruptRecordError, match="declares length 10, below the minimum 49"):
        list(iterate_batches(data))


def test_a_magic_other_than_2_is_corrupt() -> None:
    data = bytearray(build_batch([SimpleRecord(b"a", timestamp=1)]))
    data[16] = 1
    with pytest.raises(CorruptRecordError, match="has magic 1; only magic 2 is supported"):
        list(iterate_batches(data))


def test_an_unknown_codec_is_corrupt() -> None:
    data = bytearray(build_batch([SimpleRecord(b"a", timestamp=1)]))
    struct.pack_into(">h", data, 21, 6)
    with pytest.raises(CorruptRecordError, match="unknown compression codec id 6"):
        list(iterate_batches(data))


def _batch_with_offset_deltas(deltas: list[int]) -> bytes:
    area = bytearray()
    for delta in deltas:
        encode_record(area, delta, 0, None, b"x")
    size = 61 + len(area)
    buffer = bytearray(size)
    HEADER_STRUCT.pack_into(
        buffer, 0, 0, size - 12, -1, 2, 0, 0, len(deltas) - 1, 1, 1, -1, -1, -1, len(deltas)
    )
    buffer[61:] = area
    struct.pack_into(">I", buffer, 17, crc32c.crc32c(buffer[21:]))
    return bytes(buffer)


def test_non_monotonic_offset_deltas_are_named() -> None:
    data = _batch_with_offset_deltas([0, 2, 1])
    (decoded,) = list(iterate_batches(data))
    decoded.ensure_valid()
    with pytest.raises(InvalidRecordError, match=r"record 1 .* has offset delta 2, expected 1"):
        decoded.records(check_offset_deltas=True)
    with pytest.raises(InvalidRecordError, match="has offset delta 2, expected 1"):
        scan_uncompressed_records(data, decoded.header, 0)


def test_a_record_count_larger_than_the_records_is_corrupt() -> None:
    data = bytearray(_batch_with_offset_deltas([0, 1]))
    struct.pack_into(">i", data, 57, 3)
    struct.pack_into(">I", data, 17, crc32c.crc32c(data[21:]))
    (decoded,) = list(iterate_batches(data))
    with pytest.raises(CorruptRecordError, match="declares 3 records but holds only 2"):
        decoded.records()
    with pytest.raises(CorruptRecordError, match="declares 3 records but holds only 2"):
        scan_uncompressed_records(data, decoded.header, 0)


def test_bytes_after_the_declared_records_are_corrupt() -> None:
    data = bytearray(_batch_with_offset_deltas([0, 1]))
    struct.pack_into(">i", data, 57, 1)
    struct.pack_into(">i", data, 23, 0)
    struct.pack_into(">I", data, 17, crc32c.crc32c(data[21:]))
    (decoded,) = list(iterate_batches(data))
    with pytest.raises(CorruptRecordError, match="declares 1 records but 8 bytes follow them"):
        decoded.records()
    with pytest.raises(CorruptRecordError, match="declares 1 records but 8 bytes follow them"):
        scan_uncompressed_records(data, decoded.header, 0)


def test_scan_finds_the_max_timestamp_and_its_first_record() -> None:
    data = build_batch(
        [SimpleRecord(b"a", timestamp=30), SimpleRecord(b"b", timestamp=90), SimpleRecord(b"c", timestamp=90)]
    )
    scan = scan_uncompressed_records(data, read_header(data, 0), 0)
    assert (scan.max_timestamp, scan.offset_delta_of_max_timestamp, scan.min_timestamp) == (90, 1, 30)


def test_the_builder_stops_accepting_records_at_its_write_limit() -> None:
    builder = RecordBatchBuilder(write_limit=1000)
    appended = 0
    while builder.has_room_for(None, b"x" * 100):
        builder.append(SimpleRecord(b"x" * 100, timestamp=1))
        appended += 1
    assert appended == 8
    assert len(builder.build()) <= 1000
    with pytest.raises(ValueError, match="at least one record"):
        RecordBatchBuilder().build()
    with pytest.raises(ValueError, match="needs log_append_time"):
        build_batch([SimpleRecord(b"x")], timestamp_type=TimestampType.LOG_APPEND_TIME)
