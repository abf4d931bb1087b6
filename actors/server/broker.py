"""BrokerActor: a broker's front door and its replica manager.

Theory of operation
-------------------
*Requests.* Kafka requests (Produce, Fetch, ListOffsets, OffsetsForLeaderEpoch) name many
partitions. The broker asks each partition actor for its part, gathers the answers and replies with
one response (``broker_requests.py``). A partition not hosted here answers NOT_LEADER_OR_FOLLOWER if
the metadata knows it, UNKNOWN_TOPIC_OR_PARTITION otherwise. Metadata requests are answered from
the metadata cache. A fetch that finds too little data is *parked*: the broker asks its partitions
to notify it once (``NotifyOnChange``), re-reads them on ``PartitionChanged`` and answers when there
is enough, when a follower's HW moved (KIP-392), or when ``max_wait_ms`` passes.

*Controller requests.* LeaderAndIsr, UpdateMetadata and StopReplica carry the controller epoch: a
lower one than the highest seen is answered STALE_CONTROLLER_EPOCH for the whole request; an older
broker epoch than our registration's, or none (-1: Kafka lets that through, we do not), is
STALE_BROKER_EPOCH. A controller epoch never seen before is checked against ZooKeeper first: the
request waits (with the controller's later ones, in order) until ``/controller`` and
``/controller_epoch`` are read; it is applied only if they name its controller id and epoch, else
answered STALE_CONTROLLER_EPOCH. So a request forged with a future epoch cannot fence the real
controller, nor a stale one act (docs/security.md). In LeaderAndIsr each partition is then
fenced on its leader epoch (only a higher epoch is applied; an equal or lower one answers
STALE_CONTROLLER_EPOCH for that partition, as Kafka 2.4 does). Leaders stop being fetched and become
leader; followers whose leader is alive become followers and are handed to the replica fetcher of
``(leader, fetcher id)``, created on demand; fetchers left with nothing are stopped. The per
partition part lives in ``replica_manager.py`` (the hosted partitions and their roles) and
``fetcher/manager.py`` (the replica fetchers); the request-level fencing stays here.

*Replica manager duties.* ``isr-expiration`` every ``replica.lag.time.max.ms / 2`` ticks the led
partitions; successful leader ISR writes are recorded in ``isr_change_set`` and propagated by the
``isr-change-propagation`` task every 2500 ms (``isr_propagation.py``); the high watermark checkpoint
is written every ``replica.high.watermark.checkpoint.interval.ms`` once the first LeaderAndIsr has
been handled; recovery points and log start offsets every 60 s; retention every 300 s. Checkpoint
files are captured on the loop and written (fsync) in a worker thread.

*Replication quotas* (docs/replication-quotas.md). The broker holds its leader and follower
quotas (``replication_quota.py``): rates from ``BrokerConfigChanged`` (the ``topic-configs``
child reads ``/config/brokers/<id>`` and ``<default>``), throttled partitions from each topic's
config. On a follower fetch, a throttled partition is read with ``leader_throttled`` while the
leader quota is exceeded (the partition withholds its records from a replica outside the ISR),
and the bytes sent for throttled partitions are recorded; the follower quota is shared with the
replica fetchers, which apply it themselves.

*Registration.* A ``BrokerRegistrationActor`` child keeps ``/brokers/ids/<id>`` registered across
ZooKeeper sessions and reports the broker epoch.

Statistics (and Kafka's BrokerState numbers): ``broker_statistics.py``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, assert_never

from actors.common.client_protocol import CreatableTopic, CreateTopicsRequest
from actors.common.errors import ErrorCode
from actors.common.names import (
    ADMIN_ACTOR_NAME,
    CONTROLLER_ACTOR_NAME,
    REGISTRATION_ACTOR_NAME,
    TOPIC_CONFIGS_ACTOR_NAME,
    broker_node,
)
from actors.common.protocol import (
    FetchRequest,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsRequest,
    MetadataRequest,
    MetadataResponse,
    OffsetsForLeaderEpochRequest,
    PartitionError,
    ProduceRequest,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from actors.common.topic_names import validate_topic_name
from actors.common.types import TopicPartition
from actors.controller.controller import EnableTopicUncleanLeaderElection
from actors.group.coordinator_actor import GroupCoordinatorStarted
from actors.server import zk_data
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
)
from actors.server.config import BrokerConfig, TopicPolicy
from actors.server.controller_gate import (
    ControllerRead,
    ControllerRequest,
    ControllerRequestGate,
    ReadControllerAgain,
    TopicConfigsReady,
    answer,
)
from actors.server.fetch_purgatory import FetchExpired
from actors.server.metadata_cache import MetadataCache
from actors.server.registration import (
    BrokerRegistered,
    BrokerRegistrationActor,
    BrokerRegistrationFailed,
    RestartSeen,
    SessionLost,
    SessionSuspended,
)
from actors.server.replica.messages import (
    IsrChangeRecorded,
    PartitionChanged,
)
from actors.server.replica_manager import HostedPartitions, PartitionDeleted
from actors.server.replication_quota import ReplicationQuotas
from actors.server.request_fanout import PartitionReply, RequestFanOut
from actors.server.state_changes import StateChangeLog
from actors.server.topic_config_manager import (
    BrokerConfigChanged,
    TopicConfigChanged,
    TopicConfigManagerActor,
)
from runtime.actor import Actor
from runtime.context import Context
from runtime.coordination.base import Coordinator
from runtime.histogram import Histogram
from runtime.messages import Requester
from runtime.ref import ActorRef
from runtime.storage.config import LogConfig
from runtime.storage.log_manager import LogManager
from runtime.supervision import SupervisorStrategy
from runtime.transport.addresses import AddressBook

__all__ = ["BrokerActor", "BrokerMessage", "BrokerState", "BrokerStatistics"]


# ------------------------------------------------------------------------------ private messages


@dataclass(frozen=True, slots=True)
class _AutoCreated:
    """The admin actor is done with topics this broker asked it to create (auto-creation)."""

    topics: tuple[str, ...]


@dataclass(slots=True)
class _PendingDeletion:
    """A StopReplica(delete) answered once every partition's log is gone (Kafka answers after
    renaming each log directory for deletion): the controller completes a topic's deletion only
    when every replica says so."""

    requester: Requester | None
    started: int
    partitions: tuple[TopicPartition, ...]
    errors: dict[TopicPartition, ErrorCode]


BrokerMessage: TypeAlias = (
    ProduceRequest
    | FetchRequest
    | ListOffsetsRequest
    | OffsetsForLeaderEpochRequest
    | MetadataRequest
    | LeaderAndIsrRequest
    | UpdateMetadataRequest
    | StopReplicaRequest
    | IsrChangeRecorded
    | PartitionChanged
    | BrokerRegistered
    | SessionSuspended
    | SessionLost
    | BrokerRegistrationFailed
    | PartitionReply
    | FetchExpired
    | IsrExpirationTick
    | PropagationTick
    | PropagationDone
    | ControllerRead
    | ReadControllerAgain
    | CheckpointTick
    | CheckpointDone
    | RetentionTick
    | FlushTick
    | TopicConfigsReady
    | TopicConfigChanged
    | BrokerConfigChanged
    | _AutoCreated
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
        self.registration = registration
        self.address_book = address_book
        self.metadata = MetadataCache()
        self.metadata.cluster_id = cluster_id
        # The replication quotas (docs/replication-quotas.md): the leader side is applied here
        # on follower fetches; the follower side is shared with this node's replica fetchers.
        self.quotas = ReplicationQuotas(config.broker_id)
        self._last_now_ms = 0
        self.hosted = HostedPartitions(
            config=config,
            log_manager=log_manager,
            coordinator=coordinator,
            metadata=self.metadata,
            topic_config=topic_config or self._topic_settings_of,
            state_changes=state_changes,
            group_coordinator=group_coordinator,
            follower_quota=self.quotas.follower,
        )
        self.request_metrics = RequestMetrics()
        self.requests = RequestFanOut(
            config=config,
            hosted=self.hosted,
            metadata=self.metadata,
            leader_quota=self.quotas.leader,
            request_metrics=self.request_metrics,
        )
        self.state_changes = state_changes
        self._fixed_topic_config = topic_config is not None
        # Each topic's (policy, log config), as last read from ZooKeeper.
        self.topic_settings: dict[str, tuple[TopicPolicy, LogConfig]] = {}
        # Controller requests waiting behind a LeaderAndIsr whose topics' configs are being read,
        # in arrival order (the controller's order is the order they take effect in).
        self._auto_creating: set[str] = set()
        self.gate = ControllerRequestGate(
            coordinator=coordinator,
            request_timeout_ms=config.request_timeout_ms,
            request_metrics=self.request_metrics,
            missing_topic_configs=self._missing_topic_configs,
            apply=self._apply_controller_request,
        )
        self._deletion_ids = itertools.count(1)
        self._pending_deletions: dict[int, _PendingDeletion] = {}
        self.registered = False
        self.has_current_metadata = False
        self.state = BrokerState.STARTING
        self.tasks = BrokerTasks(
            config=config,
            log_manager=log_manager,
            coordinator=coordinator,
            hosted=self.hosted,
            state_changes=state_changes,
        )
        self.zookeeper_expires_total = 0
        self.zookeeper_disconnects_total = 0
        self._registration_ref: ActorRef | None = None

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
        if not self._fixed_topic_config:
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
        self._registration_ref = ctx.spawn(
            REGISTRATION_ACTOR_NAME,
            lambda: BrokerRegistrationActor(
                self.coordinator,
                self.registration,
                session_timeout_ms=self.config.zookeeper_session_timeout_ms,
                subscriber=ctx.self_ref,
            ),
        )
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
                self._count_request(ctx, "Metadata", ctx.now_ns)
                ctx.reply(self._metadata_response(ctx, message))
            case LeaderAndIsrRequest() | UpdateMetadataRequest() | StopReplicaRequest():
                self.gate.hold(ctx, message)
            case IsrChangeRecorded():
                self.tasks.isr_change_recorded(message.tp, ctx.now_ms)
            case PartitionChanged():
                self.requests.purgatory.partition_changed(ctx, message)
            case BrokerRegistered():
                self._on_registered(ctx, message)
            case SessionSuspended():
                self.zookeeper_disconnects_total += 1
            case SessionLost():
                self._on_session_lost(ctx)
            case BrokerRegistrationFailed():
                # Alive but unregistered, the controller counts this broker dead while it keeps
                # answering clients and followers: exit, so the supervisor starts it again.
                ctx.halt_node(f"broker registration failed: {message.reason}")
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
            case ControllerRead():
                self.gate.controller_read(ctx, message)
            case ReadControllerAgain():
                self.gate.release(ctx)
            case _AutoCreated():
                self._auto_creating.difference_update(message.topics)
            case TopicConfigsReady():
                self._on_topic_configs_ready(ctx, message)
            case PartitionDeleted():
                self._on_partition_deleted(ctx, message)
            case GroupCoordinatorStarted():
                self.hosted.elect_offsets_partitions_again(ctx)
            case TopicConfigChanged():
                self.topic_settings[message.topic] = (message.policy, message.log_config)
                self._update_topic_quotas(message.topic, message.log_config)
                self.hosted.update_topic_config(ctx, message.topic, message.policy, message.log_config)
                if message.policy.unclean_leader_election_enable:
                    # Kafka's TopicConfigHandler: the controller (if it runs here) elects the
                    # topic's offline partitions now that an unclean leader is allowed.
                    controller = ActorRef(node_id=ctx.self_ref.node_id, name=CONTROLLER_ACTOR_NAME)
                    ctx.tell(controller, EnableTopicUncleanLeaderElection(message.topic))
            case BrokerConfigChanged():
                self.quotas.update_rates(
                    message.settings.leader_replication_throttled_rate,
                    message.settings.follower_replication_throttled_rate,
                )
            case _:
                assert_never(message)

    # ---------------------------------------------------------------------- request plumbing

    def _count_request(self, ctx: Context[BrokerMessage], kind: str, started_ns: int) -> None:
        self.request_metrics.count_request(kind, ctx.now_ns - started_ns)

    def _count_error(self, kind: str, error: ErrorCode) -> None:
        self.request_metrics.count_error(kind, error)

    def _metadata_response(self, ctx: Context[BrokerMessage], request: MetadataRequest) -> MetadataResponse:
        """Kafka's Metadata; with ``auto.create.topics.enable`` and a request that allows it, named
        topics that do not exist are created (with the broker defaults) through this node's admin
        actor and answered LEADER_NOT_AVAILABLE until they have leaders, and a name that cannot be
        a topic's is answered INVALID_TOPIC_EXCEPTION, as Kafka does."""
        response = self.metadata.response(request.topics)
        if not (
            self.config.auto_create_topics_enable and request.allow_auto_topic_creation and request.topics
        ):
            return response
        unknown = [t.name for t in response.topics if t.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        missing = [name for name in unknown if validate_topic_name(name) is None]
        if not unknown:
            return response
        fresh = [name for name in missing if name not in self._auto_creating]
        if fresh:
            self._auto_creating.update(fresh)
            ctx.ask(
                ActorRef(node_id=ctx.self_ref.node_id, name=ADMIN_ACTOR_NAME),
                CreateTopicsRequest(topics=tuple(CreatableTopic(name=name) for name in fresh)),
                timeout_ms=self.config.request_timeout_ms,
                on_reply=lambda _reply: _AutoCreated(tuple(fresh)),
                on_failure=lambda _failure: _AutoCreated(tuple(fresh)),
            )
        answered = {
            name: ErrorCode.LEADER_NOT_AVAILABLE if name in missing else ErrorCode.INVALID_TOPIC_EXCEPTION
            for name in unknown
        }
        return dataclasses.replace(
            response,
            topics=tuple(
                dataclasses.replace(t, error_code=answered[t.name]) if t.name in answered else t
                for t in response.topics
            ),
        )

    # -------------------------------------------------------------------- controller requests

    def _missing_topic_configs(self, request: ControllerRequest) -> list[str]:
        """A LeaderAndIsr's topics whose configs have not been read from ZooKeeper yet."""
        if not isinstance(request, LeaderAndIsrRequest) or self._fixed_topic_config:
            return []
        return sorted({s.topic for s in request.partition_states} - self.topic_settings.keys())

    def _topic_settings_of(self, topic: str) -> tuple[TopicPolicy, LogConfig]:
        settings = self.topic_settings.get(topic)
        if settings is not None:
            return settings
        return self.config.topic_policy(), self.log_manager.config_for(topic)

    def _apply_controller_request(
        self, ctx: Context[Any], request: ControllerRequest, requester: Requester | None, started: int
    ) -> None:
        match request:
            case LeaderAndIsrRequest():
                self._apply_leader_and_isr(ctx, request, requester, started)
            case UpdateMetadataRequest():
                self._apply_update_metadata(ctx, request, requester, started)
            case StopReplicaRequest():
                self._apply_stop_replica(ctx, request, requester, started)
            case _:
                assert_never(request)

    def _on_topic_configs_ready(self, ctx: Context[BrokerMessage], message: TopicConfigsReady) -> None:
        if message.loaded is None:
            ctx.log.warning("topic configs not read yet; LeaderAndIsr waits and asks again")
        else:
            self.topic_settings.update(message.loaded.settings)
            for topic, (_, log_config) in message.loaded.settings.items():
                self._update_topic_quotas(topic, log_config)
        self.gate.topic_configs_read(ctx)

    def _update_topic_quotas(self, topic: str, log_config: LogConfig) -> None:
        self.quotas.update_topic(
            topic,
            log_config.leader_replication_throttled_replicas,
            log_config.follower_replication_throttled_replicas,
        )

    def _apply_leader_and_isr(
        self,
        ctx: Context[BrokerMessage],
        request: LeaderAndIsrRequest,
        requester: Requester | None,
        started: int,
    ) -> None:
        for endpoint in request.live_leaders:
            self.metadata.add_live_broker(endpoint)
            self.address_book.set(broker_node(endpoint.broker_id), endpoint.url)
        errors = [
            PartitionError(
                topic=state.topic,
                partition=state.partition,
                error_code=self.hosted.apply(ctx, state),
            )
            for state in request.partition_states
        ]
        self.hosted.stop_idle_fetchers(ctx)
        self.tasks.leader_and_isr_handled(ctx)
        answer(ctx, requester, LeaderAndIsrResponse(error_code=ErrorCode.NONE, partitions=tuple(errors)))
        self._count_request(ctx, "LeaderAndIsr", started)

    def _apply_update_metadata(
        self,
        ctx: Context[BrokerMessage],
        request: UpdateMetadataRequest,
        requester: Requester | None,
        started: int,
    ) -> None:
        self.metadata.update(request)
        if self.registered and any(b.broker_id == self.broker_id for b in request.live_brokers):
            # The controller has seen this incarnation: the cache now describes the cluster as it
            # is with this broker in it (what readiness may trust).
            self.has_current_metadata = True
            if self.registration.unclean_start:
                # ... and so handled its unclean start: a re-registration after a session expiry is
                # no restart a later controller must treat as a bounce (docs/controller.md §2).
                self.registration = dataclasses.replace(self.registration, unclean_start=False)
                self.log_manager.mark_seen()
                if self._registration_ref is not None:
                    ctx.tell(self._registration_ref, RestartSeen())
        for endpoint in request.live_brokers:
            self.address_book.set(broker_node(endpoint.broker_id), endpoint.url)
        answer(ctx, requester, UpdateMetadataResponse(error_code=ErrorCode.NONE))
        self._count_request(ctx, "UpdateMetadata", started)

    def _apply_stop_replica(
        self,
        ctx: Context[BrokerMessage],
        request: StopReplicaRequest,
        requester: Requester | None,
        started: int,
    ) -> None:
        if request.delete_partitions:
            self._delete_replicas(ctx, request, requester, started)
            return
        for tp in request.partitions:
            self.hosted.stop(ctx, tp)
        self.hosted.stop_idle_fetchers(ctx)
        answer(
            ctx,
            requester,
            StopReplicaResponse(
                error_code=ErrorCode.NONE,
                partitions=tuple(
                    PartitionError(topic=tp.topic, partition=tp.partition, error_code=ErrorCode.NONE)
                    for tp in request.partitions
                ),
            ),
        )
        self._count_request(ctx, "StopReplica", started)

    def _delete_replicas(
        self,
        ctx: Context[BrokerMessage],
        request: StopReplicaRequest,
        requester: Requester | None,
        started: int,
    ) -> None:
        request_id = next(self._deletion_ids)
        pending = _PendingDeletion(requester, started, request.partitions, {})
        self._pending_deletions[request_id] = pending
        for tp in request.partitions:
            # A topic deleted (and maybe created again) must not keep its old overrides.
            self.topic_settings.pop(tp.topic, None)
            error = self.hosted.delete(ctx, tp, timeout_ms=self.config.request_timeout_ms)
            if error is not None:
                pending.errors[tp] = error
        self.hosted.stop_idle_fetchers(ctx)
        self._maybe_answer_deletion(ctx, request_id)

    def _on_partition_deleted(self, ctx: Context[BrokerMessage], message: PartitionDeleted) -> None:
        # Every deletion waiting for this partition (a repeated StopReplica waits for the first).
        waiting = [
            request_id
            for request_id, pending in self._pending_deletions.items()
            if message.tp in pending.partitions and message.tp not in pending.errors
        ]
        for request_id in waiting:
            self._pending_deletions[request_id].errors[message.tp] = message.error_code
        self.hosted.deleted(ctx, message)
        for request_id in waiting:
            self._maybe_answer_deletion(ctx, request_id)

    def _maybe_answer_deletion(self, ctx: Context[BrokerMessage], request_id: int) -> None:
        pending = self._pending_deletions[request_id]
        if len(pending.errors) < len(set(pending.partitions)):
            return
        del self._pending_deletions[request_id]
        failed = [tp for tp, error in pending.errors.items() if error is not ErrorCode.NONE]
        if failed:
            ctx.log.warning("StopReplica(delete) failed for %s", ", ".join(str(tp) for tp in sorted(failed)))
        answer(
            ctx,
            pending.requester,
            StopReplicaResponse(
                error_code=ErrorCode.NONE,
                partitions=tuple(
                    PartitionError(topic=tp.topic, partition=tp.partition, error_code=pending.errors[tp])
                    for tp in pending.partitions
                ),
            ),
        )
        self._count_request(ctx, "StopReplica", pending.started)

    # --------------------------------------------------------------------------- registration

    def _on_registered(self, ctx: Context[BrokerMessage], message: BrokerRegistered) -> None:
        self.registered = True
        ctx.log.info(
            "registered in ZooKeeper as broker %d (broker epoch %d)", message.broker_id, message.broker_epoch
        )
        self.gate.registered(ctx, message.broker_epoch)

    def _on_session_lost(self, ctx: Context[BrokerMessage]) -> None:
        self.registered = False
        self.has_current_metadata = False
        self.zookeeper_expires_total += 1
        ctx.log.warning("ZooKeeper session expired; the registration will be re-created")

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
            registered=self.registered,
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
            zookeeper_expires_total=self.zookeeper_expires_total,
            zookeeper_disconnects_total=self.zookeeper_disconnects_total,
            followed_out_of_isr=self._followed_out_of_isr(),
            has_current_metadata=self.has_current_metadata,
            offline_log_directories=int(self.log_manager.offline_reason is not None),
            log_recovery_actions=self.log_manager.recovery_report.counts(),
            log_recovery_truncated_bytes=self.log_manager.recovery_report.truncated_bytes,
            leader_replication_byte_rate=self.quotas.leader.byte_rate(measured_at),
            follower_replication_byte_rate=self.quotas.follower.byte_rate(measured_at),
            leader_replication_throttle_time_ms=self.quotas.leader.throttle_time_ms_total,
            follower_replication_throttle_time_ms=self.quotas.follower.throttle_time_ms_total,
        )

    def _followed_out_of_isr(self) -> tuple[str, ...]:
        """Partitions with a live leader that name this broker as a replica but not in their ISR,
        per the controller's latest UpdateMetadata."""
        me = self.broker_id
        return tuple(
            sorted(
                str(tp)
                for tp, state in self.metadata.partitions.items()
                if me in state.replicas and me not in state.isr and state.leader >= 0 and state.leader != me
            )
        )
