"""BrokerActor: a broker's front door. It only routes: each message goes to the object that owns
its job, and the actor holds them together (their effects go out through its context).

Collaborators (each "decides, records and tells" through this actor's context)
-----------------------------------------------------------------------------
* ``request_fanout.py``: Produce, Fetch, ListOffsets and OffsetsForLeaderEpoch, asked of each
  partition and gathered into one response (one table row per kind); ``fetch_purgatory.py``:
  fetches parked until data arrives, a follower's HW moves (KIP-392) or ``max_wait_ms`` passes.
* ``controller_gate.py``: LeaderAndIsr, UpdateMetadata and StopReplica in arrival order, checked
  against ZooKeeper when their controller epoch is new, held while a new topic's config is read,
  and fenced on controller and broker epoch (docs/security.md); ``controller_requests.py``
  applies those that pass.
* ``replica_manager.py``: the hosted partitions and their roles (``becomeLeaderOrFollower``,
  ``stopReplicas``) and the replica fetchers; ``replica_deletions.py``: StopReplica(delete)
  answered once every log is gone.
* ``broker_tasks.py``: isr-expiration, ISR change propagation, checkpoints (their only writer),
  retention and the flusher.
* ``topic_settings.py``: each topic's settings and throttled replicas;
  ``replication_quota.py``: the leader and follower replication quotas, whose rates come from
  ``BrokerConfigChanged`` (docs/replication-quotas.md); ``topic_auto_creation.py``: Metadata, with
  ``auto.create.topics.enable``.
* ``broker_registration.py``: the registration kept by a ``BrokerRegistrationActor`` child across
  ZooKeeper sessions, and whether the controller has seen it; a ``topic-configs`` child reads
  topic and broker configs.

An I/O error on the log dir halts the broker. Statistics: ``broker_statistics.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias, assert_never

from actors.common.names import (
    TOPIC_CONFIGS_ACTOR_NAME,
)
from actors.common.protocol import (
    FetchRequest,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetsForLeaderEpochRequest,
    ProduceRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from actors.group.coordinator_actor import GroupCoordinatorStarted
from actors.server import zk_data
from actors.server.broker_registration import BrokerRegistrationState, RegistrationEvent
from actors.server.broker_statistics import BrokerState, BrokerStatistics, RequestMetrics
from actors.server.broker_tasks import (
    BrokerTasks,
    CheckpointDone,
    CheckpointTick,
    FlushTick,
    IsrExpirationTick,
    PropagationDone,
    PropagationTick,
    RetentionTick,
    TaskMessage,
)
from actors.server.config import BrokerConfig, TopicPolicy
from actors.server.controller_gate import (
    ControllerRead,
    ControllerRequest,
    ControllerRequestGate,
    GateMessage,
    ReadControllerAgain,
    TopicConfigsReady,
)
from actors.server.controller_requests import ControllerRequestHandler
from actors.server.fetch_purgatory import FetchExpired
from actors.server.metadata_cache import MetadataCache
from actors.server.registration import (
    BrokerRegistered,
    BrokerRegistrationFailed,
    SessionLost,
    SessionSuspended,
)
from actors.server.replica.messages import (
    IsrChangeRecorded,
    PartitionChanged,
)
from actors.server.replica_deletions import ReplicaDeletions
from actors.server.replica_manager import HostedPartitions, PartitionDeleted
from actors.server.replication_quota import ReplicationQuotas
from actors.server.request_fanout import FanOutRequest, PartitionReply, RequestFanOut
from actors.server.state_changes import StateChangeLog
from actors.server.topic_auto_creation import AutoCreated, TopicAutoCreation
from actors.server.topic_config_manager import (
    BrokerConfigChanged,
    TopicConfigChanged,
    TopicConfigManagerActor,
)
from actors.server.topic_settings import TopicSettings
from runtime.actor import Actor
from runtime.context import Context
from runtime.coordination.base import Coordinator
from runtime.histogram import Histogram
from runtime.ref import ActorRef
from runtime.storage.config import LogConfig
from runtime.storage.log_manager import LogManager
from runtime.supervision import SupervisorStrategy
from runtime.transport.addresses import AddressBook

__all__ = ["BrokerActor", "BrokerMessage", "BrokerState", "BrokerStatistics"]


BrokerMessage: TypeAlias = (
    FanOutRequest
    | MetadataRequest
    | ControllerRequest
    | IsrChangeRecorded
    | PartitionChanged
    | RegistrationEvent
    | PartitionReply
    | FetchExpired
    | TaskMessage
    | GateMessage
    | TopicConfigsReady
    | TopicConfigChanged
    | BrokerConfigChanged
    | AutoCreated
    | PartitionDeleted
    | GroupCoordinatorStarted
)


class BrokerActor(Actor[BrokerMessage]):
    # From clients: the data path. From the controller: its three requests. From followers: Fetch and
    # OffsetsForLeaderEpoch. A Produce may also come as a tell: acks=0 wants no answer.
    remote_asks = frozenset(
        {
            ProduceRequest,
            FetchRequest,
            ListOffsetsRequest,
            OffsetsForLeaderEpochRequest,
            MetadataRequest,
            LeaderAndIsrRequest,
            UpdateMetadataRequest,
            StopReplicaRequest,
        }
    )
    remote_tells = frozenset({ProduceRequest})

    def __init__(
        self,
        *,
        config: BrokerConfig,
        log_manager: LogManager,
        coordinator: Coordinator,
        registration: zk_data.BrokerRegistration,
        address_book: AddressBook,
        topic_config: Callable[[str], tuple[TopicPolicy, LogConfig]] | None = None,
        cluster_id: str | None = None,
        state_changes: StateChangeLog | None = None,
        group_coordinator: ActorRef | None = None,
    ) -> None:
        """``group_coordinator``: the node's ``group-coordinator``, told of leadership changes of
        ``__consumer_offsets`` partitions (``replica_manager.py``, rule 6).
        ``topic_config``: a fixed lookup of each topic's settings (tests); without it the
        broker reads topic overrides from ZooKeeper through its ``topic-configs`` child.
        ``cluster_id``: what Metadata answers carry (``/cluster/id``)."""
        self.config = config
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.coordinator = coordinator
        self.state = BrokerState.STARTING
        self._last_now_ms = 0
        self.metadata = MetadataCache()
        self.metadata.cluster_id = cluster_id
        self.request_metrics = RequestMetrics()
        # The replication quotas (docs/replication-quotas.md): the leader side is applied on
        # follower fetches (request_fanout.py); the follower side is shared with the fetchers.
        self.quotas = ReplicationQuotas(config.broker_id)
        self.topic_settings = TopicSettings(
            config=config, log_manager=log_manager, quotas=self.quotas, fixed=topic_config
        )
        self.hosted = HostedPartitions(
            config=config,
            log_manager=log_manager,
            coordinator=coordinator,
            metadata=self.metadata,
            topic_config=self.topic_settings.of,
            state_changes=state_changes,
            group_coordinator=group_coordinator,
            follower_quota=self.quotas.follower,
        )
        self.requests = RequestFanOut(
            config=config,
            hosted=self.hosted,
            metadata=self.metadata,
            leader_quota=self.quotas.leader,
            request_metrics=self.request_metrics,
        )
        self.auto_creation = TopicAutoCreation(config=config, metadata=self.metadata)
        self.tasks = BrokerTasks(
            config=config,
            log_manager=log_manager,
            coordinator=coordinator,
            hosted=self.hosted,
            state_changes=state_changes,
        )
        timeout_ms = config.request_timeout_ms
        self.deletions = ReplicaDeletions(
            hosted=self.hosted, request_timeout_ms=timeout_ms, request_metrics=self.request_metrics
        )
        self.controller_requests = ControllerRequestHandler(
            broker_id=config.broker_id,
            hosted=self.hosted,
            metadata=self.metadata,
            address_book=address_book,
            tasks=self.tasks,
            deletions=self.deletions,
            topic_settings=self.topic_settings,
            request_metrics=self.request_metrics,
            registered=lambda: self.registration.registered,
            seen_by_controller=lambda ctx: self.registration.seen_by_controller(ctx),
        )
        self.gate = ControllerRequestGate(
            coordinator=coordinator,
            request_timeout_ms=timeout_ms,
            request_metrics=self.request_metrics,
            missing_topic_configs=self.topic_settings.missing,
            apply=self.controller_requests.apply,
        )
        self.registration = BrokerRegistrationState(
            coordinator=coordinator,
            registration=registration,
            log_manager=log_manager,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            on_registered=self.gate.registered,
        )

    @property
    def registered(self) -> bool:
        return self.registration.registered

    @property
    def has_current_metadata(self) -> bool:
        return self.registration.has_current_metadata

    @property
    def controller_epoch(self) -> int:
        return self.gate.controller_epoch

    @property
    def broker_epoch(self) -> int:
        return self.gate.broker_epoch

    @property
    def forged_controller_requests_total(self) -> int:
        return self.gate.forged_controller_requests_total

    # ------------------------------------------------------------------------------ lifecycle

    def on_start(self, ctx: Context[BrokerMessage]) -> None:
        if self.topic_settings.fixed is None:
            broker = ctx.self_ref
            ctx.spawn(
                TOPIC_CONFIGS_ACTOR_NAME,
                lambda: TopicConfigManagerActor(
                    config=self.config,
                    coordinator=self.coordinator,
                    default_log_config=self.log_manager.default_config,
                    broker=broker,
                ),
                supervision=SupervisorStrategy.restart(),
            )
        self.registration.start(ctx)
        self.tasks.start(ctx)
        self.state = BrokerState.RUNNING

    # -------------------------------------------------------------------------------- dispatch

    def receive(self, ctx: Context[BrokerMessage], message: BrokerMessage) -> None:
        self._last_now_ms = ctx.now_ms
        try:
            self._dispatch(ctx, message)
        except OSError as error:
            self._log_dir_failed(ctx, error)

    def _log_dir_failed(self, ctx: Context[BrokerMessage], error: OSError) -> None:
        """Kafka's log-dir failure with one log dir: the broker halts (a restarted broker actor
        would forget every partition it hosts while ZooKeeper still names it leader)."""
        self.log_manager.mark_offline(str(error))
        ctx.log.error("I/O error in log dir %s: %s; halting the broker", self.log_manager.log_dir, error)
        ctx.halt_node(f"log directory {self.log_manager.log_dir} failed: {error}")

    def _dispatch(self, ctx: Context[BrokerMessage], message: BrokerMessage) -> None:
        match message:
            case ProduceRequest() | FetchRequest() | ListOffsetsRequest() | OffsetsForLeaderEpochRequest():
                self.requests.start(ctx, message)
            case MetadataRequest():
                self.request_metrics.count_request("Metadata", 0)
                ctx.reply(self.auto_creation.metadata_response(ctx, message))
            case LeaderAndIsrRequest() | UpdateMetadataRequest() | StopReplicaRequest():
                self.gate.hold(ctx, message)
            case IsrChangeRecorded():
                self.tasks.isr_change_recorded(message.tp, ctx.now_ms)
            case PartitionChanged():
                self.requests.purgatory.partition_changed(ctx, message)
            case BrokerRegistered() | SessionSuspended() | SessionLost() | BrokerRegistrationFailed():
                self.registration.receive(ctx, message)
            case PartitionReply():
                self.requests.partition_replied(ctx, message)
            case FetchExpired():
                self.requests.purgatory.expired(ctx, message)
            case (
                IsrExpirationTick()
                | PropagationTick()
                | PropagationDone()
                | CheckpointTick()
                | CheckpointDone()
                | RetentionTick()
                | FlushTick()
            ):
                self.tasks.receive(ctx, message)
            case ControllerRead() | ReadControllerAgain():
                self.gate.receive(ctx, message)
            case AutoCreated():
                self.auto_creation.created(message)
            case TopicConfigsReady():
                self.topic_settings.read(ctx, message)
                self.gate.topic_configs_read(ctx)
            case PartitionDeleted():
                self.deletions.partition_deleted(ctx, message)
            case GroupCoordinatorStarted():
                self.hosted.elect_offsets_partitions_again(ctx)
            case TopicConfigChanged():
                self.topic_settings.changed(ctx, self.hosted, message)
            case BrokerConfigChanged():
                self.quotas.update_rates(
                    message.settings.leader_replication_throttled_rate,
                    message.settings.follower_replication_throttled_rate,
                )
            case _:
                assert_never(message)

    # ------------------------------------------------------------------------------ statistics

    def statistics(self, now_ms: int | None = None) -> BrokerStatistics:
        """``now_ms``: the time the quota byte rates are measured at (the last message's otherwise)."""
        propagation = self.tasks.propagation
        measured_at = self._last_now_ms if now_ms is None else now_ms
        metrics = self.request_metrics
        return BrokerStatistics(
            broker_id=self.broker_id,
            broker_state=self.state,
            broker_epoch=self.gate.broker_epoch,
            registered=self.registration.registered,
            controller_epoch=self.gate.controller_epoch,
            controller_id=self.metadata.controller_id,
            live_brokers=tuple(sorted(self.metadata.live_brokers)),
            hosted_partitions=len(self.hosted),
            fetchers=len(self.hosted.fetcher_manager),
            parked_fetches=len(self.requests.purgatory),
            pending_requests=len(self.requests),
            propagation_outcomes={o.value: n for o, n in propagation.outcomes.items()} if propagation else {},
            pending_isr_changes=propagation.pending if propagation else 0,
            propagation_failures_total=propagation.propagation_failures_total if propagation else 0,
            propagation_delay=propagation.delay_seconds.snapshot() if propagation else Histogram().snapshot(),
            request_durations={kind: h.snapshot() for kind, h in metrics.request_durations.items()},
            requests_total=dict(metrics.requests_total),
            request_errors_total=dict(metrics.request_errors_total),
            zookeeper_expires_total=self.registration.zookeeper_expires_total,
            zookeeper_disconnects_total=self.registration.zookeeper_disconnects_total,
            followed_out_of_isr=self.metadata.followed_out_of_isr(self.broker_id),
            has_current_metadata=self.registration.has_current_metadata,
            offline_log_directories=int(self.log_manager.offline_reason is not None),
            log_recovery_actions=self.log_manager.recovery_report.counts(),
            log_recovery_truncated_bytes=self.log_manager.recovery_report.truncated_bytes,
            leader_replication_byte_rate=self.quotas.leader.byte_rate(measured_at),
            follower_replication_byte_rate=self.quotas.follower.byte_rate(measured_at),
            leader_replication_throttle_time_ms=self.quotas.leader.throttle_time_ms_total,
            follower_replication_throttle_time_ms=self.quotas.follower.throttle_time_ms_total,
        )
