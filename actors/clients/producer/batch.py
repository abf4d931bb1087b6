"""One producer batch and the buffer memory it lives in, pure (docs/producer.md §2).

* ``ProducerBatch``: a partition's records as v2 record-batch bytes (grown by a
  ``RecordBatchBuilder``), the completions waiting on them, its attempts, and the idempotence fields
  stamped before it is closed (and rewritten, CRC included, if its sequence is reset later).
* ``BufferPool``: ``buffer.memory`` as a byte count with a FIFO queue of ``BlockedRecord`` waiters
  (see ``accumulator.py`` for how the accumulator serves them).
* ``estimate_size_upper_bound``: Kafka's per-record size bound, used for room checks, allocation
  and the max.request.size / buffer.memory checks.

Rules kept (Kafka's ``ProducerBatch``/``MemoryRecordsBuilder``/``BufferPool``): the first record always
fits; later ones while ``estimated size + record upper bound <= write limit``, a refusal closing the
batch for appends; once closed, the bytes never change except for a producer-state reset; memory is
never returned twice.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Final, NamedTuple

from actors.clients.producer.protocol import RecordEntry
from actors.common.types import TopicPartition
from runtime.storage.compression import CompressionType
from runtime.storage.record_builder import MAX_RECORD_OVERHEAD, RecordBatchBuilder
from runtime.storage.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    RecordHeader,
    compute_crc,
    increment_sequence,
    iterate_batches,
)
from runtime.storage.varint import size_of_varint

__all__ = ["NO_DEADLINE", "BlockedRecord", "BufferPool", "ProducerBatch", "estimate_size_upper_bound"]

NO_DEADLINE: Final = 2**63 - 1
_PRODUCER_STATE: Final = struct.Struct(">qhi")  # producer id, producer epoch, base sequence
_PRODUCER_ID_OFFSET: Final = 43
_UINT32: Final = struct.Struct(">I")


def estimate_size_upper_bound(
    key: bytes | None, value: bytes | None, headers: tuple[RecordHeader, ...] | list[RecordHeader] = ()
) -> int:
    """Upper bound of one record's encoded size (Kafka's ``estimateSizeInBytesUpperBound`` without
    the batch header). Inlined for the two common shapes: it runs once per record."""
    size = MAX_RECORD_OVERHEAD
    size += 1 if key is None else size_of_varint(len(key)) + len(key)
    size += 1 if value is None else size_of_varint(len(value)) + len(value)
    if not headers:
        return size + 1
    size += size_of_varint(len(headers))
    for header in headers:
        encoded = header.key.encode("utf-8")
        size += size_of_varint(len(encoded)) + len(encoded)
        size += 1 if header.value is None else size_of_varint(len(header.value)) + len(header.value)
    return size


class ProducerBatch:
    """One partition's batch: records as bytes, the completions waiting on them, and its attempts.

    Open, it grows through its builder; closed (``close()``, at drain), it is the bytes sent on every
    attempt. Producer id, epoch and base sequence are stamped before it closes; a later reset
    (sequence adjustment after a failed batch, or a new producer id) rewrites them in the closed
    bytes and recomputes the CRC (Kafka's ``resetProducerState``)."""

    __slots__ = (
        "_builder",
        "_data",
        "_estimated_size",
        "_write_limit",
        "attempts",
        "base_sequence",
        "buffer_size",
        "created_ms",
        "done",
        "drained_ms",
        "full",
        "in_retry",
        "is_split",
        "last_attempt_ms",
        "producer_epoch",
        "producer_id",
        "records",
        "sent_as_next_sequence",
        "sequence_reset",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        created_ms: int,
        *,
        write_limit: int,
        buffer_size: int,
        compression: CompressionType = CompressionType.NONE,
    ) -> None:
        self.tp = tp
        self.created_ms = created_ms
        self.last_attempt_ms = created_ms
        self.drained_ms = created_ms
        self.attempts = 0
        self.in_retry = False
        self.buffer_size = buffer_size
        self.records: list[RecordEntry] = []
        self._write_limit = write_limit
        self._builder: RecordBatchBuilder | None = RecordBatchBuilder(
            compression=compression, write_limit=write_limit
        )
        self._estimated_size = RECORD_BATCH_OVERHEAD
        self._data: bytes | None = None
        self.full = False
        self.done = False
        self.is_split = False
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.sequence_reset = False
        # Whether every earlier sequence of its partition was acknowledged when this attempt was
        # sent (see idempotence.py: requests to a broker are not ordered in transit here).
        self.sent_as_next_sequence = False

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.tp}, records={len(self.records)}, created_ms={self.created_ms}, "
            f"attempts={self.attempts}, base_sequence={self.base_sequence})"
        )

    # ----------------------------------------------------------------------------- appending

    def try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[RecordHeader, ...],
        completion: object,
        size_upper_bound: int,
    ) -> bool:
        """Append one record if it has room (see the module's room rule); False closes the batch
        for appends."""
        builder = self._builder
        if builder is None or self.full:
            return False
        if self.records and self._estimated_size + size_upper_bound > self._write_limit:
            self.full = True
            return False
        builder.append_fields(timestamp, key, value, headers)
        self._estimated_size = builder.estimated_size_in_bytes
        self.records.append(
            (completion, timestamp, -1 if key is None else len(key), -1 if value is None else len(value))
        )
        return True

    @property
    def record_count(self) -> int:
        return len(self.records)

    @property
    def is_full(self) -> bool:
        """Closed for appends, or its estimated size reached the write limit."""
        return self.full or self._builder is None or self._estimated_size >= self._write_limit

    @property
    def estimated_size_in_bytes(self) -> int:
        """The bytes it will take: exact once closed, the uncompressed estimate before."""
        return len(self._data) if self._data is not None else self._estimated_size

    # ------------------------------------------------------------------------- producer state

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, len(self.records) - 1)

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Stamp idempotence fields on a batch that was never sent."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        if self._data is not None:
            self._rewrite_producer_state()

    def reset_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Re-stamp a batch that was already sent (Kafka's ``resetProducerState``): its next attempt
        carries the new sequence; ``sequence_reset`` stays set until it is drained again."""
        self.sequence_reset = True
        self.set_producer_state(producer_id, producer_epoch, base_sequence)

    def _rewrite_producer_state(self) -> None:
        assert self._data is not None
        data = bytearray(self._data)
        _PRODUCER_STATE.pack_into(
            data, _PRODUCER_ID_OFFSET, self.producer_id, self.producer_epoch, self.base_sequence
        )
        _UINT32.pack_into(data, CRC_OFFSET, compute_crc(data, 0, len(data)))
        assert ATTRIBUTES_OFFSET < _PRODUCER_ID_OFFSET  # the producer state is covered by the CRC
        self._data = bytes(data)

    # ------------------------------------------------------------------------------ lifecycle

    def close(self) -> bytes:
        """The batch's bytes, built on first call (no appends after that)."""
        if self._data is None:
            builder = self._builder
            assert builder is not None
            assert self.records, "closing an empty batch"
            builder.set_producer_state(self.producer_id, self.producer_epoch, self.base_sequence)
            self._data = builder.build()
            self._builder = None  # the record area now lives in the built bytes only
        self.sequence_reset = False
        return self._data

    @property
    def is_closed(self) -> bool:
        return self._data is not None

    def drained(self, now_ms: int) -> None:
        self.drained_ms = max(self.drained_ms, now_ms)

    def reenqueued(self, now_ms: int) -> None:
        self.attempts += 1
        self.last_attempt_ms = max(self.last_attempt_ms, now_ms)
        self.drained_ms = max(self.drained_ms, now_ms)
        self.in_retry = True

    def waited_ms(self, now_ms: int) -> int:
        return max(now_ms - self.last_attempt_ms, 0)

    def has_reached_delivery_timeout(self, delivery_timeout_ms: int, now_ms: int) -> bool:
        return delivery_timeout_ms <= now_ms - self.created_ms

    def split(self, split_batch_size: int) -> list[ProducerBatch]:
        """Kafka's ``ProducerBatch.split`` for MESSAGE_TOO_LARGE: the records again, in batches of at
        most ``split_batch_size`` (a single record may exceed it), same creation time, memory
        outside the pool, sequences continuing from this batch's when it had one."""
        records = [r for batch in iterate_batches(self.close()) for r in batch.records()]
        assert len(records) == len(self.records)
        compression = CompressionType.NONE
        for parsed in iterate_batches(self.close()):
            compression = parsed.header.compression
        parts: list[ProducerBatch] = []
        current: ProducerBatch | None = None
        for record, (completion, timestamp, _, _) in zip(records, self.records, strict=True):
            size = estimate_size_upper_bound(record.key, record.value, record.headers)
            if current is None or not current.try_append(
                timestamp, record.key, record.value, record.headers, completion, size
            ):
                current = ProducerBatch(
                    self.tp,
                    self.created_ms,
                    write_limit=max(split_batch_size, RECORD_BATCH_OVERHEAD + size),
                    buffer_size=0,
                    compression=compression,
                )
                current.is_split = True
                ok = current.try_append(timestamp, record.key, record.value, record.headers, completion, size)
                assert ok
                parts.append(current)
        if self.has_sequence:
            sequence = self.base_sequence
            for part in parts:
                part.set_producer_state(self.producer_id, self.producer_epoch, sequence)
                sequence = increment_sequence(sequence, part.record_count)
        return parts


class BlockedRecord(NamedTuple):
    """A record waiting for buffer memory (a BufferPool waiter), with its max.block.ms deadline."""

    tp: TopicPartition
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...]
    completion: object
    size_upper_bound: int
    deadline_ms: int


class BufferPool:
    """``buffer.memory`` as a byte count, with FIFO waiters as data (see the module docstring)."""

    def __init__(self, total_memory: int, poolable_size: int) -> None:
        self.total_memory = total_memory
        self.poolable_size = poolable_size
        self.available_memory = total_memory
        self.waiters: deque[BlockedRecord] = deque()
        self._earliest_deadline_ms = NO_DEADLINE

    @property
    def exhausted(self) -> bool:
        """Someone waits for memory (Kafka's ``queued() > 0``)."""
        return bool(self.waiters)

    def try_allocate(self, size: int) -> bool:
        """Take ``size`` bytes if they are free and nobody waits before us."""
        if size > self.total_memory:
            raise ValueError(
                f"attempt to allocate {size} bytes, but there is a hard limit of {self.total_memory} "
                "on memory allocations (buffer.memory)"
            )
        if self.waiters or size > self.available_memory:
            return False
        self.available_memory -= size
        return True

    def take_for_head_waiter(self, size: int) -> bool:
        """Memory for the first waiter, which goes before everyone."""
        if size > self.available_memory:
            return False
        self.available_memory -= size
        return True

    def deallocate(self, size: int) -> None:
        self.available_memory += size
        assert self.available_memory <= self.total_memory, "more memory returned than allocated"

    def enqueue(self, waiter: BlockedRecord) -> None:
        self.waiters.append(waiter)
        self._earliest_deadline_ms = min(self._earliest_deadline_ms, waiter.deadline_ms)

    def next_deadline_ms(self) -> int:
        return self._earliest_deadline_ms if self.waiters else NO_DEADLINE

    def expire_waiters(self, now_ms: int) -> list[BlockedRecord]:
        """Waiters whose max.block.ms deadline passed, removed from the queue in order."""
        if not self.waiters or now_ms < self._earliest_deadline_ms:
            return []
        expired = [w for w in self.waiters if w.deadline_ms <= now_ms]
        self.waiters = deque(w for w in self.waiters if w.deadline_ms > now_ms)
        self._earliest_deadline_ms = min((w.deadline_ms for w in self.waiters), default=NO_DEADLINE)
        return expired

    def take_all_waiters(self) -> list[BlockedRecord]:
        waiters = list(self.waiters)
        self.waiters.clear()
        self._earliest_deadline_ms = NO_DEADLINE
        return waiters
