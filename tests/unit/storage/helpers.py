"""Shared helpers for the storage tests: batch builders, log openers and readers."""

from __future__ import annotations

import random
from collections.abc import Sequence

from runtime.storage.compression import CompressionType
from runtime.storage.config import LogConfig
from runtime.storage.fs import FileSystem
from runtime.storage.log import Log
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import NO_TIMESTAMP, Record, iterate_batches

BASE_TIME_MS = 1_700_000_000_000


def batch(
    *values: bytes,
    base_offset: int = 0,
    timestamp: int = BASE_TIME_MS,
    leader_epoch: int = -1,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """One batch holding ``values`` (records get ``timestamp``, ``timestamp + 1``, ...)."""
    records = [
        SimpleRecord(value, timestamp=timestamp + i if timestamp != NO_TIMESTAMP else NO_TIMESTAMP)
        for i, value in enumerate(values)
    ]
    return build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def open_log(
    fs: FileSystem,
    directory: str = "/logs/topic-0",
    config: LogConfig | None = None,
    *,
    now_ms: int = 0,
    **kwargs: int | bool,
) -> Log:
    return Log.open(fs, directory, config or LogConfig(), now_ms=now_ms, rng=random.Random(7), **kwargs)  # type: ignore[arg-type]


def decode_all(data: bytes) -> list[Record]:
    """Every record of every complete batch in ``data`` (CRC checked)."""
    records: list[Record] = []
    for record_batch in iterate_batches(data):
        record_batch.ensure_valid()
        records.extend(record_batch.records())
    return records


def read_all(log: Log, start_offset: int | None = None) -> list[tuple[int, bytes | None]]:
    """``(offset, value)`` of every record from ``start_offset`` (default: log start) to the end."""
    offset = log.log_start_offset if start_offset is None else start_offset
    seen: list[tuple[int, bytes | None]] = []
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        records = [r for r in decode_all(result.records) if r.offset >= offset]
        if not records:
            break
        seen.extend((r.offset, r.value) for r in records)
        offset = records[-1].offset + 1
    return seen


def values(log: Log) -> list[bytes | None]:
    return [value for _offset, value in read_all(log)]


def append_values(
    log: Log, count: int, *, leader_epoch: int = 0, now_ms: int = 0, prefix: bytes = b"v"
) -> None:
    """``count`` one-record batches appended as leader."""
    start = log.log_end_offset
    for i in range(count):
        log.append_as_leader(
            batch(prefix + str(start + i).encode()), leader_epoch, now_ms=now_ms, wall_clock_ms=BASE_TIME_MS
        )


def one_record_batches(values_: Sequence[bytes], *, base_offset: int, leader_epoch: int = 0) -> list[bytes]:
    return [batch(v, base_offset=base_offset + i, leader_epoch=leader_epoch) for i, v in enumerate(values_)]
