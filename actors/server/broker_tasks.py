"""The broker's periodic tasks (Kafka's ReplicaManager and LogManager schedulers), and the sole
writer of its checkpoint files.

Rules
-----
1. ``isr-expiration`` every ``replica.lag.time.max.ms / 2`` tells each partition led here to
   check its ISR (``MaybeShrinkIsr``).
2. ``isr-change-propagation`` every 2500 ms: the ISR changes leaders recorded
   (``IsrChangeRecorded``) are written as one sequential ``/isr_change_notification`` znode when
   ``isr_propagation.py`` says so; a written one is a state-change event, a failed one is retried
   at a later check.
3. Checkpoint files (high watermark, recovery point, log start offset) are written only here: each
   kind's content is captured on the loop and written (fsync) in a worker thread, one write per
   kind at a time (a tick finding its kind in flight is skipped). The high watermark checkpoint
   starts once the first LeaderAndIsr has been handled (Kafka's ``startHighWatermarkCheckPointThread``);
   the others, retention and the flusher after Kafka's 30 s initial delay. A failed write is raised
   on the loop: an I/O error takes the log dir offline (the broker halts).
4. ``kafka-log-retention`` deletes old segments; ``kafka-log-flusher`` (only when
   ``log.flush.scheduler.interval.ms`` is set, as in Kafka) tells every hosted partition to flush
   what ``flush.ms`` says is due.

Effects go through the broker's context: this object decides, records and tells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias, assert_never

from actors.common.types import TopicPartition
from actors.server import zk_data
from actors.server.config import BrokerConfig
from actors.server.isr_propagation import (
    ISR_CHANGE_PROPAGATION_CHECK_INTERVAL_MS,
    IsrChangePropagation,
    PropagationOutcome,
)
from actors.server.replica.messages import MaybeFlush, MaybeShrinkIsr
from actors.server.replica_manager import HostedPartitions
from actors.server.state_changes import StateChange, StateChangeLog
from runtime.context import Context
from runtime.coordination.base import Coordinator
from runtime.coordination.requests import ZkCreate, execute
from runtime.storage.config import LONG_MAX
from runtime.storage.log_manager import LogManager

__all__ = [
    "BrokerTasks",
    "CheckpointDone",
    "CheckpointTick",
    "FlushTick",
    "IsrExpirationTick",
    "PropagationDone",
    "PropagationTick",
    "RetentionTick",
    "TaskMessage",
]

# Kafka's LogManager starts its periodic tasks after this delay.
_INITIAL_TASK_DELAY_MS = 30_000


@dataclass(frozen=True, slots=True)
class IsrExpirationTick:
    pass


@dataclass(frozen=True, slots=True)
class PropagationTick:
    pass


@dataclass(frozen=True, slots=True)
class PropagationDone:
    """An ISR change notification was written (``error`` None) or not; what it carried, and why
    it was written then (for its state-change event)."""

    error: Exception | None
    outcome: PropagationOutcome | None
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class CheckpointTick:
    kind: str


@dataclass(frozen=True, slots=True)
class CheckpointDone:
    kind: str
    error: Exception | None


@dataclass(frozen=True, slots=True)
class RetentionTick:
    pass


@dataclass(frozen=True, slots=True)
class FlushTick:
    pass


TaskMessage: TypeAlias = (
    IsrExpirationTick
    | PropagationTick
    | PropagationDone
    | CheckpointTick
    | CheckpointDone
    | RetentionTick
    | FlushTick
)


class BrokerTasks:
    def __init__(
        self,
        *,
        config: BrokerConfig,
        log_manager: LogManager,
        coordinator: Coordinator,
        hosted: HostedPartitions,
        state_changes: StateChangeLog | None,
    ) -> None:
        self._config = config
        self._log_manager = log_manager
        self._coordinator = coordinator
        self._hosted = hosted
        self._state_changes = state_changes
        self.propagation: IsrChangePropagation | None = None  # from start
        self.hw_checkpoint_started = False
        self._checkpoints_in_flight: set[str] = set()

    def start(self, ctx: Context[Any]) -> None:
        self.propagation = IsrChangePropagation(start_ms=ctx.now_ms)
        config = self._config
        ctx.start_periodic_timer(
            "isr-expiration", IsrExpirationTick(), config.isr_expiration_interval_ms, initial_delay_ms=0
        )
        ctx.start_periodic_timer(
            "isr-change-propagation",
            PropagationTick(),
            ISR_CHANGE_PROPAGATION_CHECK_INTERVAL_MS,
            initial_delay_ms=0,
        )
        ctx.start_periodic_timer(
            "recovery-point-checkpoint",
            CheckpointTick("recovery-point"),
            config.log_flush_offset_checkpoint_interval_ms,
            initial_delay_ms=_INITIAL_TASK_DELAY_MS,
        )
        ctx.start_periodic_timer(
            "log-start-offset-checkpoint",
            CheckpointTick("log-start-offset"),
            config.log_flush_start_offset_checkpoint_interval_ms,
            initial_delay_ms=_INITIAL_TASK_DELAY_MS,
        )
        ctx.start_periodic_timer(
            "kafka-log-retention",
            RetentionTick(),
            config.log_retention_check_interval_ms,
            initial_delay_ms=_INITIAL_TASK_DELAY_MS,
        )
        if config.log_flush_scheduler_interval_ms < LONG_MAX:
            # With the default (Long.MAX) the flusher never runs, as in Kafka (rule 4).
            ctx.start_periodic_timer(
                "kafka-log-flusher",
                FlushTick(),
                config.log_flush_scheduler_interval_ms,
                initial_delay_ms=_INITIAL_TASK_DELAY_MS,
            )

    def leader_and_isr_handled(self, ctx: Context[Any]) -> None:
        """Rule 3: the high watermark checkpoint starts with the first LeaderAndIsr."""
        if not self.hw_checkpoint_started:
            self.hw_checkpoint_started = True
            ctx.start_periodic_timer(
                "highwatermark-checkpoint",
                CheckpointTick("high-watermark"),
                self._config.replica_high_watermark_checkpoint_interval_ms,
            )

    def isr_change_recorded(self, tp: TopicPartition, now_ms: int) -> None:
        assert self.propagation is not None
        self.propagation.record(tp, now_ms)

    def receive(self, ctx: Context[Any], message: TaskMessage) -> None:
        match message:
            case IsrExpirationTick():
                for ref in self._hosted.led():
                    ctx.tell(ref, MaybeShrinkIsr())
            case PropagationTick():
                self._check_propagation(ctx)
            case PropagationDone():
                self._propagation_done(ctx, message)
            case CheckpointTick():
                self._start_checkpoint(ctx, message.kind)
            case CheckpointDone():
                self._checkpoints_in_flight.discard(message.kind)
                if message.error is not None:
                    raise message.error  # an OSError takes the log dir offline (rule 3)
            case RetentionTick():
                self._log_manager.delete_old_segments(now_ms=ctx.now_ms, wall_clock_ms=ctx.wall_clock_ms)
            case FlushTick():
                for ref in self._hosted.refs():
                    ctx.tell(ref, MaybeFlush())
            case _:
                assert_never(message)

    def _check_propagation(self, ctx: Context[Any]) -> None:
        propagation = self.propagation
        assert propagation is not None
        check = propagation.check(ctx.now_ms)
        if not check.partitions:
            return
        outcome, partitions = check.outcome, tuple(sorted(check.partitions))
        data = zk_data.encode_isr_change_notification(
            zk_data.TopicPartition(topic=tp.topic, partition=tp.partition) for tp in check.partitions
        )
        # A request value, performed outside the actor (the handler never awaits).
        notification = ZkCreate(zk_data.isr_change_notification_path(), data, sequential=True)
        coordinator = self._coordinator
        ctx.pipe_to_self(
            lambda: execute(coordinator, notification),
            lambda _: PropagationDone(None, outcome, partitions),
            lambda error: PropagationDone(error, outcome, partitions),
        )

    def _propagation_done(self, ctx: Context[Any], message: PropagationDone) -> None:
        propagation = self.propagation
        assert propagation is not None
        if message.error is None:
            propagation.propagated(ctx.now_ms)
            if self._state_changes is not None:
                self._state_changes.record(
                    StateChange(
                        ts_ms=ctx.wall_clock_ms,
                        kind="propagation",
                        reason=None if message.outcome is None else message.outcome.value,
                        partitions=message.partitions,
                    )
                )
        else:
            ctx.log.warning("could not write an ISR change notification: %r", message.error)
            propagation.failed()

    def _start_checkpoint(self, ctx: Context[Any], kind: str) -> None:
        if kind in self._checkpoints_in_flight:
            return
        if kind == "high-watermark":
            job = self._log_manager.high_watermark_checkpoint()
        elif kind == "recovery-point":
            job = self._log_manager.recovery_point_checkpoint()
        else:
            job = self._log_manager.log_start_offset_checkpoint()
        self._checkpoints_in_flight.add(kind)
        ctx.pipe_blocking_to_self(
            job.run, lambda _: CheckpointDone(kind, None), lambda e: CheckpointDone(kind, e)
        )
