"""The ConsumerActor: Kafka's consumer fetcher, as an actor, for partitions the application assigns.

It keeps the cluster metadata of the assigned topics, resolves offset resets with ListOffsets at
each partition's leader, and keeps one Fetch in flight per leader for the fetchable partitions
(``state.py``), each partition in at most one per leader. A fetch whose partitions were all caught up (at
their high watermark) may be held by the leader for ``fetch.max.wait.ms``: it does not stop a
fetch of that leader's other partitions, whose records would otherwise wait for it (Kafka waits).
``Poll`` hands out buffered records at once, or parks until some arrive or its timeout passes. The
application side (``ops/clients/consumer.py``) only tells and asks.

Rules kept (Kafka 2.4's ``Fetcher``/``KafkaConsumer``):
* consumer fetches (replica id -1) read below the high watermark only, so nothing returned can be
  truncated later with acks=all writes;
* a partition whose leader is unknown, or whose fetch failed with an invalid-metadata error
  (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, FENCED/UNKNOWN_LEADER_EPOCH...), waits for a
  metadata refresh, at most every ``retry.backoff.ms``; a leader that cannot be reached is
  treated the same way;
* OFFSET_OUT_OF_RANGE applies ``auto.offset.reset``;
* positions move only as ``Poll`` hands records out, so a seek always wins over a fetch in flight.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias, assert_never

from actors.clients.consumer.config import ConsumerConfig, OffsetResetStrategy
from actors.clients.consumer.state import ConsumerRecord, SubscriptionState
from actors.clients.metadata import NO_DEADLINE, ClientMetadata
from actors.common.errors import ErrorCode, KafkaError
from actors.common.names import broker_node, broker_ref
from actors.common.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
)
from actors.common.types import TopicPartition
from runtime.actor import Actor
from runtime.context import Context
from runtime.messages import Requester
from runtime.ref import ActorRef
from runtime.transport.addresses import AddressBook

__all__ = [
    "Assign",
    "ConsumerActor",
    "ConsumerStatistics",
    "Pause",
    "Poll",
    "PollResult",
    "Position",
    "PositionResult",
    "Seek",
    "SeekToBeginning",
    "SeekToEnd",
]


# ---------------------------------------------------------------------- the application's API


@dataclass(frozen=True, slots=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class Seek:
    tp: TopicPartition
    offset: int


@dataclass(frozen=True, slots=True)
class SeekToBeginning:
    partitions: tuple[TopicPartition, ...] | None = None  # None: every assigned partition


@dataclass(frozen=True, slots=True)
class SeekToEnd:
    partitions: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True, slots=True)
class Pause:
    partitions: tuple[TopicPartition, ...]
    paused: bool = True


@dataclass(frozen=True, slots=True)
class Poll:
    """Ask: records (up to ``max.poll.records``) as soon as any are buffered, or none after
    ``timeout_ms``."""

    timeout_ms: int


@dataclass(frozen=True, slots=True)
class PollResult:
    records: tuple[ConsumerRecord, ...]
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class Position:
    """Ask: the partition's position, once known (after a pending reset), within ``timeout_ms``."""

    tp: TopicPartition
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class PositionResult:
    offset: int | None
    error: KafkaError | None = None


# ------------------------------------------------------------------------------ private messages


@dataclass(frozen=True, slots=True)
class _MetadataAnswer:
    response: MetadataResponse | None


@dataclass(frozen=True, slots=True)
class _FetchAnswer:
    node: int
    offsets: tuple[tuple[TopicPartition, int], ...]
    response: FetchResponse | None
    waits: bool  # every partition was caught up when sent: the leader may hold it fetch.max.wait.ms


@dataclass(frozen=True, slots=True)
class _OffsetsAnswer:
    node: int
    strategies: tuple[tuple[TopicPartition, OffsetResetStrategy], ...]
    response: ListOffsetsResponse | None


@dataclass(frozen=True, slots=True)
class _Wake:
    """A timer: re-check what is due (metadata refresh, parked requests)."""


@dataclass(frozen=True, slots=True)
class _PollExpired:
    generation: int


@dataclass(frozen=True, slots=True)
class _PositionExpired:
    generation: int


ConsumerMessage: TypeAlias = (
    Assign
    | Seek
    | SeekToBeginning
    | SeekToEnd
    | Pause
    | Poll
    | Position
    | _MetadataAnswer
    | _FetchAnswer
    | _OffsetsAnswer
    | _Wake
    | _PollExpired
    | _PositionExpired
)


@dataclass(frozen=True, slots=True)
class ConsumerStatistics:
    assigned_partitions: int
    buffered_records: int
    fetches_total: int
    records_consumed_total: int
    bytes_fetched_total: int
    metadata_updates_total: int
    offset_resets_total: int


@dataclass(slots=True)
class _ParkedPosition:
    requester: Requester
    tp: TopicPartition
    generation: int


class ConsumerActor(Actor[ConsumerMessage]):
    def __init__(
        self,
        *,
        config: ConsumerConfig,
        bootstrap: Sequence[ActorRef],
        address_book: AddressBook | None = None,
    ) -> None:
        self.config = config
        self.bootstrap = tuple(bootstrap)
        self.address_book = address_book
        self.subscriptions = SubscriptionState(config.auto_offset_reset)
        self.metadata = ClientMetadata(
            metadata_max_age_ms=config.metadata_max_age_ms, refresh_backoff_ms=config.retry_backoff_ms
        )
        self._metadata_attempts = 0
        # (partition, leader) of every fetch in flight: a partition whose leader moved is fetched
        # from the new one at once, as Kafka does (a late answer of the old one is then stale). Per
        # leader, how many of its fetches in flight will be answered at once (some partition had
        # records to read when sent).
        self._in_flight: set[tuple[TopicPartition, int]] = set()
        self._busy: dict[int, int] = {}
        self._backoff_until: dict[int, int] = {}
        self._resetting: set[TopicPartition] = set()
        self._parked_poll: tuple[Requester, int] | None = None
        self._parked_positions: list[_ParkedPosition] = []
        self._generation = 0
        self.fetches_total = 0
        self.records_consumed_total = 0
        self.bytes_fetched_total = 0
        self.offset_resets_total = 0

    def statistics(self) -> ConsumerStatistics:
        return ConsumerStatistics(
            assigned_partitions=len(self.subscriptions.partitions),
            buffered_records=sum(len(s.buffered) for s in self.subscriptions.partitions.values()),
            fetches_total=self.fetches_total,
            records_consumed_total=self.records_consumed_total,
            bytes_fetched_total=self.bytes_fetched_total,
            metadata_updates_total=self.metadata.updates_total,
            offset_resets_total=self.offset_resets_total,
        )

    def receive(self, ctx: Context[ConsumerMessage], message: ConsumerMessage) -> None:
        match message:
            case Assign():
                self.subscriptions.assign(message.partitions)
                for topic in dict.fromkeys(tp.topic for tp in message.partitions):
                    self.metadata.add_topic(topic)
            case Seek():
                self._guarded(ctx, lambda: self.subscriptions.seek(message.tp, message.offset))
            case SeekToBeginning():
                self._seek_to(ctx, message.partitions, OffsetResetStrategy.EARLIEST)
            case SeekToEnd():
                self._seek_to(ctx, message.partitions, OffsetResetStrategy.LATEST)
            case Pause():
                self._guarded(ctx, lambda: self.subscriptions.pause(message.partitions, message.paused))
            case Poll():
                self._on_poll(ctx, message)
            case Position():
                self._on_position(ctx, message)
            case _MetadataAnswer():
                self._on_metadata(ctx, message)
            case _FetchAnswer():
                self._on_fetch(ctx, message)
            case _OffsetsAnswer():
                self._on_offsets(ctx, message)
            case _Wake():
                pass
            case _PollExpired():
                if self._parked_poll is not None and self._parked_poll[1] == message.generation:
                    requester, _ = self._parked_poll
                    self._parked_poll = None
                    ctx.reply_to(requester, PollResult(records=()))
            case _PositionExpired():
                self._expire_positions(ctx, message.generation)
            case _:
                assert_never(message)
        self._drive(ctx)

    def _guarded(self, ctx: Context[ConsumerMessage], action: Callable[[], None]) -> None:
        """Apply an application command; a bad one (an unassigned partition, a negative offset) is
        logged and, when asked, answered with the error, and changes nothing."""
        try:
            action()
        except KafkaError as error:
            ctx.log.warning("%s", error)
            if ctx.requester is not None:
                ctx.reply(error)

    def _seek_to(
        self,
        ctx: Context[ConsumerMessage],
        tps: tuple[TopicPartition, ...] | None,
        strategy: OffsetResetStrategy,
    ) -> None:
        for tp in tps if tps is not None else tuple(self.subscriptions.partitions):
            self._guarded(ctx, functools.partial(self.subscriptions.request_reset, tp, strategy))
            self._resetting.discard(tp)

    # ------------------------------------------------------------------------------ requests

    def _on_poll(self, ctx: Context[ConsumerMessage], message: Poll) -> None:
        requester = ctx.requester
        if requester is None:
            return
        if self._parked_poll is not None:
            ctx.reply_to(self._parked_poll[0], PollResult(records=()))
        self._generation += 1
        self._parked_poll = (requester, self._generation)
        if not self._answer_poll(ctx) and message.timeout_ms >= 0:
            ctx.start_timer("poll", _PollExpired(self._generation), message.timeout_ms)

    def _answer_poll(self, ctx: Context[ConsumerMessage]) -> bool:
        if self._parked_poll is None or not self.subscriptions.has_buffered():
            return False
        records, error = self.subscriptions.take(self.config.max_poll_records)
        requester, _ = self._parked_poll
        self._parked_poll = None
        ctx.cancel_timer("poll")
        self.records_consumed_total += len(records)
        ctx.reply_to(requester, PollResult(records=tuple(records), error=error))
        return True

    def _on_position(self, ctx: Context[ConsumerMessage], message: Position) -> None:
        requester = ctx.requester
        if requester is None:
            return
        try:
            offset = self.subscriptions.position(message.tp)
        except KafkaError as error:
            ctx.reply(PositionResult(offset=None, error=error))
            return
        if offset is not None:
            ctx.reply(PositionResult(offset=offset))
            return
        self._generation += 1
        self._parked_positions.append(_ParkedPosition(requester, message.tp, self._generation))
        ctx.start_timer(
            ("position", self._generation), _PositionExpired(self._generation), message.timeout_ms
        )

    def _answer_positions(self, ctx: Context[ConsumerMessage]) -> None:
        still: list[_ParkedPosition] = []
        for parked in self._parked_positions:
            state = self.subscriptions.partitions.get(parked.tp)
            if state is None:
                ctx.reply_to(parked.requester, PositionResult(offset=None, error=_not_assigned(parked.tp)))
            elif state.position is not None:
                ctx.reply_to(parked.requester, PositionResult(offset=state.position))
            elif state.error is not None or state.reset is OffsetResetStrategy.NONE:
                error = state.error or KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE, f"no position for {parked.tp} and no reset policy"
                )
                ctx.reply_to(parked.requester, PositionResult(offset=None, error=error))
            else:
                still.append(parked)
                continue
            ctx.cancel_timer(("position", parked.generation))
        self._parked_positions = still

    def _expire_positions(self, ctx: Context[ConsumerMessage], generation: int) -> None:
        for parked in [p for p in self._parked_positions if p.generation == generation]:
            self._parked_positions.remove(parked)
            ctx.reply_to(
                parked.requester,
                PositionResult(
                    offset=None,
                    error=KafkaError(
                        ErrorCode.REQUEST_TIMED_OUT, f"the position of {parked.tp} is not known yet"
                    ),
                ),
            )

    # ------------------------------------------------------------------------------- driving

    def _drive(self, ctx: Context[ConsumerMessage]) -> None:
        """Send whatever is due: metadata, offset resets, fetches; answer parked requests."""
        now_ms = ctx.now_ms
        wait_ms = self.metadata.time_to_next_update_ms(now_ms)
        if wait_ms == 0:
            self._send_metadata(ctx, now_ms)
        elif wait_ms != NO_DEADLINE:
            ctx.start_timer("metadata", _Wake(), wait_ms)
        self._send_resets(ctx)
        self._send_fetches(ctx)
        self._answer_poll(ctx)
        self._answer_positions(ctx)

    def _send_metadata(self, ctx: Context[ConsumerMessage], now_ms: int) -> None:
        topics = self.metadata.update_started(now_ms)
        known = [broker_ref(b) for b in sorted(self.metadata.brokers)]
        candidates = known + list(self.bootstrap)
        target = candidates[self._metadata_attempts % len(candidates)]
        self._metadata_attempts += 1
        ctx.ask(
            target,
            MetadataRequest(topics=topics),
            timeout_ms=self.config.request_timeout_ms,
            on_reply=lambda reply: _MetadataAnswer(reply if isinstance(reply, MetadataResponse) else None),
            on_failure=lambda _failure: _MetadataAnswer(None),
        )

    def _on_metadata(self, ctx: Context[ConsumerMessage], message: _MetadataAnswer) -> None:
        if message.response is None:
            self.metadata.failed_update(ctx.now_ms)
            return
        self.metadata.update(message.response, ctx.now_ms)
        if self.address_book is not None:
            for endpoint in message.response.brokers:
                self.address_book.set(broker_node(endpoint.broker_id), endpoint.url)
        for tp in self.subscriptions.partitions:
            if self.metadata.leader_of(tp) is None:
                self.metadata.request_update()
                break

    def _send_resets(self, ctx: Context[ConsumerMessage]) -> None:
        by_node: dict[int, list[tuple[TopicPartition, OffsetResetStrategy]]] = {}
        for tp, strategy in self.subscriptions.needs_reset().items():
            if tp in self._resetting:
                continue
            leader = self.metadata.leader_of(tp)
            if leader is None:
                self.metadata.request_update()
                continue
            by_node.setdefault(leader, []).append((tp, strategy))
        for node, wanted in by_node.items():
            self._resetting.update(tp for tp, _ in wanted)
            request = ListOffsetsRequest(
                replica_id=-1,
                partitions=tuple(
                    ListOffsetsPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        timestamp=EARLIEST_TIMESTAMP
                        if s is OffsetResetStrategy.EARLIEST
                        else LATEST_TIMESTAMP,
                    )
                    for tp, s in wanted
                ),
            )
            strategies = tuple(wanted)
            ctx.ask(
                broker_ref(node),
                request,
                timeout_ms=self.config.request_timeout_ms,
                on_reply=_offsets_answer(node, strategies),
                on_failure=_offsets_answer(node, strategies),
            )

    def _on_offsets(self, ctx: Context[ConsumerMessage], message: _OffsetsAnswer) -> None:
        strategies = dict(message.strategies)
        self._resetting.difference_update(strategies)
        if message.response is None:
            self.metadata.request_update()
            return
        for answer in message.response.partitions:
            strategy = strategies.get(answer.tp)
            if strategy is None:
                continue
            if answer.error_code is ErrorCode.NONE:
                self.subscriptions.reset_to(answer.tp, strategy, answer.offset)
                self.offset_resets_total += 1
            elif answer.error_code.invalid_metadata or answer.error_code.retriable:
                self.metadata.request_update()
            else:
                ctx.log.warning("offset reset of %s failed: %s", answer.tp, answer.error_code.name)

    def _send_fetches(self, ctx: Context[ConsumerMessage]) -> None:
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in self.subscriptions.fetchable():
            leader = self.metadata.leader_of(tp)
            if leader is None:
                self.metadata.request_update()
                continue
            if (
                (tp, leader) not in self._in_flight
                and not self._busy.get(leader)
                and self._backoff_until.get(leader, 0) <= ctx.now_ms
            ):
                by_node.setdefault(leader, []).append(tp)
        for node, tps in by_node.items():
            offsets = tuple((tp, self.subscriptions.fetch_offset(tp) or 0) for tp in tps)
            waits = all(self.subscriptions.caught_up(tp) for tp in tps)
            request = FetchRequest(
                replica_id=-1,
                max_wait_ms=self.config.fetch_max_wait_ms,
                min_bytes=self.config.fetch_min_bytes,
                max_bytes=self.config.fetch_max_bytes,
                partitions=tuple(
                    FetchPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=offset,
                        partition_max_bytes=self.config.max_partition_fetch_bytes,
                    )
                    for tp, offset in offsets
                ),
            )
            self._in_flight.update((tp, node) for tp in tps)
            if not waits:
                self._busy[node] = self._busy.get(node, 0) + 1
            self.fetches_total += 1
            ctx.ask(
                broker_ref(node),
                request,
                timeout_ms=self.config.request_timeout_ms + self.config.fetch_max_wait_ms,
                on_reply=_fetch_answer(node, offsets, waits),
                on_failure=_fetch_answer(node, offsets, waits),
            )

    def _on_fetch(self, ctx: Context[ConsumerMessage], message: _FetchAnswer) -> None:
        self._in_flight.difference_update((tp, message.node) for tp, _ in message.offsets)
        if not message.waits:
            self._busy[message.node] -= 1
        response = message.response
        if response is None:
            # The leader could not be reached: it may have moved. Refresh the metadata and leave
            # that node alone for retry.backoff.ms.
            self.metadata.request_update()
            self._backoff_until[message.node] = ctx.now_ms + self.config.retry_backoff_ms
            ctx.start_timer(("backoff", message.node), _Wake(), self.config.retry_backoff_ms)
            return
        offsets = dict(message.offsets)
        for data in response.partitions:
            fetch_offset = offsets.get(data.tp)
            if fetch_offset is None:
                continue
            self.bytes_fetched_total += len(data.records)
            stale = self.subscriptions.apply_fetch(
                data.tp, fetch_offset, data, check_crcs=self.config.check_crcs
            )
            if stale:
                self.metadata.request_update()


def _offsets_answer(
    node: int, strategies: tuple[tuple[TopicPartition, OffsetResetStrategy], ...]
) -> Callable[[object], _OffsetsAnswer]:
    """The message for a ListOffsets answer (a failure, not being a response, becomes None)."""
    return lambda reply: _OffsetsAnswer(
        node, strategies, reply if isinstance(reply, ListOffsetsResponse) else None
    )


def _fetch_answer(
    node: int, offsets: tuple[tuple[TopicPartition, int], ...], waits: bool
) -> Callable[[object], _FetchAnswer]:
    return lambda reply: _FetchAnswer(
        node, offsets, reply if isinstance(reply, FetchResponse) else None, waits
    )


def _not_assigned(tp: TopicPartition) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, f"{tp} is not assigned to this consumer")
