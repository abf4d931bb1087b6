"""The producer's Sender, pure: intake, expiry, ready/drain, and what each answer means.

Kafka's ``KafkaProducer.doSend`` (partitioning, size checks, waiting for metadata) and
``Sender.runOnce``/``completeBatch``, with no I/O and time as ``now_ms``. ``ProducerActor``
(``producer.py``) drives it: it feeds records and answers in, sends the ``PreparedRequest``s that
``run_once`` returns, and hands the ``BatchOutcome``s to the client library.

Theory of operation
-------------------
*Intake.* Each record is partitioned — explicit; else ``murmur2(key) % partitions``; else the
sticky partition (KIP-480: a record that would open a new batch first moves the topic to another
partition) — checked against ``max.request.size`` and ``buffer.memory`` (``RecordTooLargeError``
at once, nothing buffered), and appended to the ``RecordAccumulator``. A record whose topic (or
partition) is not in the metadata waits, in order with the later records of its topic, until a
refresh shows it or its ``max.block.ms`` passes.

*``run_once``* (Kafka's ``sendProducerData``): expire (below); ``ready``, requesting a metadata
refresh for leaderless topics; keep nodes with fewer than ``max.in.flight.requests.per.connection``
requests outstanding; ``drain`` (with the idempotence gate) and build one ``ProduceRequest`` per
node; with ``max.in.flight.requests.per.connection=1`` mute the drained partitions until their
answer. With ``acks=0`` nothing answers: the batches complete as sent, offset -1.

*Expiry* (KIP-91): queued and in-flight batches whose ``delivery.timeout.ms`` passed fail with
``ProducerTimeoutError``, whatever their state; records past ``max.block.ms`` waiting for metadata or
memory fail too (``BufferExhaustedError`` for memory). Expiry always runs before an answer is
processed, so an in-flight batch past its deadline fails even if its answer is a success, and is
never resent (docs/scenarios.md §5 #45); the late answer only feeds the sequence bookkeeping.

*Answers* (``completeBatch``): NONE completes the records (offset = base + index); MESSAGE_TOO_LARGE
for a batch of several records splits it and retries the parts (no attempt counted); an error is
retried — re-enqueued at the head, sent again after ``retry.backoff.ms`` — while the delivery timeout
has not passed, attempts < ``retries`` and the error is retriable or idempotence allows it (and, with
idempotence, only under the same producer id, else ``OutOfOrderSequenceError``);
DUPLICATE_SEQUENCE_NUMBER is a success with an unknown offset; anything else fails the batch with
its typed error. Invalid-metadata errors (NOT_LEADER_OR_FOLLOWER, NETWORK_EXCEPTION...) request a
refresh; the retried batch follows the new leader at the next ``ready``/``drain``. A request with
no usable answer (unreachable broker, timeout, a lost reply) is NETWORK_EXCEPTION for all its batches.

Invariants: a batch completes once (``done``), returning its memory then; a retried batch keeps its
bytes and sequence; every record handed in ends in exactly one outcome.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from actors.clients.metadata import ClientMetadata, TopicInfo
from actors.clients.producer.accumulator import ABORTED_FOR_NEW_BATCH, RecordAccumulator
from actors.clients.producer.batch import NO_DEADLINE, BlockedRecord, ProducerBatch, estimate_size_upper_bound
from actors.clients.producer.config import ProducerConfig
from actors.clients.producer.errors import (
    BufferExhaustedError,
    MetadataTimeoutError,
    OutOfOrderSequenceError,
    ProducerError,
    ProducerTimeoutError,
    RecordTooLargeError,
    error_for,
)
from actors.clients.producer.idempotence import IdempotenceManager
from actors.clients.producer.partitioner import StickyPartitionCache, keyed_partition
from actors.clients.producer.protocol import BatchOutcome, OutgoingRecord
from actors.common.errors import ErrorCode
from actors.common.protocol import ProducePartitionData, ProduceRequest, ProduceResponse
from actors.common.types import TopicPartition
from runtime.histogram import Histogram
from runtime.storage.records import RECORD_BATCH_OVERHEAD

__all__ = ["PreparedRequest", "Sender"]


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """A ProduceRequest to send to ``node``. ``request_id`` is 0 for acks=0 (nothing answers)."""

    request_id: int
    node: int
    request: ProduceRequest


@dataclass(slots=True)
class _InFlightRequest:
    node: int
    batches: dict[TopicPartition, ProducerBatch]
    sent_ms: int


@dataclass(slots=True)
class _Waiting:
    """A record waiting for its topic's metadata, with its max.block.ms deadline."""

    record: OutgoingRecord
    deadline_ms: int


class Sender:
    """Kafka's producer Sender and send path, pure (module docstring)."""

    def __init__(self, config: ProducerConfig, rng: random.Random) -> None:
        self.config = config
        self.accumulator = RecordAccumulator(
            batch_size=config.batch_size,
            linger_ms=config.linger_ms,
            buffer_memory=config.buffer_memory,
            retry_backoff_ms=config.retry_backoff_ms,
            delivery_timeout_ms=config.delivery_timeout_ms,
            compression=config.compression_type,
            idempotent=config.enable_idempotence,
        )
        self.metadata = ClientMetadata(
            metadata_max_age_ms=config.metadata_max_age_ms, refresh_backoff_ms=config.retry_backoff_ms
        )
        self.idempotence = IdempotenceManager() if config.enable_idempotence else None
        self.sticky = StickyPartitionCache(rng)
        self.waiting: dict[str, deque[_Waiting]] = {}
        self.in_flight: dict[int, _InFlightRequest] = {}
        self.in_flight_per_node: dict[int, int] = {}
        self.in_flight_batches: dict[TopicPartition, list[ProducerBatch]] = {}
        self._request_ids = itertools.count(1)
        self.outcomes: list[BatchOutcome] = []
        self.next_ready_check_delay_ms = NO_DEADLINE
        self.records_sent_total = 0
        self.record_errors_total = 0
        self.record_retries_total = 0
        self.retries_by_error: dict[str, int] = {}
        # Send to answer of produce requests (Kafka's request-latency), in seconds.
        self.request_latency = Histogram()
        self.batches_sent_total = 0
        self.requests_sent_total = 0
        self.bytes_sent_total = 0
        self.warnings: list[str] = []

    # -------------------------------------------------------------------------------- intake

    def send(self, records: Iterable[OutgoingRecord], now_ms: int) -> None:
        """Take records handed over by the client at ``now_ms`` (their max.block.ms starts now)."""
        deadline_ms = now_ms + self.config.max_block_ms
        waiting = self.waiting
        topic_info = self.metadata.topic_info
        append = self._append
        for record in records:
            if waiting:
                queue = waiting.get(record.topic)
                if queue is not None:
                    queue.append(_Waiting(record, deadline_ms))
                    continue
            info = topic_info(record.topic)
            if info is None or record.partition >= info.partition_count:
                waiting.setdefault(record.topic, deque()).append(_Waiting(record, deadline_ms))
                self.metadata.add_topic(record.topic)
                self.metadata.request_update()
                continue
            append(record, info, now_ms, deadline_ms)

    def _append(self, record: OutgoingRecord, info: TopicInfo, now_ms: int, deadline_ms: int) -> None:
        key = record.key
        size = estimate_size_upper_bound(key, record.value, record.headers)
        config = self.config
        serialized = RECORD_BATCH_OVERHEAD + size
        if serialized > config.max_request_size or serialized > config.buffer_memory:
            self.fail_record(record, _too_large(serialized, config))
            return
        partition = record.partition
        sticky = partition < 0 and key is None
        if partition < 0:
            if key is not None:
                partition = keyed_partition(key, info.partition_count)
            else:
                partition = self.sticky.partition(info.name, info.partition_count, info.available)
        accumulator = self.accumulator
        status = accumulator.append(
            info.tps[partition],
            record.timestamp,
            key,
            record.value,
            record.headers,
            record.completion,
            size,
            now_ms,
            deadline_ms,
            sticky,
        )
        if status == ABORTED_FOR_NEW_BATCH:
            partition = self.sticky.on_new_batch(info.name, info.partition_count, info.available, partition)
            accumulator.append(
                info.tps[partition],
                record.timestamp,
                key,
                record.value,
                record.headers,
                record.completion,
                size,
                now_ms,
                deadline_ms,
            )
        # Otherwise it is in a batch, or (BLOCKED) waits in the buffer pool's queue.

    def metadata_updated(self, now_ms: int) -> None:
        """Records whose topic is now known go to the accumulator, in order, per topic."""
        for topic in list(self.waiting):
            info = self.metadata.topic_info(topic)
            if info is None:
                continue
            queue = self.waiting[topic]
            while queue and queue[0].record.partition < info.partition_count:
                waiting = queue.popleft()
                self._append(waiting.record, info, now_ms, waiting.deadline_ms)
            if not queue:
                del self.waiting[topic]
        if self.waiting:
            # Still unknown (no such topic yet, or fewer partitions): ask again after the back-off,
            # as Kafka's send keeps requesting updates while it waits for a topic.
            self.metadata.request_update()

    # ----------------------------------------------------------------------------- the loop

    def run_once(self, now_ms: int) -> list[PreparedRequest]:
        """Expire, then drain what is ready into requests (module docstring)."""
        self.expire(now_ms)
        accumulator = self.accumulator
        result = accumulator.ready(self.metadata, now_ms)
        self.next_ready_check_delay_ms = result.next_ready_check_delay_ms
        if result.unknown_leader_topics:
            self.metadata.request_update()
        limit = self.config.max_in_flight_requests_per_connection
        nodes = [n for n in result.ready_nodes if self.in_flight_per_node.get(n, 0) < limit]
        if not nodes:
            return []
        drained = accumulator.drain(
            self.metadata, nodes, self.config.max_request_size, now_ms, self.idempotence
        )
        return [self._prepare(node, batches, now_ms) for node, batches in drained.items()]

    def _prepare(self, node: int, batches: list[ProducerBatch], now_ms: int) -> PreparedRequest:
        config = self.config
        partitions = tuple(
            ProducePartitionData(topic=b.tp.topic, partition=b.tp.partition, records=b.close())
            for b in batches
        )
        request = ProduceRequest(
            acks=config.acks, timeout_ms=config.request_timeout_ms, partitions=partitions
        )
        self.requests_sent_total += 1
        self.batches_sent_total += len(batches)
        self.bytes_sent_total += sum(len(p.records) for p in partitions)
        if config.acks == 0:
            for batch in batches:
                self._complete(batch, -1, -1)
            return PreparedRequest(0, node, request)
        request_id = next(self._request_ids)
        self.in_flight[request_id] = _InFlightRequest(node, {b.tp: b for b in batches}, now_ms)
        self.in_flight_per_node[node] = self.in_flight_per_node.get(node, 0) + 1
        idempotence = self.idempotence
        for batch in batches:
            self.in_flight_batches.setdefault(batch.tp, []).append(batch)
            if config.guarantee_message_order:
                self.accumulator.mute_partition(batch.tp)
            if idempotence is not None:
                batch.sent_as_next_sequence = idempotence.is_next_sequence(batch.tp, batch.base_sequence)
        return PreparedRequest(request_id, node, request)

    def next_wakeup_ms(self, now_ms: int) -> int:
        """When ``run_once`` next has something to do without any new message (NO_DEADLINE: never)."""
        delay = self.next_ready_check_delay_ms
        due = now_ms + delay if delay != NO_DEADLINE else NO_DEADLINE
        return min(
            due,
            self.accumulator.next_expiry_ms(),
            self._next_in_flight_expiry_ms(),
            self.accumulator.pool.next_deadline_ms(),
            self._next_waiting_deadline_ms(),
        )

    def has_pending(self) -> bool:
        """Anything not yet complete: waiting records, batches, requests."""
        return bool(self.waiting) or self.accumulator.has_incomplete() or bool(self.in_flight)

    def take_outcomes(self) -> list[BatchOutcome]:
        outcomes = self.outcomes
        self.outcomes = []
        return outcomes

    # ------------------------------------------------------------------------------ answers

    def complete_request(self, request_id: int, response: object, now_ms: int) -> None:
        """The answer of a ProduceRequest (anything but a ProduceResponse counts as none)."""
        if not isinstance(response, ProduceResponse):
            self.fail_request(request_id, f"unexpected answer {type(response).__name__}", now_ms)
            return
        self.expire(now_ms)  # before the answers, in-flight batches included: docs/scenarios.md §5 #45
        request = self._finish_request(request_id)
        if request is None:
            return
        self.request_latency.observe((now_ms - request.sent_ms) / 1000)
        answers = {(p.topic, p.partition): p for p in response.partitions}
        for tp, batch in request.batches.items():
            answer = answers.get((tp.topic, tp.partition))
            if answer is None:
                self._complete_batch(
                    batch, ErrorCode.NETWORK_EXCEPTION, "no answer for the partition", -1, -1, -1, now_ms
                )
            else:
                self._complete_batch(
                    batch,
                    answer.error_code,
                    answer.error_message,
                    answer.base_offset,
                    answer.log_append_time_ms,
                    answer.log_start_offset,
                    now_ms,
                )
            if self.config.guarantee_message_order:
                self.accumulator.unmute_partition(tp)

    def fail_request(self, request_id: int, reason: str, now_ms: int) -> None:
        """No usable answer: Kafka's disconnect, NETWORK_EXCEPTION for every batch of the request."""
        self.expire(now_ms)
        request = self._finish_request(request_id)
        if request is None:
            return
        for tp, batch in request.batches.items():
            message = f"no answer from broker {request.node}: {reason}"
            self._complete_batch(batch, ErrorCode.NETWORK_EXCEPTION, message, -1, -1, -1, now_ms)
            if self.config.guarantee_message_order:
                self.accumulator.unmute_partition(tp)

    def _finish_request(self, request_id: int) -> _InFlightRequest | None:
        request = self.in_flight.pop(request_id, None)
        if request is None:
            return None  # the runtime delivers one outcome per ask; nothing to do for a second
        self.in_flight_per_node[request.node] -= 1
        for tp, batch in request.batches.items():
            in_flight = self.in_flight_batches.get(tp)
            if in_flight is not None and batch in in_flight:
                in_flight.remove(batch)
                if not in_flight:
                    del self.in_flight_batches[tp]
        return request

    def _complete_batch(
        self,
        batch: ProducerBatch,
        error: ErrorCode,
        error_message: str | None,
        base_offset: int,
        log_append_time_ms: int,
        log_start_offset: int,
        now_ms: int,
    ) -> None:
        """Kafka's ``Sender.completeBatch`` (module docstring)."""
        idempotence = self.idempotence
        if error.invalid_metadata:
            self.metadata.request_update()
        if batch.done:
            # Expired while in flight: the application has its timeout; the answer only tells the
            # sequence bookkeeping whether the broker has the records.
            if idempotence is not None:
                if error in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    idempotence.handle_completed(batch, base_offset)
                else:
                    idempotence.remove_unresolved_batch(batch)
            return
        if error is ErrorCode.MESSAGE_TOO_LARGE and batch.record_count > 1:
            self._split(batch)
        elif error is ErrorCode.NONE:
            self._complete(batch, base_offset, log_append_time_ms)
        elif self._can_retry(batch, error, log_start_offset, now_ms):
            if idempotence is None or idempotence.has_producer_id(batch.producer_id, batch.producer_epoch):
                self.accumulator.reenqueue(batch, now_ms)
                self.record_retries_total += batch.record_count
                self.retries_by_error[error.name] = (
                    self.retries_by_error.get(error.name, 0) + batch.record_count
                )
            else:
                self._fail_batch(
                    batch,
                    OutOfOrderSequenceError(
                        f"attempted to retry sending a batch of {batch.tp} but the producer id changed "
                        f"from {batch.producer_id} to {idempotence.producer_id} in the meantime; "
                        "the batch is dropped"
                    ),
                    adjust_sequences=False,
                )
        elif error is ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            self._complete(batch, -1, -1)  # an older broker's way to say "already written"
        else:
            failure = error_for(error, error_message)
            self.warnings.append(
                f"batch of {batch.record_count} record(s) for {batch.tp} failed: {failure!r}"
            )
            self._fail_batch(batch, failure, adjust_sequences=batch.attempts < self.config.retries)

    def _can_retry(self, batch: ProducerBatch, error: ErrorCode, log_start_offset: int, now_ms: int) -> bool:
        if batch.has_reached_delivery_timeout(self.config.delivery_timeout_ms, now_ms):
            return False
        if batch.attempts >= self.config.retries:
            return False
        if error.retriable:
            return True
        return self.idempotence is not None and self.idempotence.can_retry(error, log_start_offset, batch)

    def _split(self, batch: ProducerBatch) -> None:
        idempotence = self.idempotence
        if idempotence is not None:
            idempotence.remove_unresolved_batch(batch)
        before = self.accumulator.size_limits.get(batch.tp)
        parts = self.accumulator.split_and_reenqueue(batch)
        after = self.accumulator.size_limits.get(batch.tp)
        if after != before:
            self.warnings.append(
                f"a batch of {batch.estimated_size_in_bytes} bytes for {batch.tp} was refused as "
                f"MESSAGE_TOO_LARGE although within batch.size={self.config.batch_size}: split in "
                f"{len(parts)}, and the partition's batches now stop at {after} bytes (lower batch.size "
                "or raise the topic's max.message.bytes)"
            )
        if idempotence is not None:
            for part in parts:
                if part.has_sequence:
                    idempotence.add_unresolved_batch(part)
        # The big batch's records now belong to the parts; only its memory is released.
        batch.done = True
        self.accumulator.deallocate(batch)

    # ----------------------------------------------------------------------------- outcomes

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
        if self.idempotence is not None and batch.has_sequence:
            self.idempotence.handle_completed(batch, base_offset)
        batch.done = True
        self.accumulator.deallocate(batch)
        self.records_sent_total += batch.record_count
        tp = batch.tp
        self.outcomes.append(
            BatchOutcome(tp.topic, tp.partition, base_offset, log_append_time_ms, batch.records)
        )

    def _fail_batch(self, batch: ProducerBatch, error: ProducerError, *, adjust_sequences: bool) -> None:
        if self.idempotence is not None and batch.has_sequence:
            self.idempotence.handle_failed(batch, error, adjust_sequences)
        self._finish_failed(batch, error)

    def _finish_failed(self, batch: ProducerBatch, error: ProducerError) -> None:
        batch.done = True
        self.accumulator.deallocate(batch)
        self.record_errors_total += batch.record_count
        tp = batch.tp
        self.outcomes.append(BatchOutcome(tp.topic, tp.partition, -1, -1, batch.records, error))

    def fail_record(self, record: OutgoingRecord, error: ProducerError) -> None:
        """A record that never reached a batch."""
        self.record_errors_total += 1
        entry = (
            record.completion,
            record.timestamp,
            -1 if record.key is None else len(record.key),
            -1 if record.value is None else len(record.value),
        )
        self.outcomes.append(BatchOutcome(record.topic, record.partition, -1, -1, (entry,), error))

    def abort(self, error: ProducerError) -> None:
        """Fail everything not yet complete (a forced close). In-flight requests still answer later;
        their batches are done by then and the answers only update bookkeeping."""
        for queue in self.waiting.values():
            for waiting in queue:
                self.fail_record(waiting.record, error)
        self.waiting.clear()
        for waiter in self.accumulator.pool.take_all_waiters():
            self.fail_record(_record_of(waiter), error)
        for batch in self.accumulator.abort_undrained():
            self._finish_failed(batch, error)
        for batches in self.in_flight_batches.values():
            for batch in batches:
                if not batch.done:
                    self._finish_failed(batch, error)

    # ------------------------------------------------------------------------------- expiry

    def expire(self, now_ms: int) -> None:
        """Fail whatever passed its deadline (module docstring)."""
        accumulator = self.accumulator
        if accumulator.pool.waiters:
            for waiter in accumulator.pool.expire_waiters(now_ms):
                self.fail_record(
                    _record_of(waiter),
                    BufferExhaustedError(
                        f"failed to allocate memory within the configured max blocking time "
                        f"{self.config.max_block_ms} ms (buffer.memory={self.config.buffer_memory})"
                    ),
                )
        if self.waiting:
            self._expire_waiting(now_ms)
        timeout_ms = self.config.delivery_timeout_ms
        for batches in list(self.in_flight_batches.values()):
            for batch in [
                b for b in batches if not b.done and b.has_reached_delivery_timeout(timeout_ms, now_ms)
            ]:
                self._expire_batch(batch, now_ms, in_request=True)
        for batch in accumulator.expired_batches(now_ms):
            self._expire_batch(batch, now_ms, in_request=False)
        if accumulator.pool.waiters:
            # Memory freed since the last run (completed, failed or expired batches) goes to the
            # records waiting for it, in order.
            accumulator.serve_waiters(now_ms)

    def _expire_batch(self, batch: ProducerBatch, now_ms: int, *, in_request: bool) -> None:
        idempotence = self.idempotence
        if idempotence is not None and batch.has_sequence:
            # It was sent at least once: whether the broker has it is unknown until its request
            # (if one is still out) answers.
            idempotence.mark_sequence_unresolved(batch.tp)
            if not in_request:
                idempotence.remove_unresolved_batch(batch)
        self._finish_failed(
            batch,
            ProducerTimeoutError(
                f"expiring {batch.record_count} record(s) for {batch.tp}: "
                f"{now_ms - batch.created_ms} ms has passed since batch creation"
            ),
        )

    def _expire_waiting(self, now_ms: int) -> None:
        max_block_ms = self.config.max_block_ms
        for topic in list(self.waiting):
            queue = self.waiting[topic]
            while queue and queue[0].deadline_ms <= now_ms:
                record = queue.popleft().record
                info = self.metadata.topic_info(topic)
                if info is None:
                    reason = f"topic {topic} not present in metadata after {max_block_ms} ms"
                else:
                    reason = (
                        f"partition {record.partition} of topic {topic} with partition count "
                        f"{info.partition_count} is not present in metadata after {max_block_ms} ms"
                    )
                self.fail_record(record, MetadataTimeoutError(reason))
            if not queue:
                del self.waiting[topic]

    def _next_in_flight_expiry_ms(self) -> int:
        created = [b.created_ms for batches in self.in_flight_batches.values() for b in batches if not b.done]
        return min(created) + self.config.delivery_timeout_ms if created else NO_DEADLINE

    def _next_waiting_deadline_ms(self) -> int:
        return min((queue[0].deadline_ms for queue in self.waiting.values() if queue), default=NO_DEADLINE)


def _too_large(size: int, config: ProducerConfig) -> RecordTooLargeError:
    if size > config.max_request_size:
        return RecordTooLargeError(
            f"the record is {size} bytes when serialized, which is larger than {config.max_request_size}, "
            "the maximum request size configured with max.request.size"
        )
    return RecordTooLargeError(
        f"the record is {size} bytes when serialized, which is larger than the total memory buffer "
        f"configured with buffer.memory ({config.buffer_memory})"
    )


def _record_of(waiter: BlockedRecord) -> OutgoingRecord:
    tp = waiter.tp
    return OutgoingRecord(
        tp.topic, tp.partition, waiter.key, waiter.value, waiter.headers, waiter.timestamp, waiter.completion
    )
