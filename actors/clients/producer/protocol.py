"""Messages between the producer client library and its ProducerActor, and what a send results in.

Both sides live on the client's node, so none of these cross the wire (they are not ``@wire``).

* ``SendRecords``: the client library hands over every record sent during one event-loop turn in
  one message (a chunk), so the per-record cost is an append to a list, not an actor message.
  Each record is an ``OutgoingRecord`` carrying an opaque ``completion`` (the library's future)
  that comes back with its result.
* ``ProducerResults`` (producer → the results ref given at construction): the outcome of whole
  batches, ``BatchOutcome``, from which each record's ``RecordMetadata`` or error is derived.
  One message per handler that finished anything.
* ``BeginFlush`` / ``EndFlush``: Kafka's ``flushInProgress``: while a flush is in progress every
  batch is sendable at once (linger.ms is not waited for). The library waits for the futures.
* ``CloseProducer`` (ask): no further records are accepted; everything pending is sent (as with a
  flush) and the answer ``ProducerClosed`` comes once nothing is left. ``AbortProducer`` fails
  whatever is still pending with ``ProducerClosedError`` (a forced close).
* ``PartitionsFor`` (ask): the partitions of a topic, waiting for metadata up to max.block.ms.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias

from actors.clients.producer.errors import ProducerError
from runtime.storage.records import RecordHeader

__all__ = [
    "AbortProducer",
    "BatchOutcome",
    "BeginFlush",
    "CloseProducer",
    "EndFlush",
    "OutgoingRecord",
    "PartitionsFor",
    "PartitionsForResponse",
    "ProducerClosed",
    "ProducerResults",
    "RecordEntry",
    "RecordMetadata",
    "SendRecords",
]

NO_PARTITION = -1


class OutgoingRecord(NamedTuple):
    """One record as ``send`` took it. A NamedTuple, not a dataclass: one is made per record on the
    hot path, and a tuple is several times cheaper to build. ``partition`` is -1 to let the
    partitioner choose; ``timestamp`` is the CreateTime in Unix-epoch ms."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...]
    timestamp: int
    completion: object


RecordEntry: TypeAlias = tuple[object, int, int, int]
"""What a batch remembers of each record until it completes: ``(completion, timestamp,
serialized key size, serialized value size)``, sizes -1 for a null key/value (as Kafka reports)."""


class RecordMetadata(NamedTuple):
    """Where an acknowledged record was written. ``offset`` is -1 when it is not known (acks=0).
    ``timestamp`` is the record's CreateTime, or the broker's LogAppendTime for such topics. A
    NamedTuple for the reason ``OutgoingRecord`` is one: a producer makes one per record."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int

    @property
    def has_offset(self) -> bool:
        return self.offset >= 0


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """The result of a group of records: either all written from ``base_offset`` (in order), or all
    failed with ``error``. ``partition`` is -1 for records that failed before reaching a partition
    (no metadata, no memory, too large)."""

    topic: str
    partition: int
    base_offset: int
    log_append_time_ms: int
    records: Sequence[RecordEntry]
    error: ProducerError | None = None

    def results(self) -> Iterator[tuple[object, RecordMetadata | ProducerError]]:
        """(completion, metadata or error) for each record, in order."""
        error = self.error
        if error is not None:
            for entry in self.records:
                yield entry[0], error
            return
        topic, partition, base, append_time = (
            self.topic,
            self.partition,
            self.base_offset,
            self.log_append_time_ms,
        )
        for index, (completion, timestamp, key_size, value_size) in enumerate(self.records):
            yield (
                completion,
                RecordMetadata(
                    topic,
                    partition,
                    base + index if base >= 0 else -1,
                    append_time if append_time >= 0 else timestamp,
                    key_size,
                    value_size,
                ),
            )


@dataclass(frozen=True, slots=True)
class SendRecords:
    records: Sequence[OutgoingRecord]


@dataclass(frozen=True, slots=True)
class ProducerResults:
    """Outcomes of finished records. ``stopped`` says the producer actor has stopped (closed, or
    failed): nothing more will complete, and later sends cannot."""

    outcomes: Sequence[BatchOutcome]
    stopped: bool = False


@dataclass(frozen=True, slots=True)
class BeginFlush:
    pass


@dataclass(frozen=True, slots=True)
class EndFlush:
    pass


@dataclass(frozen=True, slots=True)
class CloseProducer:
    pass


@dataclass(frozen=True, slots=True)
class ProducerClosed:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortProducer:
    reason: str = "the producer was closed forcefully"


@dataclass(frozen=True, slots=True)
class PartitionsFor:
    topic: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsForResponse:
    topic: str
    partitions: tuple[int, ...] = ()
    error: ProducerError | None = None
