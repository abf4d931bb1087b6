"""What a broker reports: Kafka's BrokerState numbers, the statistics snapshot the metrics
collectors read at scrape time, and the per-request-kind counters behind it (docs/propagation.md
§3; request counts, errors and durations in the shape of ``kafka.network:type=RequestMetrics``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.common.errors import ErrorCode
from runtime.histogram import Histogram, HistogramSnapshot

__all__ = ["BrokerState", "BrokerStatistics", "RequestMetrics"]


class BrokerState:
    """Kafka's BrokerState numbers (the ``kafka_server_kafkaserver_brokerstate`` gauge) that a
    broker actor passes through: starting until its children and tasks are started, then running
    (a broker going away stops its process; no actor is left to report another state)."""

    STARTING = 1
    RUNNING = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerStatistics:
    broker_id: int
    broker_state: int
    broker_epoch: int
    registered: bool
    controller_epoch: int
    controller_id: int
    live_brokers: tuple[int, ...]
    hosted_partitions: int
    fetchers: int
    parked_fetches: int
    pending_requests: int
    propagation_outcomes: dict[str, int]
    pending_isr_changes: int
    propagation_failures_total: int
    propagation_delay: HistogramSnapshot
    request_durations: dict[str, HistogramSnapshot]
    requests_total: dict[str, int]
    request_errors_total: dict[tuple[str, str], int]
    zookeeper_expires_total: int
    zookeeper_disconnects_total: int
    # Partitions this broker follows whose ISR (as the controller last published it) lacks it:
    # readiness waits for none, so a rolling restart never takes a partition below min ISR.
    followed_out_of_isr: tuple[str, ...] = ()
    # An UpdateMetadata naming this broker live arrived since it (last) registered.
    has_current_metadata: bool = False
    # 1 once an I/O error took the (only) log dir offline; the broker halts right after.
    offline_log_directories: int = 0
    # What loading the log dir at start-up repaired: actions by kind, and bytes cut off segments.
    log_recovery_actions: dict[str, int] = field(default_factory=dict)
    log_recovery_truncated_bytes: int = 0
    # Replication quotas (docs/replication-quotas.md): bytes/s of throttled partitions over the
    # quota's 11 one-second windows, and how long each quota has been seen exceeded.
    leader_replication_byte_rate: float = 0.0
    follower_replication_byte_rate: float = 0.0
    leader_replication_throttle_time_ms: int = 0
    follower_replication_throttle_time_ms: int = 0


@dataclass(slots=True)
class RequestMetrics:
    """Requests handled, their durations and their errors, by request kind."""

    request_durations: dict[str, Histogram] = field(default_factory=dict)
    requests_total: dict[str, int] = field(default_factory=dict)
    request_errors_total: dict[tuple[str, str], int] = field(default_factory=dict)

    def count_request(self, kind: str, duration_ns: int) -> None:
        self.requests_total[kind] = self.requests_total.get(kind, 0) + 1
        histogram = self.request_durations.get(kind)
        if histogram is None:
            histogram = self.request_durations[kind] = Histogram()
        histogram.observe(duration_ns / 1e9)

    def count_error(self, kind: str, error: ErrorCode) -> None:
        key = (kind, error.name)
        self.request_errors_total[key] = self.request_errors_total.get(key, 0) + 1
