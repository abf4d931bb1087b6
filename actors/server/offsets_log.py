"""The group coordinator's two ports over this broker's own ``__consumer_offsets`` partition actors.

``GroupCoordinatorActor`` (docs/consumer-groups.md §10) appends and loads through an
``OffsetsLogWriter`` and an ``OffsetsLogReader``; here both are one ask to the local partition actor
of ``__consumer_offsets-<n>`` (by its name on the coordinator's own node), answered by exactly one
message:

* the writer sends the produce path's ``AppendRecords`` with acks -1 and ``offsets.commit.timeout.ms``:
  the partition answers once the high watermark covers the batch, or with its produce error
  (REQUEST_TIMED_OUT from its own purgatory timeout, NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER...).
  The ask's own deadline adds ``request.timeout.ms``, as the broker's produce path does, so it only
  guards against a partition actor that vanished;
* the reader sends the fetch path's ``ReadRecords`` as a consumer would, but with ``fetch_log_end``
  (Kafka's loader reads to the log end, not the high watermark, from the log start offset), at most
  ``offsets.load.buffer.size`` bytes (Kafka's default, 5 MiB) and at least one whole batch.

A failed ask maps with ``ask_failure_error``: no partition actor here (``UnknownActor``) is
NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from actors.common.errors import ErrorCode
from actors.common.names import partition_name
from actors.common.protocol import CONSUMER_REPLICA_ID, NO_PARTITION_LEADER_EPOCH
from actors.common.topic_names import GROUP_METADATA_TOPIC_NAME
from actors.common.types import TopicPartition
from actors.group.coordinator_actor import (
    AppendOutcome,
    GroupCoordinatorMessage,
    ReadOutcome,
    ask_failure_error,
)
from actors.server.replica.messages import (
    AppendRecords,
    PartitionAppendResult,
    PartitionReadResult,
    ReadRecords,
)
from runtime.context import Context
from runtime.ref import ActorRef

__all__ = ["OFFSETS_LOAD_BUFFER_SIZE", "PartitionOffsetsLog"]

OFFSETS_LOAD_BUFFER_SIZE: Final = 5 * 1024 * 1024
"""Kafka's ``offsets.load.buffer.size`` default: the most one loading read returns (beyond one batch)."""


class PartitionOffsetsLog:
    """Both ports (``OffsetsLogWriter``, ``OffsetsLogReader``) as asks to local partition actors."""

    def __init__(self, *, commit_timeout_ms: int, request_timeout_ms: int) -> None:
        self.commit_timeout_ms = commit_timeout_ms
        self.request_timeout_ms = request_timeout_ms

    @staticmethod
    def _partition_ref(ctx: Context[GroupCoordinatorMessage], partition: int) -> ActorRef:
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
        return ActorRef(node_id=ctx.self_ref.node_id, name=partition_name(tp))

    def append(
        self,
        ctx: Context[GroupCoordinatorMessage],
        partition: int,
        batch: bytes,
        on_complete: Callable[[AppendOutcome], GroupCoordinatorMessage],
    ) -> None:
        def on_reply(reply: object) -> GroupCoordinatorMessage:
            if not isinstance(reply, PartitionAppendResult):
                return on_complete(AppendOutcome(ErrorCode.UNKNOWN_SERVER_ERROR))
            if reply.error_code is not ErrorCode.NONE:
                return on_complete(AppendOutcome(reply.error_code))
            return on_complete(AppendOutcome(ErrorCode.NONE, reply.base_offset))

        ctx.ask(
            self._partition_ref(ctx, partition),
            AppendRecords(batch, -1, self.commit_timeout_ms),
            timeout_ms=self.commit_timeout_ms + self.request_timeout_ms,
            on_reply=on_reply,
            on_failure=lambda failure: on_complete(AppendOutcome(ask_failure_error(failure))),
        )

    def read(
        self,
        ctx: Context[GroupCoordinatorMessage],
        partition: int,
        start_offset: int,
        on_complete: Callable[[ReadOutcome], GroupCoordinatorMessage],
    ) -> None:
        def on_reply(reply: object) -> GroupCoordinatorMessage:
            if not isinstance(reply, PartitionReadResult):
                return on_complete(ReadOutcome(ErrorCode.UNKNOWN_SERVER_ERROR))
            response = reply.response
            if response.error_code is not ErrorCode.NONE:
                return on_complete(ReadOutcome(response.error_code))
            return on_complete(ReadOutcome(ErrorCode.NONE, response.records, reply.log_end_offset))

        read = ReadRecords(
            replica_id=CONSUMER_REPLICA_ID,
            fetch_offset=start_offset,
            follower_log_start_offset=-1,
            max_bytes=OFFSETS_LOAD_BUFFER_SIZE,
            current_leader_epoch=NO_PARTITION_LEADER_EPOCH,
            min_one_message=True,
            update_follower_state=False,
            fetch_log_end=True,
        )
        ctx.ask(
            self._partition_ref(ctx, partition),
            read,
            timeout_ms=self.request_timeout_ms,
            on_reply=on_reply,
            on_failure=lambda failure: on_complete(ReadOutcome(ask_failure_error(failure))),
        )
