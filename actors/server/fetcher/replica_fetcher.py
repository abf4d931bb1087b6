"""ReplicaFetcherActor: one per (source broker, fetcher id); pulls followed partitions from a leader.

Theory of operation (docs/replication.md §6)
-------------------------------------------
Each followed partition has a fetch state ``(fetch offset, leader epoch, TRUNCATING | FETCHING |
RESETTING, delayed until)`` kept in insertion order; a partition that just received data moves to
the end (round-robin fairness under response size limits). The actor runs Kafka's ``doWork`` as a
chain of steps with **at most one request to the leader in flight**:

1. *Truncate* (partitions TRUNCATING): ask each local partition for its latest leader epoch; send
   one OffsetsForLeaderEpoch for those that have one (those without truncate to their high watermark);
   hand each answer to the local partition, which truncates (KIP-279 rule, ``truncation.py``) and says
   whether another round is needed. FENCED_LEADER_EPOCH fails the partition (it waits for a newer
   LeaderAndIsr); other errors delay it by ``replica.fetch.backoff.ms``.
2. *Reset* (a partition whose fetch got OFFSET_OUT_OF_RANGE, docs/replication.md §6.4): ListOffsets LATEST
   from the leader; if the leader's LEO is below ours, truncate to it; else ListOffsets EARLIEST and, if the
   leader's log starts past our LEO, restart our log there.
3. *Fetch* (partitions FETCHING and not delayed): one FetchRequest (``replica.fetch.wait.max.ms``,
   ``replica.fetch.min.bytes``, per-partition ``replica.fetch.max.bytes``, ``replica.fetch.response.
   max.bytes``); each partition's answer is appended by the local partition (which also adopts the
   leader's HW), and its next fetch offset is the new log end offset. The leader parks the fetch until
   data arrives, so the next fetch is sent at once: an idle follower costs nothing and a new record
   replicates in one round trip.
4. Nothing to do: wait for a partition to be added or a delay to end.

Replication quota (docs/replication-quotas.md): a partition in the follower throttle list is left
out of the fetch while the broker's follower quota is exceeded, unless it is in sync (its lag at
the last response was 0; before any response it is not). When that leaves nothing to fetch, the
fetcher waits ``replica.fetch.backoff.ms`` and looks again (Kafka's fetcher waits the same when it
has no request to send). The bytes of throttled partitions are recorded in the quota, in sync or not.

The broker owns the fetcher's lifecycle: it adds and removes partitions and stops a fetcher that
has none left (Kafka's ``shutdownIdleFetcherThreads``); a fetcher restarted by its supervisor asks
the broker's list (``initial_partitions``) and truncates each partition again before fetching.

Only answers for partitions still present, at the epoch (and, for fetches, the fetch offset) the
request was built with, are applied; everything else is stale and dropped. That holds for the
local partition's answers too: a LeaderAndIsr can move the partition to a newer epoch while the
fetcher's request for the older one is on its way, and the partition's refusal
(FENCED_LEADER_EPOCH) describes the old request, not the partition the broker has just re-added.
A request that fails at the transport level delays every
partition in it by ``replica.fetch.backoff.ms``.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, assert_never

from actors.common.errors import ErrorCode
from actors.common.names import broker_ref, partition_name
from actors.common.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from actors.common.types import TopicPartition
from actors.server.config import BrokerConfig
from actors.server.replica.messages import (
    AppendAsFollower,
    FollowerAppendResult,
    FollowerLogState,
    GetFollowerLogState,
    TruncateFullyAndStartAt,
    TruncateOnLeaderEpoch,
    TruncateTo,
    TruncationResult,
)
from actors.server.replication_quota import ReplicationQuota
from runtime.actor import Actor
from runtime.context import Context
from runtime.messages import AskFailure

__all__ = [
    "AddPartitions",
    "FetcherPartitionStatistics",
    "FetcherStatistics",
    "PartitionFetchState",
    "RemovePartitions",
    "ReplicaFetcherActor",
    "ReplicaFetcherMessage",
]


# ------------------------------------------------------------------------------ public messages


@dataclass(frozen=True, slots=True)
class AddPartitions:
    """Follow these partitions at these leader epochs (from the broker's makeFollowers)."""

    partitions: tuple[tuple[TopicPartition, int], ...]


@dataclass(frozen=True, slots=True)
class RemovePartitions:
    partitions: tuple[TopicPartition, ...]


# ------------------------------------------------------------------------------ private messages


@dataclass(frozen=True, slots=True)
class _Wake:
    pass


@dataclass(frozen=True, slots=True)
class _LocalReply:
    """A local partition answered one step of the current round."""

    round_id: int
    tp: TopicPartition
    reply: Any


@dataclass(frozen=True, slots=True)
class _LeaderReply:
    round_id: int
    reply: Any


ReplicaFetcherMessage: TypeAlias = AddPartitions | RemovePartitions | _Wake | _LocalReply | _LeaderReply


class FetchPhase(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    RESETTING = "resetting"


@dataclass(slots=True)
class PartitionFetchState:
    tp: TopicPartition
    leader_epoch: int
    phase: FetchPhase = FetchPhase.TRUNCATING
    fetch_offset: int = -1
    log_start_offset: int = -1
    delayed_until_ms: int | None = None
    lag: int = 0
    # Whether ``lag`` comes from a response (Kafka: a partition without lag stats is not in sync).
    lag_known: bool = False
    # The leader's HW in the last response: the lag is measured against it (Kafka's fetcher lag).
    leader_high_watermark: int = -1

    def ready(self, now_ms: int) -> bool:
        return self.delayed_until_ms is None or self.delayed_until_ms <= now_ms

    @property
    def in_sync(self) -> bool:
        """Kafka's fetcherLagStats.isReplicaInSync: a known lag of 0."""
        return self.lag_known and self.lag <= 0


@dataclass(frozen=True, slots=True, kw_only=True)
class FetcherPartitionStatistics:
    tp: TopicPartition
    phase: FetchPhase
    fetch_offset: int
    lag: int
    delayed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class FetcherStatistics:
    fetcher_id: int
    source_broker_id: int
    partitions: tuple[FetcherPartitionStatistics, ...]
    failed_partitions: int
    requests_total: int
    bytes_total: int
    max_lag: int
    throttled_partitions: int = 0  # left out of fetches by the follower quota, counted per fetch


_LocalRequest: TypeAlias = (
    GetFollowerLogState | TruncateOnLeaderEpoch | TruncateTo | TruncateFullyAndStartAt | AppendAsFollower
)


class _Round(enum.Enum):
    IDLE = "idle"
    TRUNCATE_STATE = "truncate: local state"
    TRUNCATE_EPOCHS = "truncate: OffsetsForLeaderEpoch"
    TRUNCATE_APPLY = "truncate: apply"
    RESET_STATE = "reset: local state"
    RESET_LATEST = "reset: ListOffsets latest"
    RESET_EARLIEST = "reset: ListOffsets earliest"
    RESET_APPLY = "reset: apply"
    FETCH = "fetch"
    FETCH_APPLY = "fetch: append"


class ReplicaFetcherActor(Actor[ReplicaFetcherMessage]):
    def __init__(
        self,
        *,
        fetcher_id: int,
        source_broker_id: int,
        config: BrokerConfig,
        initial_partitions: Callable[[], tuple[tuple[TopicPartition, int], ...]] | None = None,
        quota: ReplicationQuota | None = None,
    ) -> None:
        self._initial_partitions = initial_partitions
        # The broker's follower replication quota (shared by its fetchers; unbounded by default).
        self.quota = quota if quota is not None else ReplicationQuota()
        self.throttled_partitions_total = 0
        self.fetcher_id = fetcher_id
        self.source_broker_id = source_broker_id
        self.config = config
        self.leader = broker_ref(source_broker_id)
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self.failed: set[TopicPartition] = set()
        self.requests_total = 0
        self.bytes_total = 0
        self._round = _Round.IDLE
        self._round_ids = itertools.count(1)
        self._round_id = 0
        # What the current round is waiting for, and what it has collected.
        self._waiting: set[TopicPartition] = set()
        self._collected: dict[TopicPartition, Any] = {}
        # The leader epoch each local request of the current round was built for.
        self._asked_epochs: dict[TopicPartition, int] = {}
        self._context: dict[TopicPartition, Any] = {}
        self._resetting: TopicPartition | None = None
        # Partitions of the current truncation round with no epoch cache: their HW is the point.
        self._context_high_watermarks: dict[TopicPartition, int] = {}
        self._wake_armed_for: int | None = None

    # ----------------------------------------------------------------------------- dispatch

    def on_start(self, ctx: Context[ReplicaFetcherMessage]) -> None:
        # The broker's list of what this fetcher follows, at which epochs: after a supervisor
        # restart (which loses every fetch state) the partitions start over with truncation.
        partitions = self._initial_partitions() if self._initial_partitions is not None else ()
        if partitions:
            self._on_add_partitions(ctx, AddPartitions(partitions))

    def receive(self, ctx: Context[ReplicaFetcherMessage], message: ReplicaFetcherMessage) -> None:
        match message:
            case AddPartitions():
                self._on_add_partitions(ctx, message)
            case RemovePartitions():
                self._on_remove_partitions(ctx, message)
            case _Wake():
                self._wake_armed_for = None
                self._step(ctx)
            case _LocalReply():
                self._on_local_reply(ctx, message)
            case _LeaderReply():
                self._on_leader_reply(ctx, message)
            case _:
                assert_never(message)

    def _on_add_partitions(self, ctx: Context[ReplicaFetcherMessage], message: AddPartitions) -> None:
        for tp, leader_epoch in message.partitions:
            existing = self.partitions.get(tp)
            if existing is not None and existing.leader_epoch == leader_epoch:
                continue  # same epoch: keep the state, no new truncation (docs/replication.md §6.2)
            self.partitions[tp] = PartitionFetchState(tp, leader_epoch)
            self.failed.discard(tp)
        self._step(ctx)

    def _on_remove_partitions(self, ctx: Context[ReplicaFetcherMessage], message: RemovePartitions) -> None:
        for tp in message.partitions:
            self.partitions.pop(tp, None)
            self.failed.discard(tp)

    # -------------------------------------------------------------------------- the main loop

    def _step(self, ctx: Context[ReplicaFetcherMessage]) -> None:
        """Start the next step if none is running (Kafka's doWork: truncate, then fetch)."""
        if self._round is not _Round.IDLE:
            return
        now = ctx.now_ms
        truncating = [
            s.tp for s in self.partitions.values() if s.phase is FetchPhase.TRUNCATING and s.ready(now)
        ]
        if truncating:
            self._begin_round(_Round.TRUNCATE_STATE)
            for tp in truncating:
                self._ask_partition(ctx, tp, GetFollowerLogState(self.partitions[tp].leader_epoch))
            return
        resetting = next(
            (s.tp for s in self.partitions.values() if s.phase is FetchPhase.RESETTING and s.ready(now)), None
        )
        if resetting is not None:
            self._begin_round(_Round.RESET_STATE)
            self._resetting = resetting
            self._ask_partition(ctx, resetting, GetFollowerLogState(self.partitions[resetting].leader_epoch))
            return
        fetchable = [s for s in self.partitions.values() if s.phase is FetchPhase.FETCHING and s.ready(now)]
        for state in self.partitions.values():
            if state.delayed_until_ms is not None and state.delayed_until_ms <= now:
                state.delayed_until_ms = None
        unthrottled = [s for s in fetchable if not self._should_throttle(s, now)]
        self.throttled_partitions_total += len(fetchable) - len(unthrottled)
        if unthrottled:
            self._send_fetch(ctx, unthrottled)
            return
        if fetchable:
            # Everything fetchable is held back by the quota: look again after the back-off.
            ctx.start_timer("quota-wake", _Wake(), self.config.replica_fetch_backoff_ms)
            return
        self._arm_wake(ctx)

    def _should_throttle(self, state: PartitionFetchState, now_ms: int) -> bool:
        """Kafka's shouldFollowerThrottle: throttled, out of sync, and the quota exceeded (checked
        last: only then does it count as time spent throttling)."""
        return not state.in_sync and self.quota.is_throttled(state.tp) and self.quota.is_exceeded(now_ms)

    def _arm_wake(self, ctx: Context[ReplicaFetcherMessage]) -> None:
        delays = [s.delayed_until_ms for s in self.partitions.values() if s.delayed_until_ms is not None]
        if not delays:
            return  # nothing delayed: the next AddPartitions wakes us
        due = min(delays)
        if self._wake_armed_for is not None and self._wake_armed_for <= due:
            return
        self._wake_armed_for = due
        ctx.start_timer("wake", _Wake(), max(due - ctx.now_ms, 0))

    def _begin_round(self, kind: _Round) -> int:
        self._round = kind
        self._round_id = next(self._round_ids)
        self._waiting = set()
        self._collected = {}
        self._asked_epochs = {}
        return self._round_id

    def _end_round(self, ctx: Context[ReplicaFetcherMessage]) -> None:
        self._round = _Round.IDLE
        self._waiting = set()
        self._collected = {}
        self._asked_epochs = {}
        self._context = {}
        self._resetting = None
        self._step(ctx)

    def _ask_partition(
        self, ctx: Context[ReplicaFetcherMessage], tp: TopicPartition, request: _LocalRequest
    ) -> None:
        round_id = self._round_id
        self._waiting.add(tp)
        self._asked_epochs[tp] = request.leader_epoch

        def adapt(reply: object) -> _LocalReply:
            return _LocalReply(round_id, tp, reply)

        ctx.ask(
            ctx.self_ref.sibling(partition_name(tp)),
            request,
            timeout_ms=self.config.replica_socket_timeout_ms,
            on_reply=adapt,
            on_failure=adapt,
        )

    def _ask_leader(self, ctx: Context[ReplicaFetcherMessage], request: object, timeout_ms: int) -> None:
        round_id = self._round_id
        self.requests_total += 1

        def adapt(reply: object) -> _LeaderReply:
            return _LeaderReply(round_id, reply)

        ctx.ask(self.leader, request, timeout_ms=timeout_ms, on_reply=adapt, on_failure=adapt)

    def _on_local_reply(self, ctx: Context[ReplicaFetcherMessage], message: _LocalReply) -> None:
        if message.round_id != self._round_id or message.tp not in self._waiting:
            return
        self._waiting.discard(message.tp)
        self._collected[message.tp] = message.reply
        if self._waiting:
            return
        # Answers for a partition removed or re-added at another epoch since the request was
        # built are stale: they say nothing about the partition as it is now.
        collected = {
            tp: reply
            for tp, reply in self._collected.items()
            if self._current(tp, self._asked_epochs[tp]) is not None
        }
        match self._round:
            case _Round.TRUNCATE_STATE:
                self._after_truncate_state(ctx, collected)
            case _Round.TRUNCATE_APPLY | _Round.RESET_APPLY:
                self._after_truncate_apply(ctx, collected)
            case _Round.RESET_STATE:
                self._after_reset_state(ctx, collected)
            case _Round.FETCH_APPLY:
                self._after_fetch_apply(ctx, collected)
            case _:
                raise AssertionError(f"local reply in round {self._round}")

    def _on_leader_reply(self, ctx: Context[ReplicaFetcherMessage], message: _LeaderReply) -> None:
        if message.round_id != self._round_id:
            return
        reply = message.reply
        if isinstance(reply, AskFailure):
            ctx.log.info("request to broker %d failed: %r", self.source_broker_id, reply)
            self._delay_round(ctx)
            return
        match self._round:
            case _Round.TRUNCATE_EPOCHS:
                assert isinstance(reply, OffsetsForLeaderEpochResponse)
                self._after_epochs(ctx, reply)
            case _Round.RESET_LATEST | _Round.RESET_EARLIEST:
                assert isinstance(reply, ListOffsetsResponse)
                self._after_list_offsets(ctx, reply)
            case _Round.FETCH:
                assert isinstance(reply, FetchResponse)
                self._after_fetch(ctx, reply)
            case _:
                raise AssertionError(f"leader reply in round {self._round}")

    def _delay_round(self, ctx: Context[ReplicaFetcherMessage]) -> None:
        """A request to the leader failed: back off every partition it concerned."""
        for tp in self._context or self.partitions:
            self._delay(ctx, tp)
        self._end_round(ctx)

    def _delay(self, ctx: Context[ReplicaFetcherMessage], tp: TopicPartition) -> None:
        state = self.partitions.get(tp)
        if state is not None:
            state.delayed_until_ms = ctx.now_ms + self.config.replica_fetch_backoff_ms

    def _fail(self, ctx: Context[ReplicaFetcherMessage], tp: TopicPartition, reason: str) -> None:
        """Remove a partition until a newer LeaderAndIsr re-adds it (Kafka's failed partitions)."""
        if self.partitions.pop(tp, None) is not None:
            self.failed.add(tp)
            ctx.log.warning("%s: stopped fetching from broker %d: %s", tp, self.source_broker_id, reason)

    def _current(self, tp: TopicPartition, epoch: int) -> PartitionFetchState | None:
        state = self.partitions.get(tp)
        return state if state is not None and state.leader_epoch == epoch else None

    # ------------------------------------------------------------------------------ truncation

    def _after_truncate_state(
        self, ctx: Context[ReplicaFetcherMessage], replies: dict[TopicPartition, Any]
    ) -> None:
        with_epochs: list[OffsetForLeaderEpochPartition] = []
        high_watermarks: dict[TopicPartition, int] = {}
        for tp, reply in replies.items():
            state = self.partitions.get(tp)
            if state is None:
                continue
            if not isinstance(reply, FollowerLogState) or reply.error_code is not ErrorCode.NONE:
                self._handle_local_error(ctx, tp, reply)
                continue
            state.log_start_offset = reply.log_start_offset
            if reply.latest_epoch is None:
                high_watermarks[tp] = reply.high_watermark
            else:
                with_epochs.append(
                    OffsetForLeaderEpochPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        current_leader_epoch=state.leader_epoch,
                        leader_epoch=reply.latest_epoch,
                    )
                )
        self._context = {p.tp: self.partitions[p.tp].leader_epoch for p in with_epochs}
        self._context.update({tp: self.partitions[tp].leader_epoch for tp in high_watermarks})
        self._context_high_watermarks = high_watermarks
        if with_epochs:
            self._round = _Round.TRUNCATE_EPOCHS
            self._ask_leader(
                ctx,
                OffsetsForLeaderEpochRequest(replica_id=self.config.broker_id, partitions=tuple(with_epochs)),
                self.config.replica_socket_timeout_ms,
            )
            return
        self._apply_truncations(ctx, {})

    def _after_epochs(
        self, ctx: Context[ReplicaFetcherMessage], response: OffsetsForLeaderEpochResponse
    ) -> None:
        answers: dict[TopicPartition, tuple[int, int]] = {}
        for result in response.partitions:
            tp = result.tp
            if tp not in self._context:
                raise AssertionError(f"OffsetsForLeaderEpoch answered for {tp}, which was not requested")
            if self._current(tp, self._context[tp]) is None:
                continue  # removed or re-added at another epoch meanwhile
            if result.error_code is ErrorCode.NONE:
                answers[tp] = (result.leader_epoch, result.end_offset)
            elif result.error_code is ErrorCode.FENCED_LEADER_EPOCH:
                self._fail(ctx, tp, "fenced leader epoch in OffsetsForLeaderEpoch")
            else:
                self._delay(ctx, tp)
        self._apply_truncations(ctx, answers)

    def _apply_truncations(
        self, ctx: Context[ReplicaFetcherMessage], answers: dict[TopicPartition, tuple[int, int]]
    ) -> None:
        self._begin_round(_Round.TRUNCATE_APPLY)
        for tp, (answer_epoch, end_offset) in answers.items():
            leader_epoch = self.partitions[tp].leader_epoch
            self._ask_partition(ctx, tp, TruncateOnLeaderEpoch(leader_epoch, answer_epoch, end_offset))
        for tp, high_watermark in self._context_high_watermarks.items():
            without_epochs = self._current(tp, self._context[tp])
            if without_epochs is not None:
                # No epoch information locally: the high watermark is the truncation point
                # (docs/replication.md §6.3, step 3).
                self._ask_partition(ctx, tp, TruncateTo(without_epochs.leader_epoch, high_watermark))
        self._context_high_watermarks = {}
        if not self._waiting:
            self._end_round(ctx)

    def _after_truncate_apply(
        self, ctx: Context[ReplicaFetcherMessage], replies: dict[TopicPartition, Any]
    ) -> None:
        """Truncations done (by leader epoch, to the high watermark, or fully after an out-of-range
        reset, which is always complete): fetch from the new log end, or ask again if incomplete."""
        for tp, reply in replies.items():
            state = self.partitions.get(tp)
            if state is None:
                continue
            if not isinstance(reply, TruncationResult) or reply.error_code is not ErrorCode.NONE:
                self._handle_local_error(ctx, tp, reply)
                continue
            state.fetch_offset = reply.fetch_offset
            if reply.complete:
                state.phase = FetchPhase.FETCHING
        self._end_round(ctx)

    # ----------------------------------------------------------------------- out of range reset

    def _after_reset_state(
        self, ctx: Context[ReplicaFetcherMessage], replies: dict[TopicPartition, Any]
    ) -> None:
        tp = self._resetting
        assert tp is not None
        state = self.partitions.get(tp)
        if tp not in replies or state is None:
            self._end_round(ctx)  # stale: the partition was removed or re-added meanwhile
            return
        reply = replies[tp]
        if not isinstance(reply, FollowerLogState) or reply.error_code is not ErrorCode.NONE:
            self._handle_local_error(ctx, tp, reply)
            self._end_round(ctx)
            return
        self._context = {tp: (state.leader_epoch, reply.log_end_offset)}
        self._round = _Round.RESET_LATEST
        self._ask_leader(
            ctx,
            self._list_offsets(tp, state.leader_epoch, LATEST_TIMESTAMP),
            self.config.replica_socket_timeout_ms,
        )

    def _list_offsets(self, tp: TopicPartition, leader_epoch: int, timestamp: int) -> ListOffsetsRequest:
        return ListOffsetsRequest(
            replica_id=self.config.broker_id,
            partitions=(
                ListOffsetsPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    timestamp=timestamp,
                    current_leader_epoch=leader_epoch,
                ),
            ),
        )

    def _after_list_offsets(self, ctx: Context[ReplicaFetcherMessage], response: ListOffsetsResponse) -> None:
        tp = self._resetting
        assert tp is not None
        leader_epoch, local_log_end_offset = self._context[tp]
        state = self._current(tp, leader_epoch)
        result = next((r for r in response.partitions if r.tp == tp), None)
        if state is None or result is None:
            self._end_round(ctx)
            return
        if result.error_code is ErrorCode.FENCED_LEADER_EPOCH:
            self._fail(ctx, tp, "fenced leader epoch while resetting the fetch offset")
            self._end_round(ctx)
            return
        if result.error_code is not ErrorCode.NONE:
            self._delay(ctx, tp)
            self._end_round(ctx)
            return
        if self._round is _Round.RESET_LATEST:
            if result.offset < local_log_end_offset:
                # The leader's log ends below ours (typically after an unclean election).
                self._begin_round(_Round.RESET_APPLY)
                self._context = {tp: (leader_epoch, local_log_end_offset)}
                self._resetting = tp
                self._ask_partition(ctx, tp, TruncateTo(leader_epoch, result.offset))
                return
            self._round = _Round.RESET_EARLIEST
            self._ask_leader(
                ctx,
                self._list_offsets(tp, leader_epoch, EARLIEST_TIMESTAMP),
                self.config.replica_socket_timeout_ms,
            )
            return
        self._begin_round(_Round.RESET_APPLY)
        self._context = {tp: (leader_epoch, local_log_end_offset)}
        self._resetting = tp
        if result.offset > local_log_end_offset:
            # We fell behind the leader's retention: start over at its log start offset.
            self._ask_partition(ctx, tp, TruncateFullyAndStartAt(leader_epoch, result.offset))
        else:
            # The leader simply moved on; keep our log and fetch from its end.
            state.fetch_offset = local_log_end_offset
            state.phase = FetchPhase.FETCHING
            self._waiting.clear()
            self._end_round(ctx)

    # ----------------------------------------------------------------------------------- fetch

    def _send_fetch(self, ctx: Context[ReplicaFetcherMessage], fetchable: list[PartitionFetchState]) -> None:
        self._begin_round(_Round.FETCH)
        self._context = {s.tp: (s.leader_epoch, s.fetch_offset) for s in fetchable}
        request = FetchRequest(
            replica_id=self.config.broker_id,
            max_wait_ms=self.config.replica_fetch_wait_max_ms,
            min_bytes=self.config.replica_fetch_min_bytes,
            max_bytes=self.config.replica_fetch_response_max_bytes,
            partitions=tuple(
                FetchPartition(
                    topic=s.tp.topic,
                    partition=s.tp.partition,
                    fetch_offset=s.fetch_offset,
                    partition_max_bytes=self.config.replica_fetch_max_bytes,
                    log_start_offset=s.log_start_offset,
                    current_leader_epoch=s.leader_epoch,
                )
                for s in fetchable
            ),
        )
        self._ask_leader(
            ctx, request, self.config.replica_fetch_wait_max_ms + self.config.replica_socket_timeout_ms
        )

    def _after_fetch(self, ctx: Context[ReplicaFetcherMessage], response: FetchResponse) -> None:
        self._begin_round(_Round.FETCH_APPLY)
        requested: dict[TopicPartition, tuple[int, int]] = dict(self._context)
        self._context = requested
        for data in response.partitions:
            tp = data.tp
            expected = requested.get(tp)
            state = self.partitions.get(tp)
            if expected is None or state is None or (state.leader_epoch, state.fetch_offset) != expected:
                continue  # stale: removed, re-added or moved since the request was built
            if not state.ready(ctx.now_ms) or state.phase is not FetchPhase.FETCHING:
                continue
            self._handle_fetched_partition(ctx, state, data)
        if not self._waiting:
            self._end_round(ctx)

    def _handle_fetched_partition(
        self, ctx: Context[ReplicaFetcherMessage], state: PartitionFetchState, data: FetchPartitionResponse
    ) -> None:
        error = data.error_code
        if error is ErrorCode.NONE:
            self.bytes_total += len(data.records)
            if self.quota.is_throttled(state.tp):
                self.quota.record(len(data.records), ctx.now_ms)
            state.leader_high_watermark = data.high_watermark
            state.lag = max(0, data.high_watermark - state.fetch_offset)
            state.lag_known = True
            self._ask_partition(
                ctx,
                state.tp,
                AppendAsFollower(
                    state.leader_epoch,
                    state.fetch_offset,
                    data.records,
                    data.high_watermark,
                    data.log_start_offset,
                ),
            )
        elif error is ErrorCode.OFFSET_OUT_OF_RANGE:
            state.phase = FetchPhase.RESETTING
        elif error is ErrorCode.FENCED_LEADER_EPOCH:
            self._fail(ctx, state.tp, "fenced leader epoch in fetch")
        else:
            # UNKNOWN_LEADER_EPOCH (the leader is behind us), NOT_LEADER_OR_FOLLOWER, others: retry later.
            self._delay(ctx, state.tp)

    def _after_fetch_apply(
        self, ctx: Context[ReplicaFetcherMessage], replies: dict[TopicPartition, Any]
    ) -> None:
        for tp, reply in replies.items():
            state = self.partitions.get(tp)
            if state is None:
                continue
            if not isinstance(reply, FollowerAppendResult) or reply.error_code is not ErrorCode.NONE:
                self._handle_local_error(ctx, tp, reply)
                continue
            state.log_start_offset = reply.log_start_offset
            if reply.log_end_offset > state.fetch_offset:
                state.fetch_offset = reply.log_end_offset
                # Kafka: the leader's HW (from the response) less the next fetch offset; the local
                # HW would say 0 for a follower far behind (it is capped by the local log end).
                state.lag = max(
                    0, max(state.leader_high_watermark, reply.high_watermark) - state.fetch_offset
                )
                # Round-robin: a partition that just got data goes to the back of the line.
                self.partitions[tp] = self.partitions.pop(tp)
        self._end_round(ctx)

    def _handle_local_error(
        self, ctx: Context[ReplicaFetcherMessage], tp: TopicPartition, reply: object
    ) -> None:
        error = getattr(reply, "error_code", None)
        if error is ErrorCode.CORRUPT_MESSAGE:
            ctx.log.warning("%s: corrupt records from broker %d, will retry", tp, self.source_broker_id)
            self._delay(ctx, tp)
        elif error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
            # The local partition has moved on (a newer LeaderAndIsr): this fetch state is stale.
            self._fail(ctx, tp, f"local partition answered {error.name if error else error}")
        elif error is ErrorCode.UNKNOWN_LEADER_EPOCH or isinstance(reply, AskFailure):
            self._delay(ctx, tp)
        else:
            message = getattr(reply, "error_message", None) or repr(reply)
            self._fail(
                ctx, tp, f"local error {error.name if isinstance(error, ErrorCode) else error}: {message}"
            )

    # ------------------------------------------------------------------------------ statistics

    def statistics(self) -> FetcherStatistics:
        partitions = tuple(
            FetcherPartitionStatistics(
                tp=s.tp,
                phase=s.phase,
                fetch_offset=s.fetch_offset,
                lag=s.lag,
                delayed=s.delayed_until_ms is not None,
            )
            for s in self.partitions.values()
        )
        return FetcherStatistics(
            fetcher_id=self.fetcher_id,
            source_broker_id=self.source_broker_id,
            partitions=partitions,
            failed_partitions=len(self.failed),
            requests_total=self.requests_total,
            bytes_total=self.bytes_total,
            max_lag=max((p.lag for p in partitions), default=0),
            throttled_partitions=self.throttled_partitions_total,
        )
