"""Kafka record batch v2 (magic 2), byte for byte: framing, headers, records, CRC. Sans-I/O.

Layout (docs/record-batch.md §1, all big-endian)::

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 (CRC-32C of bytes 21..end) | 21 attributes int16 | 23 lastOffsetDelta int32
    27 baseTimestamp int64 | 35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16
    53 baseSequence int32 | 57 recordsCount int32 | 61 records (one compressed blob if compressed)

What this module offers:

* ``iterate_batches(data)``: walk batches back to back, reading only headers; a partial batch at the
  end stops the walk (readers discard it, as Kafka's do); framing garbage raises.
* ``RecordBatch``: one batch's header fields plus its bytes; ``ensure_valid()`` checks the CRC,
  ``records()`` decompresses and decodes lazily.
* in-place setters (``set_base_offset``, ``set_partition_leader_epoch``, ``set_max_timestamp``):
  baseOffset and partitionLeaderEpoch sit outside the CRC, so only a changed maxTimestamp or
  timestamp type costs a CRC recomputation (the leader's own path, log_validator.py, goes further and
  rewrites a fresh 17-byte prefix instead of copying the batch);
* ``scan_uncompressed_records``: a structural walk of an uncompressed record area that checks every
  length and offset delta without building objects (the leader's full record validation);
* ``complete_batches_extent``: how many bytes of a fetched buffer are whole batches, and the next
  offset after them (what a fetcher needs to continue).

Rules kept here: nothing is copied unless asked; every error names the batch (position and base
offset) and the expected and actual values. Building batches lives in ``record_builder.py``.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, NamedTuple, TypeAlias

import crc32c

from runtime.storage.compression import CompressionType, decompress
from runtime.storage.errors import CorruptRecordError, InvalidRecordError
from runtime.storage.varint import MAX_VARLONG_BYTES, decode_varint

__all__ = [
    "ATTRIBUTES_OFFSET",
    "CRC_OFFSET",
    "HEADER_STRUCT",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "RECORD_BATCH_OVERHEAD",
    "BatchHeader",
    "CompressionType",
    "Record",
    "RecordBatch",
    "RecordHeader",
    "RecordRow",
    "RecordScan",
    "TimestampType",
    "complete_batches_extent",
    "compute_crc",
    "decode_record_rows",
    "increment_sequence",
    "iterate_batches",
    "scan_uncompressed_records",
    "set_base_offset",
    "set_max_timestamp",
    "set_partition_leader_epoch",
]

MAGIC_V2: Final = 2
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength: the prefix that frames a batch in a file.
RECORD_BATCH_OVERHEAD: Final = 61
BASE_OFFSET_OFFSET: Final = 0
LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
MAX_TIMESTAMP_OFFSET: Final = 35
RECORDS_COUNT_OFFSET: Final = 57

NO_TIMESTAMP: Final = -1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
INT32_MAX: Final = 2_147_483_647

COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20

HEADER_STRUCT: Final = struct.Struct(">qiibIhiqqqhii")
_PREFIX: Final = struct.Struct(">qi")
_OFFSETS_AND_LENGTH: Final = struct.Struct(">qi11xi")  # baseOffset, batchLength, lastOffsetDelta
_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_INT16: Final = struct.Struct(">h")

_MIN_BATCH_LENGTH: Final = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD


class TimestampType(enum.IntEnum):
    """Bit 3 of a v2 batch's attributes."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The 61-byte header, field for field.

    A NamedTuple rather than a dataclass: it is built straight from ``struct.unpack_from`` for every
    batch on every read and append, and a tuple is several times cheaper to make. It is immutable.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control_batch(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence numbers wrap from Int.MAX to 0 (Kafka's ``DefaultRecordBatch.incrementSequence``)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


@dataclass(frozen=True, slots=True)
class RecordHeader:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record. ``timestamp`` is the record's own (CreateTime) timestamp; for a
    LogAppendTime batch readers should use the batch's ``max_timestamp`` instead, as Kafka's do."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...] = ()


class RecordBatch:
    """One batch: its parsed header, its bytes (``data``, exactly ``size_in_bytes`` long) and where it
    started in the buffer it came from (``position``)."""

    __slots__ = ("data", "header", "position")

    def __init__(self, header: BatchHeader, data: bytes | memoryview, position: int) -> None:
        self.header = header
        self.data = data
        self.position = position

    def __repr__(self) -> str:
        h = self.header
        return (
            f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, size={h.size_in_bytes})"
        )

    @property
    def size_in_bytes(self) -> int:
        return self.header.batch_length + LOG_OVERHEAD

    def compute_crc(self) -> int:
        return compute_crc(self.data, 0, self.header.size_in_bytes)

    def is_valid(self) -> bool:
        return self.header.crc == self.compute_crc()

    def ensure_valid(self) -> None:
        """Raise ``CorruptRecordError`` unless the stored CRC matches the bytes."""
        computed = self.compute_crc()
        if computed != self.header.crc:
            raise CorruptRecordError(
                f"record batch at byte {self.position} (base offset {self.header.base_offset}) is corrupt: "
                f"stored CRC 0x{self.header.crc:08x}, computed 0x{computed:08x}"
            )

    def records(self, *, check_offset_deltas: bool = False) -> list[Record]:
        """Decompress (if needed) and decode every record. With ``check_offset_deltas`` the record
        offset deltas must be exactly 0, 1, 2, ... (``InvalidRecordError`` otherwise)."""
        return decode_records(self.header, self.data, self.position, check_offset_deltas=check_offset_deltas)


def compute_crc(data: bytes | bytearray | memoryview, position: int, size: int) -> int:
    """CRC-32C of a batch's bytes from the attributes field to its end."""
    return int(crc32c.crc32c(memoryview(data)[position + ATTRIBUTES_OFFSET : position + size]))


def read_header(data: bytes | bytearray | memoryview, position: int) -> BatchHeader:
    """Parse the 61-byte header at ``position`` (the caller has checked the bytes are there)."""
    return BatchHeader._make(HEADER_STRUCT.unpack_from(data, position))


def iterate_batches(
    data: bytes | bytearray | memoryview, position: int = 0, end: int | None = None, *, file_position: int = 0
) -> Iterator[RecordBatch]:
    """Yield the complete batches in ``data[position:end]``, headers parsed, CRCs *not* checked.

    Stops quietly at a partial batch (fewer bytes left than the batch declares). Raises
    ``CorruptRecordError`` for a declared length below the 61-byte minimum or a magic other than 2,
    because nothing after such a header can be framed. ``file_position`` is where ``data`` starts in
    its file: batch positions and messages are reported relative to the file.
    """
    view = memoryview(data)
    limit = len(data) if end is None else end
    while limit - position >= LOG_OVERHEAD:
        base_offset, batch_length = _PREFIX.unpack_from(data, position)
        where = f"record batch at byte {file_position + position} (base offset {base_offset})"
        if batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"{where} declares length {batch_length}, below the minimum {_MIN_BATCH_LENGTH}"
            )
        size = batch_length + LOG_OVERHEAD
        if position + size > limit:
            return
        magic = data[position + MAGIC_OFFSET]
        if magic != MAGIC_V2:
            raise CorruptRecordError(f"{where} has magic {magic}; only magic {MAGIC_V2} is supported")
        header = BatchHeader._make(HEADER_STRUCT.unpack_from(data, position))
        if header.attributes & COMPRESSION_MASK > CompressionType.ZSTD:
            raise CorruptRecordError(
                f"{where} names unknown compression codec id {header.attributes & COMPRESSION_MASK}"
            )
        yield RecordBatch(header, view[position : position + size], file_position + position)
        position += size


def complete_batches_extent(data: bytes | bytearray | memoryview, position: int = 0) -> tuple[int, int]:
    """``(bytes holding complete batches, next offset after the last of them)`` for a fetched buffer
    that may end with a partial batch; next offset is -1 if there is no complete batch. Only the
    12-byte prefixes and last offset deltas are read (a fetcher's next fetch offset)."""
    end = len(data)
    next_offset = -1
    unpack = _OFFSETS_AND_LENGTH.unpack_from
    while end - position >= RECORD_BATCH_OVERHEAD:
        base_offset, batch_length, last_offset_delta = unpack(data, position)
        size = batch_length + LOG_OVERHEAD
        if batch_length < _MIN_BATCH_LENGTH or position + size > end:
            break
        next_offset = base_offset + last_offset_delta + 1
        position += size
    return position, next_offset


def set_base_offset(buffer: bytearray, position: int, base_offset: int) -> None:
    """Rewrite a batch's baseOffset in place (outside the CRC)."""
    _INT64.pack_into(buffer, position + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buffer: bytearray, position: int, leader_epoch: int) -> None:
    """Rewrite a batch's partitionLeaderEpoch in place (outside the CRC)."""
    _INT32.pack_into(buffer, position + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)


def set_max_timestamp(
    buffer: bytearray,
    position: int,
    timestamp_type: TimestampType,
    max_timestamp: int,
    header: BatchHeader | None = None,
) -> bool:
    """Set the timestamp type bit and maxTimestamp, recomputing the CRC only if either changed
    (Kafka's ``DefaultRecordBatch.setMaxTimestamp``). ``header``, if given, must be the batch's
    current header (saves parsing it again). Returns whether the batch changed."""
    if header is None:
        header = read_header(buffer, position)
    current_type = (
        TimestampType.LOG_APPEND_TIME
        if header.attributes & TIMESTAMP_TYPE_MASK
        else TimestampType.CREATE_TIME
    )
    if current_type == timestamp_type and header.max_timestamp == max_timestamp:
        return False
    attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buffer, position + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buffer, position + MAX_TIMESTAMP_OFFSET, max_timestamp)
    _UINT32.pack_into(buffer, position + CRC_OFFSET, compute_crc(buffer, position, header.size_in_bytes))
    return True


class RecordScan(NamedTuple):
    """What the leader needs from an uncompressed batch's records, found without decoding them."""

    max_timestamp: int
    offset_delta_of_max_timestamp: int
    min_timestamp: int  # smallest timestamp other than NO_TIMESTAMP, or NO_TIMESTAMP if none


def scan_uncompressed_records(
    data: bytes | bytearray | memoryview, header: BatchHeader, position: int
) -> RecordScan:
    """Walk the records of the uncompressed batch at ``position`` checking every length, that offset
    deltas are 0, 1, 2, ... and that the records fill the batch exactly; return the timestamps the
    leader needs. Keys, values and headers are skipped by length, never copied."""
    start = position + RECORD_BATCH_OVERHEAD
    end = position + header.size_in_bytes
    base_timestamp = header.base_timestamp
    max_timestamp = NO_TIMESTAMP
    offset_of_max = -1
    min_timestamp = NO_TIMESTAMP
    cursor = start
    count = header.records_count
    for expected_delta in range(count):
        if cursor >= end:
            raise CorruptRecordError(
                f"the batch at byte {position} (base offset {header.base_offset}) declares {count} records "
                f"but holds only {expected_delta}"
            )
        length, cursor = _varint(data, cursor, end)
        record_end = cursor + length
        if length <= 0 or record_end > end:
            raise CorruptRecordError(
                f"record {expected_delta} of the batch at byte {position} (base offset {header.base_offset}) "
                f"declares {length} bytes but {end - cursor} remain in the batch"
            )
        cursor += 1  # attributes
        timestamp_delta, cursor = _varint(data, cursor, record_end, MAX_VARLONG_BYTES)
        offset_delta, cursor = _varint(data, cursor, record_end)
        if offset_delta != expected_delta:
            raise InvalidRecordError(
                f"record {expected_delta} of the batch at byte {position} (base offset {header.base_offset}) "
                f"has offset delta {offset_delta}, expected {expected_delta}: offset deltas must "
                "be 0, 1, 2, ..."
            )
        key_length, cursor = _varint(data, cursor, record_end)
        if key_length > 0:
            cursor += key_length
        value_length, cursor = _varint(data, cursor, record_end)
        if value_length > 0:
            cursor += value_length
        header_count, cursor = _varint(data, cursor, record_end)
        for _ in range(header_count):
            header_key_length, cursor = _varint(data, cursor, record_end)
            if header_key_length < 0:
                raise CorruptRecordError(
                    f"record {expected_delta} of the batch at byte {position} (base offset "
                    f"{header.base_offset}) has a header with a null key"
                )
            cursor += header_key_length
            header_value_length, cursor = _varint(data, cursor, record_end)
            if header_value_length > 0:
                cursor += header_value_length
        if cursor != record_end or header_count < 0:
            raise CorruptRecordError(
                f"record {expected_delta} of the batch at byte {position} (base offset {header.base_offset}) "
                f"declares {length} bytes but its fields take {cursor - record_end + length}"
            )
        timestamp = base_timestamp + timestamp_delta
        if timestamp > max_timestamp:
            max_timestamp = timestamp
            offset_of_max = offset_delta
        if timestamp != NO_TIMESTAMP and (min_timestamp == NO_TIMESTAMP or timestamp < min_timestamp):
            min_timestamp = timestamp
    if cursor != end:
        raise CorruptRecordError(
            f"the batch at byte {position} (base offset {header.base_offset}) declares {count} records "
            f"but {end - cursor} bytes follow them"
        )
    return RecordScan(max_timestamp, offset_of_max, min_timestamp)


def _varint(
    data: bytes | bytearray | memoryview, position: int, end: int, max_bytes: int = 5
) -> tuple[int, int]:
    # Inline fast path for one-byte varints; the general decoder handles the rest.
    if position < end:
        byte = data[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
    if position >= end:
        raise CorruptRecordError(f"a record field at byte {position} runs past the end of its record ({end})")
    value, after = decode_varint(bytes(data[position : min(end, position + max_bytes)]), 0, max_bytes)
    return value, position + after


def decode_records(
    header: BatchHeader, data: bytes | memoryview, position: int, *, check_offset_deltas: bool = False
) -> list[Record]:
    """Decode every record of one batch (``data`` holds exactly the batch)."""
    where = f"the batch at byte {position} (base offset {header.base_offset})"
    area = decompress(header.compression, memoryview(data)[RECORD_BATCH_OVERHEAD:])
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(f"{where} declares a negative record count {count}")
    records: list[Record] = []
    cursor = 0
    end = len(area)
    for index in range(count):
        if cursor >= end:
            raise CorruptRecordError(f"{where} declares {count} records but holds only {index}")
        length, cursor = _field(area, cursor, end, where)
        record_end = cursor + length
        if length <= 0 or record_end > end:
            raise CorruptRecordError(
                f"record {index} of {where} declares {length} bytes but {end - cursor} remain"
            )
        cursor += 1  # attributes: unused, always 0
        timestamp_delta, cursor = _field(area, cursor, record_end, where, MAX_VARLONG_BYTES)
        offset_delta, cursor = _field(area, cursor, record_end, where)
        if check_offset_deltas and offset_delta != index:
            raise InvalidRecordError(
                f"record {index} of {where} has offset delta {offset_delta}, expected {index}: "
                "inner offsets must be 0, 1, 2, ..."
            )
        key, cursor = _bytes_field(area, cursor, record_end, where)
        value, cursor = _bytes_field(area, cursor, record_end, where)
        header_count, cursor = _field(area, cursor, record_end, where)
        if header_count < 0:
            raise CorruptRecordError(f"record {index} of {where} declares {header_count} headers")
        headers: list[RecordHeader] = []
        for _ in range(header_count):
            raw_key, cursor = _bytes_field(area, cursor, record_end, where)
            if raw_key is None:
                raise CorruptRecordError(f"record {index} of {where} has a header with a null key")
            header_value, cursor = _bytes_field(area, cursor, record_end, where)
            try:
                headers.append(RecordHeader(raw_key.decode("utf-8"), header_value))
            except UnicodeDecodeError:
                raise CorruptRecordError(
                    f"record {index} of {where} has a header key that is not UTF-8"
                ) from None
        if cursor != record_end:
            raise CorruptRecordError(
                f"record {index} of {where} declares {length} bytes but its fields take "
                f"{length + cursor - record_end}"
            )
        records.append(
            Record(
                header.base_offset + offset_delta,
                header.base_timestamp + timestamp_delta,
                key,
                value,
                tuple(headers),
            )
        )
    if cursor != end:
        raise CorruptRecordError(f"{where} declares {count} records but {end - cursor} bytes follow them")
    return records


def _field(data: bytes, position: int, end: int, where: str, max_bytes: int = 5) -> tuple[int, int]:
    if position >= end:
        raise CorruptRecordError(
            f"a record of {where} ends inside a field (byte {position} of the record area)"
        )
    value, after = decode_varint(data, position, max_bytes)
    if after > end:
        raise CorruptRecordError(
            f"a record of {where} ends inside a field (byte {position} of the record area)"
        )
    return value, after


def _bytes_field(data: bytes, position: int, end: int, where: str) -> tuple[bytes | None, int]:
    length, position = _field(data, position, end, where)
    if length < 0:
        return None, position
    if position + length > end:
        raise CorruptRecordError(
            f"a record of {where} declares a {length}-byte field but {end - position} bytes remain "
            "in the record"
        )
    return data[position : position + length], position + length


RecordRow: TypeAlias = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def decode_record_rows(
    header: BatchHeader, data: bytes | memoryview, position: int, *, from_offset: int = 0
) -> list[RecordRow]:
    """Every record of one batch (``data`` holds exactly the batch) at or after ``from_offset``, as a
    plain ``(offset, timestamp, key, value, headers)`` tuple, headers as ``(key, value)`` pairs.

    The consumer's path: it refuses exactly the batches ``decode_records`` refuses, without a
    ``Record`` per record, with one- and two-byte varints (every field of a record up to 8 KiB)
    decoded inline rather than by a call. Fields are read without checking each against the
    record's end: the cursor only moves forward, so a field running past it leaves the cursor past
    it, which the check that the fields fill the record exactly refuses (a read past the batch is
    caught as such). ``timestamp`` is the record's own, as in ``Record``."""
    where = f"the batch at byte {position} (base offset {header.base_offset})"
    area = decompress(header.compression, memoryview(data)[RECORD_BATCH_OVERHEAD:])
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(f"{where} declares a negative record count {count}")
    rows: list[RecordRow] = []
    append = rows.append
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    cursor = 0
    end = len(area)
    index = 0
    try:
        for index in range(count):
            if cursor >= end:
                raise CorruptRecordError(f"{where} declares {count} records but holds only {index}")
            byte = area[cursor]
            if byte < 0x80:
                length = (byte >> 1) ^ -(byte & 1)
                cursor += 1
            elif (high := area[cursor + 1]) < 0x80:
                length = (((byte & 0x7F) | (high << 7)) >> 1) ^ -(byte & 1)
                cursor += 2
            else:
                length, cursor = _field(area, cursor, end, where)
            record_end = cursor + length
            if length <= 0 or record_end > end:
                raise CorruptRecordError(
                    f"record {index} of {where} declares {length} bytes but {end - cursor} remain"
                )
            byte = area[cursor + 1]  # after the attributes byte (unused, always 0)
            if byte < 0x80:
                timestamp_delta = (byte >> 1) ^ -(byte & 1)
                cursor += 2
            elif (high := area[cursor + 2]) < 0x80:
                timestamp_delta = (((byte & 0x7F) | (high << 7)) >> 1) ^ -(byte & 1)
                cursor += 3
            else:
                timestamp_delta, cursor = _field(area, cursor + 1, end, where, MAX_VARLONG_BYTES)
            byte = area[cursor]
            if byte < 0x80:
                offset_delta = (byte >> 1) ^ -(byte & 1)
                cursor += 1
            elif (high := area[cursor + 1]) < 0x80:
                offset_delta = (((byte & 0x7F) | (high << 7)) >> 1) ^ -(byte & 1)
                cursor += 2
            else:
                offset_delta, cursor = _field(area, cursor, end, where)
            byte = area[cursor]
            if byte == 1:  # -1: no key, the common case
                key: bytes | None = None
                cursor += 1
            else:
                if byte < 0x80:
                    key_length = (byte >> 1) ^ -(byte & 1)
                    cursor += 1
                elif (high := area[cursor + 1]) < 0x80:
                    key_length = (((byte & 0x7F) | (high << 7)) >> 1) ^ -(byte & 1)
                    cursor += 2
                else:
                    key_length, cursor = _field(area, cursor, end, where)
                if key_length < 0:
                    key = None
                else:
                    key = area[cursor : cursor + key_length]
                    cursor += key_length
            byte = area[cursor]
            if byte < 0x80:
                value_length = (byte >> 1) ^ -(byte & 1)
                cursor += 1
            elif (high := area[cursor + 1]) < 0x80:
                value_length = (((byte & 0x7F) | (high << 7)) >> 1) ^ -(byte & 1)
                cursor += 2
            else:
                value_length, cursor = _field(area, cursor, end, where)
            value: bytes | None = None
            if value_length >= 0:
                value = area[cursor : cursor + value_length]
                cursor += value_length
            if cursor < record_end and area[cursor] == 0:  # no headers: the common case
                cursor += 1
                headers: tuple[tuple[str, bytes | None], ...] = ()
            else:
                headers, cursor = _row_headers(area, cursor, record_end, where, index)
            if cursor != record_end:
                raise CorruptRecordError(
                    f"record {index} of {where} declares {length} bytes but its fields take "
                    f"{length + cursor - record_end}"
                )
            offset = base_offset + offset_delta
            if offset >= from_offset:
                append((offset, base_timestamp + timestamp_delta, key, value, headers))
    except IndexError:
        raise CorruptRecordError(f"record {index} of {where} ends inside a field") from None
    if cursor != end:
        raise CorruptRecordError(f"{where} declares {count} records but {end - cursor} bytes follow them")
    return rows


def _row_headers(
    area: bytes, cursor: int, record_end: int, where: str, index: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    header_count, cursor = _field(area, cursor, record_end, where)
    if header_count < 0:
        raise CorruptRecordError(f"record {index} of {where} declares {header_count} headers")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(header_count):
        raw_key, cursor = _bytes_field(area, cursor, record_end, where)
        if raw_key is None:
            raise CorruptRecordError(f"record {index} of {where} has a header with a null key")
        header_value, cursor = _bytes_field(area, cursor, record_end, where)
        try:
            headers.append((raw_key.decode("utf-8"), header_value))
        except UnicodeDecodeError:
            raise CorruptRecordError(
                f"record {index} of {where} has a header key that is not UTF-8"
            ) from None
    return tuple(headers), cursor
