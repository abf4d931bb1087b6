"""The broker's StopReplica(delete) requests, answered once every named partition's log is gone.

Rules
-----
1. Kafka answers a deleting StopReplica after renaming each log directory for deletion; the
   controller completes a topic's deletion only when every replica says so. Here each partition's
   actor deletes its log and stops (``replica_manager.py`` rule 5); the request is answered when
   every partition it names has answered (``PartitionDeleted``) or could not be asked.
2. A partition named by several deleting requests answers all of them (a repeated StopReplica
   waits for the first deletion's answer).
3. The answer's error is NONE for the request, with each partition's own error; failed
   partitions are logged.

Effects go through the broker's context: this object decides, records and tells.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from actors.common.errors import ErrorCode
from actors.common.protocol import PartitionError, StopReplicaRequest, StopReplicaResponse
from actors.common.types import TopicPartition
from actors.server.broker_statistics import RequestMetrics
from actors.server.replica_manager import HostedPartitions, PartitionDeleted
from runtime.context import Context
from runtime.messages import Requester

__all__ = ["ReplicaDeletions"]


@dataclass(slots=True)
class _PendingDeletion:
    requester: Requester | None
    started: int
    partitions: tuple[TopicPartition, ...]
    errors: dict[TopicPartition, ErrorCode]


class ReplicaDeletions:
    def __init__(
        self, *, hosted: HostedPartitions, request_timeout_ms: int, request_metrics: RequestMetrics
    ) -> None:
        self._hosted = hosted
        self._request_timeout_ms = request_timeout_ms
        self._metrics = request_metrics
        self._ids = itertools.count(1)
        self._pending: dict[int, _PendingDeletion] = {}

    def start(
        self, ctx: Context[Any], request: StopReplicaRequest, requester: Requester | None, started: int
    ) -> None:
        request_id = next(self._ids)
        pending = _PendingDeletion(requester, started, request.partitions, {})
        self._pending[request_id] = pending
        for tp in request.partitions:
            error = self._hosted.delete(ctx, tp, timeout_ms=self._request_timeout_ms)
            if error is not None:
                pending.errors[tp] = error
        self._hosted.stop_idle_fetchers(ctx)
        self._maybe_answer(ctx, request_id)

    def partition_deleted(self, ctx: Context[Any], message: PartitionDeleted) -> None:
        waiting = [
            request_id
            for request_id, pending in self._pending.items()
            if message.tp in pending.partitions and message.tp not in pending.errors
        ]
        for request_id in waiting:
            self._pending[request_id].errors[message.tp] = message.error_code
        self._hosted.deleted(ctx, message)
        for request_id in waiting:
            self._maybe_answer(ctx, request_id)

    def _maybe_answer(self, ctx: Context[Any], request_id: int) -> None:
        pending = self._pending[request_id]
        if len(pending.errors) < len(set(pending.partitions)):
            return
        del self._pending[request_id]
        failed = [tp for tp, error in pending.errors.items() if error is not ErrorCode.NONE]
        if failed:
            ctx.log.warning("StopReplica(delete) failed for %s", ", ".join(str(tp) for tp in sorted(failed)))
        if pending.requester is not None:
            ctx.reply_to(
                pending.requester,
                StopReplicaResponse(
                    error_code=ErrorCode.NONE,
                    partitions=tuple(
                        PartitionError(topic=tp.topic, partition=tp.partition, error_code=pending.errors[tp])
                        for tp in pending.partitions
                    ),
                ),
            )
        self._metrics.count_request("StopReplica", ctx.now_ns - pending.started)
