"""The RecordAccumulator on the manual clock: docs/scenarios.md §5 scenarios 39–42 (Kafka's
RecordAccumulatorTest), plus buffer memory (waiting, serving, max.block.ms), drain fairness,
max.request.size, expiry, retries in sequence order and batch splitting.

Expected record counts are derived from the storage layer's own encoder (how many bytes n records
take in a built batch) and the room rule, never from the accumulator under test."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from actors.clients.producer.accumulator import (
    ABORTED_FOR_NEW_BATCH,
    APPENDED,
    BLOCKED,
    NEW_BATCH,
    RecordAccumulator,
)
from actors.clients.producer.batch import NO_DEADLINE, ProducerBatch, estimate_size_upper_bound
from actors.common.types import TopicPartition
from runtime.clock import ManualClock
from runtime.storage.compression import CompressionType
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import NO_SEQUENCE, RECORD_BATCH_OVERHEAD, iterate_batches

KEY = b"key"
VALUE = b"value"
TP1 = TopicPartition("test", 0)
TP2 = TopicPartition("test", 1)
TP3 = TopicPartition("test", 2)
NODE1 = 1
NODE2 = 2
FAR_DEADLINE = 10**12


@dataclass
class FakeMetadata:
    """Leaders as a test decides them (the accumulator's MetadataView)."""

    leaders: dict[TopicPartition, int] = field(default_factory=dict)

    def leader_of(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp)

    def partitions_for_node(self, node: int) -> Sequence[TopicPartition]:
        return sorted(
            (tp for tp, leader in self.leaders.items() if leader == node), key=lambda tp: tp.partition
        )


def cluster() -> FakeMetadata:
    """tp1 and tp2 led by node 1, tp3 by node 2 (Kafka's test cluster)."""
    return FakeMetadata({TP1: NODE1, TP2: NODE1, TP3: NODE2})


def accumulator(
    *,
    batch_size: int = 1024 + RECORD_BATCH_OVERHEAD,
    buffer_memory: int = 10 * 1024,
    linger_ms: int = 10,
    retry_backoff_ms: int = 100,
    delivery_timeout_ms: int = 120_000,
    idempotent: bool = False,
    compression: CompressionType = CompressionType.NONE,
) -> RecordAccumulator:
    return RecordAccumulator(
        batch_size=batch_size,
        linger_ms=linger_ms,
        buffer_memory=buffer_memory,
        retry_backoff_ms=retry_backoff_ms,
        delivery_timeout_ms=delivery_timeout_ms,
        compression=compression,
        idempotent=idempotent,
    )


def append(
    accum: RecordAccumulator,
    tp: TopicPartition,
    clock: ManualClock,
    *,
    key: bytes | None = KEY,
    value: bytes | None = VALUE,
    completion: object = None,
    deadline_ms: int = FAR_DEADLINE,
    abort_on_new_batch: bool = False,
) -> int:
    size = estimate_size_upper_bound(key, value)
    return accum.append(
        tp, 0, key, value, (), completion, size, clock.now_ms(), deadline_ms, abort_on_new_batch
    )


def expected_num_appends(write_limit: int, key: bytes = KEY, value: bytes = VALUE) -> int:
    """How many records fit one batch: the n-th goes in while the bytes of n-1 records (as the
    storage encoder builds them) plus the next record's upper bound stay within the limit."""
    upper_bound = estimate_size_upper_bound(key, value)
    count = 1
    while True:
        built = len(build_batch([SimpleRecord(value, key, (), 0)] * count))
        if built + upper_bound > write_limit:
            return count
        count += 1


def decoded(batch: ProducerBatch) -> list[tuple[bytes | None, bytes | None]]:
    return [(r.key, r.value) for b in iterate_batches(batch.close()) for r in b.records()]


# ------------------------------------------------------------------------------------ #39


def test_full_batch_makes_the_leader_ready_and_drains_with_all_its_records() -> None:
    """docs/scenarios.md §5 #39 (testFull): records fill one batch without making anything ready; the next one
    opens a second batch (deque > 1) and the leader becomes ready; drain returns the first batch."""
    clock = ManualClock()
    batch_size = 1025 + RECORD_BATCH_OVERHEAD
    accum = accumulator(batch_size=batch_size, buffer_memory=10 * batch_size, linger_ms=10)
    metadata = cluster()
    appends = expected_num_appends(batch_size)
    assert appends > 1
    for _ in range(appends):
        append(accum, TP1, clock)
        assert len(accum.batches(TP1)) == 1
        assert not accum.batches(TP1)[0].is_full
        assert accum.ready(metadata, clock.now_ms()).ready_nodes == set()

    assert append(accum, TP1, clock) == NEW_BATCH
    assert len(accum.batches(TP1)) == 2
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == {NODE1}
    drained = accum.drain(metadata, [NODE1], 2**31 - 1, clock.now_ms())
    assert [len(batches) for batches in drained.values()] == [1]
    assert decoded(drained[NODE1][0]) == [(KEY, VALUE)] * appends


def test_a_lingering_record_is_ready_only_after_linger_ms() -> None:
    """docs/scenarios.md §5 #39 (testLinger): linger.ms 10 → not ready, next check in 10 ms; ready after 10
    ms."""
    clock = ManualClock()
    accum = accumulator(linger_ms=10)
    metadata = cluster()
    append(accum, TP1, clock)
    result = accum.ready(metadata, clock.now_ms())
    assert result.ready_nodes == set()
    assert result.next_ready_check_delay_ms == 10
    clock.advance(9)
    assert accum.ready(metadata, clock.now_ms()).next_ready_check_delay_ms == 1
    clock.advance(1)
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == {NODE1}
    drained = accum.drain(metadata, [NODE1], 2**31 - 1, clock.now_ms())
    assert decoded(drained[NODE1][0]) == [(KEY, VALUE)]


# ------------------------------------------------------------------------------------ #40


def test_partial_drain_respects_max_request_size() -> None:
    """docs/scenarios.md §5 #40 (testPartialDrain): two partitions of one node with full batches; a drain
    bounded by 1024 bytes takes one batch only."""
    clock = ManualClock()
    accum = accumulator(batch_size=1024, buffer_memory=10 * 1024, linger_ms=10)
    metadata = cluster()
    appends = expected_num_appends(1024) + 1
    for tp in (TP1, TP2):
        for _ in range(appends):
            append(accum, tp, clock)
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == {NODE1}
    drained = accum.drain(metadata, [NODE1], 1024, clock.now_ms())
    assert len(drained[NODE1]) == 1


def test_a_batch_larger_than_max_request_size_is_still_sent_alone() -> None:
    clock = ManualClock()
    accum = accumulator(batch_size=4096, buffer_memory=40_000, linger_ms=0)
    metadata = cluster()
    for _ in range(20):
        append(accum, TP1, clock, value=b"v" * 100)
    append(accum, TP2, clock)
    first = accum.drain(metadata, [NODE1], 1000, clock.now_ms())[NODE1]
    assert [b.tp for b in first] == [TP1]
    assert len(first[0].close()) > 1000
    assert [b.tp for b in accum.drain(metadata, [NODE1], 1000, clock.now_ms())[NODE1]] == [TP2]


# ------------------------------------------------------------------------------------ #41


def test_retried_batch_backs_off_while_another_partition_drains() -> None:
    """docs/scenarios.md §5 #41 (testRetryBackoff): tp1's batch comes back for a retry; tp2 gets a new batch;
    at now + linger + 1 only tp2 drains; after retry.backoff.ms tp1 drains."""
    clock = ManualClock()
    linger_ms = 2**31 // 4
    retry_backoff_ms = 2**31 // 2
    accum = accumulator(linger_ms=linger_ms, retry_backoff_ms=retry_backoff_ms, delivery_timeout_ms=2**31 - 1)
    metadata = cluster()
    now = clock.now_ms()
    append(accum, TP1, clock)
    result = accum.ready(metadata, now + linger_ms + 1)
    assert result.ready_nodes == {NODE1}
    drained = accum.drain(metadata, result.ready_nodes, 2**31 - 1, now + linger_ms + 1)
    assert [b.tp for b in drained[NODE1]] == [TP1]

    accum.reenqueue(drained[NODE1][0], now)
    append(accum, TP2, clock)
    result = accum.ready(metadata, now + linger_ms + 1)
    assert result.ready_nodes == {NODE1}
    drained = accum.drain(metadata, result.ready_nodes, 2**31 - 1, now + linger_ms + 1)
    assert [b.tp for b in drained[NODE1]] == [TP2]

    result = accum.ready(metadata, now + retry_backoff_ms + 1)
    assert result.ready_nodes == {NODE1}
    drained = accum.drain(metadata, result.ready_nodes, 2**31 - 1, now + retry_backoff_ms + 1)
    assert [b.tp for b in drained[NODE1]] == [TP1]
    assert drained[NODE1][0].attempts == 1


def test_backing_off_batch_reports_the_time_left_as_next_check() -> None:
    clock = ManualClock()
    accum = accumulator(linger_ms=0, retry_backoff_ms=100)
    metadata = cluster()
    append(accum, TP1, clock)
    batch = accum.drain(metadata, [NODE1], 2**31 - 1, clock.now_ms())[NODE1][0]
    clock.advance(30)
    accum.reenqueue(batch, clock.now_ms())
    clock.advance(40)
    result = accum.ready(metadata, clock.now_ms())
    assert result.ready_nodes == set()
    assert result.next_ready_check_delay_ms == 60


# ------------------------------------------------------------------------------------ #42


def test_muted_partition_is_neither_ready_nor_drained() -> None:
    """docs/scenarios.md §5 #42 (testMutedPartitions)."""
    clock = ManualClock()
    batch_size = 1025 + RECORD_BATCH_OVERHEAD
    accum = accumulator(batch_size=batch_size, buffer_memory=10 * batch_size, linger_ms=10)
    metadata = cluster()
    for _ in range(expected_num_appends(batch_size)):
        append(accum, TP1, clock)
        assert accum.ready(metadata, clock.now_ms()).ready_nodes == set()
    clock.advance(2000)

    accum.mute_partition(TP1)
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == set()
    accum.unmute_partition(TP1, 0)
    result = accum.ready(metadata, clock.now_ms())
    assert result.ready_nodes == {NODE1}

    accum.mute_partition(TP1)
    assert accum.drain(metadata, result.ready_nodes, 2**31 - 1, clock.now_ms()) == {}
    accum.unmute_partition(TP1, 0)
    assert len(accum.drain(metadata, result.ready_nodes, 2**31 - 1, clock.now_ms())[NODE1]) == 1


def test_unmute_with_a_throttle_deadline_keeps_the_partition_muted_until_then() -> None:
    clock = ManualClock()
    accum = accumulator(linger_ms=0)
    metadata = cluster()
    append(accum, TP1, clock)
    accum.unmute_partition(TP1, clock.now_ms() + 50)
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == set()
    clock.advance(50)
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == {NODE1}


def test_queued_batches_expire_after_delivery_timeout_muted_or_not() -> None:
    """docs/scenarios.md §5 #42 (testExpiredBatches): two queued batches of a partition expire together after
    delivery.timeout.ms + 1, although the partition is muted; nothing is left to expire or send."""
    clock = ManualClock()
    batch_size = 1025 + RECORD_BATCH_OVERHEAD
    delivery_timeout_ms = 3200
    accum = accumulator(
        batch_size=batch_size,
        buffer_memory=10 * batch_size,
        linger_ms=3000,
        delivery_timeout_ms=delivery_timeout_ms,
    )
    metadata = cluster()
    for _ in range(expected_num_appends(batch_size)):
        append(accum, TP1, clock)
        assert accum.ready(metadata, clock.now_ms()).ready_nodes == set()
    append(accum, TP1, clock)
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == {NODE1}
    assert accum.next_expiry_ms() == delivery_timeout_ms

    clock.advance(delivery_timeout_ms - 1)
    assert accum.expired_batches(clock.now_ms()) == []
    clock.advance(2)
    accum.mute_partition(TP1)
    expired = accum.expired_batches(clock.now_ms())
    assert len(expired) == 2
    accum.unmute_partition(TP1, 0)
    assert accum.expired_batches(clock.now_ms()) == []
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == set()
    assert accum.next_expiry_ms() == NO_DEADLINE


def test_expiry_stops_at_the_first_batch_that_is_not_expired() -> None:
    clock = ManualClock()
    accum = accumulator(batch_size=200, buffer_memory=10_000, linger_ms=10_000, delivery_timeout_ms=1000)
    append(accum, TP1, clock, value=b"x" * 150)
    clock.advance(500)
    append(accum, TP1, clock, value=b"x" * 150)
    assert len(accum.batches(TP1)) == 2
    clock.advance(500)
    expired = accum.expired_batches(clock.now_ms())
    assert [b.created_ms for b in expired] == [0]
    assert [b.created_ms for b in accum.batches(TP1)] == [500]


# ------------------------------------------------------------------------------- memory


def test_a_record_without_memory_waits_and_is_appended_when_memory_is_freed() -> None:
    clock = ManualClock()
    accum = accumulator(batch_size=1000, buffer_memory=2000, linger_ms=0)
    metadata = cluster()
    assert append(accum, TP1, clock, completion="a") == NEW_BATCH
    assert append(accum, TP2, clock, completion="b") == NEW_BATCH
    assert accum.pool.available_memory == 0
    assert append(accum, TP3, clock, completion="c") == BLOCKED
    # Everything after a waiter waits too, even a record that would fit an open batch: the order
    # of sends is kept.
    assert append(accum, TP1, clock, completion="d") == BLOCKED
    assert accum.pool.exhausted  # which makes every batch sendable (tested below)
    assert [w.completion for w in accum.pool.waiters] == ["c", "d"]

    drained = accum.drain(metadata, [NODE1], 2**31 - 1, clock.now_ms())[NODE1]
    assert [b.tp for b in drained] == [TP1, TP2]
    assert accum.serve_waiters(clock.now_ms()) == 0  # nothing freed yet
    accum.deallocate(drained[0])
    # "c" gets the memory; "d" needs a new batch too (tp1's was drained) and waits for more.
    assert accum.serve_waiters(clock.now_ms()) == 1
    assert [w.completion for w in accum.pool.waiters] == ["d"]
    accum.deallocate(drained[1])
    assert accum.serve_waiters(clock.now_ms()) == 1
    assert list(accum.pool.waiters) == []
    assert [entry[0] for entry in accum.batches(TP3)[0].records] == ["c"]
    assert [entry[0] for b in accum.batches(TP1) for entry in b.records] == ["d"]


def test_a_waiting_record_fails_after_max_block_ms_and_the_next_one_is_served() -> None:
    clock = ManualClock()
    accum = accumulator(batch_size=1000, buffer_memory=1000, linger_ms=0)
    append(accum, TP1, clock)
    assert append(accum, TP2, clock, completion="late", deadline_ms=clock.now_ms() + 60) == BLOCKED
    clock.advance(30)
    assert append(accum, TP3, clock, completion="later", deadline_ms=clock.now_ms() + 60) == BLOCKED
    assert accum.pool.next_deadline_ms() == 60
    clock.advance(29)
    assert accum.pool.expire_waiters(clock.now_ms()) == []
    clock.advance(1)
    assert [w.completion for w in accum.pool.expire_waiters(clock.now_ms())] == ["late"]
    assert accum.pool.next_deadline_ms() == 90
    assert [w.completion for w in accum.pool.waiters] == ["later"]


def test_batches_full_or_not_are_ready_while_someone_waits_for_memory() -> None:
    clock = ManualClock()
    accum = accumulator(batch_size=1000, buffer_memory=1000, linger_ms=60_000)
    metadata = cluster()
    append(accum, TP1, clock)
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == set()
    append(accum, TP3, clock)  # no memory left: waits
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == {NODE1}


def test_a_flush_or_a_close_makes_lingering_batches_ready() -> None:
    clock = ManualClock()
    accum = accumulator(linger_ms=60_000)
    metadata = cluster()
    append(accum, TP1, clock)
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == set()
    accum.flushes_in_progress = 1
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == {NODE1}
    accum.flushes_in_progress = 0
    accum.closed = True
    assert accum.ready(metadata, clock.now_ms()).ready_nodes == {NODE1}


def test_memory_is_returned_once_per_batch_and_never_above_the_total() -> None:
    clock = ManualClock()
    accum = accumulator(batch_size=500, buffer_memory=5000, linger_ms=0)
    metadata = cluster()
    for _ in range(3):
        append(accum, TP1, clock, value=b"x" * 400)
    assert accum.pool.available_memory == 5000 - 3 * 500
    for batch in accum.drain(metadata, [NODE1], 2**31 - 1, clock.now_ms())[NODE1]:
        accum.deallocate(batch)
    assert accum.pool.available_memory == 5000 - 2 * 500
    with pytest.raises(AssertionError, match="more memory returned"):
        accum.pool.deallocate(2 * 500 + 1)


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own_size() -> None:
    clock = ManualClock()
    accum = accumulator(batch_size=100, buffer_memory=10_000, linger_ms=0)
    append(accum, TP1, clock, value=b"x" * 500)
    (batch,) = accum.batches(TP1)
    assert batch.buffer_size == RECORD_BATCH_OVERHEAD + estimate_size_upper_bound(KEY, b"x" * 500)
    assert accum.pool.available_memory == 10_000 - batch.buffer_size


# ------------------------------------------------------------------------------ drain fairness


def test_drain_rotates_its_start_so_no_partition_starves() -> None:
    """With room for one batch per request, successive drains serve tp1, tp2, tp1..., not always
    the first partition (Kafka's drainIndex; the next drain starts at the partition that did not
    fit, see accumulator.py)."""
    clock = ManualClock()
    accum = accumulator(batch_size=200, buffer_memory=100_000, linger_ms=0)
    metadata = cluster()
    for _ in range(6):
        for tp in (TP1, TP2):
            append(accum, tp, clock, value=b"x" * 150)
    served = [accum.drain(metadata, [NODE1], 200, clock.now_ms())[NODE1][0].tp for _ in range(4)]
    assert served == [TP1, TP2, TP1, TP2]


def test_at_most_one_batch_per_partition_per_drain() -> None:
    clock = ManualClock()
    accum = accumulator(batch_size=200, buffer_memory=100_000, linger_ms=0)
    metadata = cluster()
    for _ in range(3):
        append(accum, TP1, clock, value=b"x" * 150)
    drained = accum.drain(metadata, [NODE1, NODE2], 2**31 - 1, clock.now_ms())
    assert [b.tp for b in drained[NODE1]] == [TP1]
    assert NODE2 not in drained
    assert len(accum.batches(TP1)) == 2


def test_unknown_leader_reports_the_topic_for_a_metadata_update() -> None:
    clock = ManualClock()
    accum = accumulator(linger_ms=0)
    append(accum, TopicPartition("other", 0), clock)
    result = accum.ready(cluster(), clock.now_ms())
    assert result.ready_nodes == set()
    assert result.unknown_leader_topics == {"other"}


def test_abort_on_new_batch_leaves_nothing_behind() -> None:
    clock = ManualClock()
    accum = accumulator(linger_ms=0)
    assert append(accum, TP1, clock, abort_on_new_batch=True) == ABORTED_FOR_NEW_BATCH
    assert accum.batches(TP1) == ()
    assert accum.pool.available_memory == accum.pool.total_memory
    assert append(accum, TP1, clock) == NEW_BATCH
    assert append(accum, TP1, clock, abort_on_new_batch=True) == APPENDED


# ---------------------------------------------------------------------- idempotent retries


@dataclass
class FakeSequences:
    """The idempotence gate as a test sets it."""

    producer: tuple[int, int] | None = (7, 0)
    unresolved: set[TopicPartition] = field(default_factory=set)
    next_sequence: dict[TopicPartition, int] = field(default_factory=dict)
    in_flight: dict[TopicPartition, list[int]] = field(default_factory=dict)
    full_windows: set[TopicPartition] = field(default_factory=set)

    def broker_window_is_full(self, tp: TopicPartition) -> bool:
        return tp in self.full_windows

    def producer_id_and_epoch(self) -> tuple[int, int] | None:
        return self.producer

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        return tp in self.unresolved

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        sequences = self.in_flight.get(tp)
        return min(sequences) if sequences else NO_SEQUENCE

    def assign_sequence(self, batch: ProducerBatch) -> None:
        assert self.producer is not None
        sequence = self.next_sequence.get(batch.tp, 0)
        batch.set_producer_state(self.producer[0], self.producer[1], sequence)
        self.next_sequence[batch.tp] = sequence + batch.record_count
        self.in_flight.setdefault(batch.tp, []).append(sequence)


def drain_one_each(
    accum: RecordAccumulator, clock: ManualClock, sequences: FakeSequences
) -> list[ProducerBatch]:
    return accum.drain(cluster(), [NODE1], 2**31 - 1, clock.now_ms(), sequences).get(NODE1, [])


def test_nothing_drains_without_a_producer_id() -> None:
    clock = ManualClock()
    accum = accumulator(linger_ms=0, idempotent=True)
    append(accum, TP1, clock)
    assert drain_one_each(accum, clock, FakeSequences(producer=None)) == []
    (batch,) = drain_one_each(accum, clock, FakeSequences())
    header = next(iterate_batches(batch.close())).header
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 0, 0)


def test_reenqueued_batches_keep_sequence_order_and_only_the_first_in_flight_drains() -> None:
    clock = ManualClock()
    accum = accumulator(
        batch_size=200, buffer_memory=10_000, linger_ms=0, retry_backoff_ms=0, idempotent=True
    )
    sequences = FakeSequences()
    sent = []
    for _ in range(3):
        append(accum, TP1, clock, value=b"x" * 150)
        sent += drain_one_each(accum, clock, sequences)
    assert [b.base_sequence for b in sent] == [0, 1, 2]
    append(accum, TP1, clock, value=b"x" * 150)  # a new batch, never sent
    # Answers come back out of order; each failed batch returns to its place by sequence.
    for batch in (sent[2], sent[0], sent[1]):
        accum.reenqueue(batch, clock.now_ms())
    assert [b.base_sequence for b in accum.batches(TP1)] == [0, 1, 2, NO_SEQUENCE]
    # The first in flight (0) goes; the next retry waits until it is resolved.
    assert [b.base_sequence for b in drain_one_each(accum, clock, sequences)] == [0]
    assert drain_one_each(accum, clock, sequences) == []
    sequences.in_flight[TP1].remove(0)
    assert [b.base_sequence for b in drain_one_each(accum, clock, sequences)] == [1]


def test_no_new_batch_drains_while_its_partition_is_unresolved() -> None:
    clock = ManualClock()
    accum = accumulator(linger_ms=0, idempotent=True)
    append(accum, TP1, clock)
    append(accum, TP2, clock)
    sequences = FakeSequences(unresolved={TP1})
    # Kafka stops draining the node at such a partition; the rotation moves past it next time.
    assert drain_one_each(accum, clock, sequences) == []
    assert [b.tp for b in drain_one_each(accum, clock, sequences)] == [TP2]


def test_a_full_broker_window_holds_back_only_new_batches_of_its_partition() -> None:
    """Unlike an unresolved partition, a full window (idempotence.py) skips just that partition:
    the node's other partitions drain in the same pass, and a retry of the held partition still
    goes."""
    clock = ManualClock()
    accum = accumulator(linger_ms=0, retry_backoff_ms=0, idempotent=True)
    sequences = FakeSequences()
    append(accum, TP1, clock)
    (sent,) = drain_one_each(accum, clock, sequences)
    append(accum, TP1, clock)
    append(accum, TP2, clock)
    sequences.full_windows.add(TP1)
    assert [b.tp for b in drain_one_each(accum, clock, sequences)] == [TP2]
    accum.reenqueue(sent, clock.now_ms())
    assert drain_one_each(accum, clock, sequences) == [sent]
    assert drain_one_each(accum, clock, sequences) == []
    sequences.full_windows.clear()
    assert [b.base_sequence for b in drain_one_each(accum, clock, sequences)] == [1]


def test_a_split_batch_continues_the_sequence_and_stays_in_order() -> None:
    clock = ManualClock()
    accum = accumulator(batch_size=2000, buffer_memory=10_000, linger_ms=0, idempotent=True)
    sequences = FakeSequences()
    for index in range(10):
        append(accum, TP1, clock, value=b"%03d" % index + b"x" * 100, completion=index)
    (big,) = drain_one_each(accum, clock, sequences)
    accum.batch_size = 300  # split into batches of at most ~300 bytes
    parts = accum.split_and_reenqueue(big)
    accum.deallocate(big)
    assert len(parts) > 1
    assert all(part.buffer_size == 0 for part in parts)
    assert [entry[0] for part in parts for entry in part.records] == list(range(10))
    assert [part.base_sequence for part in parts] == [
        sum(p.record_count for p in parts[:i]) for i in range(len(parts))
    ]
    assert list(accum.batches(TP1)) == parts
    assert accum.pool.available_memory == accum.pool.total_memory
    values = [value for part in parts for _, value in decoded(part)]
    assert values == [b"%03d" % i + b"x" * 100 for i in range(10)]


def test_resetting_a_closed_batch_rewrites_its_sequence_and_crc() -> None:
    clock = ManualClock()
    accum = accumulator(linger_ms=0, idempotent=True)
    append(accum, TP1, clock)
    (batch,) = drain_one_each(accum, clock, FakeSequences())
    batch.reset_producer_state(7, 0, 42)
    assert batch.sequence_reset
    (parsed,) = iterate_batches(batch.close())
    assert parsed.header.base_sequence == 42
    assert parsed.is_valid()
    assert not batch.sequence_reset  # cleared when it is drained (closed) again


def test_compressed_batches_decode_to_the_records_appended() -> None:
    clock = ManualClock()
    accum = accumulator(linger_ms=0, compression=CompressionType.GZIP)
    for index in range(5):
        append(accum, TP1, clock, value=b"value-%d" % index)
    (batch,) = accum.drain(cluster(), [NODE1], 2**31 - 1, clock.now_ms())[NODE1]
    (parsed,) = iterate_batches(batch.close())
    assert parsed.header.compression is CompressionType.GZIP
    assert [r.value for r in parsed.records()] == [b"value-%d" % i for i in range(5)]
