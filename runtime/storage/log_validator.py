"""Checking appended bytes and, on the leader, assigning offsets (Kafka's ``Log.analyzeAndValidateRecords``
and ``LogValidator.validateMessagesAndAssignOffsets``). Sans-I/O.

``analyze`` (leader and follower, the hot path): frame every batch, check magic, size against
``max.message.bytes`` (``RecordTooLargeError``) and CRC (``CorruptRecordError``); client batches must
have base offset 0. A trailing partial batch is trimmed, as Kafka does (``valid_bytes``). Only the
61-byte headers are parsed; the one pass over the bytes is the CRC.

``assign_offsets`` (leader only), docs/record-batch.md §3:

* every client batch: ``lastOffsetDelta + 1 == recordsCount > 0``, not a control batch, a producer id
  needs a base sequence >= 0, CreateTime (a client never claims LogAppendTime);
* uncompressed (source and target): **in place**. baseOffset and partitionLeaderEpoch are rewritten
  (outside the CRC); maxTimestamp and the timestamp type, and then the CRC, only when they change
  (LogAppendTime). Records are not decoded: with ``records.validation = batch`` (the default) the
  producer's maxTimestamp stands; with ``full``, or when ``message.timestamp.difference.max.ms`` is
  set, every record is walked without copying (lengths, offset deltas 0, 1, 2, ..., timestamps).
* compressed with the topic's codec (``compression.type`` = ``producer`` or the same codec): **in
  place** after decompressing to check inner offset deltas 0, 1, 2, ... and timestamps; needs exactly
  one batch.
* otherwise: **rebuild** one batch with the target codec, offsets from the log end offset, the first
  batch's producer id/epoch/sequence, and re-check its size against ``max.message.bytes``.
* CreateTime bounds: ``|timestamp - now| <= message.timestamp.difference.max.ms`` for every record
  timestamp other than -1 (``InvalidTimestampError``); LogAppendTime stamps ``now`` as max timestamp.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

import crc32c

from runtime.storage.compression import CompressionType
from runtime.storage.config import LONG_MAX, LogConfig, RecordsValidation
from runtime.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from runtime.storage.record_builder import RecordBatchBuilder, SimpleRecord
from runtime.storage.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Record,
    RecordBatch,
    TimestampType,
    read_header,
    scan_uncompressed_records,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)

__all__ = [
    "PREFIX_SIZE",
    "Analysis",
    "AssignedOffsets",
    "LeaderPlan",
    "analyze",
    "assign_offsets",
    "leader_prefix",
    "one_plain_batch",
    "validate_client_batch",
]

_PREFIX: Final = struct.Struct(">qi")
_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_MIN_BATCH_LENGTH: Final = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
# baseOffset, batchLength, partitionLeaderEpoch: everything the leader rewrites in the common case, all
# before the magic byte (already checked to be 2) and outside the CRC.
_LEADER_PREFIX: Final = struct.Struct(">qii")
PREFIX_SIZE: Final = _LEADER_PREFIX.size


class Analysis(NamedTuple):
    """What ``analyze`` found in the appended bytes (Kafka's ``LogAppendInfo`` before the append).
    A NamedTuple, not a frozen dataclass: it is built on every append and tuples are cheaper."""

    headers: list[BatchHeader]
    positions: list[int]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    valid_bytes: int
    offsets_monotonic: bool
    source_codec: CompressionType
    has_producer_ids: bool


def analyze(data: bytes | bytearray | memoryview, from_client: bool, max_message_bytes: int) -> Analysis:
    """Frame and check every batch (hot path: header fields and one CRC per batch, nothing more)."""
    headers: list[BatchHeader] = []
    positions: list[int] = []
    first_offset = -1
    last_offset = -1
    max_timestamp = NO_TIMESTAMP
    offset_of_max_timestamp = -1
    record_count = 0
    monotonic = True
    source_codec = CompressionType.NONE
    has_producer_ids = False
    view = memoryview(data)
    end = len(data)
    position = 0
    unpack_prefix = _PREFIX.unpack_from
    unpack_header = HEADER_STRUCT.unpack_from
    new_tuple = tuple.__new__
    crc = crc32c.crc32c
    while end - position >= LOG_OVERHEAD:
        base_offset, batch_length = unpack_prefix(data, position)
        size = batch_length + LOG_OVERHEAD
        if batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch at byte {position} (base offset {base_offset}) declares length "
                f"{batch_length}, "
                f"below the minimum {_MIN_BATCH_LENGTH}"
            )
        if position + size > end:
            break  # A partial batch at the end is trimmed, as Kafka does.
        header: BatchHeader = new_tuple(BatchHeader, unpack_header(data, position))
        if header.magic != MAGIC_V2:
            raise CorruptRecordError(
                f"record batch at byte {position} (base offset {base_offset}) has magic {header.magic}; "
                f"only magic {MAGIC_V2} is supported"
            )
        if from_client and not headers and base_offset != 0:
            raise InvalidRecordError(
                f"the base offset of the record batch in a client append should be 0, but it is {base_offset}"
            )
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"the record batch at offset {base_offset} is {size} bytes, larger than "
                f"max.message.bytes {max_message_bytes}"
            )
        computed = crc(view[position + ATTRIBUTES_OFFSET : position + size])
        if computed != header.crc:
            raise CorruptRecordError(
                f"record batch at byte {position} (base offset {base_offset}) is corrupt: "
                f"stored CRC 0x{header.crc:08x}, computed 0x{computed:08x}"
            )
        codec = header.attributes & COMPRESSION_MASK
        if codec:
            if codec > CompressionType.ZSTD:
                raise CorruptRecordError(
                    f"record batch at byte {position} (base offset {base_offset}) names unknown compression "
                    f"codec id {codec}"
                )
            source_codec = CompressionType(codec)
        batch_last_offset = base_offset + header.last_offset_delta
        if first_offset < 0:
            first_offset = base_offset
        if last_offset >= batch_last_offset:
            monotonic = False
        last_offset = batch_last_offset
        if header.max_timestamp > max_timestamp:
            max_timestamp = header.max_timestamp
            offset_of_max_timestamp = batch_last_offset
        record_count += header.records_count
        if header.producer_id >= 0:
            has_producer_ids = True
        headers.append(header)
        positions.append(position)
        position += size
    return Analysis(
        headers,
        positions,
        first_offset,
        last_offset,
        max_timestamp,
        offset_of_max_timestamp,
        record_count,
        position,
        monotonic,
        source_codec,
        has_producer_ids,
    )


class AssignedOffsets(NamedTuple):
    """The leader's validated bytes with offsets, epochs and timestamps stamped, as buffers to be
    written back to back (``size`` bytes in all)."""

    parts: list[bytes | bytearray | memoryview]
    size: int
    headers: list[BatchHeader]
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    rebuilt: bool
    target_codec: CompressionType


def validate_client_batch(header: BatchHeader) -> None:
    records_count = header.records_count
    attributes = header.attributes
    if (
        records_count > 0
        and records_count == header.last_offset_delta + 1
        and not attributes & (CONTROL_MASK | TIMESTAMP_TYPE_MASK)
        and (header.producer_id < 0 or header.base_sequence >= 0)
    ):
        return  # The common case, checked in one expression (this runs per produced batch).
    where = f"record batch (base offset {header.base_offset})"
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecordError(f"{where} has last offset delta {header.last_offset_delta}")
    if records_count <= 0 or records_count != count_from_offsets:
        raise InvalidRecordError(
            f"{where} has {records_count} records but its offset delta implies {count_from_offsets}"
        )
    if attributes & CONTROL_MASK:
        raise InvalidRecordError(f"{where}: clients are not allowed to write control records")
    if attributes & TIMESTAMP_TYPE_MASK:
        raise InvalidTimestampError(f"{where}: a producer should not set the timestamp type to LogAppendTime")
    raise InvalidRecordError(
        f"{where}: producer id {header.producer_id} with invalid base sequence {header.base_sequence}"
    )


def _check_timestamp_bounds(min_timestamp: int, max_timestamp: int, config: LogConfig, now_ms: int) -> None:
    limit = config.message_timestamp_difference_max_ms
    if config.message_timestamp_type != TimestampType.CREATE_TIME or limit == LONG_MAX:
        return
    for timestamp in (min_timestamp, max_timestamp):
        if timestamp != NO_TIMESTAMP and abs(timestamp - now_ms) > limit:
            raise InvalidTimestampError(
                f"record timestamp {timestamp} is out of range: it differs from the broker time "
                f"{now_ms} by more "
                f"than message.timestamp.difference.max.ms {limit}"
            )


class LeaderPlan(NamedTuple):
    """What a LogConfig means for the leader's path, worked out once per log, not per append."""

    log_append_time: bool
    walk_records: bool
    uncompressed_in_place: bool  # compression.type is producer or uncompressed
    # An uncompressed batch goes in as sent, but for the leader's prefix: the one-batch fast path.
    as_sent: bool

    @classmethod
    def of(cls, config: LogConfig) -> LeaderPlan:
        log_append_time = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
        walk_records = config.records_validation is RecordsValidation.FULL or (
            not log_append_time and config.message_timestamp_difference_max_ms != LONG_MAX
        )
        in_place = config.compression_type.target_codec(CompressionType.NONE) == CompressionType.NONE
        return cls(
            log_append_time, walk_records, in_place, in_place and not (log_append_time or walk_records)
        )


def assign_offsets(
    analysis: Analysis,
    data: bytes | bytearray | memoryview,
    first_offset: int,
    leader_epoch: int,
    config: LogConfig,
    wall_clock_ms: int,
    plan: LeaderPlan | None = None,
) -> AssignedOffsets:
    """Validate client batches and stamp them with offsets from ``first_offset`` (see module doc)."""
    if plan is None:
        plan = LeaderPlan.of(config)
    for header in analysis.headers:
        validate_client_batch(header)
    if analysis.source_codec == CompressionType.NONE and plan.uncompressed_in_place:
        return _in_place_uncompressed(analysis, data, first_offset, leader_epoch, config, wall_clock_ms, plan)
    target_codec = config.compression_type.target_codec(analysis.source_codec)
    return _compressed(analysis, data, first_offset, leader_epoch, config, wall_clock_ms, target_codec)


def _in_place_uncompressed(
    analysis: Analysis,
    data: bytes | bytearray | memoryview,
    first_offset: int,
    leader_epoch: int,
    config: LogConfig,
    now_ms: int,
    plan: LeaderPlan,
) -> AssignedOffsets:
    """Stamp each batch without copying it: the first 17 bytes (baseOffset, batchLength,
    partitionLeaderEpoch, magic) are packed anew and the rest of the batch is passed on as a view, to be
    written with one gathering write. A changed maxTimestamp or timestamp type (LogAppendTime) needs a
    whole new header and a CRC computed over it and the untouched records."""
    view = memoryview(data)
    log_append_time, walk_records = plan.log_append_time, plan.walk_records
    next_offset = first_offset
    max_timestamp = NO_TIMESTAMP
    offset_of_max_timestamp = -1
    headers: list[BatchHeader] = []
    parts: list[bytes | bytearray | memoryview] = []
    pack_header = HEADER_STRUCT.pack
    pack_prefix = _LEADER_PREFIX.pack
    new_tuple = tuple.__new__
    crc = crc32c.crc32c
    for header, position in zip(analysis.headers, analysis.positions, strict=True):
        base_offset = next_offset
        next_offset += header.records_count
        if walk_records:
            scan = scan_uncompressed_records(data, header, position)
            _check_timestamp_bounds(scan.min_timestamp, scan.max_timestamp, config, now_ms)
            batch_max_timestamp = scan.max_timestamp
            offset_of_batch_max = base_offset + scan.offset_delta_of_max_timestamp
        else:
            # Header-level validation: the producer's maxTimestamp stands (the CRC vouches for it).
            batch_max_timestamp = header.max_timestamp
            offset_of_batch_max = next_offset - 1
        end = position + header.batch_length + LOG_OVERHEAD
        if log_append_time or batch_max_timestamp != header.max_timestamp:
            # Attributes and maxTimestamp are covered by the CRC: new header, CRC recomputed.
            fields = list(header)
            fields[0] = base_offset
            fields[2] = leader_epoch
            if log_append_time:
                fields[5] = header.attributes | TIMESTAMP_TYPE_MASK
                fields[8] = now_ms
            else:
                fields[8] = batch_max_timestamp
            body = view[position + RECORD_BATCH_OVERHEAD : end]
            fields[4] = crc(body, crc(pack_header(*fields)[ATTRIBUTES_OFFSET:]))
            headers.append(new_tuple(BatchHeader, fields))
            parts.append(pack_header(*fields))
            parts.append(body)
        else:
            # The common case: only baseOffset and partitionLeaderEpoch change, both outside the CRC.
            headers.append(
                new_tuple(BatchHeader, (base_offset, header.batch_length, leader_epoch, *header[3:]))
            )
            parts.append(pack_prefix(base_offset, header.batch_length, leader_epoch))
            parts.append(view[position + PREFIX_SIZE : end])
        if not log_append_time and batch_max_timestamp > max_timestamp:
            max_timestamp = batch_max_timestamp
            offset_of_max_timestamp = offset_of_batch_max
    if log_append_time:
        max_timestamp = now_ms
        offset_of_max_timestamp = next_offset - 1
    return AssignedOffsets(
        parts,
        analysis.valid_bytes,
        headers,
        max_timestamp,
        offset_of_max_timestamp,
        now_ms if log_append_time else NO_TIMESTAMP,
        False,
        CompressionType.NONE,
    )


def _compressed(
    analysis: Analysis,
    data: bytes | bytearray | memoryview,
    first_offset: int,
    leader_epoch: int,
    config: LogConfig,
    now_ms: int,
    target_codec: CompressionType,
) -> AssignedOffsets:
    in_place = analysis.source_codec == target_codec
    log_append_time = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    records: list[Record] = []
    max_timestamp = NO_TIMESTAMP
    batches = [
        RecordBatch(header, memoryview(data)[position : position + header.size_in_bytes], position)
        for header, position in zip(analysis.headers, analysis.positions, strict=True)
    ]
    for batch in batches:
        batch_records = batch.records(check_offset_deltas=True)
        for record in batch_records:
            if record.timestamp > max_timestamp:
                max_timestamp = record.timestamp
        timestamps = [r.timestamp for r in batch_records if r.timestamp != NO_TIMESTAMP]
        if timestamps:
            _check_timestamp_bounds(min(timestamps), max(timestamps), config, now_ms)
        records.extend(batch_records)
    if in_place and len(batches) != 1:
        raise InvalidRecordError(
            f"a compressed append must hold exactly one record batch, this one holds {len(batches)}"
        )
    last_offset = first_offset + len(records) - 1
    if in_place:
        batch = batches[0]
        buffer = bytearray(batch.data)
        set_base_offset(buffer, 0, last_offset - batch.header.last_offset_delta)
        set_partition_leader_epoch(buffer, 0, leader_epoch)
        stamped = now_ms if log_append_time else max_timestamp
        set_max_timestamp(
            buffer,
            0,
            TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME,
            stamped,
        )
        return AssignedOffsets(
            [buffer],
            len(buffer),
            [read_header(buffer, 0)],
            stamped,
            last_offset,
            now_ms if log_append_time else NO_TIMESTAMP,
            rebuilt=False,
            target_codec=target_codec,
        )
    first = analysis.headers[0]
    builder = RecordBatchBuilder(
        compression=target_codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME,
        producer_id=first.producer_id,
        producer_epoch=first.producer_epoch,
        base_sequence=first.base_sequence,
        is_transactional=first.is_transactional,
    )
    for record in records:
        builder.append(SimpleRecord(record.value, record.key, record.headers, record.timestamp))
    rebuilt = builder.build(
        base_offset=first_offset,
        partition_leader_epoch=leader_epoch,
        log_append_time=now_ms if log_append_time else NO_TIMESTAMP,
    )
    if len(rebuilt) > config.max_message_bytes:
        raise RecordTooLargeError(
            f"the record batch rebuilt with {target_codec.name.lower()} is {len(rebuilt)} bytes, larger than "
            f"max.message.bytes {config.max_message_bytes}"
        )
    header = read_header(rebuilt, 0)
    return AssignedOffsets(
        [rebuilt],
        len(rebuilt),
        [header],
        header.max_timestamp,
        last_offset,
        now_ms if log_append_time else NO_TIMESTAMP,
        rebuilt=True,
        target_codec=target_codec,
    )


def one_plain_batch(data: bytes | bytearray | memoryview, max_message_bytes: int) -> BatchHeader | None:
    """What nearly every append carries, checked in one pass: exactly one whole uncompressed v2 batch
    within ``max.message.bytes`` whose CRC holds. Its header, or None when anything is unusual (the
    general path, ``analyze``, then handles it, errors included, so their messages stay in one place).
    The caller adds what its role needs: base offset 0 and ``validate_client_batch`` on the leader,
    offsets at or after the log end offset on a follower."""
    size = len(data)
    if size < RECORD_BATCH_OVERHEAD or size > max_message_bytes:
        return None
    header: BatchHeader = tuple.__new__(BatchHeader, HEADER_STRUCT.unpack_from(data, 0))
    if (
        header.batch_length + LOG_OVERHEAD != size
        or header.magic != MAGIC_V2
        or header.attributes & COMPRESSION_MASK
        or crc32c.crc32c(memoryview(data)[ATTRIBUTES_OFFSET:]) != header.crc
    ):
        return None
    return header


# leader_prefix(first_offset, batch_length, leader_epoch): the first PREFIX_SIZE bytes of a client batch
# as the leader writes it in place; the rest of the batch follows unchanged. (A bound Struct method:
# no Python frame on the hot path.)
leader_prefix: Final = _LEADER_PREFIX.pack
