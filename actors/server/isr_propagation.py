"""The ISR change propagation rule of the ZooKeeper era (docs/propagation.md §1), as pure state.

A leader that changes an ISR in ZooKeeper records the partition in ``isr_change_set``. Every 2500 ms
the ``isr-change-propagation`` task checks: if the set is non-empty **and** (no change was recorded
for 5000 ms — the black-out — **or** nothing was propagated for 60000 ms), it writes one sequential
``/isr_change_notification/isr_change_`` znode naming the partitions, so the controller can push
fresh metadata to every broker. An isolated change therefore reaches the controller 5–7.5 s later;
a storm of changes is batched and still delivered at least once a minute.

Outcomes of a check with pending changes, counted for the metrics:
``written`` (after 5 s of quiet), ``forced`` (by the 60 s bound while changes kept coming; it writes
too), ``deferred`` (black-out: nothing written). ``delay`` is the time from the first change recorded
since the last propagation to the propagation.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from actors.common.types import TopicPartition
from runtime.histogram import PROPAGATION_BUCKETS_SECONDS, Histogram

__all__ = [
    "ISR_CHANGE_PROPAGATION_BLACK_OUT_MS",
    "ISR_CHANGE_PROPAGATION_CHECK_INTERVAL_MS",
    "ISR_CHANGE_PROPAGATION_INTERVAL_MS",
    "IsrChangePropagation",
    "PropagationCheck",
    "PropagationOutcome",
]

# ReplicaManager's constants (Kafka 2.4; 2.8 calls them checkIntervalMs, lingerMs, maxDelayMs).
ISR_CHANGE_PROPAGATION_CHECK_INTERVAL_MS = 2_500
ISR_CHANGE_PROPAGATION_BLACK_OUT_MS = 5_000
ISR_CHANGE_PROPAGATION_INTERVAL_MS = 60_000


class PropagationOutcome(enum.Enum):
    WRITTEN = "written"
    FORCED = "forced"
    DEFERRED = "deferred"


@dataclass(frozen=True, slots=True)
class PropagationCheck:
    """What a check decided: an outcome, and for WRITTEN/FORCED the partitions to write."""

    outcome: PropagationOutcome | None
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(slots=True)
class IsrChangePropagation:
    start_ms: int
    isr_change_set: set[TopicPartition] = field(default_factory=set)
    last_isr_change_ms: int = 0
    last_isr_propagation_ms: int = 0
    first_pending_change_ms: int | None = None
    in_flight: frozenset[TopicPartition] | None = None
    outcomes: dict[PropagationOutcome, int] = field(
        default_factory=lambda: dict.fromkeys(PropagationOutcome, 0)
    )
    delay_seconds: Histogram = field(default_factory=lambda: Histogram(PROPAGATION_BUCKETS_SECONDS))
    propagation_failures_total: int = 0

    def __post_init__(self) -> None:
        # Both timestamps start at the broker's start time, as Kafka's do.
        self.last_isr_change_ms = self.start_ms
        self.last_isr_propagation_ms = self.start_ms

    @property
    def pending(self) -> int:
        return len(self.isr_change_set) + (len(self.in_flight) if self.in_flight else 0)

    def record(self, tp: TopicPartition, now_ms: int) -> None:
        """``recordIsrChange``: called after every successful leader-initiated ISR write."""
        self.isr_change_set.add(tp)
        self.last_isr_change_ms = now_ms
        if self.first_pending_change_ms is None:
            self.first_pending_change_ms = now_ms

    def check(self, now_ms: int) -> PropagationCheck:
        """The periodic task. With WRITTEN/FORCED the caller writes the znode, then calls
        ``propagated`` or ``failed``; no second write starts while one is in flight."""
        if not self.isr_change_set or self.in_flight is not None:
            return PropagationCheck(None)
        quiet = self.last_isr_change_ms + ISR_CHANGE_PROPAGATION_BLACK_OUT_MS < now_ms
        overdue = self.last_isr_propagation_ms + ISR_CHANGE_PROPAGATION_INTERVAL_MS < now_ms
        if not (quiet or overdue):
            self.outcomes[PropagationOutcome.DEFERRED] += 1
            return PropagationCheck(PropagationOutcome.DEFERRED)
        outcome = PropagationOutcome.WRITTEN if quiet else PropagationOutcome.FORCED
        self.outcomes[outcome] += 1
        self.in_flight = frozenset(self.isr_change_set)
        self.isr_change_set.clear()
        return PropagationCheck(outcome, self.in_flight)

    def propagated(self, now_ms: int) -> None:
        assert self.in_flight is not None, "no propagation in flight"
        self.in_flight = None
        self.last_isr_propagation_ms = now_ms
        if self.first_pending_change_ms is not None:
            self.delay_seconds.observe((now_ms - self.first_pending_change_ms) / 1000)
        # Changes recorded while the write was in flight start a new pending period.
        self.first_pending_change_ms = self.last_isr_change_ms if self.isr_change_set else None

    def failed(self) -> None:
        """The znode could not be written: keep the partitions for the next check."""
        assert self.in_flight is not None, "no propagation in flight"
        self.isr_change_set |= self.in_flight
        self.in_flight = None
        self.propagation_failures_total += 1
