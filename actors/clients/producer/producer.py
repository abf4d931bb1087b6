"""ProducerActor: a producer client's Sender, metadata and idempotence, as one sans-I/O actor.

Theory of operation
-------------------
The client library (``ops/clients/producer.py``) hands records over in chunks (``SendRecords``, one
message per event-loop turn) and receives their outcomes as ``ProducerResults`` told to its
``results`` ref. The pure ``Sender`` (``sender.py``) partitions, batches, expires and
interprets answers; this actor does the talking and the timing around it. After every message it
runs the sender once and then:

* sends each prepared ``ProduceRequest`` as an ask to the leader's ``broker`` actor, timing out
  after ``request.timeout.ms`` (a tell for ``acks=0``, which nobody answers);
* with idempotence and no producer id, asks a broker's ``admin`` actor for one (InitProducerId),
  again after ``retry.backoff.ms`` when that fails;
* refreshes metadata when due (``actors/clients/metadata.py``): a ``MetadataRequest`` for the topics in
  use to a known broker — the bootstrap servers until the first answer, then the brokers it named,
  then the bootstrap servers again — moving to the next one after a failure. Broker addresses from
  the answer go to the client's ``AddressBook``, as the broker actor does with UpdateMetadata;
* sets one timer for the earliest thing due (linger, retry back-off, an expiry, a refresh).

Flush and close (Kafka's ``flush``/``close``): ``BeginFlush``/``EndFlush`` bracket a flush, during
which every batch is sendable at once; ``CloseProducer`` refuses new records, sends everything and
answers ``ProducerClosed`` when nothing is left; ``AbortProducer`` fails what is left
(``ProducerClosedError``). ``PartitionsFor`` answers once the topic's metadata is known, or with a
``ProducerTimeoutError`` after ``max.block.ms``. Whenever the actor stops (shutdown, or a failure:
the client library spawns it with a stop strategy) ``on_stop`` fails whatever is still pending and
tells the results ref ``stopped``, so no record is left without an outcome.

If an ask's answer arrives after its timeout it is dropped by the runtime; the request counts as
failed (NETWORK_EXCEPTION) and may be retried — that a broker may still have acted on it is exactly
what idempotence (sequence numbers) is for.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias, assert_never

from actors.clients.producer.batch import NO_DEADLINE
from actors.clients.producer.config import ProducerConfig
from actors.clients.producer.errors import ProducerClosedError, ProducerTimeoutError
from actors.clients.producer.protocol import (
    AbortProducer,
    BeginFlush,
    CloseProducer,
    EndFlush,
    PartitionsFor,
    PartitionsForResponse,
    ProducerClosed,
    ProducerResults,
    SendRecords,
)
from actors.clients.producer.sender import PreparedRequest, Sender
from actors.common.client_protocol import InitProducerIdRequest, InitProducerIdResponse
from actors.common.errors import ErrorCode
from actors.common.names import ADMIN_ACTOR_NAME, BROKER_ACTOR_NAME, broker_node
from actors.common.protocol import MetadataRequest, MetadataResponse
from runtime.actor import Actor
from runtime.context import Context
from runtime.histogram import HistogramSnapshot
from runtime.messages import AskFailure, AskTimedOut, PeerUnavailable, Requester, UnknownActor
from runtime.ref import ActorRef
from runtime.transport.addresses import AddressBook

__all__ = ["ProducerActor", "ProducerMessage", "ProducerStatistics"]

_WAKEUP_TIMER = "sender-wakeup"


@dataclass(frozen=True, slots=True)
class _Wakeup:
    pass


@dataclass(frozen=True, slots=True)
class _ProduceAnswered:
    request_id: int
    response: object


@dataclass(frozen=True, slots=True)
class _ProduceFailed:
    request_id: int
    failure: AskFailure


@dataclass(frozen=True, slots=True)
class _MetadataAnswered:
    response: object


@dataclass(frozen=True, slots=True)
class _MetadataFailed:
    failure: AskFailure


@dataclass(frozen=True, slots=True)
class _ProducerIdAnswered:
    response: object


@dataclass(frozen=True, slots=True)
class _ProducerIdFailed:
    failure: AskFailure


ProducerMessage: TypeAlias = (
    SendRecords
    | BeginFlush
    | EndFlush
    | CloseProducer
    | AbortProducer
    | PartitionsFor
    | _Wakeup
    | _ProduceAnswered
    | _ProduceFailed
    | _MetadataAnswered
    | _MetadataFailed
    | _ProducerIdAnswered
    | _ProducerIdFailed
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerStatistics:
    client_id: str
    producer_id: int
    records_sent_total: int
    record_errors_total: int
    record_retries_total: int
    # Records retried, by the error that caused the retry (Kafka's record-retry-rate, by cause).
    record_retries_by_error: dict[str, int]
    batches_sent_total: int
    requests_sent_total: int
    bytes_sent_total: int
    requests_in_flight: int
    batches_incomplete: int
    records_waiting_for_memory: int
    records_waiting_for_metadata: int
    buffer_total_bytes: int
    buffer_available_bytes: int
    metadata_updates_total: int
    metadata_failures_total: int
    producer_id_resets_total: int
    request_latency: HistogramSnapshot


class ProducerActor(Actor[ProducerMessage]):
    def __init__(
        self,
        config: ProducerConfig,
        *,
        bootstrap: Sequence[ActorRef],
        results: ActorRef,
        address_book: AddressBook | None = None,
    ) -> None:
        if not bootstrap:
            raise ValueError("a producer needs at least one bootstrap broker")
        self.config = config
        self.bootstrap = tuple(bootstrap)
        self.results = results
        self.address_book = address_book
        self._sender: Sender | None = None
        self._learned: tuple[ActorRef, ...] = ()
        self._node_index = 0
        self._producer_id_in_flight = False
        self._producer_id_retry_ms = 0
        self._producer_id_failures = 0
        self._wakeup_due_ms: int | None = None
        self._closing: list[Requester] = []
        self._closed = False
        self._partitions_for: list[tuple[Requester, str, int]] = []

    @property
    def sender(self) -> Sender:
        assert self._sender is not None, "the producer has not started"
        return self._sender

    def on_start(self, ctx: Context[ProducerMessage]) -> None:
        # The sticky partitioner's randomness is the node's seeded one, so tests are repeatable.
        self._sender = Sender(self.config, ctx.rng)

    def on_stop(self, ctx: Context[ProducerMessage]) -> None:
        """Stopping (shut down, or failed: producers are spawned with a stop strategy) leaves no
        record without an outcome: whatever is pending fails with ProducerClosedError."""
        sender = self._sender
        outcomes = []
        if sender is not None:
            if sender.has_pending():
                sender.abort(ProducerClosedError("the producer stopped before these records completed"))
            outcomes = sender.take_outcomes()
        ctx.tell(self.results, ProducerResults(outcomes, stopped=True))

    # ------------------------------------------------------------------------------ dispatch

    def receive(self, ctx: Context[ProducerMessage], message: ProducerMessage) -> None:
        match message:
            case SendRecords():
                self._on_send_records(ctx, message)
            case BeginFlush():
                self.sender.accumulator.flushes_in_progress += 1
                self._run_once(ctx)
            case EndFlush():
                accumulator = self.sender.accumulator
                accumulator.flushes_in_progress = max(accumulator.flushes_in_progress - 1, 0)
            case CloseProducer():
                self._on_close(ctx)
            case AbortProducer():
                self._on_abort(ctx, message)
            case PartitionsFor():
                self._on_partitions_for(ctx, message)
            case _Wakeup():
                self._wakeup_due_ms = None
                self._run_once(ctx)
            case _ProduceAnswered():
                self.sender.complete_request(message.request_id, message.response, ctx.now_ms)
                self._run_once(ctx)
            case _ProduceFailed():
                self.sender.fail_request(message.request_id, _describe(message.failure), ctx.now_ms)
                self._run_once(ctx)
            case _MetadataAnswered():
                self._on_metadata_answered(ctx, message)
            case _MetadataFailed():
                self._on_metadata_failed(ctx, _describe(message.failure))
            case _ProducerIdAnswered():
                self._on_producer_id_answered(ctx, message)
            case _ProducerIdFailed():
                self._on_producer_id_failed(ctx, _describe(message.failure))
            case _:
                assert_never(message)

    def statistics(self) -> ProducerStatistics | None:
        sender = self._sender
        if sender is None:
            return None
        pool = sender.accumulator.pool
        idempotence = sender.idempotence
        return ProducerStatistics(
            client_id=self.config.client_id,
            producer_id=-1 if idempotence is None else idempotence.producer_id,
            records_sent_total=sender.records_sent_total,
            record_errors_total=sender.record_errors_total,
            record_retries_total=sender.record_retries_total,
            record_retries_by_error=dict(sender.retries_by_error),
            batches_sent_total=sender.batches_sent_total,
            requests_sent_total=sender.requests_sent_total,
            bytes_sent_total=sender.bytes_sent_total,
            requests_in_flight=len(sender.in_flight),
            batches_incomplete=sender.accumulator.incomplete_count,
            records_waiting_for_memory=len(pool.waiters),
            records_waiting_for_metadata=sum(len(queue) for queue in sender.waiting.values()),
            buffer_total_bytes=pool.total_memory,
            buffer_available_bytes=pool.available_memory,
            metadata_updates_total=sender.metadata.updates_total,
            metadata_failures_total=sender.metadata.failed_updates_total,
            producer_id_resets_total=0 if idempotence is None else idempotence.producer_id_resets_total,
            request_latency=sender.request_latency.snapshot(),
        )

    # ------------------------------------------------------------------------------ handlers

    def _on_send_records(self, ctx: Context[ProducerMessage], message: SendRecords) -> None:
        if self._closed or self._closing:
            error = ProducerClosedError("cannot send after the producer is closed")
            for record in message.records:
                self.sender.fail_record(record, error)
        else:
            self.sender.send(message.records, ctx.now_ms)
        self._run_once(ctx)

    def _on_close(self, ctx: Context[ProducerMessage]) -> None:
        requester = ctx.requester
        if requester is not None:
            self._closing.append(requester)
        # Kafka's accumulator.close(): everything left is sendable at once.
        self.sender.accumulator.closed = True
        self._run_once(ctx)

    def _on_abort(self, ctx: Context[ProducerMessage], message: AbortProducer) -> None:
        self._closed = True
        self.sender.accumulator.closed = True
        self.sender.abort(ProducerClosedError(message.reason))
        for requester, topic, _ in self._partitions_for:
            ctx.reply_to(
                requester, PartitionsForResponse(topic=topic, error=ProducerClosedError(message.reason))
            )
        self._partitions_for.clear()
        self._run_once(ctx)

    def _on_partitions_for(self, ctx: Context[ProducerMessage], message: PartitionsFor) -> None:
        requester = ctx.requester
        if requester is None:
            return
        info = self.sender.metadata.topic_info(message.topic)
        if info is not None:
            ctx.reply(
                PartitionsForResponse(topic=message.topic, partitions=tuple(range(info.partition_count)))
            )
            return
        self._partitions_for.append((requester, message.topic, ctx.now_ms + self.config.max_block_ms))
        self.sender.metadata.add_topic(message.topic)
        self._run_once(ctx)

    # ---------------------------------------------------------------------------------- loop

    def _run_once(self, ctx: Context[ProducerMessage]) -> None:
        now_ms = ctx.now_ms
        sender = self.sender
        idempotence = sender.idempotence
        if idempotence is not None:
            if idempotence.maybe_resolve_sequences():
                ctx.log.warning("expired batches left a sequence gap: requesting a new producer id")
            if idempotence.needs_producer_id:
                self._maybe_init_producer_id(ctx, now_ms)
        for request in sender.run_once(now_ms):
            self._send(ctx, request)
        self._expire_partitions_for(ctx, now_ms)
        self._maybe_request_metadata(ctx, now_ms)
        self._schedule_wakeup(ctx, now_ms)
        for warning in sender.warnings:
            ctx.log.warning("%s", warning)
        sender.warnings.clear()
        outcomes = sender.take_outcomes()
        if outcomes:
            ctx.tell(self.results, ProducerResults(outcomes))
        if self._closing and not sender.has_pending():
            self._closed = True
            for requester in self._closing:
                ctx.reply_to(requester, ProducerClosed())
            self._closing.clear()

    def _send(self, ctx: Context[ProducerMessage], prepared: PreparedRequest) -> None:
        target = ActorRef(node_id=broker_node(prepared.node), name=BROKER_ACTOR_NAME)
        if prepared.request_id == 0:
            ctx.tell(target, prepared.request)  # acks=0: nobody answers
            return
        request_id = prepared.request_id
        ctx.ask(
            target,
            prepared.request,
            timeout_ms=self.config.request_timeout_ms,
            on_reply=lambda response: _ProduceAnswered(request_id, response),
            on_failure=lambda failure: _ProduceFailed(request_id, failure),
        )

    def _schedule_wakeup(self, ctx: Context[ProducerMessage], now_ms: int) -> None:
        due = self.sender.next_wakeup_ms(now_ms)
        metadata_delay = self.sender.metadata.time_to_next_update_ms(now_ms)
        if metadata_delay != NO_DEADLINE:
            due = min(due, now_ms + metadata_delay)
        idempotence = self.sender.idempotence
        if idempotence is not None and idempotence.needs_producer_id and not self._producer_id_in_flight:
            due = min(due, self._producer_id_retry_ms)
        for _, _, deadline_ms in self._partitions_for:
            due = min(due, deadline_ms)
        if due == NO_DEADLINE or (self._wakeup_due_ms is not None and self._wakeup_due_ms <= due):
            return  # nothing to wait for, or an earlier wake-up is already set (a spare one is harmless)
        # Never 0 ms: whatever was due by now has just been handled, and a zero timer would spin.
        ctx.start_timer(_WAKEUP_TIMER, _Wakeup(), max(due - now_ms, 1))
        self._wakeup_due_ms = due

    def _expire_partitions_for(self, ctx: Context[ProducerMessage], now_ms: int) -> None:
        if not self._partitions_for:
            return
        remaining = []
        for requester, topic, deadline_ms in self._partitions_for:
            info = self.sender.metadata.topic_info(topic)
            if info is not None:
                ctx.reply_to(
                    requester,
                    PartitionsForResponse(topic=topic, partitions=tuple(range(info.partition_count))),
                )
            elif deadline_ms <= now_ms:
                error = ProducerTimeoutError(
                    f"topic {topic} not present in metadata after {self.config.max_block_ms} ms"
                )
                ctx.reply_to(requester, PartitionsForResponse(topic=topic, error=error))
            else:
                remaining.append((requester, topic, deadline_ms))
        self._partitions_for = remaining
        if remaining:
            # Not known yet (a topic just created may not have reached the broker that answered):
            # ask again after the back-off, as for records waiting on a topic.
            self.sender.metadata.request_update()

    # ------------------------------------------------------------------------------ metadata

    def _current_node(self) -> ActorRef:
        candidates = self._learned + self.bootstrap
        return candidates[self._node_index % len(candidates)]

    def _maybe_request_metadata(self, ctx: Context[ProducerMessage], now_ms: int) -> None:
        metadata = self.sender.metadata
        if metadata.time_to_next_update_ms(now_ms) != 0:
            return
        topics = metadata.update_started(now_ms)
        ctx.ask(
            self._current_node(),
            MetadataRequest(topics=topics),
            timeout_ms=self.config.request_timeout_ms,
            on_reply=_MetadataAnswered,
            on_failure=_MetadataFailed,
        )

    def _on_metadata_answered(self, ctx: Context[ProducerMessage], message: _MetadataAnswered) -> None:
        response = message.response
        if not isinstance(response, MetadataResponse):
            self._on_metadata_failed(ctx, f"unexpected answer {type(response).__name__}")
            return
        now_ms = ctx.now_ms
        sender = self.sender
        sender.metadata.update(response, now_ms)
        if self.address_book is not None:
            for endpoint in response.brokers:
                self.address_book.set(broker_node(endpoint.broker_id), endpoint.url)
        if response.brokers:
            answered = self._current_node()
            self._learned = tuple(
                ActorRef(node_id=broker_node(endpoint.broker_id), name=BROKER_ACTOR_NAME)
                for endpoint in sorted(response.brokers, key=lambda e: e.broker_id)
            )
            # Stay with the broker that answers (a listed broker may be the one that just died);
            # one reached through a bootstrap address starts the learned list from its beginning.
            candidates = self._learned + self.bootstrap
            self._node_index = candidates.index(answered) if answered in self._learned else 0
        for topic in response.topics:
            if topic.error_code is not ErrorCode.NONE:
                ctx.log.debug("metadata for topic %s: %s", topic.name, topic.error_code.name)
        sender.metadata_updated(now_ms)
        self._run_once(ctx)

    def _on_metadata_failed(self, ctx: Context[ProducerMessage], reason: str) -> None:
        ctx.log.info("metadata request to %s failed: %s", self._current_node(), reason)
        self.sender.metadata.failed_update(ctx.now_ms)
        self._node_index += 1
        self._run_once(ctx)

    # --------------------------------------------------------------------------- producer id

    def _maybe_init_producer_id(self, ctx: Context[ProducerMessage], now_ms: int) -> None:
        if self._producer_id_in_flight or now_ms < self._producer_id_retry_ms:
            return
        self._producer_id_in_flight = True
        ctx.ask(
            self._current_node().sibling(ADMIN_ACTOR_NAME),
            InitProducerIdRequest(),
            timeout_ms=self.config.request_timeout_ms,
            on_reply=_ProducerIdAnswered,
            on_failure=_ProducerIdFailed,
        )

    def _on_producer_id_answered(self, ctx: Context[ProducerMessage], message: _ProducerIdAnswered) -> None:
        response = message.response
        if not isinstance(response, InitProducerIdResponse):
            self._on_producer_id_failed(ctx, f"unexpected answer {type(response).__name__}")
            return
        if response.error_code is not ErrorCode.NONE:
            self._on_producer_id_failed(ctx, f"{response.error_code.name}: {response.error_message}")
            return
        self._producer_id_in_flight = False
        self._producer_id_failures = 0
        idempotence = self.sender.idempotence
        assert idempotence is not None
        idempotence.set_producer_id(response.producer_id, response.producer_epoch)
        ctx.log.info("producer id %d, epoch %d", response.producer_id, response.producer_epoch)
        self._run_once(ctx)

    def _on_producer_id_failed(self, ctx: Context[ProducerMessage], reason: str) -> None:
        self._producer_id_failures += 1
        # Retried every retry.backoff.ms: a warning for the first failure and every 100th after.
        level = logging.WARNING if self._producer_id_failures % 100 == 1 else logging.DEBUG
        ctx.log.log(
            level,
            "InitProducerId via %s failed (%d time(s) in a row): %s",
            self._current_node(),
            self._producer_id_failures,
            reason,
        )
        self._producer_id_in_flight = False
        self._producer_id_retry_ms = ctx.now_ms + self.config.retry_backoff_ms
        self._node_index += 1
        self._run_once(ctx)


def _describe(failure: AskFailure) -> str:
    match failure:
        case AskTimedOut():
            return f"no answer within {failure.timeout_ms} ms"
        case PeerUnavailable():
            return f"unreachable ({failure.reason})"
        case UnknownActor():
            return f"no actor {failure.target}"
        case _:
            assert_never(failure)
