"""Replication quotas (Kafka's ``ReplicationQuotaManager``): byte-rate bounds on throttled replicas.

What this module owns, pure and clock-driven (time enters as ``now_ms``):

* ``SampledRate`` — Kafka's ``SimpleRate`` over a windowed sum: bytes recorded into up to
  ``samples`` windows of ``window_ms`` each (11 × 1 s for replication); the rate is the sum of the
  live windows divided by the time since the oldest one started (at least one window). A window
  older than ``samples × window_ms`` is forgotten, so an idle second drags the rate down.
* ``ReplicationQuota`` — one side's bound (``leader.replication.throttled.rate`` or
  ``follower.replication.throttled.rate``, Long.MAX = unbounded) and its throttled partitions per
  topic (from ``*.replication.throttled.replicas``); ``is_exceeded`` is Kafka's quota check (the
  measured rate above the bound). It also counts how long it has been seen exceeded (the
  ``throttle_time`` metric: time between two checks that both found it exceeded).
* ``throttled_partitions(value, broker_id)`` — Kafka's ``parseThrottledPartitions``: ``*`` is every
  partition; otherwise the partitions of the ``partition:broker`` items naming this broker.

Rules the callers keep (docs/replication-quotas.md): bytes of throttled partitions are always
recorded, in sync or not; an in-sync replica is never held back, so throttling can slow a
catching-up replica but never shrink the ISR.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from actors.common.types import TopicPartition

__all__ = [
    "ALL_PARTITIONS",
    "DEFAULT_NUM_QUOTA_SAMPLES",
    "DEFAULT_QUOTA_WINDOW_MS",
    "UNBOUNDED_RATE",
    "ReplicationQuota",
    "ReplicationQuotas",
    "SampledRate",
    "throttled_partitions",
]

UNBOUNDED_RATE: Final = 9_223_372_036_854_775_807  # Long.MAX: Kafka's "no throttle" rate
DEFAULT_NUM_QUOTA_SAMPLES: Final = 11  # 10 whole windows and the current one
DEFAULT_QUOTA_WINDOW_MS: Final = 1_000
ALL_PARTITIONS: Final = None
"""``throttled_partitions``'s answer for ``*``: every partition of the topic."""


@dataclass(slots=True)
class _Window:
    start_ms: int
    total: float = 0.0


class SampledRate:
    """Bytes per second over the last ``samples`` windows (Kafka's SimpleRate + WindowedSum)."""

    def __init__(
        self, *, samples: int = DEFAULT_NUM_QUOTA_SAMPLES, window_ms: int = DEFAULT_QUOTA_WINDOW_MS
    ) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a sampled rate needs at least one window of at least 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        self._windows: list[_Window] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._windows:
            self._windows.append(_Window(now_ms))
        window = self._windows[self._current]
        if now_ms - window.start_ms >= self.window_ms:
            # The current window is complete: the next one (re)starts now, replacing the oldest.
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._windows):
                self._windows.append(_Window(now_ms))
            else:
                self._windows[self._current] = _Window(now_ms)
            window = self._windows[self._current]
        window.total += value

    def measure(self, now_ms: int) -> float:
        """The rate in units per second at ``now_ms``."""
        self._purge(now_ms)
        if not self._windows:
            self._windows.append(_Window(now_ms))
        total = sum(window.total for window in self._windows)
        oldest = min(window.start_ms for window in self._windows)
        elapsed_ms = max(now_ms - oldest, self.window_ms)
        return total * 1000.0 / elapsed_ms

    def _purge(self, now_ms: int) -> None:
        """Windows that started ``samples × window_ms`` ago or more restart empty (Kafka's
        purgeObsoleteSamples: they no longer describe the recent past)."""
        expire_ms = self.samples * self.window_ms
        for index, window in enumerate(self._windows):
            if now_ms - window.start_ms >= expire_ms:
                self._windows[index] = _Window(now_ms)


@dataclass(slots=True)
class ReplicationQuota:
    """One side's quota: the bound, the throttled partitions, the measured byte rate."""

    bound: int = UNBOUNDED_RATE
    rate: SampledRate = field(default_factory=SampledRate)
    # topic -> throttled partition ids (None: all of them); absent topics are not throttled.
    throttled: dict[str, frozenset[int] | None] = field(default_factory=dict)
    bytes_total: int = 0
    throttle_time_ms_total: int = 0
    _last_exceeded_ms: int | None = None

    def is_throttled(self, tp: TopicPartition) -> bool:
        if tp.topic not in self.throttled:
            return False
        partitions = self.throttled[tp.topic]
        return partitions is ALL_PARTITIONS or tp.partition in partitions

    def record(self, size: int, now_ms: int) -> None:
        """Bytes moved for a throttled partition (counted whether or not they were over the bound)."""
        if size > 0:
            self.rate.record(size, now_ms)
            self.bytes_total += size

    def byte_rate(self, now_ms: int) -> float:
        return self.rate.measure(now_ms)

    def is_exceeded(self, now_ms: int) -> bool:
        exceeded = self.bound < UNBOUNDED_RATE and self.rate.measure(now_ms) > self.bound
        if exceeded:
            if self._last_exceeded_ms is not None and now_ms > self._last_exceeded_ms:
                self.throttle_time_ms_total += now_ms - self._last_exceeded_ms
            self._last_exceeded_ms = now_ms
        else:
            self._last_exceeded_ms = None
        return exceeded

    def mark_throttled(self, topic: str, partitions: frozenset[int] | None) -> None:
        """Replace the topic's throttled partitions (None = all; empty = none)."""
        if partitions is not ALL_PARTITIONS and not partitions:
            self.throttled.pop(topic, None)
        else:
            self.throttled[topic] = partitions

    def remove_topic(self, topic: str) -> None:
        self.throttled.pop(topic, None)


@dataclass(slots=True)
class ReplicationQuotas:
    """A broker's two replication quotas (Kafka's ``QuotaManagers.leader`` / ``.follower``)."""

    broker_id: int
    leader: ReplicationQuota = field(default_factory=ReplicationQuota)
    follower: ReplicationQuota = field(default_factory=ReplicationQuota)

    def update_topic(self, topic: str, leader_replicas: str, follower_replicas: str) -> None:
        """A topic's ``leader/follower.replication.throttled.replicas`` values, as now configured."""
        self.leader.mark_throttled(topic, throttled_partitions(leader_replicas, self.broker_id))
        self.follower.mark_throttled(topic, throttled_partitions(follower_replicas, self.broker_id))

    def update_rates(self, leader_rate: int, follower_rate: int) -> None:
        self.leader.bound = leader_rate
        self.follower.bound = follower_rate


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a throttled-replica list names for ``broker_id`` (None: ``*``, all).

    ``value`` has passed the topic config's validation (``runtime/storage/config.py``); an item
    naming another broker is someone else's throttle and is skipped."""
    items = [item.strip() for item in value.split(",")]
    if items[0] == "*":
        return ALL_PARTITIONS
    partitions: set[int] = set()
    for item in _non_empty(items):
        partition, _, broker = item.partition(":")
        if int(broker) == broker_id:
            partitions.add(int(partition))
    return frozenset(partitions)


def _non_empty(items: Iterable[str]) -> Iterable[str]:
    return (item for item in items if item)
