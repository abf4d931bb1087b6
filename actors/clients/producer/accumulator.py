"""RecordAccumulator: the producer's batches, pure (docs/producer.md §2). No I/O, time as now_ms.

Theory of operation
-------------------
Records are appended, as bytes, to the *last* ``ProducerBatch`` of their partition's deque (a
``RecordBatchBuilder`` grows the v2 record area record by record); when it has no room a new batch
takes ``max(batch.size, the record's upper-bound size)`` bytes from the ``BufferPool`` and goes to
the tail. The sender asks ``ready(metadata, now_ms)`` which leaders have something sendable and
``drain(...)`` for at most one batch per partition per node, up to ``max.request.size`` per node,
starting from a rotating index so no partition starves. A drained batch is *closed*: its bytes are
built once (compressed, CRC) and sent as they are on every attempt. Retries come back with
``reenqueue`` at the head of the deque (in sequence order when idempotent); ``expired_batches``
pops batches older than ``delivery.timeout.ms``; ``deallocate`` returns a completed batch's memory.

Memory (``buffer.memory``)
--------------------------
The ``BufferPool`` counts bytes; it has no buffers to hand out (a Python ``bytearray`` is not
reused), so Kafka's free list of ``batch.size`` buffers is just accounting here. A record whose new
batch cannot get memory becomes a *waiter* — data, not a blocked thread: it waits in the pool's
FIFO queue until completed batches free enough memory or its ``max.block.ms`` deadline passes
(``expire_waiters`` returns it to be failed with ``BufferExhaustedError``). While anyone waits, every
later record queues behind (as the next ``send`` of Kafka's single application thread would wait
behind the blocked one), which keeps per-partition order, and the pool counts as *exhausted*, which
makes every batch sendable at once so memory comes back as fast as possible.

Rules kept (Kafka 2.4's ``RecordAccumulator``, ``ProducerBatch``, ``BufferPool``)
------------------------------------------------------------------------------
* The first record always fits an empty batch; later ones while ``estimated size + record upper
  bound <= write limit`` (compression is not taken into account for room, as Kafka does not take
  the new record's); a batch that refused a record is closed for appends (*full*).
* ``ready``: per deque's first batch — unknown leader → its topic is reported for a metadata
  update; skip if its leader is already ready or the partition is muted; backing off = retried and
  waited < retry.backoff.ms; sendable = full (deque > 1 or batch full) or waited ≥ linger.ms (or the
  back-off) or exhausted or closing or a flush in progress; sendable and not backing off → ready,
  else the time left feeds ``next_ready_check_delay_ms``.
* ``drain``: Kafka's loop, including its one shared ``drain_index``, the rule that an oversized
  single batch is still sent alone, and the idempotent stops (no producer id yet; unresolved
  sequences block new batches; a retried batch goes only when it is the first in flight). One
  deliberate difference: when a partition's batch does not fit the request, the next drain starts
  at that partition (Kafka 2.4 starts after it, which can starve it).
* ``mute_partition`` (until +∞) / ``unmute_partition(tp, until_ms)``: a muted partition is neither
  ready nor drained, but its batches still expire.
* Expiry is by creation time: ``now - created_ms >= delivery.timeout.ms``, from each deque's head.

What this module does not do: hold the batch and pool types (``batch.py``), choose
partitions (``partitioner.py``), talk to brokers, track in-flight requests or sequences
(``sender.py``, ``idempotence.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from actors.clients.producer.batch import NO_DEADLINE, BlockedRecord, BufferPool, ProducerBatch
from actors.common.types import TopicPartition
from runtime.storage.compression import CompressionType
from runtime.storage.records import NO_SEQUENCE, RECORD_BATCH_OVERHEAD, RecordHeader

__all__ = [
    "ABORTED_FOR_NEW_BATCH",
    "APPENDED",
    "BLOCKED",
    "NEW_BATCH",
    "NO_DEADLINE",
    "MetadataView",
    "ReadyCheckResult",
    "RecordAccumulator",
    "SequenceGate",
]

# append() outcomes (ints, not an Enum: append runs once per record).
APPENDED: Final = 0
"""Added to the partition's last open batch."""
NEW_BATCH: Final = 1
"""A new batch was created for it."""
ABORTED_FOR_NEW_BATCH: Final = 2
"""Nothing done: it would need a new batch and the caller asked to be told first (sticky partitioning
moves to another partition then, KIP-480)."""
BLOCKED: Final = 3
"""No memory for a new batch (or others already wait): it waits in the pool's queue."""


class MetadataView(Protocol):
    """What the accumulator needs to know of the cluster."""

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The leader's broker id, or None when unknown."""
        ...

    def partitions_for_node(self, node: int) -> Sequence[TopicPartition]:
        """The partitions a broker leads, in cluster order."""
        ...


class SequenceGate(Protocol):
    """The idempotence manager's side of ``drain`` (Kafka's TransactionManager)."""

    def producer_id_and_epoch(self) -> tuple[int, int] | None: ...

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool: ...

    def first_in_flight_sequence(self, tp: TopicPartition) -> int: ...

    def broker_window_is_full(self, tp: TopicPartition) -> bool: ...

    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Stamp the next sequence on a never-sent batch and track it as in flight."""
        ...


@dataclass(slots=True)
class ReadyCheckResult:
    ready_nodes: set[int] = field(default_factory=set)
    next_ready_check_delay_ms: int = NO_DEADLINE
    unknown_leader_topics: set[str] = field(default_factory=set)


class RecordAccumulator:
    """Batches per partition, bounded memory, ready/drain as Kafka's (module docstring)."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        buffer_memory: int,
        retry_backoff_ms: int,
        delivery_timeout_ms: int,
        compression: CompressionType = CompressionType.NONE,
        idempotent: bool = False,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.compression = compression
        self.idempotent = idempotent
        self.pool = BufferPool(buffer_memory, batch_size)
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._muted: dict[TopicPartition, int] = {}
        # Per partition, the batch size its broker was last seen to accept after refusing a larger
        # batch as MESSAGE_TOO_LARGE (see split_and_reenqueue): new batches stop there.
        self.size_limits: dict[TopicPartition, int] = {}
        self._incomplete: set[ProducerBatch] = set()
        self.drain_index = 0
        self.flushes_in_progress = 0
        self.closed = False

    # ------------------------------------------------------------------------------ appending

    def append(
        self,
        tp: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[RecordHeader, ...],
        completion: object,
        size_upper_bound: int,
        now_ms: int,
        deadline_ms: int,
        abort_on_new_batch: bool = False,
    ) -> int:
        """Append one record; returns APPENDED, NEW_BATCH, ABORTED_FOR_NEW_BATCH or BLOCKED."""
        if self.pool.waiters:
            self.pool.enqueue(
                BlockedRecord(tp, timestamp, key, value, headers, completion, size_upper_bound, deadline_ms)
            )
            return BLOCKED
        batches = self._batches.get(tp)
        if batches and batches[-1].try_append(timestamp, key, value, headers, completion, size_upper_bound):
            return APPENDED
        if abort_on_new_batch:
            return ABORTED_FOR_NEW_BATCH
        size = self._allocation_size(size_upper_bound)
        if not self.pool.try_allocate(size):
            self.pool.enqueue(
                BlockedRecord(tp, timestamp, key, value, headers, completion, size_upper_bound, deadline_ms)
            )
            return BLOCKED
        self._new_batch(tp, size, now_ms).try_append(
            timestamp, key, value, headers, completion, size_upper_bound
        )
        return NEW_BATCH

    def _allocation_size(self, size_upper_bound: int) -> int:
        """Kafka allocates ``max(batch.size, record upper bound)``; never more than the whole pool
        (a batch.size above buffer.memory would otherwise make every allocation impossible). The
        caller has checked that the record itself fits buffer.memory."""
        return min(max(self.batch_size, RECORD_BATCH_OVERHEAD + size_upper_bound), self.pool.total_memory)

    def _new_batch(self, tp: TopicPartition, size: int, now_ms: int) -> ProducerBatch:
        limit = self.size_limits.get(tp)
        write_limit = size if limit is None else min(size, limit)
        batch = ProducerBatch(
            tp, now_ms, write_limit=write_limit, buffer_size=size, compression=self.compression
        )
        batches = self._batches.get(tp)
        if batches is None:
            batches = self._batches[tp] = deque()
        batches.append(batch)
        self._incomplete.add(batch)
        return batch

    def serve_waiters(self, now_ms: int) -> int:
        """Append waiting records, in order, for as long as memory allows; returns how many."""
        pool = self.pool
        served = 0
        while pool.waiters:
            waiter = pool.waiters[0]
            batches = self._batches.get(waiter.tp)
            if not (
                batches
                and batches[-1].try_append(
                    waiter.timestamp,
                    waiter.key,
                    waiter.value,
                    waiter.headers,
                    waiter.completion,
                    waiter.size_upper_bound,
                )
            ):
                size = self._allocation_size(waiter.size_upper_bound)
                if not pool.take_for_head_waiter(size):
                    break
                self._new_batch(waiter.tp, size, now_ms).try_append(
                    waiter.timestamp,
                    waiter.key,
                    waiter.value,
                    waiter.headers,
                    waiter.completion,
                    waiter.size_upper_bound,
                )
            pool.waiters.popleft()
            served += 1
        return served

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch is complete (acknowledged or failed for good): forget it, free its memory."""
        self._incomplete.discard(batch)
        if not batch.is_split:
            self.pool.deallocate(batch.buffer_size)

    # ----------------------------------------------------------------------------- readiness

    def is_muted(self, tp: TopicPartition, now_ms: int) -> bool:
        until = self._muted.get(tp)
        if until is None:
            return False
        if until > now_ms:
            return True
        del self._muted[tp]
        return False

    def mute_partition(self, tp: TopicPartition) -> None:
        self._muted[tp] = NO_DEADLINE

    def unmute_partition(self, tp: TopicPartition, throttle_until_ms: int = 0) -> None:
        self._muted[tp] = throttle_until_ms

    def ready(self, metadata: MetadataView, now_ms: int) -> ReadyCheckResult:
        result = ReadyCheckResult()
        ready_nodes = result.ready_nodes
        exhausted = self.pool.exhausted
        eager = exhausted or self.closed or self.flushes_in_progress > 0
        linger_ms = self.linger_ms
        retry_backoff_ms = self.retry_backoff_ms
        for tp, batches in self._batches.items():
            if not batches:
                continue
            leader = metadata.leader_of(tp)
            if leader is None:
                result.unknown_leader_topics.add(tp.topic)
                continue
            if leader in ready_nodes or (self._muted and self.is_muted(tp, now_ms)):
                continue
            batch = batches[0]
            waited = batch.waited_ms(now_ms)
            backing_off = batch.attempts > 0 and waited < retry_backoff_ms
            time_to_wait = retry_backoff_ms if backing_off else linger_ms
            full = len(batches) > 1 or batch.is_full
            sendable = full or waited >= time_to_wait or eager
            if sendable and not backing_off:
                ready_nodes.add(leader)
            else:
                result.next_ready_check_delay_ms = min(
                    result.next_ready_check_delay_ms, max(time_to_wait - waited, 0)
                )
        return result

    # --------------------------------------------------------------------------------- drain

    def drain(
        self,
        metadata: MetadataView,
        nodes: Iterable[int],
        max_size: int,
        now_ms: int,
        sequences: SequenceGate | None = None,
    ) -> dict[int, list[ProducerBatch]]:
        """At most one batch per partition, up to ``max_size`` bytes per node (a single larger batch
        still goes alone)."""
        drained: dict[int, list[ProducerBatch]] = {}
        for node in nodes:
            batches = self._drain_node(metadata, node, max_size, now_ms, sequences)
            if batches:
                drained[node] = batches
        return drained

    def _drain_node(
        self,
        metadata: MetadataView,
        node: int,
        max_size: int,
        now_ms: int,
        sequences: SequenceGate | None,
    ) -> list[ProducerBatch]:
        parts = metadata.partitions_for_node(node)
        if not parts:
            return []
        size = 0
        ready: list[ProducerBatch] = []
        start = self.drain_index = self.drain_index % len(parts)
        while True:
            tp = parts[self.drain_index]
            self.drain_index = (self.drain_index + 1) % len(parts)
            batches = self._batches.get(tp)
            if batches and not (self._muted and self.is_muted(tp, now_ms)):
                first = batches[0]
                backoff = first.attempts > 0 and first.waited_ms(now_ms) < self.retry_backoff_ms
                if not backoff:
                    if size + first.estimated_size_in_bytes > max_size and ready:
                        # A single batch larger than the request size (compression estimates) is
                        # still sent, alone, in a later request. The next drain starts here: Kafka
                        # 2.4 moves past this partition, which with two partitions that each fill a
                        # request serves the first one forever.
                        self.drain_index = parts.index(tp)
                        break
                    if sequences is not None and _should_stop_drain(first, tp, sequences):
                        break
                    # Not Kafka's rule (idempotence.py, "the broker window"): a held partition is
                    # only skipped, its answers awaited; the node's other partitions still go.
                    held = (
                        sequences is not None
                        and not first.has_sequence
                        and sequences.broker_window_is_full(tp)
                    )
                    if not held:
                        batch = batches.popleft()
                        if sequences is not None and not batch.has_sequence:
                            sequences.assign_sequence(batch)
                        size += len(batch.close())
                        batch.drained(now_ms)
                        ready.append(batch)
            if self.drain_index == start:
                break
        return ready

    # ------------------------------------------------------------------------- retry, expiry

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Put a batch to retry back at the head of its deque (in sequence order when idempotent)."""
        batch.reenqueued(now_ms)
        batches = self._batches.get(batch.tp)
        if batches is None:
            batches = self._batches[batch.tp] = deque()
        self._insert_at_head(batches, batch)

    def _insert_at_head(self, batches: deque[ProducerBatch], batch: ProducerBatch) -> None:
        if not self.idempotent:
            batches.appendleft(batch)
            return
        assert batch.has_sequence, f"re-enqueueing {batch} without a sequence although idempotent"
        # Several batches of one partition can come back (they were in flight to one leader); the
        # deque must stay in sequence order, so the batch goes after those with lower sequences.
        before: list[ProducerBatch] = []
        while batches and batches[0].has_sequence and batches[0].base_sequence < batch.base_sequence:
            before.append(batches.popleft())
        batches.appendleft(batch)
        for earlier in reversed(before):
            batches.appendleft(earlier)

    def split_and_reenqueue(
        self, batch: ProducerBatch, sequences_tracked: bool = False
    ) -> list[ProducerBatch]:
        """MESSAGE_TOO_LARGE for a batch of several records: retry them in smaller batches (not
        counted as an attempt). The caller deallocates the big batch.

        Kafka splits into batches of batch.size, which only helps a batch that outgrew batch.size
        (a compressed batch's estimate); one within batch.size would come back whole and be
        refused forever (a batch.size above the topic's max.message.bytes: 0 records/s at full
        CPU). Such a batch is halved instead, and the partition's later batches stop at that size,
        so a batch.size the broker cannot take costs a few refusals, not the partition."""
        size = batch.estimated_size_in_bytes
        split_size = self.batch_size if size > self.batch_size else max(size // 2, 1)
        parts = batch.split(split_size)
        batches = self._batches.get(batch.tp)
        if batches is None:
            batches = self._batches[batch.tp] = deque()
        if size <= self.batch_size and split_size < self.size_limits.get(batch.tp, size):
            self.size_limits[batch.tp] = split_size
            self._split_queued(batches, split_size)
        for part in reversed(parts):
            self._incomplete.add(part)
            if self.idempotent and part.has_sequence:
                self._insert_at_head(batches, part)
            else:
                batches.appendleft(part)
        return parts

    def _split_queued(self, batches: deque[ProducerBatch], limit: int) -> None:
        """Split the partition's batches not sent yet that are above ``limit``, where they stand:
        each would otherwise meet the same refusal first. Their memory goes back to the pool (the
        parts are outside it, as split parts are)."""
        for index in range(len(batches) - 1, -1, -1):
            queued = batches[index]
            if queued.attempts or queued.has_sequence or queued.record_count < 2:
                continue
            if queued.estimated_size_in_bytes <= limit:
                continue
            parts = queued.split(limit)
            del batches[index]
            for part in reversed(parts):
                batches.insert(index, part)
                self._incomplete.add(part)
            queued.done = True
            self.deallocate(queued)

    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        """Pop, from each deque's head, every batch past delivery.timeout.ms (muted or not)."""
        expired: list[ProducerBatch] = []
        timeout_ms = self.delivery_timeout_ms
        for batches in self._batches.values():
            while batches and batches[0].has_reached_delivery_timeout(timeout_ms, now_ms):
                expired.append(batches.popleft())
        return expired

    def next_expiry_ms(self) -> int:
        """When the oldest queued batch reaches delivery.timeout.ms."""
        heads = [batches[0].created_ms for batches in self._batches.values() if batches]
        return min(heads) + self.delivery_timeout_ms if heads else NO_DEADLINE

    # ---------------------------------------------------------------------------- inspection

    def batches(self, tp: TopicPartition) -> Sequence[ProducerBatch]:
        return tuple(self._batches.get(tp, ()))

    def queued_batches(self) -> Iterator[ProducerBatch]:
        for batches in self._batches.values():
            yield from batches

    def has_undrained(self) -> bool:
        return any(self._batches.values())

    def has_incomplete(self) -> bool:
        """Batches not yet complete (queued or in flight), or records waiting for memory."""
        return bool(self._incomplete) or self.pool.exhausted

    @property
    def incomplete_count(self) -> int:
        return len(self._incomplete)

    def abort_undrained(self) -> list[ProducerBatch]:
        """Take every queued batch out (a forced close); in-flight ones are the sender's."""
        aborted = [batch for batches in self._batches.values() for batch in batches]
        for batches in self._batches.values():
            batches.clear()
        return aborted


def _should_stop_drain(first: ProducerBatch, tp: TopicPartition, sequences: SequenceGate) -> bool:
    """Kafka's ``shouldStopDrainBatchesForPartition`` (idempotent producer)."""
    if sequences.producer_id_and_epoch() is None:
        return True  # no producer id yet: nothing can be sent
    if not first.has_sequence and sequences.has_unresolved_sequence(tp):
        # Earlier batches of this partition expired after being sent: until their fate is known,
        # new sequences would risk a gap.
        return True
    first_in_flight = sequences.first_in_flight_sequence(tp)
    # A retried batch goes only when it is the first in flight: retries are resent in sequence
    # order, one at a time, so the broker never sees a gap.
    return first_in_flight != NO_SEQUENCE and first.has_sequence and first.base_sequence != first_in_flight
