"""The broker's bookkeeping for requests it splits across partitions, and their responses.

A Kafka request names many partitions; the broker asks each partition actor and gathers the
answers (``PendingRequest``), then assembles the response in the request's partition order
(``assemble_*``: Produce, Fetch, OffsetsForLeaderEpoch, ListOffsets). Fetches
may be parked until data arrives (``FetchDecision``). Pure data and functions; the request
fan-out (``request_fanout.py``) and the fetch purgatory (``fetch_purgatory.py``) own the asks, the
timers and the replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.common.errors import ErrorCode
from actors.common.protocol import (
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochResult,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)
from actors.common.types import TopicPartition
from actors.server.replica.messages import PartitionAppendResult, PartitionReadResult
from runtime.messages import Requester

__all__ = [
    "FetchDecision",
    "PendingRequest",
    "assemble_fetch_response",
    "assemble_list_offsets_response",
    "assemble_offsets_for_leader_epoch_response",
    "assemble_produce_response",
    "decide_fetch",
]


@dataclass(slots=True)
class PendingRequest:
    """A request waiting for its partitions' answers (and, for a fetch, maybe parked)."""

    request_id: int
    kind: str
    request: object
    requester: Requester | None
    started_ns: int
    waiting: set[TopicPartition] = field(default_factory=set)
    results: dict[TopicPartition, object] = field(default_factory=dict)
    parked: bool = False
    expired: bool = False
    # A parked fetch's partitions that changed since their last read (read again once the reads
    # in progress are in), and the partitions its last read asked.
    stale: set[TopicPartition] = field(default_factory=set)
    last_read: set[TopicPartition] = field(default_factory=set)

    def record(self, tp: TopicPartition, result: object) -> bool:
        """Keep one partition's answer; True when every partition has answered."""
        if tp in self.waiting:
            self.waiting.discard(tp)
            self.results[tp] = result
        return not self.waiting


def assemble_produce_response(
    request: ProduceRequest, results: dict[TopicPartition, object]
) -> ProduceResponse:
    partitions: list[ProducePartitionResponse] = []
    for data in request.partitions:
        result = results.get(data.tp)
        if isinstance(result, PartitionAppendResult):
            partitions.append(
                ProducePartitionResponse(
                    topic=data.topic,
                    partition=data.partition,
                    error_code=result.error_code,
                    base_offset=result.base_offset,
                    log_append_time_ms=result.log_append_time_ms,
                    log_start_offset=result.log_start_offset,
                    error_message=result.error_message,
                )
            )
        elif isinstance(result, ProducePartitionResponse):
            partitions.append(result)
        else:
            # The partition's answer never came (the replica stopped, or its ask timed out): the
            # outcome is unknown, so the error must be a retriable, indefinite one.
            partitions.append(
                ProducePartitionResponse(
                    topic=data.topic,
                    partition=data.partition,
                    error_code=ErrorCode.REQUEST_TIMED_OUT,
                    error_message=f"no answer from the partition: {result!r}",
                )
            )
    return ProduceResponse(partitions=tuple(partitions))


@dataclass(frozen=True, slots=True)
class FetchDecision:
    respond: bool
    bytes_available: int


def decide_fetch(request: FetchRequest, results: dict[TopicPartition, object]) -> FetchDecision:
    """docs/replication.md §5.2: answer now if the request does not wait, any partition erred, enough bytes
    are there, or (followers, KIP-392) a partition's HW moved past what the follower was last sent."""
    total = 0
    respond = request.max_wait_ms <= 0 or not request.partitions
    for result in results.values():
        if not isinstance(result, PartitionReadResult):
            respond = True
            continue
        if result.response.error_code is not ErrorCode.NONE or result.high_watermark_advanced_for_follower:
            respond = True
        total += len(result.response.records)
    return FetchDecision(respond or total >= request.min_bytes, total)


def assemble_fetch_response(request: FetchRequest, results: dict[TopicPartition, object]) -> FetchResponse:
    """Responses in request order within ``max_bytes``: the first partition with data always gets
    its records (Kafka's "at least one batch", KIP-74); later ones only if they still fit."""
    remaining = request.max_bytes
    first_with_data = True
    partitions: list[FetchPartitionResponse] = []
    for wanted in request.partitions:
        result = results.get(wanted.tp)
        if not isinstance(result, PartitionReadResult):
            partitions.append(
                FetchPartitionResponse(
                    topic=wanted.topic,
                    partition=wanted.partition,
                    error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    error_message=f"no answer from the partition: {result!r}",
                )
            )
            continue
        response = result.response
        size = len(response.records)
        if size and not first_with_data and size > remaining:
            response = FetchPartitionResponse(
                topic=response.topic,
                partition=response.partition,
                error_code=response.error_code,
                high_watermark=response.high_watermark,
                last_stable_offset=response.last_stable_offset,
                log_start_offset=response.log_start_offset,
            )
            size = 0
        if size:
            first_with_data = False
            remaining = max(remaining - size, 0)
        partitions.append(response)
    return FetchResponse(error_code=ErrorCode.NONE, partitions=tuple(partitions))


def assemble_offsets_for_leader_epoch_response(
    request: OffsetsForLeaderEpochRequest, results: dict[TopicPartition, object]
) -> OffsetsForLeaderEpochResponse:
    """In request order; a partition that never answered is NOT_LEADER_OR_FOLLOWER."""
    answers: list[OffsetForLeaderEpochResult] = []
    for wanted in request.partitions:
        result = results.get(wanted.tp)
        if not isinstance(result, OffsetForLeaderEpochResult):
            result = OffsetForLeaderEpochResult(
                topic=wanted.topic, partition=wanted.partition, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        answers.append(result)
    return OffsetsForLeaderEpochResponse(partitions=tuple(answers))


def assemble_list_offsets_response(
    request: ListOffsetsRequest, results: dict[TopicPartition, object]
) -> ListOffsetsResponse:
    """In request order; a partition that never answered is NOT_LEADER_OR_FOLLOWER."""
    answers: list[ListOffsetsPartitionResponse] = []
    for wanted in request.partitions:
        result = results.get(wanted.tp)
        if not isinstance(result, ListOffsetsPartitionResponse):
            result = ListOffsetsPartitionResponse(
                topic=wanted.topic, partition=wanted.partition, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        answers.append(result)
    return ListOffsetsResponse(partitions=tuple(answers))
