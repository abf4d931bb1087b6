"""ControllerActor: runs on every broker; one of them is the active controller at a time.

Theory of operation
-------------------
*Events.* Everything the controller reacts to — its own election, a watch firing, a controlled
shutdown request, the auto-rebalance tick — becomes an event in one FIFO queue, processed one at a
time (Kafka's ``ControllerEventManager``). Processing an event means driving its script
(``logic.py``) with the runtime's script driver in its one-at-a-time mode (``runtime/scripts.py``):
each ZooKeeper request the script yields is executed outside the actor and its result (or
exception) is fed back in. The broker requests it batched are sent whenever it waits on a step and
when it ends (Kafka sends after each state-machine step, not once per event). Queue size, time in
queue and processing time per event kind are measured.

*Activation.* ``Elect`` runs at start, when ``/controller`` changes, and when a new ZooKeeper
session is established. The winner bumps ``/controller_epoch`` and runs failover. A controller
*resigns* at once — without waiting in the queue — when its session is lost, and after any script
fails its fencing check (another controller has a higher epoch): its state is dropped, its pending
broker requests are discarded, and watches registered under the old activation are ignored (each
activation has a generation number).

*Broker channels.* Requests to a broker go through one channel per broker, one request in flight at
a time, in order; a failed send is retried every 100 ms until it succeeds or the broker is gone
(Kafka's ``ControllerChannelManager``). Each request carries the controller epoch and the target's
broker epoch.

*Failures inside scripts.* A lost connection (ConnectionLossError) re-queues the event at the head
and retries after a back-off while the session lives, except in the failover of an activation that
has already won (its context is half-built: it resigns and re-elects); a fencing failure resigns;
an unexpected error resigns too, and the controller re-elects — it never continues with a
half-applied event.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass
from typing import Any, TypeAlias, assert_never

from actors.common.errors import ErrorCode
from actors.common.names import broker_node, broker_ref
from actors.common.protocol import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    LeaderAndIsrResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    StopReplicaRequest,
    StopReplicaResponse,
)
from actors.common.types import BrokerId, TopicPartition
from actors.controller.logic import ControllerLogic, Script, Watched, WatchKind
from actors.controller.requests import BrokerRequest
from actors.server import zk_data
from actors.server.config import BrokerConfig, ProtocolFault
from actors.server.state_changes import StateChangeLog
from runtime.actor import Actor
from runtime.context import Context
from runtime.coordination.base import Coordinator, WatchEvent
from runtime.coordination.errors import ConnectionLossError, SessionExpiredError
from runtime.coordination.requests import FencedError, ZkExists, ZkGet
from runtime.coordination.session import SessionEvent, SessionState, Subscription
from runtime.histogram import Histogram, HistogramSnapshot
from runtime.messages import AskFailure, Requester
from runtime.scripts import Resume as ScriptResume
from runtime.scripts import ScriptRunner, ScriptStep
from runtime.transport.addresses import AddressBook

__all__ = [
    "ControllerActor",
    "ControllerMessage",
    "ControllerStatistics",
    "EnableTopicUncleanLeaderElection",
]

_CHANNEL_RETRY_MS = 100
_CONNECTION_RETRY_MS = 1_000
_AUTO_REBALANCE_FIRST_DELAY_MS = 5_000
# A replica whose StopReplica(delete) failed on a live broker is asked again after this.
_DELETION_RETRY_MS = 5_000


# ------------------------------------------------------------------------------------- events


# One dataclass per kind of event, named as Kafka's ControllerEvent (the name labels the
# processing-time metric). Every event knows when it was queued; only the requests carry a
# requester.


@dataclass(frozen=True, slots=True, kw_only=True)
class _Queued:
    enqueued_ns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Elect(_Queued):
    """/controller changed, a new session, or a resignation: compete (or check we still hold it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerChange(_Queued):
    """The children of /brokers/ids changed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicChange(_Queued):
    """The children of /brokers/topics changed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDeletion(_Queued):
    """The children of /admin/delete_topics changed (or a deletion retry is due)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrChangeNotification(_Queued):
    """A broker wrote an ISR change notification."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PreferredReplicaLeaderElection(_Queued):
    """/admin/preferred_replica_election was written."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoPreferredReplicaLeaderElection(_Queued):
    """The periodic imbalance check is due."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkPartitionReassignment(_Queued):
    """/admin/reassign_partitions was created."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionModifications(_Queued):
    topic: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionReassignmentIsrChange(_Queued):
    """The state znode of a reassigning partition changed."""

    tp: TopicPartition


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicUncleanLeaderElectionEnable(_Queued):
    topic: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDeletionStopReplicaResponseReceived(_Queued):
    """A StopReplica(delete) answer: the broker, the partitions asked, those that failed."""

    broker_id: BrokerId
    partitions: tuple[TopicPartition, ...]
    failed: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdown(_Queued):
    requester: Requester | None
    request: ControlledShutdownRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaLeaderElection(_Queued):
    """An admin request relayed by a broker's admin actor (its script returns the response)."""

    requester: Requester | None
    request: ElectLeadersRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiPartitionReassignment(_Queued):
    requester: Requester | None
    request: AlterPartitionReassignmentsRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class ListPartitionReassignments(_Queued):
    requester: Requester | None
    request: ListPartitionReassignmentsRequest


_Request: TypeAlias = (
    ControlledShutdown | ReplicaLeaderElection | ApiPartitionReassignment | ListPartitionReassignments
)
_Event: TypeAlias = (
    Elect
    | BrokerChange
    | TopicChange
    | TopicDeletion
    | IsrChangeNotification
    | PreferredReplicaLeaderElection
    | AutoPreferredReplicaLeaderElection
    | ZkPartitionReassignment
    | PartitionModifications
    | PartitionReassignmentIsrChange
    | TopicUncleanLeaderElectionEnable
    | TopicDeletionStopReplicaResponseReceived
    | _Request
)
# The events a timer or a watch raises with nothing but their time.
_Plain: TypeAlias = (
    type[Elect]
    | type[BrokerChange]
    | type[TopicChange]
    | type[TopicDeletion]
    | type[IsrChangeNotification]
    | type[PreferredReplicaLeaderElection]
    | type[AutoPreferredReplicaLeaderElection]
    | type[ZkPartitionReassignment]
)

_WATCH_EVENTS: dict[WatchKind, _Plain] = {
    WatchKind.CONTROLLER: Elect,
    WatchKind.BROKERS: BrokerChange,
    WatchKind.TOPICS: TopicChange,
    WatchKind.DELETE_TOPICS: TopicDeletion,
    WatchKind.ISR_CHANGES: IsrChangeNotification,
    WatchKind.PREFERRED_ELECTION: PreferredReplicaLeaderElection,
    WatchKind.PARTITION_REASSIGNMENT: ZkPartitionReassignment,
}


def _watch_event(kind: WatchKind, path: str, now_ns: int) -> _Event:
    """The event a fired watch raises (the two per-znode watches take their subject from the path)."""
    if kind is WatchKind.PARTITION_MODIFICATIONS:
        return PartitionModifications(enqueued_ns=now_ns, topic=path.rsplit("/", 1)[-1])
    if kind is WatchKind.PARTITION_REASSIGNMENT_ISR_CHANGE:
        return PartitionReassignmentIsrChange(enqueued_ns=now_ns, tp=_state_path_partition(path))
    return _WATCH_EVENTS[kind](enqueued_ns=now_ns)


def _event_name(event: _Event) -> str:
    return type(event).__name__


def _requester_of(event: _Event) -> Requester | None:
    match event:
        case (
            ControlledShutdown()
            | ReplicaLeaderElection()
            | ApiPartitionReassignment()
            | ListPartitionReassignments()
        ):
            return event.requester
        case _:
            return None


# ----------------------------------------------------------------------------- private messages


@dataclass(frozen=True, slots=True)
class _SessionChanged:
    event: SessionEvent


@dataclass(frozen=True, slots=True)
class _WatchFired:
    kind: WatchKind
    generation: int
    path: str = ""


@dataclass(frozen=True, slots=True)
class _ChannelReply:
    broker_id: BrokerId
    generation: int
    # Which channel sent it: a broker that died and came back gets a new channel, and an answer
    # to the old one's request must not pop the new one's.
    channel: int
    reply: Any


@dataclass(frozen=True, slots=True)
class _ChannelRetry:
    broker_id: BrokerId
    generation: int


@dataclass(frozen=True, slots=True)
class _Tick:
    event: _Plain


@dataclass(frozen=True, slots=True)
class _Resume:
    """The back-off after a lost connection is over: run the queue again."""


@dataclass(frozen=True, slots=True)
class EnableTopicUncleanLeaderElection:
    """From this node's broker: a topic's config now allows unclean leader elections (Kafka's
    TopicConfigHandler calls the controller so); acted on only by the active controller."""

    topic: str


ControllerMessage: TypeAlias = (
    EnableTopicUncleanLeaderElection
    | ControlledShutdownRequest
    | ElectLeadersRequest
    | AlterPartitionReassignmentsRequest
    | ListPartitionReassignmentsRequest
    | _SessionChanged
    | _WatchFired
    | ScriptStep
    | ScriptResume
    | _ChannelReply
    | _ChannelRetry
    | _Tick
    | _Resume
)


@dataclass(slots=True)
class _Running:
    event: _Event
    started_ns: int
    script_id: int = 0
    election: bool = False  # an Elect of a controller that was not active: election, then failover


@dataclass(slots=True)
class _Channel:
    queue: deque[BrokerRequest]
    number: int
    in_flight: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerStatistics:
    broker_id: int
    active: bool
    controller_epoch: int
    offline_partitions: int
    preferred_replica_imbalance: int
    # Not a Kafka metric: partitions whose replicas break the rack constraint (actors/common/racks.py).
    rack_constraint_violating_partitions: int
    global_topic_count: int
    global_partition_count: int
    active_broker_count: int
    unclean_leader_elections_total: int
    leader_election_seconds: HistogramSnapshot
    event_queue_size: int
    event_queue_seconds: HistogramSnapshot
    event_processing_seconds: dict[str, HistogramSnapshot]
    elections_won_total: int
    resignations_total: int


class ControllerActor(Actor[ControllerMessage]):
    # What other nodes ask of the controller: a broker's controlled shutdown, and the admin
    # requests a broker's admin actor relays.
    remote_asks = frozenset(
        {
            ControlledShutdownRequest,
            ElectLeadersRequest,
            AlterPartitionReassignmentsRequest,
            ListPartitionReassignmentsRequest,
        }
    )

    def __init__(
        self,
        *,
        config: BrokerConfig,
        coordinator: Coordinator,
        address_book: AddressBook,
        state_changes: StateChangeLog | None = None,
    ) -> None:
        self.config = config
        self.state_changes = state_changes
        self.broker_id = config.broker_id
        self.coordinator = coordinator
        self.address_book = address_book
        self._paused = False
        # Whether an election was queued on the current session (a controller started while the
        # connection was down competes when it comes back).
        self._elected_this_session = False
        self.logic: ControllerLogic | None = None
        self.generation = 0
        self.queue: deque[_Event] = deque()
        self.running: _Running | None = None
        self.channels: dict[BrokerId, _Channel] = {}
        self._subscription: Subscription | None = None
        # Scripts run one at a time, in the order of the event queue.
        self.scripts = ScriptRunner(coordinator, one_at_a_time=True, on_watch=self._watch_message)
        self._channel_numbers = itertools.count(1)
        self.unclean_leader_elections_total = 0
        self.elections_won_total = 0
        self.resignations_total = 0
        self._last_epoch = 0
        self.queue_seconds = Histogram()
        self.processing_seconds: dict[str, Histogram] = {}
        self._leader_election_seconds = Histogram()

    # ------------------------------------------------------------------------------ lifecycle

    def on_start(self, ctx: Context[ControllerMessage]) -> None:
        self._subscription = self.coordinator.subscribe(ctx.message_adapter(_SessionChanged))
        if self.coordinator.session_state is SessionState.CONNECTED:
            self._elected_this_session = True
            self._enqueue(ctx, Elect(enqueued_ns=ctx.now_ns))

    def on_stop(self, ctx: Context[ControllerMessage]) -> None:
        if self._subscription is not None:
            self._subscription.cancel()
        self.scripts.cancel_all()
        self.running = None

    @property
    def active(self) -> bool:
        return self.logic is not None and self.logic.active

    # ------------------------------------------------------------------------------- dispatch

    def receive(self, ctx: Context[ControllerMessage], message: ControllerMessage) -> None:
        match message:
            case EnableTopicUncleanLeaderElection():
                if self.active:
                    self._enqueue(
                        ctx, TopicUncleanLeaderElectionEnable(enqueued_ns=ctx.now_ns, topic=message.topic)
                    )
            case ControlledShutdownRequest():
                self._enqueue(
                    ctx, ControlledShutdown(enqueued_ns=ctx.now_ns, requester=ctx.requester, request=message)
                )
            case ElectLeadersRequest():
                self._enqueue(
                    ctx,
                    ReplicaLeaderElection(enqueued_ns=ctx.now_ns, requester=ctx.requester, request=message),
                )
            case AlterPartitionReassignmentsRequest():
                self._enqueue(
                    ctx,
                    ApiPartitionReassignment(
                        enqueued_ns=ctx.now_ns, requester=ctx.requester, request=message
                    ),
                )
            case ListPartitionReassignmentsRequest():
                self._enqueue(
                    ctx,
                    ListPartitionReassignments(
                        enqueued_ns=ctx.now_ns, requester=ctx.requester, request=message
                    ),
                )
            case _SessionChanged():
                self._on_session_changed(ctx, message.event)
            case _WatchFired():
                if message.generation == self.generation:
                    self._enqueue(ctx, _watch_event(message.kind, message.path, ctx.now_ns))
            case ScriptStep():
                self.scripts.on_step(ctx, message)
            case ScriptResume():
                self.scripts.on_resume(ctx, message)
            case _ChannelReply():
                self._on_channel_reply(ctx, message)
            case _ChannelRetry():
                if message.generation == self.generation:
                    self._pump_channel(ctx, message.broker_id)
            case _Tick():
                if self.active:
                    self._enqueue(ctx, message.event(enqueued_ns=ctx.now_ns))
            case _Resume():
                self._paused = False
                self._run_next(ctx)
            case _:
                assert_never(message)

    # ----------------------------------------------------------------------------- session

    def _on_session_changed(self, ctx: Context[ControllerMessage], event: SessionEvent) -> None:
        if event.state is SessionState.LOST:
            if self.active:
                ctx.log.warning("ZooKeeper session lost: resigning as controller")
            self._resign(ctx)
        elif event.state is SessionState.CONNECTED and (
            event.previous is not SessionState.SUSPENDED or not self._elected_this_session
        ):
            # A new session (first connect, or after an expiry): compete again. So does a
            # controller that started (or was restarted) while the connection was down: it has
            # not competed yet.
            self._elected_this_session = True
            self._enqueue(ctx, Elect(enqueued_ns=ctx.now_ns))

    def _resign(self, ctx: Context[ControllerMessage]) -> None:
        was_active = self.active
        if self.running is not None:
            self.scripts.cancel(self.running.script_id)
            self._answer_not_controller(ctx, self.running.event)
            self.running = None
        for queued in self.queue:
            self._answer_not_controller(ctx, queued)
        self.queue.clear()
        if self.logic is not None:
            self.unclean_leader_elections_total += self.logic.unclean_leader_elections_total
            self.logic.unclean_leader_elections_total = 0
        self.logic = None
        self.channels.clear()
        self.generation += 1
        self._paused = False
        ctx.cancel_timer("auto-rebalance")
        ctx.cancel_timer("connection-retry")
        ctx.cancel_timer("deletion-retry")
        if was_active:
            self.resignations_total += 1

    # ------------------------------------------------------------------------------ the queue

    def _enqueue(self, ctx: Context[ControllerMessage], event: _Event) -> None:
        self.queue.append(event)
        self._run_next(ctx)

    def _run_next(self, ctx: Context[ControllerMessage]) -> None:
        while self.running is None and self.queue and not self._paused:
            event = self.queue.popleft()
            self.queue_seconds.observe((ctx.now_ns - event.enqueued_ns) / 1e9)
            election = isinstance(event, Elect) and not self.active
            script = self._script_for(ctx, event)
            if script is None:
                continue
            running = self.running = _Running(event, ctx.now_ns, election=election)

            def finish(value: object, error: Exception | None, running: _Running = running) -> None:
                self._script_ended(ctx, running, value, error)

            running.script_id = self.scripts.start(ctx, self._sending_between_steps(ctx, script), finish)

    def _sending_between_steps(
        self, ctx: Context[ControllerMessage], script: Generator[Any, Any, Any]
    ) -> Generator[Any, Any, Any]:
        """Drive ``script``, sending the broker requests it batched before each step it waits on.

        Kafka sends the batch at the end of every state-machine step (each ``handleStateChanges``,
        each ``sendUpdateMetadataRequest``), not at the end of the event: the new leaders of a
        controlled shutdown serve as soon as they are elected, before the ISR removals that follow
        (thousands of ZooKeeper writes) are done. Sending whenever the script waits keeps that
        order: LeaderAndIsr, UpdateMetadata, StopReplica in each batch, batches in event order on
        each broker's channel. A batch never waits on ZooKeeper, so nothing the script decided is
        lost when a later step fails (a retried event does not decide it again)."""
        value: object = None
        error: BaseException | None = None
        while True:
            try:
                step = script.send(value) if error is None else script.throw(error)
            except StopIteration as finished:
                return finished.value
            logic = self.logic
            if logic is not None and logic.active and not logic.batch.is_empty():
                self._send_batch(ctx)
            try:
                value, error = (yield step), None
            except GeneratorExit:
                script.close()
                raise
            except Exception as thrown:  # noqa: BLE001 - the step's failure, thrown into the script
                value, error = None, thrown

    def _script_for(self, ctx: Context[ControllerMessage], event: _Event) -> Generator[Any, Any, Any] | None:
        if isinstance(event, Elect):
            if self.active:
                return self._check_still_controller()
            self.generation += 1
            self.logic = ControllerLogic(
                broker_id=self.broker_id,
                default_unclean_leader_election=self.config.unclean_leader_election_enable,
                now_ms=lambda: ctx.now_ms,
                now_ns=lambda: ctx.now_ns,
                wall_clock_ms=lambda: ctx.wall_clock_ms,
                session_id=lambda: self.coordinator.session_id,
                log=ctx.log,
            )
            self.logic.leader_election_seconds = self._leader_election_seconds
            self.logic.state_changes = self.state_changes
            self.logic.elect_outside_isr = ProtocolFault.ELECT_OUTSIDE_ISR in self.config.protocol_faults
            return self.logic.elect()
        logic = self.logic
        if logic is None or not logic.active:
            # Kafka processes these only on the active controller; a request is answered so.
            self._answer_not_controller(ctx, event)
            return None
        match event:
            case ReplicaLeaderElection(request=request):
                return logic.on_elect_leaders(request)
            case ApiPartitionReassignment(request=request):
                return logic.on_alter_partition_reassignments(request)
            case ListPartitionReassignments(request=request):
                return logic.on_list_partition_reassignments(request)
            case ZkPartitionReassignment():
                return logic.on_zk_partition_reassignment()
            case PartitionReassignmentIsrChange(tp=tp):
                return logic.on_partition_reassignment_isr_change(tp)
            case ControlledShutdown(request=request):
                return logic.on_controlled_shutdown(request.broker_id, request.broker_epoch)
            case BrokerChange():
                return logic.on_broker_change()
            case TopicChange():
                return logic.on_topic_change()
            case TopicDeletion():
                return logic.on_topic_deletion()
            case IsrChangeNotification():
                return logic.on_isr_change_notification()
            case PreferredReplicaLeaderElection():
                return logic.on_preferred_replica_election()
            case PartitionModifications(topic=topic):
                return logic.on_partition_modifications(topic)
            case AutoPreferredReplicaLeaderElection():
                return logic.on_auto_rebalance(self.config.leader_imbalance_per_broker_percentage)
            case TopicUncleanLeaderElectionEnable(topic=topic):
                return logic.on_unclean_leader_election_enabled(topic)
            case TopicDeletionStopReplicaResponseReceived(
                broker_id=broker_id, partitions=partitions, failed=failed
            ):
                return logic.on_stop_replica_deletion_response(broker_id, partitions, failed)
            case _:
                assert_never(event)

    def _answer_not_controller(self, ctx: Context[ControllerMessage], event: _Event) -> None:
        requester = _requester_of(event)
        if requester is not None:
            ctx.reply_to(requester, _not_controller(event))

    def _check_still_controller(self) -> Script:
        """/controller changed while we are active: if it is no longer ours, resign (by fencing)."""
        stat = yield Watched(ZkExists(zk_data.CONTROLLER_PATH, watch=True), WatchKind.CONTROLLER)
        if stat is None:
            raise FencedError("/controller was deleted")
        data, _ = yield ZkGet(zk_data.CONTROLLER_PATH)
        if zk_data.decode_controller(data).broker_id != self.broker_id:
            raise FencedError("/controller names another broker")

    # ------------------------------------------------------------------------------ the driver

    def _script_ended(
        self,
        ctx: Context[ControllerMessage],
        running: _Running,
        value: object,
        error: Exception | None,
    ) -> None:
        if self.running is not running:
            return  # abandoned meanwhile (cancelled scripts never end here; kept as a guard)
        match error:
            case None:
                self._finish(ctx, running, value)
            case FencedError():
                ctx.log.warning("controller fenced (%s): resigning", error)
                self._resign_and_reelect(ctx)
            case ConnectionLossError() | SessionExpiredError() if running.election and self.active:
                # The activation's failover stopped half-way. A retried Elect would find this
                # controller active and skip the rest, serving on a half-built context: start over.
                ctx.log.warning("controller failover lost its ZooKeeper connection (%s): resigning", error)
                self._resign_and_reelect(ctx)
            case ConnectionLossError() | SessionExpiredError():
                self._retry_later(ctx, running, error)
            case _:
                ctx.log.error(
                    "controller event %s failed: resigning", _event_name(running.event), exc_info=error
                )
                self._resign_and_reelect(ctx)

    def _watch_message(self, kind: Hashable) -> Callable[[WatchEvent], _WatchFired]:
        """What a watch set now becomes when it fires: an event of its kind, for the activation
        of now (a later activation ignores it)."""
        assert isinstance(kind, WatchKind)
        generation = self.generation

        def fired(event: WatchEvent) -> _WatchFired:
            return _WatchFired(kind, generation, str(event.path))

        return fired

    def _finish(self, ctx: Context[ControllerMessage], running: _Running, result: object) -> None:
        self.running = None
        kind = _event_name(running.event)
        histogram = self.processing_seconds.get(kind)
        if histogram is None:
            histogram = self.processing_seconds[kind] = Histogram()
        histogram.observe((ctx.now_ns - running.started_ns) / 1e9)
        logic = self.logic
        if logic is not None and logic.active:
            if isinstance(running.event, Elect) and logic.context.controller_epoch != self._last_epoch:
                self._last_epoch = logic.context.controller_epoch
                self.elections_won_total += 1
                self._schedule_auto_rebalance(ctx)
            self._send_batch(ctx)
            if logic.deletion_retry_wanted:
                logic.deletion_retry_wanted = False
                ctx.start_timer("deletion-retry", _Tick(TopicDeletion), _DELETION_RETRY_MS)
        requester = _requester_of(running.event)
        if requester is not None:
            if isinstance(running.event, ControlledShutdown):
                error, remaining = result if isinstance(result, tuple) else (ErrorCode.NOT_CONTROLLER, [])
                answer: object = ControlledShutdownResponse(
                    error_code=error, remaining_partitions=tuple(remaining)
                )
            else:
                # An admin request's script returns its response; one that returned nothing (it
                # found itself not active) is answered NOT_CONTROLLER.
                answer = result if result is not None else _not_controller(running.event)
            ctx.reply_to(requester, answer)
        self._run_next(ctx)

    def _resign_and_reelect(self, ctx: Context[ControllerMessage]) -> None:
        self._resign(ctx)
        self._enqueue(ctx, Elect(enqueued_ns=ctx.now_ns))

    def _retry_later(self, ctx: Context[ControllerMessage], running: _Running, error: Exception) -> None:
        ctx.log.warning(
            "controller event %s lost its ZooKeeper connection (%s); retrying",
            _event_name(running.event),
            error,
        )
        self.running = None
        if self.logic is not None:
            # Requests batched since the attempt's last step are dropped (those of its earlier
            # steps are sent): the retry decides again what ZooKeeper does not show done.
            self.logic.take_batch()
        # Retry the same event first, after a back-off; nothing else runs meanwhile (event order).
        self.queue.appendleft(running.event)
        self._paused = True
        ctx.start_timer("connection-retry", _Resume(), _CONNECTION_RETRY_MS)

    def _schedule_auto_rebalance(self, ctx: Context[ControllerMessage]) -> None:
        if self.config.auto_leader_rebalance_enable:
            ctx.start_periodic_timer(
                "auto-rebalance",
                _Tick(AutoPreferredReplicaLeaderElection),
                self.config.leader_imbalance_check_interval_seconds * 1000,
                initial_delay_ms=_AUTO_REBALANCE_FIRST_DELAY_MS,
            )

    # ----------------------------------------------------------------------------- channels

    def _send_batch(self, ctx: Context[ControllerMessage]) -> None:
        logic = self.logic
        assert logic is not None
        for broker_id, live in logic.context.live_brokers.items():
            # This node must be able to reach every broker it sends requests to.
            self.address_book.set(broker_node(broker_id), live.endpoint.url)
        batch = logic.take_batch()
        for broker_id, request in batch.build(logic.context):
            channel = self.channels.get(broker_id)
            if channel is None:
                channel = self.channels[broker_id] = _Channel(deque(), next(self._channel_numbers))
            channel.queue.append(request)
            self._pump_channel(ctx, broker_id)
        # Channels of brokers that are gone are dropped with their queues (Kafka removes them).
        for broker_id in [b for b in self.channels if not logic.context.is_live(b)]:
            del self.channels[broker_id]

    def _pump_channel(self, ctx: Context[ControllerMessage], broker_id: BrokerId) -> None:
        channel = self.channels.get(broker_id)
        if channel is None or channel.in_flight or not channel.queue:
            return
        channel.in_flight = True
        generation, number = self.generation, channel.number

        def adapt(reply: object) -> _ChannelReply:
            return _ChannelReply(broker_id, generation, number, reply)

        ctx.ask(
            broker_ref(broker_id),
            channel.queue[0],
            timeout_ms=self.config.controller_socket_timeout_ms,
            on_reply=adapt,
            on_failure=adapt,
        )

    def _on_channel_reply(self, ctx: Context[ControllerMessage], message: _ChannelReply) -> None:
        if message.generation != self.generation:
            return
        channel = self.channels.get(message.broker_id)
        if channel is None or channel.number != message.channel:
            return  # the answer to a dropped channel's request (its broker died meanwhile)
        channel.in_flight = False
        if isinstance(message.reply, AskFailure):
            # Kafka's channel retries until the send succeeds or the broker is removed.
            ctx.start_timer(
                ("channel", message.broker_id),
                _ChannelRetry(message.broker_id, message.generation),
                _CHANNEL_RETRY_MS,
            )
            return
        sent = channel.queue.popleft()
        if isinstance(sent, StopReplicaRequest) and sent.delete_partitions:
            self._enqueue(
                ctx,
                TopicDeletionStopReplicaResponseReceived(
                    enqueued_ns=ctx.now_ns,
                    broker_id=message.broker_id,
                    partitions=sent.partitions,
                    failed=_failed_partitions(sent, message.reply),
                ),
            )
        if isinstance(message.reply, LeaderAndIsrResponse) and message.reply.error_code is not ErrorCode.NONE:
            ctx.log.warning(
                "broker %d answered %s to %s",
                message.broker_id,
                message.reply.error_code.name,
                type(sent).__name__,
            )
        self._pump_channel(ctx, message.broker_id)

    # ---------------------------------------------------------------------------- statistics

    def statistics(self) -> ControllerStatistics:
        logic = self.logic
        active = logic is not None and logic.active
        context = logic.context if logic is not None else None
        return ControllerStatistics(
            broker_id=self.broker_id,
            active=active,
            controller_epoch=context.controller_epoch if context is not None and active else self._last_epoch,
            offline_partitions=context.offline_partition_count() if context is not None and active else 0,
            preferred_replica_imbalance=context.preferred_replica_imbalance_count()
            if context and active
            else 0,
            rack_constraint_violating_partitions=context.rack_constraint_violating_partition_count()
            if context is not None and active
            else 0,
            global_topic_count=len(context.assignments) if context is not None and active else 0,
            global_partition_count=len(context.all_partitions()) if context is not None and active else 0,
            active_broker_count=len(context.live_brokers) if context is not None and active else 0,
            unclean_leader_elections_total=self.unclean_leader_elections_total
            + (logic.unclean_leader_elections_total if logic is not None else 0),
            leader_election_seconds=self._leader_election_seconds.snapshot(),
            event_queue_size=len(self.queue),
            event_queue_seconds=self.queue_seconds.snapshot(),
            event_processing_seconds={k: h.snapshot() for k, h in self.processing_seconds.items()},
            elections_won_total=self.elections_won_total,
            resignations_total=self.resignations_total,
        )


def _not_controller(event: _Event) -> object:
    """The answer to a request this controller will not finish: it is not (or no longer) the
    active controller. The asker (a broker) then finds the new controller and asks again."""
    message = "this broker is not the active controller"
    match event:
        case ReplicaLeaderElection():
            return ElectLeadersResponse(error_code=ErrorCode.NOT_CONTROLLER, error_message=message)
        case ApiPartitionReassignment():
            return AlterPartitionReassignmentsResponse(
                error_code=ErrorCode.NOT_CONTROLLER, error_message=message
            )
        case ListPartitionReassignments():
            return ListPartitionReassignmentsResponse(
                error_code=ErrorCode.NOT_CONTROLLER, error_message=message
            )
        case _:
            return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)


def _state_path_partition(path: str) -> TopicPartition:
    """``/brokers/topics/<t>/partitions/<p>/state`` -> the partition."""
    parts = path.split("/")
    return TopicPartition(parts[3], int(parts[5]))


def _failed_partitions(request: StopReplicaRequest, reply: object) -> frozenset[TopicPartition]:
    """The partitions a StopReplica(delete) answer says were not deleted (all of them when the
    answer is not a successful StopReplicaResponse)."""
    if not isinstance(reply, StopReplicaResponse) or reply.error_code is not ErrorCode.NONE:
        return frozenset(request.partitions)
    return frozenset(
        TopicPartition(error.topic, error.partition)
        for error in reply.partitions
        if error.error_code is not ErrorCode.NONE
    )
