"""PartitionActor: one partition replica on one broker — its log, its role, produce and fetch paths.

Theory of operation
-------------------
The actor owns the partition's ``Log`` (storage) and its ``PartitionState`` (pure rules, see
``partition_state.py``). The broker actor tells it its role (``BecomeLeader``/``BecomeFollower``,
already fenced on controller and leader epochs), routes Kafka requests to it per partition, and
ticks ``MaybeShrinkIsr`` every ``replica.lag.time.max.ms / 2``. The replica fetcher of this broker
drives the follower side (truncation, appends). Everything is one mailbox: the reader/writer lock of
Kafka's ``Partition`` becomes "one message at a time, no awaits".

Roles
-----
The role is a type: ``Offline`` (hosted, serving nothing; maybe without a log), ``Leader`` or
``Follower`` (each holding its log, so neither ever checks for a missing one). One table,
``ROLE_ONLY_MESSAGES``, says which messages only one role takes; ``_refuse`` answers them in any
other role the way Kafka does. The Kafka requests (produce, fetch, OffsetsForLeaderEpoch,
ListOffsets) and the fetcher's requests all find their log through one ``local_log``
(Kafka's ``getLocalLog``): KIP-320 fencing of the request's leader epoch first, then the role.
``PartitionState`` keeps the role's rules (ISR, HW, follower progress) and is told every change
together with the role.

Leader:
* ``AppendRecords`` (produce): acks=-1 is refused with NOT_ENOUGH_REPLICAS when the committed ISR is
  below ``min.insync.replicas``; otherwise the batch is appended as leader (offsets from the LEO,
  epoch stamped), the HW is re-evaluated (it moves at once when the ISR is just the leader), and an
  acks=-1 append waits in the produce purgatory until HW ≥ its last offset + 1.
* ``ReadRecords`` (fetch): consumers read below the HW, followers (and the group coordinator's
  loading read, ``fetch_log_end``) below the LEO. The HW, LEO and log
  start offset are captured before the read. A follower fetch then updates that follower's progress
  (docs/replication.md §2.3), may start an ISR expansion (§3, using the HW before this fetch's increment)
  and may move the HW (docs/replication.md §4.1) — in that order, as Kafka 2.4 does.
* ISR changes are conditional ZooKeeper writes on the cached zkVersion, performed outside the actor
  (``pipe_to_self``, the I/O in ``state_store.py``). While one is in flight no other
  starts, and the HW is computed over the maximal ISR. BADVERSION is checked by re-reading the znode
  (a retried write that landed counts as success); any other outcome is a failed update (counted)
  and the committed ISR stays as it was.
* Whenever the HW moves, waiting acks=-1 produces complete; whenever data or the HW changes and the
  broker asked (``NotifyOnChange``), the broker gets one ``PartitionChanged`` to re-check parked
  fetches.

Follower (the log operations live in ``follower.py``):
* The fetcher asks for the log's latest epoch (``GetFollowerLogState``), reports the leader's
  OffsetsForLeaderEpoch answer (``TruncateOnLeaderEpoch``, decided by ``truncation.py``), and appends
  fetched batches byte for byte (``AppendAsFollower``), after which the follower HW becomes
  min(leader HW, LEO). Every follower-side request names the leader epoch it was built for; a request
  reaching a partition that is no longer a follower is refused with NOT_LEADER_OR_FOLLOWER, one for
  another epoch with FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH, so a fetcher can never apply data
  across a leadership change.

Statistics: ``statistics.py``.

What this actor deliberately does not do: choose leaders (the controller), fence LeaderAndIsr
epochs (the broker does, before telling the partition), park fetches spanning partitions (the broker).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias, assert_never

from actors.common.errors import ErrorCode
from actors.common.protocol import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_PARTITION_LEADER_EPOCH,
    FetchPartitionResponse,
    ListOffsetsPartitionResponse,
    OffsetForLeaderEpochResult,
)
from actors.common.types import BrokerId, TopicPartition
from actors.server import zk_data
from actors.server.config import BrokerConfig, ProtocolFault
from actors.server.replica import follower as follower
from actors.server.replica.messages import (
    AppendAsFollower,
    AppendRecords,
    BecomeFollower,
    BecomeLeader,
    CreateLog,
    FetchOffsetForTimestamp,
    FollowerRequest,
    GetFollowerLogState,
    IsrChangeRecorded,
    LastOffsetForLeaderEpoch,
    MaybeFlush,
    MaybeShrinkIsr,
    NotifyOnChange,
    PartitionAppendResult,
    PartitionChanged,
    PartitionCommand,
    PartitionReadResult,
    ReadRecords,
    ReplicaStopped,
    StopReplica,
    TruncateFullyAndStartAt,
    TruncateOnLeaderEpoch,
    TruncateTo,
    UpdateTopicConfig,
)
from actors.server.replica.partition_state import LeaderAndIsr, PartitionState
from actors.server.replica.purgatory import DelayedProduce, ProducePurgatory
from actors.server.replica.state_store import conditional_isr_write, read_partition_state
from actors.server.replica.statistics import PartitionCounters, PartitionStatistics
from actors.server.state_changes import StateChange, StateChangeLog
from runtime.actor import Actor
from runtime.context import Context
from runtime.coordination.base import Coordinator
from runtime.errors import StorageError
from runtime.logging import state_change
from runtime.ref import ActorRef
from runtime.storage.config import LogConfig
from runtime.storage.errors import OffsetOutOfRangeError
from runtime.storage.log import FlushJob, Log
from runtime.storage.log_manager import LogManager

__all__ = ["PartitionActor", "PartitionMessage", "PartitionStatistics"]

# A restarted leader that cannot read its partition state yet tries again after this.
_RECOVERY_RETRY_MS = 1_000
# An ISR write without an answer is written again after this.
_ISR_WRITE_RETRY_MS = 500


# ----------------------------------------------------------------------------- private messages


@dataclass(frozen=True, slots=True)
class _IsrWriteDone:
    proposal: LeaderAndIsr
    expanding: bool
    new_zk_version: int | None
    reason: str = ""
    # The write failed without an answer (a lost connection, a timeout): it may have landed.
    unknown: bool = False


@dataclass(frozen=True, slots=True)
class _RetryIsrWrite:
    """Resend an ISR write whose outcome was unknown (the same proposal: if the first one landed,
    the retry's BADVERSION and the data check say so)."""

    proposal: LeaderAndIsr
    expanding: bool


@dataclass(frozen=True, slots=True)
class _ZkStateRead:
    """The partition state znode, read after a restart: (state, zkVersion), or the read failed."""

    generation: int
    found: tuple[zk_data.PartitionState, int] | None
    error: str = ""


@dataclass(frozen=True, slots=True)
class _RecoverAgain:
    generation: int


@dataclass(frozen=True, slots=True)
class _ProduceExpired:
    produce_id: int


@dataclass(frozen=True, slots=True)
class _FlushDone:
    job: FlushJob
    error: Exception | None = None


PartitionMessage: TypeAlias = (
    PartitionCommand
    | _IsrWriteDone
    | _RetryIsrWrite
    | _ZkStateRead
    | _RecoverAgain
    | _ProduceExpired
    | _FlushDone
)


# ------------------------------------------------------------------------------------ roles


@dataclass(frozen=True, slots=True)
class Offline:
    """Hosted but serving nothing: not yet told its role, or stopped (StopReplica). The log may
    exist (loaded at start-up, created by CreateLog, kept by a StopReplica without delete)."""

    log: Log | None


@dataclass(frozen=True, slots=True)
class Leader:
    """Leader of ``PartitionState.leader_epoch``: serves produce and fetch, owns the ISR."""

    log: Log


@dataclass(frozen=True, slots=True)
class Follower:
    """Follower of ``PartitionState.leader_id`` in ``leader_epoch``: the replica fetcher drives it."""

    log: Log


PartitionRole: TypeAlias = Offline | Leader | Follower

# The messages only one role accepts (h11's style: one table, not a guard in every handler). Every
# other message is taken in any role: role changes, configuration, flushes, recovery, and the Kafka
# requests, which find their log through ``local_log`` as Kafka's ``getLocalLog`` does (the epoch
# first, then the role). A role-only message reaching another role gets ``_refuse``'s answer.
_LEADER_ONLY: frozenset[type] = frozenset(
    {NotifyOnChange, MaybeShrinkIsr, _IsrWriteDone, _RetryIsrWrite, _ProduceExpired}
)
_FOLLOWER_ONLY: frozenset[type] = frozenset(
    {GetFollowerLogState, TruncateOnLeaderEpoch, TruncateTo, TruncateFullyAndStartAt, AppendAsFollower}
)
ROLE_ONLY_MESSAGES: dict[type[PartitionRole], frozenset[type]] = {
    Offline: frozenset(),
    Leader: _LEADER_ONLY,
    Follower: _FOLLOWER_ONLY,
}
_ROLE_ONLY = _LEADER_ONLY | _FOLLOWER_ONLY


def _error_code_of(error: StorageError) -> ErrorCode:
    name = getattr(error, "error_name", "UNKNOWN_SERVER_ERROR")
    try:
        return ErrorCode[name]
    except KeyError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class PartitionActor(Actor[PartitionMessage]):
    def __init__(
        self,
        *,
        tp: TopicPartition,
        config: BrokerConfig,
        log_manager: LogManager,
        coordinator: Coordinator,
        broker: ActorRef,
        initial_role: Callable[[], BecomeLeader | BecomeFollower | CreateLog | None] | None = None,
        restarted: bool = False,
        state_changes: StateChangeLog | None = None,
    ) -> None:
        self.tp = tp
        self.state_changes = state_changes
        self._initial_role = initial_role
        self._restarted = restarted
        # While recovering (a leader restarted by its supervisor), the role waits for ZooKeeper.
        self._recovering: BecomeLeader | None = None
        self._recovery_generation = 0
        self.config = config
        self.log_manager = log_manager
        self.coordinator = coordinator
        self.broker = broker
        self.state = PartitionState(tp, config.broker_id)
        self.policy = config.topic_policy()
        self.role: PartitionRole = Offline(log_manager.get_log(tp))
        self.purgatory = ProducePurgatory()
        self.counters = PartitionCounters()
        self._produce_ids = itertools.count(1)
        self._notify_broker_on_change = False
        self._flush_in_flight = False
        self._flush_wanted_up_to: int | None = None
        # The simulation's negative control (ProtocolFault.TRUNCATE_TO_HIGH_WATERMARK).
        self._truncate_to_high_watermark = ProtocolFault.TRUNCATE_TO_HIGH_WATERMARK in config.protocol_faults

    # -------------------------------------------------------------------------------- dispatch

    def receive(self, ctx: Context[PartitionMessage], message: PartitionMessage) -> None:
        try:
            self._dispatch(ctx, message)
        except OSError as error:
            self._log_dir_failed(ctx, error, message)

    def _log_dir_failed(self, ctx: Context[PartitionMessage], error: OSError, message: object) -> None:
        """Kafka's log-dir failure: an I/O error on the only log directory takes it offline and
        the broker halts. Serving on after a failed write or fsync could acknowledge records a
        disk did not keep; restarting just this actor would forget nothing the disk lost. The
        request that hit the error is refused (KAFKA_STORAGE_ERROR, nothing acknowledged), and
        leadership moves once this broker's session ends."""
        ctx.log.error(
            "%s: I/O error in log dir %s: %s; halting the broker", self.tp, self.log_manager.log_dir, error
        )
        if isinstance(message, AppendRecords) and ctx.requester is not None:
            self._reply_append_error(ctx, ErrorCode.KAFKA_STORAGE_ERROR, f"log directory failed: {error}")
        self.log_manager.mark_offline(f"{self.tp}: {error}")
        ctx.halt_node(f"log directory {self.log_manager.log_dir} failed ({self.tp}): {error}")

    @property
    def log(self) -> Log | None:
        return self.role.log

    def _dispatch(self, ctx: Context[PartitionMessage], message: PartitionMessage) -> None:
        if type(message) in _ROLE_ONLY and type(message) not in ROLE_ONLY_MESSAGES[type(self.role)]:
            self._refuse(ctx, message)
            return
        match message:
            case BecomeLeader():
                self._on_become_leader(ctx, message)
            case BecomeFollower():
                self._on_become_follower(ctx, message)
            case CreateLog():
                self.policy = message.policy
                self._ensure_log(ctx, message.log_config)
            case StopReplica():
                self._on_stop_replica(ctx, message)
            case UpdateTopicConfig():
                self.policy = message.policy
                if self.log is not None:
                    self.log.update_config(message.log_config)
            case MaybeFlush():
                # Kafka's flushDirtyLogs: the whole log, once flush.ms passed since the last flush.
                if self.log is not None and self.log.flush_due(ctx.now_ms):
                    self._request_flush(ctx, self.log.log_end_offset)
            case AppendRecords():
                self._on_append_records(ctx, message)
            case ReadRecords():
                self._on_read_records(ctx, message)
            case LastOffsetForLeaderEpoch():
                self._on_last_offset_for_leader_epoch(ctx, message)
            case FetchOffsetForTimestamp():
                self._on_fetch_offset_for_timestamp(ctx, message)
            case NotifyOnChange():
                self._on_notify_on_change(ctx, self._leader(), message)
            case MaybeShrinkIsr():
                self._on_maybe_shrink_isr(ctx, self._leader())
            case _IsrWriteDone():
                self._on_isr_write_done(ctx, self._leader(), message)
            case _RetryIsrWrite():
                if self._isr_write_still_wanted(message.proposal):
                    self._write_isr(ctx, message.proposal, expanding=message.expanding)
            case _ProduceExpired():
                self._on_produce_expired(ctx, message)
            case (
                GetFollowerLogState()
                | TruncateOnLeaderEpoch()
                | TruncateTo()
                | TruncateFullyAndStartAt()
                | AppendAsFollower()
            ):
                self._on_follower_request(ctx, message)
            case _ZkStateRead():
                self._on_zk_state_read(ctx, message)
            case _RecoverAgain():
                if message.generation == self._recovery_generation:
                    self._recover_leadership(ctx)
            case _FlushDone():
                self._on_flush_done(ctx, message)
            case _:
                assert_never(message)

    def _refuse(self, ctx: Context[PartitionMessage], message: PartitionMessage) -> None:
        """A role-only message in another role, answered as Kafka answers it: a fetcher's request
        reaching a partition that is no longer its follower gets NOT_LEADER_OR_FOLLOWER; a broker
        waiting for a change hears at once that it must look again; a leader's tick or a
        leader's own completion (ISR write, produce timeout) left over from before the change is
        dropped (the role change already answered what was waiting)."""
        match message:
            case (
                GetFollowerLogState()
                | TruncateOnLeaderEpoch()
                | TruncateTo()
                | TruncateFullyAndStartAt()
                | AppendAsFollower()
            ):
                ctx.reply(follower.refused(message, ErrorCode.NOT_LEADER_OR_FOLLOWER))
            case NotifyOnChange():
                ctx.tell(self.broker, PartitionChanged(self.tp))
            case MaybeShrinkIsr() | _IsrWriteDone() | _RetryIsrWrite() | _ProduceExpired():
                pass
            case _:
                raise AssertionError(f"{self.tp}: {type(message).__name__} is not a role-only message")

    def _leader(self) -> Leader:
        role = self.role
        assert isinstance(role, Leader), f"{self.tp}: the role table let a leader-only message through"
        return role

    def local_log(self, current_leader_epoch: int, *, require_leader: bool) -> Log | ErrorCode:
        """The log a request may act on, or why not (Kafka's ``Partition.getLocalLog``): the
        request's leader epoch is fenced first (KIP-320: FENCED_LEADER_EPOCH below ours,
        UNKNOWN_LEADER_EPOCH above; NO_PARTITION_LEADER_EPOCH skips the check), so a client on an
        older epoch is fenced even by a replica that is no longer leader; then a request that needs
        the leader gets NOT_LEADER_OR_FOLLOWER anywhere else, and one that needs only a replica gets
        REPLICA_NOT_AVAILABLE where there is no log."""
        epoch = self.state.leader_epoch
        if current_leader_epoch != NO_PARTITION_LEADER_EPOCH and current_leader_epoch < epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_leader_epoch != NO_PARTITION_LEADER_EPOCH and current_leader_epoch > epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        match self.role:
            case Leader(log=log):
                return log
            case Follower(log=log) | Offline(log=Log() as log) if not require_leader:
                return log
            case _:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER if require_leader else ErrorCode.REPLICA_NOT_AVAILABLE

    def on_start(self, ctx: Context[PartitionMessage]) -> None:
        # The broker's last word on our role (also after a supervisor restart, which loses it).
        role = self._initial_role() if self._initial_role is not None else None
        if (
            isinstance(role, BecomeLeader)
            and self._restarted
            and ProtocolFault.FORGET_ISR_ON_RESTART not in self.config.protocol_faults
        ):
            # The crash lost every ISR change this leader made since that LeaderAndIsr: serving
            # with its ISR could drop a replica ZooKeeper still lists (a later clean election of it
            # would lose acknowledged records). Kafka never rebuilds ISR state from an old request:
            # read the znode first, serve nothing until then.
            self._recovering = role
            self._recover_leadership(ctx)
        elif role is not None:
            self._dispatch(ctx, role)

    def on_stop(self, ctx: Context[PartitionMessage]) -> None:
        self._fail_delayed_produces(ctx, ErrorCode.NOT_LEADER_OR_FOLLOWER)

    # ------------------------------------------------------------------------------ role changes

    def _ensure_log(self, ctx: Context[PartitionMessage], log_config: LogConfig) -> Log:
        log = self.role.log
        if log is None:
            # Only an offline partition can be without a log.
            log = self.log_manager.get_or_create_log(
                self.tp, log_config, now_ms=ctx.now_ms, wall_clock_ms=ctx.wall_clock_ms
            )
            self.role = Offline(log)
        if log.config != log_config:
            # A log loaded at start-up has the broker defaults: the topic's overrides apply now.
            log.update_config(log_config)
        return log

    def _recover_leadership(self, ctx: Context[PartitionMessage]) -> None:
        self._recovery_generation += 1
        generation = self._recovery_generation
        ctx.pipe_to_self(
            read_partition_state(self.coordinator, self.tp),
            lambda found: _ZkStateRead(generation, found),
            lambda error: _ZkStateRead(generation, None, f"{type(error).__name__}: {error}"),
        )

    def _on_zk_state_read(self, ctx: Context[PartitionMessage], message: _ZkStateRead) -> None:
        role = self._recovering
        if role is None or message.generation != self._recovery_generation:
            return  # a newer LeaderAndIsr took over meanwhile
        if message.found is None:
            ctx.log.warning(
                "%s: cannot read its state after a restart (%s); retrying", self.tp, message.error
            )
            ctx.start_timer("recover", _RecoverAgain(message.generation), _RECOVERY_RETRY_MS)
            return
        zk_state, zk_version = message.found
        self._recovering = None
        expected = role.state
        if zk_state.leader != self.config.broker_id or zk_state.leader_epoch != expected.leader_epoch:
            # Leadership moved on while this actor was down: the controller's LeaderAndIsr for the
            # new epoch is on its way (or queued here); until then this replica serves nothing.
            ctx.log.warning(
                "%s: restarted as leader of epoch %d, but ZooKeeper says leader %d epoch %d: waiting "
                "for the controller",
                self.tp, expected.leader_epoch, zk_state.leader, zk_state.leader_epoch,
            )  # fmt: skip
            return
        restored = dataclasses.replace(expected, isr=zk_state.isr, zk_version=zk_version)
        ctx.log.info(
            "%s: restarted; leader of epoch %d with ISR %s (zkVersion %d) as ZooKeeper holds it",
            self.tp, expected.leader_epoch, list(zk_state.isr), zk_version,
        )  # fmt: skip
        self._on_become_leader(ctx, dataclasses.replace(role, state=restored))

    def _begin_role_change(
        self, ctx: Context[PartitionMessage], message: BecomeLeader | BecomeFollower
    ) -> tuple[Log, str]:
        """What every LeaderAndIsr does first, whichever role it gives: end a recovery in progress,
        make sure of the log, take the topic's policy. Returns the log and the role being left."""
        self._recovering = None
        self._recovery_generation += 1
        log = self._ensure_log(ctx, message.log_config)
        self.policy = message.policy
        return log, self._describe_role()

    def _on_become_leader(self, ctx: Context[PartitionMessage], message: BecomeLeader) -> None:
        log, previous = self._begin_role_change(ctx, message)
        state = message.state
        self.state.make_leader(
            controller_epoch=state.controller_epoch,
            leader_epoch=state.leader_epoch,
            isr=frozenset(state.isr),
            assigned_replicas=state.replicas,
            zk_version=state.zk_version,
            leader_log_end_offset=log.log_end_offset,
            now_ms=ctx.now_ms,
            adding_replicas=state.adding_replicas,
            removing_replicas=state.removing_replicas,
        )
        self.role = Leader(log)
        missing = log.missing_flushed_offsets
        if missing is not None and log.log_end_offset < missing[1]:
            # Loading found flushed records gone from this replica's files, and it has not fetched
            # them back: unless another replica still holds them, they are lost from here on.
            ctx.log.error(
                "Partition %s becomes leader without offsets %d..%d, which were flushed to this "
                "replica's disk but were missing from its files when it started (see the WARN lines "
                "'Log recovery (records_missing)'): they are lost unless another replica holds them",
                self.tp, missing[0], missing[1] - 1, extra={"tp": str(self.tp)},
            )  # fmt: skip
        # KIP-279: cache the new epoch at once, so followers asking about it get an answer even
        # before this leader writes anything in it.
        log.maybe_assign_epoch_start_offset(state.leader_epoch, log.log_end_offset)
        state_change(
            ctx.log, str(self.tp), previous, self._describe_role(), "LeaderAndIsr",
            isr=list(state.isr), zk_version=state.zk_version, log_end_offset=log.log_end_offset,
        )  # fmt: skip
        self._maybe_increment_high_watermark(ctx, log)
        self._changed(ctx)

    def _on_become_follower(self, ctx: Context[PartitionMessage], message: BecomeFollower) -> None:
        log, previous = self._begin_role_change(ctx, message)
        state = message.state
        self.state.make_follower(
            controller_epoch=state.controller_epoch,
            leader_id=state.leader,
            leader_epoch=state.leader_epoch,
            assigned_replicas=state.replicas,
            zk_version=state.zk_version,
            adding_replicas=state.adding_replicas,
            removing_replicas=state.removing_replicas,
        )
        self.role = Follower(log)
        # Produces waiting for acks on a leader that is no more can never be answered for sure.
        self._fail_delayed_produces(ctx, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if self._truncate_to_high_watermark:
            # The negative control, as Kafka did before KIP-101: cut at once, before the new leader
            # has answered anything (the fetcher's truncation then finds nothing more to cut).
            self._truncate(ctx, log, log.high_watermark, cause="high watermark (negative control)")
        state_change(
            ctx.log, str(self.tp), previous, self._describe_role(), "LeaderAndIsr",
            high_watermark=log.high_watermark, log_end_offset=log.log_end_offset,
        )  # fmt: skip
        self._changed(ctx)

    def _on_stop_replica(self, ctx: Context[PartitionMessage], message: StopReplica) -> None:
        previous = self._describe_role()
        self._fail_delayed_produces(ctx, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.state.make_offline()
        self.role = Offline(self.role.log)
        error = ErrorCode.NONE
        if message.delete:
            try:
                self.log_manager.delete_log(self.tp)
            except OSError as failure:
                # A log half deleted is a failed log dir: answered KAFKA_STORAGE_ERROR, and the
                # broker halts; it finds the log again at its restart and deletes it then (the
                # controller asks again). Going on would let a topic created again find it.
                if ctx.requester is not None:
                    ctx.reply(ReplicaStopped(error_code=ErrorCode.KAFKA_STORAGE_ERROR))
                self._log_dir_failed(ctx, failure, message)
                return
            self.role = Offline(None)
        state_change(ctx.log, str(self.tp), previous, "offline", "StopReplica", delete=message.delete)
        if ctx.requester is not None:
            ctx.reply(ReplicaStopped(error_code=error))
        self._changed(ctx)
        if message.delete:
            # The reply and this stop take effect together: when the broker reads the reply, the
            # actor's name is free for a partition of the same name created again.
            ctx.stop_self()

    def _describe_role(self) -> str:
        state = self.state
        return f"{state.role.value}(epoch={state.leader_epoch}, leader={state.leader_id})"

    # ------------------------------------------------------------------------------- produce

    def _on_append_records(self, ctx: Context[PartitionMessage], message: AppendRecords) -> None:
        self.counters.produce_requests_total += 1
        # Kafka 2.4's produce names no leader epoch: only the leadership is checked.
        log = self.local_log(NO_PARTITION_LEADER_EPOCH, require_leader=True)
        if isinstance(log, ErrorCode):
            self._reply_append_error(ctx, log, f"broker {self.config.broker_id} is not the leader")
            return
        if (
            message.acks == -1
            and len(self.state.isr) < self.policy.min_insync_replicas
            and ProtocolFault.SKIP_MIN_INSYNC_CHECK not in self.config.protocol_faults
        ):
            self._reply_append_error(
                ctx,
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"the ISR {sorted(self.state.isr)} is smaller than min.insync.replicas "
                f"{self.policy.min_insync_replicas}",
            )
            return
        try:
            info = log.append_as_leader(
                message.records, self.state.leader_epoch, now_ms=ctx.now_ms, wall_clock_ms=ctx.wall_clock_ms
            )
        except StorageError as error:
            self._reply_append_error(ctx, _error_code_of(error), str(error))
            return
        if info.first_offset < 0:
            ctx.reply(self._appended(log, acks_all=False))
            return
        if not info.duplicate:
            self.counters.bytes_in_total += info.valid_bytes
            self.counters.messages_in_total += info.record_count
        if info.flush_up_to_offset is not None:
            self._request_flush(ctx, info.flush_up_to_offset)
        self._maybe_increment_high_watermark(ctx, log)
        self._changed(ctx)
        required_offset = info.last_offset + 1
        if message.acks != -1 or log.high_watermark >= required_offset:
            ctx.reply(
                self._appended(
                    log,
                    acks_all=message.acks == -1,
                    base_offset=info.first_offset,
                    log_append_time_ms=info.log_append_time_ms,
                    record_count=info.record_count,
                )
            )
            return
        requester = ctx.requester
        if requester is None:
            return  # a tell cannot be answered; the data is appended all the same
        produce = DelayedProduce(
            produce_id=next(self._produce_ids),
            requester=requester,
            required_offset=required_offset,
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            record_count=info.record_count,
            created_ms=ctx.now_ms,
        )
        self.purgatory.add(produce)
        ctx.start_timer(
            ("produce", produce.produce_id), _ProduceExpired(produce.produce_id), message.timeout_ms
        )

    def _appended(
        self,
        log: Log,
        *,
        acks_all: bool,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        record_count: int = 0,
    ) -> PartitionAppendResult:
        """The answer to an append that reached the log (no offsets: it held no records). An acks=-1
        append the HW has reached is NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank
        below min.insync.replicas meanwhile (the data is in the log either way)."""
        error, text = ErrorCode.NONE, None
        if (
            acks_all
            and len(self.state.isr) < self.policy.min_insync_replicas
            and ProtocolFault.SKIP_MIN_INSYNC_CHECK not in self.config.protocol_faults
        ):
            error = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            text = (
                f"the ISR {sorted(self.state.isr)} shrank below min.insync.replicas "
                f"{self.policy.min_insync_replicas} (the data is in the log)"
            )
        return PartitionAppendResult(
            error_code=error,
            base_offset=base_offset,
            log_append_time_ms=log_append_time_ms,
            log_start_offset=log.log_start_offset,
            error_message=text,
            record_count=record_count,
        )

    @staticmethod
    def _append_failed(
        error: ErrorCode, text: str, *, base_offset: int = -1, log_start_offset: int = -1
    ) -> PartitionAppendResult:
        """The answer to an append refused, or whose fate is unknown (``base_offset`` set)."""
        return PartitionAppendResult(
            error_code=error, base_offset=base_offset, log_start_offset=log_start_offset, error_message=text
        )

    def _reply_append_error(self, ctx: Context[PartitionMessage], error: ErrorCode, text: str) -> None:
        self.counters.failed_produce_requests_total += 1
        log_start = self.log.log_start_offset if self.log is not None else -1
        if ctx.requester is not None:
            ctx.reply(self._append_failed(error, text, log_start_offset=log_start))

    def _complete_delayed_produces(self, ctx: Context[PartitionMessage], log: Log) -> None:
        for produce in self.purgatory.complete_up_to(log.high_watermark):
            ctx.cancel_timer(("produce", produce.produce_id))
            ctx.reply_to(
                produce.requester,
                self._appended(
                    log,
                    acks_all=True,
                    base_offset=produce.base_offset,
                    log_append_time_ms=produce.log_append_time_ms,
                    record_count=produce.record_count,
                ),
            )

    def _on_produce_expired(self, ctx: Context[PartitionMessage], message: _ProduceExpired) -> None:
        produce = self.purgatory.expire(message.produce_id)
        if produce is None:
            return
        self.counters.delayed_produce_expires_total += 1
        ctx.reply_to(
            produce.requester,
            self._append_failed(
                ErrorCode.REQUEST_TIMED_OUT,
                f"the high watermark did not reach {produce.required_offset} in time "
                "(the records are in the leader's log; their fate is unknown)",
                base_offset=produce.base_offset,
            ),
        )

    def _fail_delayed_produces(self, ctx: Context[PartitionMessage], error: ErrorCode) -> None:
        for produce in self.purgatory.drain():
            ctx.cancel_timer(("produce", produce.produce_id))
            ctx.reply_to(
                produce.requester, self._append_failed(error, f"partition {self.tp} is no longer led here")
            )

    # --------------------------------------------------------------------------------- fetch

    def _fetch_failed(
        self, error: ErrorCode, text: str, *, high_watermark: int = -1, log_start_offset: int = -1
    ) -> PartitionReadResult:
        """The answer to a read refused (the offsets are known when the fetch offset was out of range)."""
        return PartitionReadResult(
            FetchPartitionResponse(
                topic=self.tp.topic,
                partition=self.tp.partition,
                error_code=error,
                error_message=text,
                high_watermark=high_watermark,
                log_start_offset=log_start_offset,
            )
        )

    def _on_read_records(self, ctx: Context[PartitionMessage], message: ReadRecords) -> None:
        if message.update_follower_state:
            self.counters.fetch_requests_total += 1
        log = self.local_log(message.current_leader_epoch, require_leader=True)
        if isinstance(log, ErrorCode):
            self.counters.failed_fetch_requests_total += 1
            text = (
                f"broker {self.config.broker_id} is not the leader"
                if log is ErrorCode.NOT_LEADER_OR_FOLLOWER
                else f"request epoch {message.current_leader_epoch}, leader epoch {self.state.leader_epoch}"
            )
            ctx.reply(self._fetch_failed(log, text))
            return
        from_follower = message.replica_id >= 0
        replica = self.state.remote_replicas.get(message.replica_id) if from_follower else None
        high_watermark = log.high_watermark
        log_end_offset = log.log_end_offset
        log_start_offset = log.log_start_offset
        if from_follower and replica is None:
            # Not an assigned replica: it gets nothing, and nothing about it is recorded.
            ctx.reply(PartitionReadResult(self._fetch_response(high_watermark, log_start_offset, b"")))
            return
        fetch_offset = message.fetch_offset
        if message.fetch_log_end:
            fetch_offset = max(fetch_offset, log_start_offset)
        try:
            info = log.read(
                fetch_offset,
                message.max_bytes,
                None if from_follower or message.fetch_log_end else high_watermark,
                message.min_one_message,
            )
        except OffsetOutOfRangeError as error:
            self.counters.failed_fetch_requests_total += 1
            ctx.reply(
                self._fetch_failed(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    str(error),
                    high_watermark=high_watermark,
                    log_start_offset=log_start_offset,
                )
            )
            return
        advanced = False
        records = info.records
        withheld = (
            replica is not None
            and message.leader_throttled
            and message.replica_id not in self.state.maximal_isr
            and bool(records)
        )
        if withheld:
            # Over the leader replication quota: a replica outside the ISR waits (its fetch still
            # counts below); one in the ISR is never held back, so throttling never shrinks it.
            records = b""
        if replica is not None:
            advanced = high_watermark > replica.last_sent_high_watermark
            self.counters.replication_bytes_out_total += len(records)
            if message.replica_id in self.state.adding_replicas:
                self.counters.reassignment_bytes_out_total += len(records)
            if message.update_follower_state:
                previous_log_end_offset = replica.log_end_offset
                replica.update_fetch_state(
                    fetch_offset=message.fetch_offset,
                    follower_log_start_offset=message.follower_log_start_offset,
                    leader_end_offset=log_end_offset,
                    fetch_time_ms=ctx.now_ms,
                    high_watermark_sent=high_watermark,
                )
                if self.state.expansion_candidate(message.replica_id, log.high_watermark):
                    self._write_isr(ctx, self.state.begin_expand(message.replica_id), expanding=True)
                if replica.log_end_offset != previous_log_end_offset:
                    self._maybe_increment_high_watermark(ctx, log)
            else:
                replica.last_sent_high_watermark = high_watermark
        else:
            self.counters.bytes_out_total += len(records)
        ctx.reply(
            PartitionReadResult(
                self._fetch_response(high_watermark, log_start_offset, records),
                high_watermark_advanced_for_follower=advanced,
                log_end_offset=log_end_offset,
                withheld_by_quota=withheld,
            )
        )

    def _fetch_response(
        self, high_watermark: int, log_start_offset: int, records: bytes
    ) -> FetchPartitionResponse:
        return FetchPartitionResponse(
            topic=self.tp.topic,
            partition=self.tp.partition,
            error_code=ErrorCode.NONE,
            high_watermark=high_watermark,
            last_stable_offset=high_watermark,
            log_start_offset=log_start_offset,
            records=records,
        )

    def _on_last_offset_for_leader_epoch(
        self, ctx: Context[PartitionMessage], message: LastOffsetForLeaderEpoch
    ) -> None:
        """The leader side of OffsetsForLeaderEpoch (docs/leader-epochs.md §2), answered from the epoch
        cache."""

        def result(error: ErrorCode, epoch: int = -1, offset: int = -1) -> OffsetForLeaderEpochResult:
            return OffsetForLeaderEpochResult(
                topic=self.tp.topic,
                partition=self.tp.partition,
                error_code=error,
                leader_epoch=epoch,
                end_offset=offset,
            )

        log = self.local_log(message.current_leader_epoch, require_leader=True)
        if isinstance(log, ErrorCode):
            ctx.reply(result(log))
            return
        found = log.end_offset_for_epoch(message.leader_epoch)
        ctx.reply(result(ErrorCode.NONE) if found is None else result(ErrorCode.NONE, found[0], found[1]))

    def _on_fetch_offset_for_timestamp(
        self, ctx: Context[PartitionMessage], message: FetchOffsetForTimestamp
    ) -> None:
        """The leader side of ListOffsets (Kafka 2.4's ``Partition.fetchOffsetForTimestamp``,
        docs/log.md §11). A consumer (negative replica id) is answered below the high watermark, a
        follower below the log end offset. EARLIEST is the log start offset with the first cached
        epoch when it starts at or below it; LATEST the high watermark (consumer) or log end offset
        (follower) with the current epoch; a timestamp >= 0 the first record at or above the log
        start offset whose timestamp reaches it (``Log.fetch_offset_by_timestamp``) with its
        timestamp and its batch's epoch, if that offset is below the bound, else no offset (-1,
        error NONE). Other negative timestamps are not Kafka 2.4 sentinels: INVALID_REQUEST."""

        def result(
            error: ErrorCode, offset: int = -1, *, timestamp: int = -1, leader_epoch: int = -1
        ) -> ListOffsetsPartitionResponse:
            return ListOffsetsPartitionResponse(
                topic=self.tp.topic, partition=self.tp.partition, error_code=error, timestamp=timestamp,
                offset=offset, leader_epoch=leader_epoch,
            )  # fmt: skip

        log = self.local_log(message.current_leader_epoch, require_leader=True)
        if isinstance(log, ErrorCode):
            ctx.reply(result(log))
            return
        is_client_request = message.replica_id < 0
        last_fetchable_offset = log.high_watermark if is_client_request else log.log_end_offset
        # A new leader whose HW has not reached its own epoch yet (Kafka 2.3+): a consumer may not
        # be told an offset it cannot read, nor "none" where the records may be above the HW.
        epoch_start = self.state.leader_epoch_start_offset
        offset_not_available = (
            is_client_request and epoch_start is not None and epoch_start > log.high_watermark
        )
        if message.timestamp == EARLIEST_TIMESTAMP:
            earliest = log.leader_epoch_cache.earliest_entry
            epoch = (
                earliest.epoch
                if earliest is not None and earliest.start_offset <= log.log_start_offset
                else NO_PARTITION_LEADER_EPOCH
            )
            ctx.reply(result(ErrorCode.NONE, log.log_start_offset, leader_epoch=epoch))
        elif message.timestamp == LATEST_TIMESTAMP:
            if offset_not_available:
                ctx.reply(result(ErrorCode.OFFSET_NOT_AVAILABLE))
            else:
                ctx.reply(result(ErrorCode.NONE, last_fetchable_offset, leader_epoch=self.state.leader_epoch))
        elif message.timestamp < 0:
            ctx.reply(result(ErrorCode.INVALID_REQUEST))
        else:
            try:
                found = log.fetch_offset_by_timestamp(message.timestamp)
            except StorageError as error:
                ctx.log.warning("%s: offset for timestamp %d failed: %s", self.tp, message.timestamp, error)
                ctx.reply(result(_error_code_of(error)))
                return
            if found is not None and found.offset < last_fetchable_offset:
                epoch = NO_PARTITION_LEADER_EPOCH if found.leader_epoch is None else found.leader_epoch
                ctx.reply(result(ErrorCode.NONE, found.offset, timestamp=found.timestamp, leader_epoch=epoch))
            elif offset_not_available:
                ctx.reply(result(ErrorCode.OFFSET_NOT_AVAILABLE))
            else:
                ctx.reply(result(ErrorCode.NONE))

    # -------------------------------------------------------------------------- follower side
    # The role table lets these reach a follower only; ``local_log`` then fences the leader epoch
    # the fetcher built the request for, so no data or truncation crosses a leadership change.

    def _on_follower_request(self, ctx: Context[PartitionMessage], message: FollowerRequest) -> None:
        log = self.local_log(message.leader_epoch, require_leader=False)
        if isinstance(log, ErrorCode):
            ctx.reply(follower.refused(message, log))
            return
        match message:
            case GetFollowerLogState():
                ctx.reply(follower.log_state(log))
            case TruncateOnLeaderEpoch() if self._truncate_to_high_watermark:
                # The simulation's negative control (ProtocolFault): the pre-KIP-101 rule, cutting
                # to the local high watermark whatever the leader answered.
                self._truncate(ctx, log, log.high_watermark, cause="high watermark (negative control)")
                ctx.reply(follower.truncated(log, complete=True))
            case TruncateOnLeaderEpoch():
                decision = follower.truncation_on_leader_epoch(log, message)
                cause = f"leader epoch {message.leader_epoch_answer} ends at {message.end_offset}"
                self._truncate(ctx, log, decision.offset, cause=cause)
                ctx.reply(follower.truncated(log, complete=decision.complete))
            case TruncateTo():
                self._truncate(ctx, log, message.offset, cause="fetcher")
                ctx.reply(follower.truncated(log, complete=True))
            case TruncateFullyAndStartAt():
                ctx.log.info("%s: truncating fully and restarting at %d", self.tp, message.offset)
                log.truncate_fully_and_start_at(
                    message.offset, now_ms=ctx.now_ms, wall_clock_ms=ctx.wall_clock_ms
                )
                self.log_manager.checkpoint_recovery_points()
                ctx.reply(follower.truncated(log, complete=True))
            case AppendAsFollower():
                self._append_as_follower(ctx, log, message)
            case _:
                assert_never(message)

    def _truncate(self, ctx: Context[PartitionMessage], log: Log, offset: int, *, cause: str) -> None:
        before = log.log_end_offset
        if self.log_manager.truncate_to(self.tp, offset, now_ms=ctx.now_ms):
            ctx.log.info("%s: truncated from %d to %d (%s)", self.tp, before, log.log_end_offset, cause)

    def _append_as_follower(
        self, ctx: Context[PartitionMessage], log: Log, message: AppendAsFollower
    ) -> None:
        result, flush_up_to_offset = follower.append_as_follower(ctx, log, message)
        self.counters.replication_bytes_in_total += result.appended_bytes
        if self.config.broker_id in self.state.adding_replicas:
            self.counters.reassignment_bytes_in_total += result.appended_bytes
        if flush_up_to_offset is not None:
            self._request_flush(ctx, flush_up_to_offset)
        ctx.reply(result)

    # ----------------------------------------------------------------------------- ISR changes

    def _on_maybe_shrink_isr(self, ctx: Context[PartitionMessage], leader: Leader) -> None:
        log = leader.log
        out_of_sync = self.state.out_of_sync_replicas(
            log.log_end_offset, ctx.now_ms, self.config.replica_lag_time_max_ms
        )
        if not out_of_sync:
            return
        for broker_id in sorted(out_of_sync):
            replica = self.state.remote_replicas[broker_id]
            ctx.log.info(
                "%s: shrinking ISR: replica %d is out of sync "
                "(log end offset %d, leader %d, last caught up %s ms ago)",
                self.tp, broker_id, replica.log_end_offset, log.log_end_offset,
                None if replica.last_caught_up_time_ms is None
                else ctx.now_ms - replica.last_caught_up_time_ms,
            )  # fmt: skip
        self._write_isr(ctx, self.state.begin_shrink(out_of_sync), expanding=False)

    def _write_isr(self, ctx: Context[PartitionMessage], proposal: LeaderAndIsr, *, expanding: bool) -> None:
        """Conditionally write the partition state znode; the outcome comes back as _IsrWriteDone."""
        operation = conditional_isr_write(self.coordinator, self.tp, proposal)

        def failed(error: Exception) -> _IsrWriteDone:
            # No answer (a lost connection, a timeout): the write may have landed. Not BADVERSION
            # or NONODE, which conditional_isr_write answers with None.
            return _IsrWriteDone(
                proposal, expanding, None, reason=f"{type(error).__name__}: {error}", unknown=True
            )

        ctx.pipe_to_self(operation, lambda version: _IsrWriteDone(proposal, expanding, version), failed)

    def _isr_write_still_wanted(self, proposal: LeaderAndIsr) -> bool:
        """Not if the leader epoch moved on, or the change was resolved meanwhile (the role table
        already dropped the write of a partition that is no longer leader)."""
        return self.state.leader_epoch == proposal.leader_epoch and self.state.isr_change_in_flight

    def _on_isr_write_done(
        self, ctx: Context[PartitionMessage], leader: Leader, message: _IsrWriteDone
    ) -> None:
        state = self.state
        proposal = message.proposal
        if not self._isr_write_still_wanted(proposal):
            return  # the leader epoch changed while the write was in flight; the controller's state rules
        if message.unknown:
            # Resolve it, do not assume it failed (Kafka's checkLeaderAndIsrZkData on the retry):
            # the change stays in flight (the HW keeps counting the maximal ISR) and the same
            # proposal is written again.
            ctx.log.warning(
                "%s: ISR update to %s has an unknown outcome (%s); retrying",
                self.tp, list(proposal.isr), message.reason,
            )  # fmt: skip
            ctx.start_timer(
                "isr-write-retry", _RetryIsrWrite(proposal, message.expanding), _ISR_WRITE_RETRY_MS
            )
            return
        previous_isr = sorted(state.isr)
        if message.new_zk_version is not None:
            state.complete_isr_change(proposal, message.new_zk_version)
            if message.expanding:
                self.counters.isr_expands_total += 1
            else:
                self.counters.isr_shrinks_total += 1
            state_change(
                ctx.log, str(self.tp), f"isr={previous_isr}", f"isr={list(proposal.isr)}",
                "expand" if message.expanding else "shrink", zk_version=message.new_zk_version,
            )  # fmt: skip
            self._record_isr_change(ctx, previous_isr, proposal, message.expanding, message.new_zk_version)
            ctx.tell(self.broker, IsrChangeRecorded(self.tp))
        else:
            state.abort_isr_change()
            self.counters.failed_isr_updates_total += 1
            ctx.log.warning(
                "%s: cached zkVersion %d not equal to that in ZooKeeper, skip updating ISR to %s%s",
                self.tp, proposal.zk_version, list(proposal.isr),
                f" ({message.reason})" if message.reason else "",
            )  # fmt: skip
        # Whatever happened, the ISR may now allow the HW to move (a shrink to just the leader).
        self._maybe_increment_high_watermark(ctx, leader.log)

    def _record_isr_change(
        self,
        ctx: Context[PartitionMessage],
        previous_isr: list[BrokerId],
        proposal: LeaderAndIsr,
        expanding: bool,
        zk_version: int,
    ) -> None:
        """The state-change event of a leader's own ISR write. A replica that left had either
        fetched within ``replica.lag.time.max.ms`` without catching up (``lag``) or not fetched at
        all (``fetch_stopped``)."""
        if self.state_changes is None:
            return
        if expanding:
            reason = "caught_up"
        else:
            removed = [b for b in previous_isr if b not in proposal.isr]
            lag_max_ms = self.config.replica_lag_time_max_ms

            def stopped(broker_id: BrokerId) -> bool:
                replica = self.state.remote_replicas.get(broker_id)
                last_fetch = None if replica is None else replica.last_fetch_time_ms
                return last_fetch is None or ctx.now_ms - last_fetch > lag_max_ms

            reason = "fetch_stopped" if removed and all(stopped(b) for b in removed) else "lag"
        self.state_changes.record(
            StateChange(
                ts_ms=ctx.wall_clock_ms,
                kind="isr_expand" if expanding else "isr_shrink",
                tp=self.tp,
                leader=self.config.broker_id,
                leader_epoch=proposal.leader_epoch,
                zk_version=zk_version,
                isr=tuple(proposal.isr),
                previous_isr=tuple(previous_isr),
                replicas=tuple(self.state.assigned_replicas),
                min_insync_replicas=self.policy.min_insync_replicas,
                reason=reason,
            )
        )

    # ------------------------------------------------------------------------------------ HW

    def _maybe_increment_high_watermark(self, ctx: Context[PartitionMessage], log: Log) -> None:
        """On the leader only (its callers are leader paths)."""
        candidate = self.state.high_watermark_candidate(
            log.log_end_offset, ctx.now_ms, self.config.replica_lag_time_max_ms
        )
        if log.maybe_increment_high_watermark(max(candidate, 0)):
            self._complete_delayed_produces(ctx, log)
            self._changed(ctx)

    def _on_notify_on_change(
        self, ctx: Context[PartitionMessage], leader: Leader, message: NotifyOnChange
    ) -> None:
        log = leader.log
        if (
            log.log_end_offset != message.seen_log_end_offset
            or log.high_watermark != message.seen_high_watermark
        ):
            ctx.tell(self.broker, PartitionChanged(self.tp))
            return
        self._notify_broker_on_change = True

    def _changed(self, ctx: Context[PartitionMessage]) -> None:
        """New data, a new HW or a new role: wake the broker's parked fetches if it asked."""
        if self._notify_broker_on_change:
            self._notify_broker_on_change = False
            ctx.tell(self.broker, PartitionChanged(self.tp))

    # --------------------------------------------------------------------------------- flush

    def _request_flush(self, ctx: Context[PartitionMessage], up_to_offset: int) -> None:
        """Start an fsync up to ``up_to_offset`` off the event loop (one at a time, coalesced)."""
        self._flush_wanted_up_to = max(self._flush_wanted_up_to or 0, up_to_offset)
        if self._flush_in_flight or self.log is None:
            return
        job = self.log.begin_flush(self._flush_wanted_up_to)
        self._flush_wanted_up_to = None
        self._flush_in_flight = True
        ctx.pipe_blocking_to_self(job.run, lambda _: _FlushDone(job), lambda error: _FlushDone(job, error))

    def _on_flush_done(self, ctx: Context[PartitionMessage], message: _FlushDone) -> None:
        self._flush_in_flight = False
        if message.error is not None:
            if isinstance(message.error, OSError):
                self._log_dir_failed(ctx, message.error, message)
                return
            raise message.error
        if self.log is not None:
            self.log.complete_flush(message.job, now_ms=ctx.now_ms)
        if self._flush_wanted_up_to is not None:
            self._request_flush(ctx, self._flush_wanted_up_to)

    # ---------------------------------------------------------------------------- statistics

    def statistics(self) -> PartitionStatistics:
        log = self.log
        log_stats = log.statistics() if log is not None else None
        state = self.state
        counters = self.counters
        return PartitionStatistics(
            tp=self.tp,
            role=state.role,
            leader_id=state.leader_id,
            leader_epoch=state.leader_epoch,
            isr=state.ordered(state.isr),
            assigned_replicas=state.assigned_replicas,
            min_insync_replicas=self.policy.min_insync_replicas,
            log_start_offset=log_stats.log_start_offset if log_stats else -1,
            log_end_offset=log_stats.log_end_offset if log_stats else -1,
            high_watermark=log_stats.high_watermark if log_stats else -1,
            size_bytes=log_stats.size_in_bytes if log_stats else 0,
            segment_count=log_stats.segment_count if log_stats else 0,
            isr_change_in_flight=state.isr_change_in_flight,
            delayed_produces=len(self.purgatory),
            isr_shrinks_total=counters.isr_shrinks_total,
            isr_expands_total=counters.isr_expands_total,
            failed_isr_updates_total=counters.failed_isr_updates_total,
            bytes_in_total=counters.bytes_in_total,
            messages_in_total=counters.messages_in_total,
            bytes_out_total=counters.bytes_out_total,
            replication_bytes_in_total=counters.replication_bytes_in_total,
            replication_bytes_out_total=counters.replication_bytes_out_total,
            produce_requests_total=counters.produce_requests_total,
            failed_produce_requests_total=counters.failed_produce_requests_total,
            fetch_requests_total=counters.fetch_requests_total,
            failed_fetch_requests_total=counters.failed_fetch_requests_total,
            delayed_produce_expires_total=counters.delayed_produce_expires_total,
            adding_replicas=state.adding_replicas,
            removing_replicas=state.removing_replicas,
            reassignment_bytes_in_total=counters.reassignment_bytes_in_total,
            reassignment_bytes_out_total=counters.reassignment_bytes_out_total,
        )
