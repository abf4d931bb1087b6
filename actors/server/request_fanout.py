"""The broker's requests that name many partitions (Produce, Fetch, ListOffsets,
OffsetsForLeaderEpoch): one scatter/gather for the four, each kind a row of ``_KINDS``.

Rules
-----
1. A row says, for its request kind: the partitions it names, what a partition not hosted here
   answers, what each hosted partition is asked and how long that ask may take, how the response
   is assembled (``broker_requests.py``) and whether its partition errors are counted.
2. A partition not hosted here answers NOT_LEADER_OR_FOLLOWER if the metadata knows it,
   UNKNOWN_TOPIC_OR_PARTITION otherwise; one whose ask failed is answered by the assembly.
3. A Produce whose acks are not -1, 0 or 1 answers INVALID_REQUIRED_ACKS for every partition
   without asking any. A Produce's ask outlives the partition's own timeout (which answers
   REQUEST_TIMED_OUT) by ``request.timeout.ms``: ours only guards against a vanished partition.
4. A Fetch, once every partition has answered its read, goes to the fetch purgatory
   (``fetch_purgatory.py``), which answers it or parks it and has it read again. A follower fetch
   reads a throttled partition with ``leader_throttled`` while the leader quota is exceeded, and
   its response's bytes of throttled partitions are recorded against that quota.
5. Every answer counts the request kind and its duration (``RequestMetrics``); a Produce tell
   (acks=0) is gathered the same way and answered to nobody.
6. A parked fetch is read again only where its last reads may have gone stale: the partitions
   that said they changed, throttled ones, and ones no longer hosted here. The rest keep
   their last read, which is what a read would return now: a partition watched since that read
   has not changed its log end offset, high watermark or role (``fetch_purgatory.py`` rule 3).
   Kafka's delayed fetch reads every partition again on completion, but reading one here is an
   ask to its actor, and an idle follower fetch names every partition the pair shares: reading
   them all again at every expiry and on every change tripled an idle broker's partition asks.

Effects go through the broker's context: this object decides, records and tells.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from actors.common.errors import ErrorCode
from actors.common.protocol import (
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    OffsetForLeaderEpochResult,
    OffsetsForLeaderEpochRequest,
    ProducePartitionResponse,
    ProduceRequest,
)
from actors.common.types import TopicPartition
from actors.server.broker_requests import (
    PendingRequest,
    assemble_fetch_response,
    assemble_list_offsets_response,
    assemble_offsets_for_leader_epoch_response,
    assemble_produce_response,
)
from actors.server.broker_statistics import RequestMetrics
from actors.server.config import BrokerConfig
from actors.server.fetch_purgatory import FetchPurgatory
from actors.server.metadata_cache import MetadataCache
from actors.server.replica.messages import (
    AppendRecords,
    FetchOffsetForTimestamp,
    LastOffsetForLeaderEpoch,
    PartitionReadResult,
    ReadRecords,
)
from actors.server.replica_manager import HostedPartitions
from actors.server.replication_quota import ReplicationQuota
from runtime.context import Context

__all__ = ["FanOutRequest", "PartitionReply", "RequestFanOut"]

FanOutRequest: TypeAlias = ProduceRequest | FetchRequest | ListOffsetsRequest | OffsetsForLeaderEpochRequest


@dataclass(frozen=True, slots=True)
class PartitionReply:
    """To the broker: one partition's answer (or the failure of its ask) for a gathered request."""

    request_id: int
    tp: TopicPartition
    reply: Any


@dataclass(frozen=True, slots=True)
class _Read:
    """How a partition is asked this time: ``first`` (a fetch's first read updates follower
    state) and the leader quota's verdict on a throttled partition (rule 4)."""

    first: bool
    leader_throttled: Callable[[TopicPartition], bool]


@dataclass(frozen=True, slots=True)
class _Kind:
    """One request kind's row (rule 1). ``unhosted`` takes (partition, error, broker id)."""

    metric: Callable[[Any], str]
    partitions: Callable[[Any], Sequence[Any]]
    unhosted: Callable[[Any, ErrorCode, int], object]
    ask: Callable[[Any, Any, _Read], object]
    timeout_ms: Callable[[BrokerConfig, Any], int]
    assemble: Callable[[Any, dict[TopicPartition, object]], Any]
    counts_errors: bool
    waits: bool = False  # read fetches go to the purgatory (rule 4)
    # What a response's bytes cost the leader quota (rule 4).
    sent: Callable[[ReplicationQuota, Any, Any, int], None] | None = None


def _fetch_error(tp: TopicPartition, error: ErrorCode) -> PartitionReadResult:
    return PartitionReadResult(
        FetchPartitionResponse(topic=tp.topic, partition=tp.partition, error_code=error)
    )


def _read_records(request: FetchRequest, wanted: Any, read: _Read) -> ReadRecords:
    return ReadRecords(
        replica_id=request.replica_id,
        fetch_offset=wanted.fetch_offset,
        follower_log_start_offset=wanted.log_start_offset,
        max_bytes=min(wanted.partition_max_bytes, request.max_bytes),
        current_leader_epoch=wanted.current_leader_epoch,
        # Every partition may return at least one batch; the response is trimmed to max_bytes
        # afterwards (only the first partition with data keeps an oversized batch).
        min_one_message=True,
        update_follower_state=read.first,
        # Kafka's shouldLeaderThrottle (the partition adds the test that the replica is not in the ISR).
        leader_throttled=request.is_from_follower and read.leader_throttled(wanted.tp),
    )


def _record_throttled(
    quota: ReplicationQuota, request: FetchRequest, response: FetchResponse, now_ms: int
) -> None:
    if request.is_from_follower:
        # Every byte sent for a throttled partition counts, in sync or not (Kafka's
        # sizeOfThrottledPartitions), so the bound covers all of the throttled traffic.
        quota.record(sum(len(p.records) for p in response.partitions if quota.is_throttled(p.tp)), now_ms)


_KINDS: dict[type, _Kind] = {
    ProduceRequest: _Kind(
        metric=lambda _request: "Produce",
        partitions=lambda request: request.partitions,
        unhosted=lambda data, error, broker_id: ProducePartitionResponse(
            topic=data.topic,
            partition=data.partition,
            error_code=error,
            error_message=f"partition {data.tp} is not led by broker {broker_id}",
        ),
        ask=lambda request, data, _read: AppendRecords(data.records, request.acks, request.timeout_ms),
        timeout_ms=lambda config, request: request.timeout_ms + config.request_timeout_ms,
        assemble=assemble_produce_response,
        counts_errors=True,
    ),
    FetchRequest: _Kind(
        metric=lambda request: "FetchFollower" if request.is_from_follower else "FetchConsumer",
        partitions=lambda request: request.partitions,
        unhosted=lambda wanted, error, _broker_id: _fetch_error(wanted.tp, error),
        ask=_read_records,
        timeout_ms=lambda config, _request: config.replica_socket_timeout_ms,
        assemble=assemble_fetch_response,
        counts_errors=True,
        waits=True,
        sent=_record_throttled,
    ),
    ListOffsetsRequest: _Kind(
        metric=lambda _request: "ListOffsets",
        partitions=lambda request: request.partitions,
        unhosted=lambda wanted, error, _broker_id: ListOffsetsPartitionResponse(
            topic=wanted.topic, partition=wanted.partition, error_code=error
        ),
        ask=lambda request, wanted, _read: FetchOffsetForTimestamp(
            request.replica_id, wanted.timestamp, wanted.current_leader_epoch
        ),
        timeout_ms=lambda config, _request: config.request_timeout_ms,
        assemble=assemble_list_offsets_response,
        counts_errors=False,
    ),
    OffsetsForLeaderEpochRequest: _Kind(
        metric=lambda _request: "OffsetsForLeaderEpoch",
        partitions=lambda request: request.partitions,
        unhosted=lambda wanted, error, _broker_id: OffsetForLeaderEpochResult(
            topic=wanted.topic, partition=wanted.partition, error_code=error
        ),
        ask=lambda request, wanted, _read: LastOffsetForLeaderEpoch(
            request.replica_id, wanted.current_leader_epoch, wanted.leader_epoch
        ),
        timeout_ms=lambda config, _request: config.request_timeout_ms,
        assemble=assemble_offsets_for_leader_epoch_response,
        counts_errors=False,
    ),
}


class RequestFanOut:
    def __init__(
        self,
        *,
        config: BrokerConfig,
        hosted: HostedPartitions,
        metadata: MetadataCache,
        leader_quota: ReplicationQuota,
        request_metrics: RequestMetrics,
    ) -> None:
        self._config = config
        self._hosted = hosted
        self._metadata = metadata
        self._leader_quota = leader_quota
        self._metrics = request_metrics
        self._request_ids = itertools.count(1)
        self.pending: dict[int, PendingRequest] = {}
        self.purgatory = FetchPurgatory(hosted=hosted, read_again=self._read_again, complete=self._complete)

    def __len__(self) -> int:
        return len(self.pending)

    def start(self, ctx: Context[Any], request: FanOutRequest) -> None:
        kind = _KINDS[type(request)]
        pending = PendingRequest(
            next(self._request_ids), kind.metric(request), request, ctx.requester, ctx.now_ns
        )
        self.pending[pending.request_id] = pending
        if isinstance(request, ProduceRequest) and request.acks not in (-1, 0, 1):
            for data in request.partitions:
                pending.results[data.tp] = ProducePartitionResponse(
                    topic=data.topic,
                    partition=data.partition,
                    error_code=ErrorCode.INVALID_REQUIRED_ACKS,
                    error_message=f"acks must be -1, 0 or 1, not {request.acks}",
                )
            self._complete(ctx, pending)
            return
        self._scatter(ctx, pending, kind, first=True)

    def partition_replied(self, ctx: Context[Any], message: PartitionReply) -> None:
        pending = self.pending.get(message.request_id)
        if pending is None or not pending.record(message.tp, message.reply):
            return
        self._gathered(ctx, pending, _KINDS[type(pending.request)])

    def _read_again(self, ctx: Context[Any], pending: PendingRequest, changed: set[TopicPartition]) -> None:
        """Read a parked fetch's ``changed`` partitions anew (rule 6), with those whose last read
        may no longer hold although they never said so: a throttled partition (the quota's verdict
        moves with time) and one no longer hosted here."""
        quota, hosted = self._leader_quota, self._hosted
        again = set(changed)
        for tp in pending.results:
            if tp not in again and (quota.is_throttled(tp) or hosted.ref(tp) is None):
                again.add(tp)
        self._scatter(ctx, pending, _KINDS[type(pending.request)], first=False, only=again)

    def _scatter(
        self,
        ctx: Context[Any],
        pending: PendingRequest,
        kind: _Kind,
        *,
        first: bool,
        only: set[TopicPartition] | None = None,
    ) -> None:
        request = pending.request
        read = _Read(first, lambda tp: self._leader_throttled(tp, ctx.now_ms))
        timeout_ms = kind.timeout_ms(self._config, request)
        pending.last_read = set()
        for wanted in kind.partitions(request):
            tp = wanted.tp
            if only is not None and tp not in only:
                continue
            ref = self._hosted.ref(tp)
            if ref is None:
                pending.results[tp] = kind.unhosted(
                    wanted, self._missing_partition_error(tp), self._config.broker_id
                )
                continue
            pending.waiting.add(tp)
            pending.last_read.add(tp)
            request_id = pending.request_id

            def adapt(reply: object, request_id: int = request_id, tp: TopicPartition = tp) -> PartitionReply:
                return PartitionReply(request_id, tp, reply)

            ctx.ask(
                ref, kind.ask(request, wanted, read), timeout_ms=timeout_ms, on_reply=adapt, on_failure=adapt
            )
        if not pending.waiting:
            self._gathered(ctx, pending, kind)

    def _gathered(self, ctx: Context[Any], pending: PendingRequest, kind: _Kind) -> None:
        if kind.waits:
            self.purgatory.read(ctx, pending)
        else:
            self._complete(ctx, pending)

    def _complete(self, ctx: Context[Any], pending: PendingRequest) -> None:
        request = pending.request
        kind = _KINDS[type(request)]
        response = kind.assemble(request, pending.results)
        if kind.counts_errors:
            for partition in response.partitions:
                if partition.error_code is not ErrorCode.NONE:
                    self._metrics.count_error(pending.kind, partition.error_code)
        if kind.sent is not None:
            kind.sent(self._leader_quota, request, response, ctx.now_ms)
        self.pending.pop(pending.request_id, None)
        self._metrics.count_request(pending.kind, ctx.now_ns - pending.started_ns)
        if pending.requester is not None:
            ctx.reply_to(pending.requester, response)

    def _leader_throttled(self, tp: TopicPartition, now_ms: int) -> bool:
        return self._leader_quota.is_throttled(tp) and self._leader_quota.is_exceeded(now_ms)

    def _missing_partition_error(self, tp: TopicPartition) -> ErrorCode:
        return (
            ErrorCode.NOT_LEADER_OR_FOLLOWER
            if self._metadata.contains(tp)
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
