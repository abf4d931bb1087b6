"""Checking appended bytes and, on the leader, assigning offsets (Kafka's ``Log.analyzeAndValidateRecords``
and ``LogValidator.validateMessagesAndAssignOffsets``). Sans-I/O.

``analyze`` (leader and follower): frame every batch, check magic, size against ``max.message.bytes``
(``RecordTooLargeError``) and CRC (``CorruptRecordError``); client batches must have base offset 0.
A trailing partial batch is trimmed, as Kafka does (``valid_bytes``).

``assign_offsets`` (leader only), kafka-semantics.md §9.3:

* every client batch: ``lastOffsetDelta + 1 == recordsCount > 0``, not a control batch, a producer id
  needs a base sequence >= 0, CreateTime (a client never claims LogAppendTime);
* uncompressed, or compressed with the topic's codec (``compression.type`` = ``producer`` or the
  same codec): **in place**. The records are walked, never re-encoded (uncompressed batches by
  ``scan_uncompressed_records``, compressed ones decompressed to check inner offset deltas 0, 1, 2,
  ...); baseOffset and partitionLeaderEpoch are rewritten, and maxTimestamp/attributes (then the CRC)
  only when they change. Compressed in place needs exactly one batch.
* otherwise: **rebuild** one batch with the target codec, offsets from the log end offset, the first
  batch's producer id/epoch/sequence, and re-check its size.
* CreateTime bounds: ``|timestamp - now| <= message.timestamp.difference.max.ms`` for every record
  timestamp other than -1 (``InvalidTimestampError``); LogAppendTime stamps ``now`` as max timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.storage.compression import CompressionType
from runtime.storage.config import LONG_MAX, LogConfig
from runtime.storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from runtime.storage.record_builder import RecordBatchBuilder, SimpleRecord
from runtime.storage.records import (
    NO_TIMESTAMP,
    BatchHeader,
    Record,
    RecordBatch,
    TimestampType,
    iterate_batches,
    read_header,
    scan_uncompressed_records,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)

__all__ = ["Analysis", "AssignedOffsets", "analyze", "assign_offsets"]


@dataclass(frozen=True, slots=True)
class Analysis:
    """What ``analyze`` found in the appended bytes (Kafka's ``LogAppendInfo`` before the append)."""

    batches: list[RecordBatch]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    valid_bytes: int
    offsets_monotonic: bool
    source_codec: CompressionType


def analyze(data: bytes | bytearray | memoryview, *, from_client: bool, max_message_bytes: int) -> Analysis:
    batches: list[RecordBatch] = []
    first_offset = -1
    last_offset = -1
    max_timestamp = NO_TIMESTAMP
    offset_of_max_timestamp = -1
    record_count = 0
    valid_bytes = 0
    monotonic = True
    source_codec = CompressionType.NONE
    for batch in iterate_batches(data):
        header = batch.header
        if from_client and not batches and header.base_offset != 0:
            raise InvalidRecordError(
                f"the base offset of the record batch in a client append should be 0, but it is {header.base_offset}"
            )
        if header.size_in_bytes > max_message_bytes:
            raise RecordTooLargeError(
                f"the record batch at offset {header.base_offset} is {header.size_in_bytes} bytes, larger than "
                f"max.message.bytes {max_message_bytes}"
            )
        batch.ensure_valid()
        if first_offset < 0:
            first_offset = header.base_offset
        if last_offset >= header.last_offset:
            monotonic = False
        last_offset = header.last_offset
        if header.max_timestamp > max_timestamp:
            max_timestamp = header.max_timestamp
            offset_of_max_timestamp = last_offset
        record_count += header.records_count
        valid_bytes += header.size_in_bytes
        if header.compression != CompressionType.NONE:
            source_codec = header.compression
        batches.append(batch)
    return Analysis(
        batches,
        first_offset,
        last_offset,
        max_timestamp,
        offset_of_max_timestamp,
        record_count,
        valid_bytes,
        monotonic,
        source_codec,
    )


@dataclass(frozen=True, slots=True)
class AssignedOffsets:
    """The leader's validated bytes with offsets, epochs and timestamps stamped."""

    records: bytes | bytearray
    headers: list[BatchHeader]
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    rebuilt: bool
    target_codec: CompressionType


def _validate_batch(header: BatchHeader) -> None:
    where = f"record batch (base offset {header.base_offset})"
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecordError(f"{where} has last offset delta {header.last_offset_delta}")
    if header.records_count <= 0 or header.records_count != count_from_offsets:
        raise InvalidRecordError(
            f"{where} has {header.records_count} records but its offset delta implies {count_from_offsets}"
        )
    if header.is_control_batch:
        raise InvalidRecordError(f"{where}: clients are not allowed to write control records")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordError(
            f"{where}: producer id {header.producer_id} with invalid base sequence {header.base_sequence}"
        )
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        raise InvalidTimestampError(f"{where}: a producer should not set the timestamp type to LogAppendTime")


def _check_timestamp_bounds(min_timestamp: int, max_timestamp: int, config: LogConfig, now_ms: int) -> None:
    limit = config.message_timestamp_difference_max_ms
    if config.message_timestamp_type != TimestampType.CREATE_TIME or limit == LONG_MAX:
        return
    for timestamp in (min_timestamp, max_timestamp):
        if timestamp != NO_TIMESTAMP and abs(timestamp - now_ms) > limit:
            raise InvalidTimestampError(
                f"record timestamp {timestamp} is out of range: it differs from the broker time {now_ms} by more "
                f"than message.timestamp.difference.max.ms {limit}"
            )


def assign_offsets(
    analysis: Analysis,
    data: bytes | bytearray | memoryview,
    *,
    first_offset: int,
    leader_epoch: int,
    config: LogConfig,
    wall_clock_ms: int,
) -> AssignedOffsets:
    """Validate client batches and stamp them with offsets from ``first_offset`` (see module doc)."""
    for batch in analysis.batches:
        _validate_batch(batch.header)
    target_codec = config.compression_type.target_codec(analysis.source_codec)
    if analysis.source_codec == CompressionType.NONE and target_codec == CompressionType.NONE:
        return _in_place_uncompressed(analysis, data, first_offset, leader_epoch, config, wall_clock_ms)
    return _compressed(analysis, first_offset, leader_epoch, config, wall_clock_ms, target_codec)


def _in_place_uncompressed(
    analysis: Analysis,
    data: bytes | bytearray | memoryview,
    first_offset: int,
    leader_epoch: int,
    config: LogConfig,
    now_ms: int,
) -> AssignedOffsets:
    buffer = bytearray(data[: analysis.valid_bytes])
    log_append_time = config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    next_offset = first_offset
    max_timestamp = NO_TIMESTAMP
    offset_of_max_timestamp = -1
    headers: list[BatchHeader] = []
    for batch in analysis.batches:
        header = batch.header
        scan = scan_uncompressed_records(buffer, header, batch.position)
        _check_timestamp_bounds(scan.min_timestamp, scan.max_timestamp, config, now_ms)
        base_offset = next_offset
        next_offset += header.records_count
        set_base_offset(buffer, batch.position, base_offset)
        set_partition_leader_epoch(buffer, batch.position, leader_epoch)
        if log_append_time:
            set_max_timestamp(buffer, batch.position, TimestampType.LOG_APPEND_TIME, now_ms)
        else:
            set_max_timestamp(buffer, batch.position, TimestampType.CREATE_TIME, scan.max_timestamp)
            if scan.max_timestamp > max_timestamp:
                max_timestamp = scan.max_timestamp
                offset_of_max_timestamp = base_offset + scan.offset_delta_of_max_timestamp
        headers.append(read_header(buffer, batch.position))
    if log_append_time:
        max_timestamp = now_ms
        offset_of_max_timestamp = next_offset - 1
    return AssignedOffsets(
        buffer,
        headers,
        max_timestamp,
        offset_of_max_timestamp,
        now_ms if log_append_time else NO_TIMESTAMP,
        rebuilt=False,
        target_codec=CompressionType.NONE,
    )


def _compressed(
    analysis: Analysis,
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
    for batch in analysis.batches:
        batch_records = batch.records(check_offset_deltas=True)
        if len(batch_records) != batch.header.records_count:
            raise InvalidRecordError(
                f"record batch (base offset {batch.header.base_offset}) record count mismatch"
            )
        for record in batch_records:
            if record.timestamp > max_timestamp:
                max_timestamp = record.timestamp
        timestamps = [r.timestamp for r in batch_records if r.timestamp != NO_TIMESTAMP]
        if timestamps:
            _check_timestamp_bounds(min(timestamps), max(timestamps), config, now_ms)
        records.extend(batch_records)
    if in_place and len(analysis.batches) != 1:
        raise InvalidRecordError(
            f"a compressed append must hold exactly one record batch, this one holds {len(analysis.batches)}"
        )
    last_offset = first_offset + len(records) - 1
    if in_place:
        batch = analysis.batches[0]
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
            buffer,
            [read_header(buffer, 0)],
            stamped,
            last_offset,
            now_ms if log_append_time else NO_TIMESTAMP,
            rebuilt=False,
            target_codec=target_codec,
        )
    first = analysis.batches[0].header
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
        rebuilt,
        [header],
        header.max_timestamp,
        last_offset,
        now_ms if log_append_time else NO_TIMESTAMP,
        rebuilt=True,
        target_codec=target_codec,
    )
