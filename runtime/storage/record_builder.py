"""Building v2 record batches, sans-I/O: the producer's and the leader's way to make bytes.

``build_batch`` makes one batch from a list of ``SimpleRecord``; ``RecordBatchBuilder`` grows a batch
record by record under a size limit (what a producer's accumulator needs). Both write exactly what
Kafka's ``MemoryRecordsBuilder`` writes for magic 2: baseTimestamp = the first record's timestamp,
maxTimestamp = the largest record timestamp (or the log append time for LogAppendTime batches, whose
records keep their own timestamps), lastOffsetDelta = records - 1, CRC-32C over attributes..end.
A compressed batch compresses the whole record area; unlike some clients, nothing falls back to
uncompressed when compression does not pay.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from runtime.storage.compression import CompressionType, compress
from runtime.storage.records import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    RecordHeader,
    TimestampType,
    compute_crc,
)
from runtime.storage.varint import encode_varint, size_of_varint

__all__ = ["MAX_RECORD_OVERHEAD", "RecordBatchBuilder", "SimpleRecord", "build_batch", "encode_record"]

# 5 length + 1 attributes + 10 timestamp delta + 5 offset delta (docs/record-batch.md §2).
MAX_RECORD_OVERHEAD: Final = 21
_UINT32: Final = struct.Struct(">I")


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out)
    return bytes(out)


# The encodings of 0 .. _SMALL - 1, looked up rather than computed: a producer encodes four or five
# varints per record (the length, two deltas, the key and value lengths) and nearly all are small.
_SMALL: Final = 1 << 14
_VARINTS: Final = tuple(_varint_bytes(value) for value in range(_SMALL))
_NULL: Final = _varint_bytes(-1)  # the length of a null key or value


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to be written: timestamp (ms, or -1 for none), key, value and headers."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[RecordHeader, ...] = ()
    timestamp: int = NO_TIMESTAMP


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[RecordHeader] = (),
) -> int:
    """Append one encoded record to ``out``; return the bytes written."""
    body = bytearray(b"\x00")  # attributes: unused, always 0
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    _encode_bytes(key, body)
    _encode_bytes(value, body)
    encode_varint(len(headers), body)
    for header in headers:
        _encode_bytes(header.key.encode("utf-8"), body)
        _encode_bytes(header.value, body)
    before = len(out)
    encode_varint(len(body), out)
    out += body
    return len(out) - before


def _encode_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        encode_varint(-1, out)
    else:
        encode_varint(len(data), out)
        out += data


def estimate_record_size(key: bytes | None, value: bytes | None, headers: Sequence[RecordHeader]) -> int:
    """Upper bound of one record's encoded size (Kafka's ``estimateSizeInBytesUpperBound``)."""
    size = MAX_RECORD_OVERHEAD
    for data in (key, value):
        size += size_of_varint(-1 if data is None else len(data)) + (0 if data is None else len(data))
    size += size_of_varint(len(headers))
    for header in headers:
        encoded = header.key.encode("utf-8")
        size += size_of_varint(len(encoded)) + len(encoded)
        value_length = -1 if header.value is None else len(header.value)
        size += size_of_varint(value_length) + max(value_length, 0)
    return size


class RecordBatchBuilder:
    """Grows one batch record by record. The first record is always accepted; later ones only while
    the estimated size stays within ``write_limit`` (Kafka's ``MemoryRecordsBuilder.hasRoomFor``)."""

    def __init__(
        self,
        *,
        compression: CompressionType = CompressionType.NONE,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        write_limit: int = 16_384,
    ) -> None:
        self.compression = compression
        self.timestamp_type = timestamp_type
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.write_limit = write_limit
        self._area = bytearray()
        self._count = 0
        self._first_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP

    @property
    def records_count(self) -> int:
        return self._count

    @property
    def estimated_size_in_bytes(self) -> int:
        """Size of the batch if built now, before compression."""
        return RECORD_BATCH_OVERHEAD + len(self._area)

    def has_room_for(
        self, key: bytes | None, value: bytes | None, headers: Sequence[RecordHeader] = ()
    ) -> bool:
        if self._count == 0:
            return True
        return self.estimated_size_in_bytes + estimate_record_size(key, value, headers) <= self.write_limit

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Stamp idempotence fields (a producer assigns the sequence when it drains the batch)."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence

    def append(self, record: SimpleRecord) -> int:
        """Add ``record``; return its offset delta."""
        return self.append_fields(record.timestamp, record.key, record.value, record.headers)

    def append_fields(
        self, timestamp: int, key: bytes | None, value: bytes | None, headers: Sequence[RecordHeader] = ()
    ) -> int:
        """``append`` without building a ``SimpleRecord`` (a producer's accumulator calls it once
        per record). A record without headers whose numbers are all small is written from the
        lookup table, a few appends to the area; any other goes through ``encode_record``."""
        offset_delta = self._count
        if offset_delta == 0:
            self._first_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        timestamp_delta = timestamp - self._first_timestamp
        key_size = 0 if key is None else len(key)
        value_size = 0 if value is None else len(value)
        if (
            headers
            or not 0 <= timestamp_delta < _SMALL
            or offset_delta >= _SMALL
            or key_size >= _SMALL
            or value_size >= _SMALL
        ):
            encode_record(self._area, offset_delta, timestamp_delta, key, value, headers)
            self._count = offset_delta + 1
            return offset_delta
        varints = _VARINTS
        timestamp_varint = varints[timestamp_delta]
        offset_varint = varints[offset_delta]
        key_varint = _NULL if key is None else varints[key_size]
        value_varint = _NULL if value is None else varints[value_size]
        # attributes (1) + the four varints + key + value + the header count (1)
        size = (
            2
            + len(timestamp_varint)
            + len(offset_varint)
            + len(key_varint)
            + key_size
            + len(value_varint)
            + value_size
        )
        area = self._area
        if size < _SMALL:
            area += varints[size]
        else:
            encode_varint(size, area)
        area.append(0)
        area += timestamp_varint
        area += offset_varint
        area += key_varint
        if key:
            area += key
        area += value_varint
        if value:
            area += value
        area.append(0)
        self._count = offset_delta + 1
        return offset_delta

    def build(
        self,
        *,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        log_append_time: int = NO_TIMESTAMP,
    ) -> bytes:
        """The finished batch. ``log_append_time`` is required for LogAppendTime batches."""
        if self._count == 0:
            raise ValueError("a record batch needs at least one record")
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            if log_append_time == NO_TIMESTAMP:
                raise ValueError("a LogAppendTime batch needs log_append_time")
            max_timestamp = log_append_time
        else:
            max_timestamp = self._max_timestamp
        area = compress(self.compression, self._area)
        attributes = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attributes |= TRANSACTIONAL_MASK
        size = RECORD_BATCH_OVERHEAD + len(area)
        buffer = bytearray(size)
        HEADER_STRUCT.pack_into(
            buffer,
            0,
            base_offset,
            size - LOG_OVERHEAD,
            partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes & ~CONTROL_MASK,
            self._count - 1,
            self._first_timestamp,
            max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._count,
        )
        buffer[RECORD_BATCH_OVERHEAD:] = area
        _UINT32.pack_into(buffer, CRC_OFFSET, compute_crc(buffer, 0, size))
        assert ATTRIBUTES_OFFSET == CRC_OFFSET + 4
        return bytes(buffer)


def build_batch(
    records: Sequence[SimpleRecord],
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int = NO_TIMESTAMP,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
) -> bytes:
    """One v2 batch holding ``records`` with offsets ``base_offset ..``."""
    builder = RecordBatchBuilder(
        compression=compression,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        write_limit=2**31 - 1,
    )
    for record in records:
        builder.append(record)
    return builder.build(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        log_append_time=log_append_time,
    )
