"""ReplicaFetcherActor: one per (source broker, fetcher id); pulls followed partitions from a leader.

Theory of operation (docs/replication.md §6)
-------------------------------------------
Each followed partition has a fetch state ``(fetch offset, leader epoch, TRUNCATING | FETCHING |
RESETTING, delayed until)`` kept in insertion order; a partition that just received data moves to
the end (round-robin fairness under response size limits). The actor runs Kafka's ``doWork`` as a
script (``do_work``, driven by the one script driver of ``actors/common/scripts.py``) with **at
most one request to the leader in flight**; each pass does the first of these that applies:

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
4. *Wait*: nothing to do until a partition is added or a delay ends.

Idle answers: a partition's empty answer carrying the leader HW and log start offset its local
partition applied last, at the same fetch offset, is not handed to it: the append would change
nothing (the follower's HW is min(leader HW, log end offset), and neither moved). An idle follower
of thousands of partitions otherwise asks every one of them at every fetch round. The same answer
is still applied once per ``replica.high.watermark.checkpoint.interval.ms``, so a local partition
that lost its state (an actor restart) is brought back within that interval even while idle.
Kafka's follower applies every partition of a response, but its leader leaves idle partitions out
of the response altogether (incremental fetch sessions, KIP-227).

When a pass ends the next one starts at once, unless it waited. What a pass has asked and what it
was answered live in the script's locals; the actor keeps only the fetch states.

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
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar, assert_never

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
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from actors.common.scripts import Ask, AskAll, AskFailed, Resume, ScriptRunner, ScriptStep, Step
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


ReplicaFetcherMessage: TypeAlias = AddPartitions | RemovePartitions | _Wake | ScriptStep | Resume


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
    # The last answer the local partition applied: (its log end offset after it, the leader's HW,
    # the leader's log start offset), and when. An empty answer repeating it would change nothing.
    applied: tuple[int, int, int] | None = None
    applied_ms: int = 0

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
_R = TypeVar("_R")  # what a leader request is answered with, or what a part of do_work returns


class _LocalAnswer(Protocol):
    """What a local partition answers the fetcher: a result with an error code."""

    @property
    def error_code(self) -> ErrorCode: ...


_A = TypeVar("_A", bound=_LocalAnswer)
_Work: TypeAlias = Generator[Step, Any, _R]
"""A part of ``do_work``: yields the driver's steps (asks to the leader and to local partitions)."""


class _Waiting(enum.Enum):
    """How a pass of ``do_work`` that sent nothing ends."""

    THROTTLED = "throttled"  # all that could be fetched is held back by the quota: look again later
    IDLE = "idle"  # nothing to do until a partition is added or a delay ends


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
        # Runs the pass of do_work in progress, if any (one at a time: one request in flight).
        self._scripts = ScriptRunner(one_at_a_time=True)
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
            case ScriptStep():
                self._scripts.on_step(ctx, message)
            case Resume():
                self._scripts.on_resume(ctx, message)
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
        """Start the next pass of do_work unless one is running."""
        if self._scripts.busy:
            return
        self._scripts.start(
            ctx, self.do_work(ctx), lambda waiting, error: self._pass_done(ctx, waiting, error)
        )

    def _pass_done(
        self, ctx: Context[ReplicaFetcherMessage], waiting: object, error: Exception | None
    ) -> None:
        if error is not None:
            raise error  # a broken invariant: the supervisor restarts the fetcher
        match waiting:
            case _Waiting.THROTTLED:
                ctx.start_timer("quota-wake", _Wake(), self.config.replica_fetch_backoff_ms)
            case _Waiting.IDLE:
                self._arm_wake(ctx)
            case _:
                self._step(ctx)

    def do_work(self, ctx: Context[ReplicaFetcherMessage]) -> _Work[_Waiting | None]:
        """One pass of Kafka's doWork: truncate, else reset one partition, else fetch, else wait.

        The script reads the clock and logs through ``ctx``, the actor's own context, which
        outlives every pass."""
        now = ctx.now_ms
        truncating = [
            s for s in self.partitions.values() if s.phase is FetchPhase.TRUNCATING and s.ready(now)
        ]
        if truncating:
            yield from self._truncate(ctx, truncating)
            return None
        resetting = next(
            (s for s in self.partitions.values() if s.phase is FetchPhase.RESETTING and s.ready(now)), None
        )
        if resetting is not None:
            yield from self._reset(ctx, resetting.tp, resetting.leader_epoch)
            return None
        fetchable = [s for s in self.partitions.values() if s.phase is FetchPhase.FETCHING and s.ready(now)]
        for state in self.partitions.values():
            if state.delayed_until_ms is not None and state.delayed_until_ms <= now:
                state.delayed_until_ms = None
        unthrottled = [s for s in fetchable if not self._should_throttle(s, now)]
        self.throttled_partitions_total += len(fetchable) - len(unthrottled)
        if unthrottled:
            yield from self._fetch(ctx, unthrottled)
            return None
        return _Waiting.THROTTLED if fetchable else _Waiting.IDLE

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

    # ------------------------------------------------------------------------------ the steps

    def _ask_partitions(
        self,
        ctx: Context[ReplicaFetcherMessage],
        requests: Mapping[TopicPartition, _LocalRequest],
        answer_type: type[_A],
    ) -> _Work[dict[TopicPartition, _A]]:
        """Ask local partitions at once; returns the answers without error. An answer for a
        partition no longer followed at the epoch its request was built for is stale (it says
        nothing about the partition as it is now) and dropped; an error, or no answer, is handled
        here (``_handle_local_error``)."""
        timeout_ms = self.config.replica_socket_timeout_ms
        replies = yield AskAll(
            tuple(
                Ask(ctx.self_ref.sibling(partition_name(tp)), request, timeout_ms)
                for tp, request in requests.items()
            )
        )
        answers: dict[TopicPartition, _A] = {}
        for (tp, request), reply in zip(requests.items(), replies, strict=True):
            if self._current(tp, request.leader_epoch) is None:
                continue
            if isinstance(reply, answer_type) and reply.error_code is ErrorCode.NONE:
                answers[tp] = reply
            else:
                self._handle_local_error(ctx, tp, reply)
        return answers

    def _ask_leader(self, request: object, reply_type: type[_R], timeout_ms: int) -> _Work[_R]:
        """Ask the leader broker; throws ``AskFailed`` when no answer comes."""
        self.requests_total += 1
        reply = yield Ask(self.leader, request, timeout_ms)
        assert isinstance(reply, reply_type), reply
        return reply

    def _leader_failed(
        self, ctx: Context[ReplicaFetcherMessage], failure: AskFailure, concerned: Iterable[TopicPartition]
    ) -> None:
        """A request to the leader failed: back off every partition it concerned."""
        ctx.log.info("request to broker %d failed: %r", self.source_broker_id, failure)
        for tp in concerned:
            self._delay(ctx, tp)

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

    def _truncate(
        self, ctx: Context[ReplicaFetcherMessage], truncating: list[PartitionFetchState]
    ) -> _Work[None]:
        """Kafka's maybeTruncate: each partition's latest epoch, the leader's end offset for it,
        and the local truncation; a partition without epochs truncates to its high watermark."""
        log_states = yield from self._ask_partitions(
            ctx, {s.tp: GetFollowerLogState(s.leader_epoch) for s in truncating}, FollowerLogState
        )
        with_epochs: list[OffsetForLeaderEpochPartition] = []
        high_watermarks: dict[TopicPartition, int] = {}
        asked_epochs: dict[TopicPartition, int] = {}
        for tp, reply in log_states.items():
            state = self.partitions[tp]
            state.log_start_offset = reply.log_start_offset
            asked_epochs[tp] = state.leader_epoch
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
        truncations: dict[TopicPartition, _LocalRequest] = {}
        if with_epochs:
            request = OffsetsForLeaderEpochRequest(
                replica_id=self.config.broker_id, partitions=tuple(with_epochs)
            )
            try:
                response = yield from self._ask_leader(
                    request, OffsetsForLeaderEpochResponse, self.config.replica_socket_timeout_ms
                )
            except AskFailed as failed:
                self._leader_failed(ctx, failed.failure, asked_epochs)
                return
            for result in response.partitions:
                tp = result.tp
                if tp not in asked_epochs:
                    raise AssertionError(f"OffsetsForLeaderEpoch answered for {tp}, which was not requested")
                leader_epoch = asked_epochs[tp]
                if self._current(tp, leader_epoch) is None:
                    continue  # removed or re-added at another epoch meanwhile
                if result.error_code is ErrorCode.NONE:
                    truncations[tp] = TruncateOnLeaderEpoch(
                        leader_epoch, result.leader_epoch, result.end_offset
                    )
                elif result.error_code is ErrorCode.FENCED_LEADER_EPOCH:
                    self._fail(ctx, tp, "fenced leader epoch in OffsetsForLeaderEpoch")
                else:
                    self._delay(ctx, tp)
        for tp, high_watermark in high_watermarks.items():
            without_epochs = self._current(tp, asked_epochs[tp])
            if without_epochs is not None:
                # No epoch information locally: the high watermark is the truncation point
                # (docs/replication.md §6.3, step 3).
                truncations[tp] = TruncateTo(without_epochs.leader_epoch, high_watermark)
        truncated = yield from self._ask_partitions(ctx, truncations, TruncationResult)
        self._truncated(truncated)

    def _truncated(self, results: dict[TopicPartition, TruncationResult]) -> None:
        """Truncations done (by leader epoch, to the high watermark, or fully after an out-of-range
        reset, which is always complete): fetch from the new log end, or ask again if incomplete."""
        for tp, result in results.items():
            state = self.partitions[tp]
            state.fetch_offset = result.fetch_offset
            if result.complete:
                state.phase = FetchPhase.FETCHING

    # ----------------------------------------------------------------------- out of range reset

    def _reset(
        self, ctx: Context[ReplicaFetcherMessage], tp: TopicPartition, leader_epoch: int
    ) -> _Work[None]:
        """Kafka's handleOutOfRangeError: compare our log end with the leader's log end, then with
        its log start."""
        log_states = yield from self._ask_partitions(
            ctx, {tp: GetFollowerLogState(leader_epoch)}, FollowerLogState
        )
        if tp not in log_states:
            return  # stale (removed or re-added meanwhile), or the local error is handled
        local_log_end_offset = log_states[tp].log_end_offset
        latest = yield from self._list_offset(ctx, tp, leader_epoch, LATEST_TIMESTAMP)
        if latest is None:
            return
        _, leader_log_end_offset = latest
        if leader_log_end_offset < local_log_end_offset:
            # The leader's log ends below ours (typically after an unclean election).
            truncated = yield from self._ask_partitions(
                ctx, {tp: TruncateTo(leader_epoch, leader_log_end_offset)}, TruncationResult
            )
            self._truncated(truncated)
            return
        earliest = yield from self._list_offset(ctx, tp, leader_epoch, EARLIEST_TIMESTAMP)
        if earliest is None:
            return
        state, leader_log_start_offset = earliest
        if leader_log_start_offset > local_log_end_offset:
            # We fell behind the leader's retention: start over at its log start offset.
            truncated = yield from self._ask_partitions(
                ctx, {tp: TruncateFullyAndStartAt(leader_epoch, leader_log_start_offset)}, TruncationResult
            )
            self._truncated(truncated)
        else:
            # The leader simply moved on; keep our log and fetch from its end.
            state.fetch_offset = local_log_end_offset
            state.phase = FetchPhase.FETCHING

    def _list_offset(
        self, ctx: Context[ReplicaFetcherMessage], tp: TopicPartition, leader_epoch: int, timestamp: int
    ) -> _Work[tuple[PartitionFetchState, int] | None]:
        """The leader's offset for ``timestamp`` with the partition's fetch state, or None when
        there is nothing to go on with: the leader unreachable, the partition gone or re-added,
        fenced (failed) or another error (delayed)."""
        request = ListOffsetsRequest(
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
        try:
            response = yield from self._ask_leader(
                request, ListOffsetsResponse, self.config.replica_socket_timeout_ms
            )
        except AskFailed as failed:
            self._leader_failed(ctx, failed.failure, (tp,))
            return None
        state = self._current(tp, leader_epoch)
        result: ListOffsetsPartitionResponse | None = next(
            (r for r in response.partitions if r.tp == tp), None
        )
        if state is None or result is None:
            return None
        if result.error_code is ErrorCode.FENCED_LEADER_EPOCH:
            self._fail(ctx, tp, "fenced leader epoch while resetting the fetch offset")
            return None
        if result.error_code is not ErrorCode.NONE:
            self._delay(ctx, tp)
            return None
        return state, result.offset

    # ----------------------------------------------------------------------------------- fetch

    def _fetch(
        self, ctx: Context[ReplicaFetcherMessage], fetchable: list[PartitionFetchState]
    ) -> _Work[None]:
        """Kafka's maybeFetch: one FetchRequest, then each partition's records appended locally."""
        requested = {s.tp: (s.leader_epoch, s.fetch_offset) for s in fetchable}
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
        timeout_ms = self.config.replica_fetch_wait_max_ms + self.config.replica_socket_timeout_ms
        try:
            response = yield from self._ask_leader(request, FetchResponse, timeout_ms)
        except AskFailed as failed:
            self._leader_failed(ctx, failed.failure, requested)
            return
        appends: dict[TopicPartition, _LocalRequest] = {}
        for data in response.partitions:
            tp = data.tp
            expected = requested.get(tp)
            state = self.partitions.get(tp)
            if expected is None or state is None or (state.leader_epoch, state.fetch_offset) != expected:
                continue  # stale: removed, re-added or moved since the request was built
            if not state.ready(ctx.now_ms) or state.phase is not FetchPhase.FETCHING:
                continue
            append = self._fetched(ctx, state, data)
            if append is not None:
                appends[tp] = append
        appended = yield from self._ask_partitions(ctx, appends, FollowerAppendResult)
        self._appended(appends, appended, ctx.now_ms)

    def _fetched(
        self, ctx: Context[ReplicaFetcherMessage], state: PartitionFetchState, data: FetchPartitionResponse
    ) -> AppendAsFollower | None:
        """One partition's part of the fetch response: what to append, or the error handled."""
        error = data.error_code
        if error is ErrorCode.NONE:
            self.bytes_total += len(data.records)
            if self.quota.is_throttled(state.tp):
                self.quota.record(len(data.records), ctx.now_ms)
            state.leader_high_watermark = data.high_watermark
            state.lag = max(0, data.high_watermark - state.fetch_offset)
            state.lag_known = True
            if (
                not data.records
                and state.applied == (state.fetch_offset, data.high_watermark, data.log_start_offset)
                and ctx.now_ms - state.applied_ms < self.config.replica_high_watermark_checkpoint_interval_ms
            ):
                return None  # nothing new for the partition (module docstring, "idle answers")
            return AppendAsFollower(
                state.leader_epoch,
                state.fetch_offset,
                data.records,
                data.high_watermark,
                data.log_start_offset,
            )
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            state.phase = FetchPhase.RESETTING
        elif error is ErrorCode.FENCED_LEADER_EPOCH:
            self._fail(ctx, state.tp, "fenced leader epoch in fetch")
        else:
            # UNKNOWN_LEADER_EPOCH (the leader is behind us), NOT_LEADER_OR_FOLLOWER, others: retry later.
            self._delay(ctx, state.tp)
        return None

    def _appended(
        self,
        appends: Mapping[TopicPartition, _LocalRequest],
        results: dict[TopicPartition, FollowerAppendResult],
        now_ms: int,
    ) -> None:
        """Appends done: fetch from the new log end; the partition goes to the back of the line."""
        for tp, reply in results.items():
            state = self.partitions[tp]
            sent = appends[tp]
            assert isinstance(sent, AppendAsFollower)
            state.applied = (reply.log_end_offset, sent.leader_high_watermark, sent.leader_log_start_offset)
            state.applied_ms = now_ms
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
