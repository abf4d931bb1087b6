"""What the Kafka roles need to know of the configuration, with Kafka's names and defaults.

Field names are Kafka's keys with dots turned into underscores (``replica.lag.time.max.ms`` is
``replica_lag_time_max_ms``). Defaults are Kafka 2.4.1's (the behaviour baseline), except the
durability defaults actorlog chooses on purpose: topics get replication factor 3 and
``min.insync.replicas=2`` unless configured otherwise. Parsing the keys from properties files,
flags and the environment is ``ops/config.py``'s job; these dataclasses only hold validated values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["BrokerConfig", "ProtocolFault", "TopicPolicy"]


class ProtocolFault(enum.Enum):
    """Deliberate protocol bugs, for the simulation's negative controls only: a checker that
    catches nothing proves nothing, so each of these must be caught within a few seeds
    (``tests/sim/test_negative_controls.py``). No configuration key, flag or environment
    variable sets them (``ops/config.py`` never does); only code building a ``BrokerConfig``
    by hand can, and only the simulation does."""

    # A follower truncates to its high watermark as it becomes one, and again instead of asking
    # the leader by leader epoch (the pre-KIP-101 rule, whose two losses KIP-101 describes).
    TRUNCATE_TO_HIGH_WATERMARK = "truncate-to-high-watermark"
    # An acks=all append is accepted and acknowledged whatever the ISR size.
    SKIP_MIN_INSYNC_CHECK = "skip-min-insync-check"
    # An offline partition's new leader is the first live replica, in the ISR or not.
    ELECT_OUTSIDE_ISR = "elect-outside-isr"
    # A partition actor restarted by its supervisor serves the ISR of its last LeaderAndIsr.
    FORGET_ISR_ON_RESTART = "forget-isr-on-restart"


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPolicy:
    """The replication settings of one topic (broker defaults overridden by topic config)."""

    min_insync_replicas: int = 2
    unclean_leader_election_enable: bool = False

    def __post_init__(self) -> None:
        if self.min_insync_replicas < 1:
            raise ValueError("min.insync.replicas must be at least 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    broker_id: int
    # ISR maintenance (docs/defaults.md §1). Kafka 2.5+ raised the lag default to 30000.
    replica_lag_time_max_ms: int = 10_000
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    # Follower fetching.
    num_replica_fetchers: int = 1
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_backoff_ms: int = 1_000
    replica_socket_timeout_ms: int = 30_000
    # Topic defaults.
    default_replication_factor: int = 3
    num_partitions: int = 1
    delete_topic_enable: bool = True
    # Kafka's default is true; here topics are created on purpose (a typo in a producer's topic
    # name must not create an RF-3 topic). Set true for Kafka's behaviour.
    auto_create_topics_enable: bool = False
    min_insync_replicas: int = 2
    unclean_leader_election_enable: bool = False
    message_max_bytes: int = 1_000_012
    # Requests.
    request_timeout_ms: int = 30_000
    # ZooKeeper session (Kafka 2.5+ raised the default to 18000).
    zookeeper_session_timeout_ms: int = 6_000
    zookeeper_connection_timeout_ms: int = 6_000
    # Controller.
    controller_socket_timeout_ms: int = 30_000
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    # Log maintenance tasks.
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_flush_start_offset_checkpoint_interval_ms: int = 60_000
    log_retention_check_interval_ms: int = 300_000
    log_flush_scheduler_interval_ms: int = 9_223_372_036_854_775_807
    # The group coordinator (docs/consumer-groups.md §8).
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    group_initial_rebalance_delay_ms: int = 3_000
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2_147_483_647
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    offsets_commit_timeout_ms: int = 5_000
    # The simulation's negative controls (see ProtocolFault); never set from configuration.
    protocol_faults: frozenset[ProtocolFault] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.broker_id < 0:
            raise ValueError("broker.id must be >= 0")
        for name in ("replica_lag_time_max_ms", "num_replica_fetchers", "replica_fetch_max_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name.replace('_', '.')} must be positive")
        if self.replica_fetch_wait_max_ms >= self.replica_socket_timeout_ms:
            # Kafka's own check: a fetch must not outlive the socket timeout.
            raise ValueError("replica.fetch.wait.max.ms must be less than replica.socket.timeout.ms")

    @property
    def isr_expiration_interval_ms(self) -> int:
        """Kafka's isr-expiration task period: replica.lag.time.max.ms / 2 (integer division)."""
        return self.replica_lag_time_max_ms // 2

    def topic_policy(self) -> TopicPolicy:
        return TopicPolicy(
            min_insync_replicas=self.min_insync_replicas,
            unclean_leader_election_enable=self.unclean_leader_election_enable,
        )
