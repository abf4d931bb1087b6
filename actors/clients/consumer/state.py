"""The consumer's pure state: assignment, positions, pending offset resets, buffered records.

Kafka's ``SubscriptionState`` plus the completed-fetch buffer of its ``Fetcher``, without I/O:

* each assigned partition has a *position* (the offset of the next record ``poll`` returns) or a
  pending reset (earliest / latest) that a ListOffsets answer resolves;
* a partition is *fetchable* when it has a position, is not paused, has no error and holds the
  records of at most one fetch: the next fetch goes out while the previous one's records are
  handed out (Kafka sends it only once they all were, then decodes lazily as poll goes; decoding
  here is done as a fetch arrives, so the fetch ahead keeps the broker busy meanwhile). Memory
  stays bounded by two fetches per partition;
* the next fetch of a partition starts after its last buffered record (its position when none);
  a fetch answer is applied only if the partition is still assigned and would be fetched from that
  same offset (a seek meanwhile makes it stale); records before the fetch offset (a batch starting
  earlier) are skipped; the position moves as records are handed out by ``take``, never before;
* an error answering a fetch ahead, while records are still buffered, is left for the fetch made
  from the position once they are handed out (so an out-of-range reset never drops them);
* OFFSET_OUT_OF_RANGE resets the position with ``auto.offset.reset`` (``none``: the error is kept
  for the next poll to raise);
* partitions take turns: ``take`` hands out buffers in order and a partition it drains goes to the
  back, so one partition fetched again at once cannot hold back the others' records (whose
  partitions, meanwhile, are not fetched).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from actors.clients.consumer.config import OffsetResetStrategy
from actors.common.errors import ErrorCode, KafkaError
from actors.common.protocol import FetchPartitionResponse
from actors.common.types import TopicPartition
from runtime.storage.errors import StorageError
from runtime.storage.records import TimestampType, decode_record_rows, iterate_batches

__all__ = ["ConsumerRecord", "PartitionPosition", "SubscriptionState"]


class ConsumerRecord(NamedTuple):
    """One record handed out by ``poll``. A NamedTuple, as kafka-python's ``ConsumerRecord`` is:
    the consumer makes one per record fetched, and a tuple is several times cheaper to make than a
    frozen dataclass. It is immutable; read it by field name."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    leader_epoch: int = -1


@dataclass(slots=True)
class PartitionPosition:
    position: int | None = None
    reset: OffsetResetStrategy | None = None
    paused: bool = False
    high_watermark: int = -1
    log_start_offset: int = -1
    buffered: deque[ConsumerRecord] = field(default_factory=deque)
    # How many records of each fetch are still buffered, oldest first.
    fetch_counts: deque[int] = field(default_factory=deque)
    # A fetch ahead failed: fetch again only from the position, once the buffer is empty.
    ahead_failed: bool = False
    error: KafkaError | None = None

    @property
    def fetch_offset(self) -> int | None:
        """Where the next fetch starts: after the last buffered record, else at the position."""
        return self.buffered[-1].offset + 1 if self.buffered else self.position

    def clear_buffer(self) -> None:
        self.buffered.clear()
        self.fetch_counts.clear()
        self.ahead_failed = False


class SubscriptionState:
    def __init__(self, default_reset: OffsetResetStrategy) -> None:
        self.default_reset = default_reset
        self.partitions: dict[TopicPartition, PartitionPosition] = {}

    # ---------------------------------------------------------------------------- assignment

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Replace the assignment; partitions kept keep their position (Kafka's assign)."""
        wanted = list(dict.fromkeys(tps))
        self.partitions = {
            tp: self.partitions.get(tp) or PartitionPosition(reset=self.default_reset) for tp in wanted
        }

    def assignment(self) -> list[TopicPartition]:
        return list(self.partitions)

    def _state(self, tp: TopicPartition) -> PartitionPosition:
        state = self.partitions.get(tp)
        if state is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{tp} is not assigned to this consumer")
        return state

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"seek offset must not be negative, got {offset}")
        state = self._state(tp)
        state.position, state.reset, state.error = offset, None, None
        state.clear_buffer()

    def request_reset(self, tp: TopicPartition, strategy: OffsetResetStrategy) -> None:
        state = self._state(tp)
        state.position, state.reset, state.error = None, strategy, None
        state.clear_buffer()

    def pause(self, tps: Iterable[TopicPartition], paused: bool) -> None:
        for tp in tps:
            self._state(tp).paused = paused

    # --------------------------------------------------------------------------------- queries

    def position(self, tp: TopicPartition) -> int | None:
        return self._state(tp).position

    def fetch_offset(self, tp: TopicPartition) -> int | None:
        return self._state(tp).fetch_offset

    def caught_up(self, tp: TopicPartition) -> bool:
        """The partition's next fetch starts at the high watermark its last answer gave."""
        state = self._state(tp)
        offset = state.fetch_offset
        return state.high_watermark >= 0 and offset is not None and offset >= state.high_watermark

    def needs_reset(self) -> dict[TopicPartition, OffsetResetStrategy]:
        return {
            tp: s.reset
            for tp, s in self.partitions.items()
            if s.reset is not None and s.reset is not OffsetResetStrategy.NONE
        }

    def fetchable(self) -> list[TopicPartition]:
        return [
            tp
            for tp, s in self.partitions.items()
            if s.position is not None
            and not s.paused
            and s.error is None
            and (not s.buffered or (len(s.fetch_counts) == 1 and not s.ahead_failed))
        ]

    def has_buffered(self) -> bool:
        return any(s.buffered or s.error is not None for s in self.partitions.values())

    # ------------------------------------------------------------------------------- updates

    def reset_to(self, tp: TopicPartition, strategy: OffsetResetStrategy, offset: int) -> None:
        """A ListOffsets answer for a reset: applied only if that reset is still pending."""
        state = self.partitions.get(tp)
        if state is not None and state.reset is strategy:
            state.position, state.reset = offset, None

    def apply_fetch(
        self, tp: TopicPartition, fetch_offset: int, data: FetchPartitionResponse, *, check_crcs: bool
    ) -> bool:
        """Apply a partition's fetch answer; True when it says the metadata is stale."""
        state = self.partitions.get(tp)
        if state is None or state.position is None or state.fetch_offset != fetch_offset:
            return False  # unassigned, or sought elsewhere meanwhile
        error = data.error_code
        if error is ErrorCode.NONE:
            state.high_watermark = data.high_watermark
            state.log_start_offset = data.log_start_offset
            try:
                records = _decode(tp, data.records, fetch_offset, check_crcs=check_crcs)
                if records:
                    state.buffered += records
                    state.fetch_counts.append(len(records))
            except StorageError as corrupt:
                state.error = KafkaError(
                    ErrorCode.CORRUPT_MESSAGE, f"{tp} at offset {fetch_offset}: {corrupt}"
                )
            return False
        if state.buffered:
            state.ahead_failed = True
            return bool(error.invalid_metadata or error is ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.default_reset is OffsetResetStrategy.NONE:
                state.error = KafkaError(
                    error,
                    "Offsets out of range with no configured reset policy for partitions: "
                    f"{{{tp}={fetch_offset}}}",
                )
                return False
            self.request_reset(tp, self.default_reset)
            return False
        if error.invalid_metadata or error in (
            ErrorCode.REPLICA_NOT_AVAILABLE,
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ):
            return True
        if error.retriable:
            return False
        state.error = KafkaError(error, data.error_message or f"fetch of {tp} failed")
        return False

    def take(self, max_records: int) -> tuple[list[ConsumerRecord], KafkaError | None]:
        """Hand out up to ``max_records`` buffered records, moving positions past them; a stored
        error is raised once, after the records before it. Fetches are handed out in turn, as
        Kafka's fetcher drains its completed fetches in the order they came: a partition gives
        the records of its oldest fetch, and once they are all out it goes to the back."""
        taken: list[ConsumerRecord] = []
        done: list[TopicPartition] = []
        error: KafkaError | None = None
        for tp, state in self.partitions.items():
            buffered = state.buffered
            if buffered:
                counts = state.fetch_counts
                wanted = min(max_records - len(taken), counts[0])
                if wanted == len(buffered):
                    taken += buffered
                    buffered.clear()
                else:
                    taken += [buffered.popleft() for _ in range(wanted)]
                state.position = taken[-1].offset + 1
                counts[0] -= wanted
                if counts[0] == 0:
                    counts.popleft()
                    done.append(tp)
                if not buffered:
                    state.ahead_failed = False
            if state.error is not None and not buffered and not taken:
                error, state.error = state.error, None
                break
            if len(taken) >= max_records:
                break
        for tp in done:
            self.partitions[tp] = self.partitions.pop(tp)
        return taken, error


def _decode(tp: TopicPartition, data: bytes, fetch_offset: int, *, check_crcs: bool) -> list[ConsumerRecord]:
    records: list[ConsumerRecord] = []
    topic, partition = tp.topic, tp.partition
    make = tuple.__new__  # ConsumerRecord's fields in order, without its Python-level __new__
    for batch in iterate_batches(data):
        header = batch.header
        if header.last_offset < fetch_offset or header.is_control_batch:
            continue
        if check_crcs:
            batch.ensure_valid()
        timestamp_type = header.timestamp_type
        epoch = header.partition_leader_epoch
        rows = decode_record_rows(header, batch.data, batch.position, from_offset=fetch_offset)
        if timestamp_type is TimestampType.LOG_APPEND_TIME:
            # Every record of a LogAppendTime batch has the batch's maxTimestamp.
            stamp = header.max_timestamp
            records += [
                make(ConsumerRecord, (topic, partition, o, stamp, timestamp_type, k, v, h, epoch))
                for o, _, k, v, h in rows
            ]
        else:
            records += [
                make(ConsumerRecord, (topic, partition, o, t, timestamp_type, k, v, h, epoch))
                for o, t, k, v, h in rows
            ]
    return records
