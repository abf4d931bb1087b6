"""What the broker does with a controller request that passed its gate (``controller_gate.py``):
Kafka's ``becomeLeaderOrFollower``, ``maybeUpdateMetadataCache`` and ``stopReplicas``.

Rules
-----
1. LeaderAndIsr: the live leaders it names join the metadata cache and the address book; each
   partition state goes to the hosted partitions (``replica_manager.py``), whose verdict is that
   partition's error; fetchers left with nothing stop; the first one starts the high watermark
   checkpoint (``broker_tasks.py``).
2. UpdateMetadata: the metadata cache takes it; if it names this broker live while registered,
   the broker is told the controller has seen this incarnation (``seen_by_controller``); every
   live broker's address is recorded.
3. StopReplica without delete: each partition stops (keeping its actor, log and leader epoch) and
   the request is answered at once. With delete: the topics forget their settings and
   ``replica_deletions.py`` answers once every log is gone.
4. Every answer counts the request kind and its duration.

Effects go through the broker's context: this object decides, records and tells.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_never

from actors.common.errors import ErrorCode
from actors.common.names import broker_node
from actors.common.protocol import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from actors.server.broker_statistics import RequestMetrics
from actors.server.broker_tasks import BrokerTasks
from actors.server.controller_gate import ControllerRequest, answer
from actors.server.metadata_cache import MetadataCache
from actors.server.replica_deletions import ReplicaDeletions
from actors.server.replica_manager import HostedPartitions
from actors.server.topic_settings import TopicSettings
from runtime.context import Context
from runtime.messages import Requester
from runtime.transport.addresses import AddressBook

__all__ = ["ControllerRequestHandler"]


class ControllerRequestHandler:
    def __init__(
        self,
        *,
        broker_id: int,
        hosted: HostedPartitions,
        metadata: MetadataCache,
        address_book: AddressBook,
        tasks: BrokerTasks,
        deletions: ReplicaDeletions,
        topic_settings: TopicSettings,
        request_metrics: RequestMetrics,
        registered: Callable[[], bool],
        seen_by_controller: Callable[[Context[Any]], None],
    ) -> None:
        """``registered``: whether the broker's registration is current; ``seen_by_controller``:
        called when an UpdateMetadata names this registered broker live (rule 2)."""
        self._broker_id = broker_id
        self._hosted = hosted
        self._metadata = metadata
        self._address_book = address_book
        self._tasks = tasks
        self._deletions = deletions
        self._topic_settings = topic_settings
        self._metrics = request_metrics
        self._registered = registered
        self._seen_by_controller = seen_by_controller

    def apply(
        self, ctx: Context[Any], request: ControllerRequest, requester: Requester | None, started: int
    ) -> None:
        match request:
            case LeaderAndIsrRequest():
                response: object = self._leader_and_isr(ctx, request)
            case UpdateMetadataRequest():
                response = self._update_metadata(ctx, request)
            case StopReplicaRequest():
                if request.delete_partitions:
                    for tp in request.partitions:
                        self._topic_settings.forget(tp.topic)
                    self._deletions.start(ctx, request, requester, started)
                    return
                response = self._stop_replica(ctx, request)
            case _:
                assert_never(request)
        answer(ctx, requester, response)
        self._metrics.count_request(type(request).__name__.removesuffix("Request"), ctx.now_ns - started)

    def _leader_and_isr(self, ctx: Context[Any], request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        for endpoint in request.live_leaders:
            self._metadata.add_live_broker(endpoint)
            self._address_book.set(broker_node(endpoint.broker_id), endpoint.url)
        errors = [
            PartitionError(
                topic=state.topic,
                partition=state.partition,
                error_code=self._hosted.apply(ctx, state),
            )
            for state in request.partition_states
        ]
        self._hosted.stop_idle_fetchers(ctx)
        self._tasks.leader_and_isr_handled(ctx)
        return LeaderAndIsrResponse(error_code=ErrorCode.NONE, partitions=tuple(errors))

    def _update_metadata(self, ctx: Context[Any], request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        self._metadata.update(request)
        if self._registered() and any(b.broker_id == self._broker_id for b in request.live_brokers):
            self._seen_by_controller(ctx)
        for endpoint in request.live_brokers:
            self._address_book.set(broker_node(endpoint.broker_id), endpoint.url)
        return UpdateMetadataResponse(error_code=ErrorCode.NONE)

    def _stop_replica(self, ctx: Context[Any], request: StopReplicaRequest) -> StopReplicaResponse:
        for tp in request.partitions:
            self._hosted.stop(ctx, tp)
        self._hosted.stop_idle_fetchers(ctx)
        return StopReplicaResponse(
            error_code=ErrorCode.NONE,
            partitions=tuple(
                PartitionError(topic=tp.topic, partition=tp.partition, error_code=ErrorCode.NONE)
                for tp in request.partitions
            ),
        )
