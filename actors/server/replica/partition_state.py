"""Pure replication state of one partition on one broker: role, ISR, follower progress, HW rule.

House rules
-----------
1. Everything that decides ISR membership and the high watermark lives here; the partition actor
   only feeds it events (a LeaderAndIsr, a follower fetch, a tick) and carries out what it returns
   (a ZooKeeper write, a log call). Nothing here does I/O or reads a clock: time is ``now_ms``.
2. The state does not know the log. Where a rule needs the leader's log end offset or HW, the
   caller passes it in.

Theory of operation (docs/replication.md §1–§4)
----------------------------------------------
A partition is LEADER, FOLLOWER or NONE (hosted but not yet told its role). On the leader,
``remote_replicas`` holds the leader's view of each follower (``ReplicaProgress``: its LEO, log
start, and the two-step ``last_caught_up_time_ms`` rule of docs/replication.md §2.3).

The ISR is written to ZooKeeper before it takes effect, and the write is asynchronous, so the ISR
has three states (Kafka 2.7's names): ``CommittedIsr``; ``PendingExpandIsr`` (a follower is being
added); ``PendingShrinkIsr`` (out-of-sync followers are being removed). While a change is in flight
no other change starts, and the high watermark is computed over the *maximal* ISR: the committed
ISR plus a follower being added, and without removing the followers being dropped. So a shrink
advances the HW only once ZooKeeper has accepted it (the AsyncIsr rule of the TLA+ model:
every member of the true ISR has everything below the HW).

Rules applied:
* out of sync (docs/replication.md §2.2): LEO != leader LEO **and** now − last_caught_up_time_ms >
  replica.lag.time.max.ms;
* in sync for expansion (docs/replication.md §3): follower LEO ≥ HW **and** ≥ the leader epoch start
  offset;
* HW candidate (docs/replication.md §4.1): min of the leader LEO and the LEOs of remote replicas that are in
  the maximal ISR or caught up (LEO equals leader LEO, or caught up within the lag bound).
The HW itself only moves forward on the leader; the log enforces that.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypeAlias

from actors.common.types import NO_LEADER, UNKNOWN_OFFSET, BrokerId, TopicPartition

__all__ = [
    "CommittedIsr",
    "IsrState",
    "LeaderAndIsr",
    "PartitionState",
    "PendingExpandIsr",
    "PendingShrinkIsr",
    "ReplicaProgress",
    "Role",
]


class Role(enum.Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True, slots=True)
class CommittedIsr:
    isr: frozenset[BrokerId]

    @property
    def maximal_isr(self) -> frozenset[BrokerId]:
        return self.isr


@dataclass(frozen=True, slots=True)
class PendingExpandIsr:
    isr: frozenset[BrokerId]
    new_in_sync_replica: BrokerId

    @property
    def maximal_isr(self) -> frozenset[BrokerId]:
        return self.isr | {self.new_in_sync_replica}


@dataclass(frozen=True, slots=True)
class PendingShrinkIsr:
    isr: frozenset[BrokerId]
    out_of_sync_replicas: frozenset[BrokerId]

    @property
    def maximal_isr(self) -> frozenset[BrokerId]:
        return self.isr


IsrState: TypeAlias = CommittedIsr | PendingExpandIsr | PendingShrinkIsr


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsr:
    """The content of a partition state znode (what a leader proposes for an ISR change)."""

    leader: BrokerId
    leader_epoch: int
    isr: tuple[BrokerId, ...]
    controller_epoch: int
    zk_version: int


@dataclass(slots=True)
class ReplicaProgress:
    """The leader's view of one follower (Kafka's ``Replica``).

    Kafka initialises ``lastFetchTimeMs`` and ``lastCaughtUpTimeMs`` to 0, which means "never"
    only because its clock is the wall clock (0 is 1970). Our ``now_ms`` is monotonic and virtual
    time starts at 0, so "never" is spelled ``None``.
    """

    broker_id: BrokerId
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int | None = None
    last_caught_up_time_ms: int | None = None
    last_sent_high_watermark: int = 0

    def update_fetch_state(
        self,
        *,
        fetch_offset: int,
        follower_log_start_offset: int,
        leader_end_offset: int,
        fetch_time_ms: int,
        high_watermark_sent: int,
    ) -> None:
        """Record a follower fetch (docs/replication.md §2.3). ``leader_end_offset`` is the leader LEO before
        the read."""
        if fetch_offset >= leader_end_offset:
            self._caught_up_at(fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset and self.last_fetch_time_ms is not None:
            # It has now reached what the leader had at its previous fetch: caught up as of then.
            self._caught_up_at(self.last_fetch_time_ms)
        self.log_start_offset = follower_log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms
        self.last_sent_high_watermark = high_watermark_sent

    def _caught_up_at(self, time_ms: int) -> None:
        previous = self.last_caught_up_time_ms
        self.last_caught_up_time_ms = time_ms if previous is None else max(previous, time_ms)

    def _caught_up_within(self, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        caught_up = self.last_caught_up_time_ms
        return caught_up is not None and now_ms - caught_up <= replica_lag_time_max_ms

    def is_caught_up(self, leader_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or self._caught_up_within(
            now_ms, replica_lag_time_max_ms
        )

    def is_out_of_sync(self, leader_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        return self.log_end_offset != leader_end_offset and not self._caught_up_within(
            now_ms, replica_lag_time_max_ms
        )


@dataclass(slots=True)
class PartitionState:
    """Role, assignment, ISR, epochs and follower progress of one partition on this broker."""

    tp: TopicPartition
    local_broker_id: BrokerId
    role: Role = Role.NONE
    assigned_replicas: tuple[BrokerId, ...] = ()
    leader_id: BrokerId = NO_LEADER
    leader_epoch: int = -1
    zk_version: int = 0
    controller_epoch: int = 0
    isr_state: IsrState = field(default_factory=lambda: CommittedIsr(frozenset()))
    leader_epoch_start_offset: int | None = None
    remote_replicas: dict[BrokerId, ReplicaProgress] = field(default_factory=dict)
    # KIP-455: while the partition is being reassigned, the replicas being added and removed, as
    # the last LeaderAndIsr said (``assigned_replicas`` is then the full replica set).
    adding_replicas: tuple[BrokerId, ...] = ()
    removing_replicas: tuple[BrokerId, ...] = ()

    # ---------------------------------------------------------------------------- properties

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def isr(self) -> frozenset[BrokerId]:
        """The committed ISR (what ZooKeeper holds)."""
        return self.isr_state.isr

    @property
    def maximal_isr(self) -> frozenset[BrokerId]:
        return self.isr_state.maximal_isr

    @property
    def is_reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def isr_change_in_flight(self) -> bool:
        return not isinstance(self.isr_state, CommittedIsr)

    def ordered(self, brokers: frozenset[BrokerId]) -> tuple[BrokerId, ...]:
        """Brokers in assignment order (how ISR lists are written), unknown ones last, sorted."""
        known = [b for b in self.assigned_replicas if b in brokers]
        return (*known, *sorted(brokers - set(known)))

    # -------------------------------------------------------------------------- role changes

    def make_leader(
        self,
        *,
        controller_epoch: int,
        leader_epoch: int,
        isr: frozenset[BrokerId],
        assigned_replicas: tuple[BrokerId, ...],
        zk_version: int,
        leader_log_end_offset: int,
        now_ms: int,
        adding_replicas: tuple[BrokerId, ...] = (),
        removing_replicas: tuple[BrokerId, ...] = (),
    ) -> bool:
        """Become leader (docs/replication.md §2.3, docs/controller.md §5). Returns True if this broker was
        not leader before."""
        was_leader = self.role is Role.LEADER and self.leader_id == self.local_broker_id
        self.controller_epoch = controller_epoch
        self.assigned_replicas = assigned_replicas
        self.adding_replicas = adding_replicas
        self.removing_replicas = removing_replicas
        self.isr_state = CommittedIsr(isr)
        self.leader_epoch = leader_epoch
        self.zk_version = zk_version
        self.leader_epoch_start_offset = leader_log_end_offset
        self.leader_id = self.local_broker_id
        self.role = Role.LEADER
        remotes = [b for b in assigned_replicas if b != self.local_broker_id]
        self.remote_replicas = {b: self.remote_replicas.get(b, ReplicaProgress(b)) for b in remotes}
        for broker_id, replica in self.remote_replicas.items():
            # ISR members get a full lag window from the moment of election; others start at 0.
            replica.last_fetch_leader_log_end_offset = leader_log_end_offset
            replica.last_fetch_time_ms = now_ms
            replica.last_caught_up_time_ms = now_ms if broker_id in isr else None
            if not was_leader:
                # A new leader knows nothing of its followers' logs yet.
                replica.log_end_offset = UNKNOWN_OFFSET
                replica.log_start_offset = UNKNOWN_OFFSET
                replica.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
                replica.last_fetch_time_ms = None
                replica.last_sent_high_watermark = 0
        return not was_leader

    def make_follower(
        self,
        *,
        controller_epoch: int,
        leader_id: BrokerId,
        leader_epoch: int,
        assigned_replicas: tuple[BrokerId, ...],
        zk_version: int,
        adding_replicas: tuple[BrokerId, ...] = (),
        removing_replicas: tuple[BrokerId, ...] = (),
    ) -> bool:
        """Become follower (docs/controller.md §5). False if neither the leader nor the leader epoch
        changed."""
        unchanged = (
            self.role is Role.FOLLOWER and self.leader_id == leader_id and self.leader_epoch == leader_epoch
        )
        self.controller_epoch = controller_epoch
        self.assigned_replicas = assigned_replicas
        self.adding_replicas = adding_replicas
        self.removing_replicas = removing_replicas
        self.isr_state = CommittedIsr(frozenset())  # only meaningful on the leader
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = None
        self.zk_version = zk_version
        self.remote_replicas = {}
        if unchanged:
            return False
        self.leader_id = leader_id
        self.role = Role.FOLLOWER
        return True

    def make_offline(self) -> None:
        """Stop acting on this partition (StopReplica); keeps epochs for fencing."""
        self.role = Role.NONE
        self.leader_id = NO_LEADER
        self.isr_state = CommittedIsr(frozenset())
        self.leader_epoch_start_offset = None
        self.remote_replicas = {}

    # ----------------------------------------------------------------------- follower fetches

    def is_follower_in_sync(self, replica: ReplicaProgress, high_watermark: int) -> bool:
        """The expansion condition of docs/replication.md §3 (2.0.1+): LEO ≥ HW and ≥ the leader epoch
        start offset."""
        return (
            self.leader_epoch_start_offset is not None
            and replica.log_end_offset >= high_watermark
            and replica.log_end_offset >= self.leader_epoch_start_offset
        )

    def expansion_candidate(self, follower_id: BrokerId, high_watermark: int) -> bool:
        """Whether a fetch from ``follower_id`` should start an ISR expansion now."""
        if not self.is_leader or self.isr_change_in_flight:
            return False
        if follower_id in self.isr or follower_id not in self.assigned_replicas:
            return False
        replica = self.remote_replicas.get(follower_id)
        return replica is not None and self.is_follower_in_sync(replica, high_watermark)

    def high_watermark_candidate(
        self, leader_log_end_offset: int, now_ms: int, replica_lag_time_max_ms: int
    ) -> int:
        """docs/replication.md §4.1 over the maximal ISR; the log keeps the leader HW from moving
        backwards."""
        candidate = leader_log_end_offset
        maximal_isr = self.maximal_isr
        for replica in self.remote_replicas.values():
            if replica.log_end_offset < candidate and (
                replica.broker_id in maximal_isr
                or replica.is_caught_up(leader_log_end_offset, now_ms, replica_lag_time_max_ms)
            ):
                candidate = replica.log_end_offset
        return candidate

    def out_of_sync_replicas(
        self, leader_log_end_offset: int, now_ms: int, replica_lag_time_max_ms: int
    ) -> frozenset[BrokerId]:
        """docs/replication.md §2.2 among ISR members other than the leader; empty while an ISR change is
        in flight."""
        if not self.is_leader or self.isr_change_in_flight:
            return frozenset()
        return frozenset(
            broker_id
            for broker_id in self.isr
            if broker_id != self.local_broker_id
            and (replica := self.remote_replicas.get(broker_id)) is not None
            and replica.is_out_of_sync(leader_log_end_offset, now_ms, replica_lag_time_max_ms)
        )

    # ---------------------------------------------------------------------------- ISR changes

    def begin_expand(self, follower_id: BrokerId) -> LeaderAndIsr:
        assert isinstance(self.isr_state, CommittedIsr), f"{self.tp}: ISR change already in flight"
        self.isr_state = PendingExpandIsr(self.isr, follower_id)
        return self._proposal(self.isr | {follower_id})

    def begin_shrink(self, out_of_sync: frozenset[BrokerId]) -> LeaderAndIsr:
        assert isinstance(self.isr_state, CommittedIsr), f"{self.tp}: ISR change already in flight"
        assert out_of_sync, f"{self.tp}: a shrink needs out-of-sync replicas"
        assert self.local_broker_id not in out_of_sync, (
            f"{self.tp}: cannot remove {sorted(out_of_sync)} (the leader stays in the ISR)"
        )
        self.isr_state = PendingShrinkIsr(self.isr, out_of_sync)
        return self._proposal(self.isr - out_of_sync)

    def _proposal(self, new_isr: frozenset[BrokerId]) -> LeaderAndIsr:
        assert self.local_broker_id in new_isr, f"{self.tp}: the leader must stay in the ISR"
        return LeaderAndIsr(
            leader=self.local_broker_id,
            leader_epoch=self.leader_epoch,
            isr=self.ordered(new_isr),
            controller_epoch=self.controller_epoch,
            zk_version=self.zk_version,
        )

    def complete_isr_change(self, proposal: LeaderAndIsr, new_zk_version: int) -> None:
        """ZooKeeper accepted ``proposal``: it becomes the committed ISR."""
        self.isr_state = CommittedIsr(frozenset(proposal.isr))
        self.zk_version = new_zk_version

    def abort_isr_change(self) -> None:
        """ZooKeeper refused (stale zkVersion): the committed ISR and zkVersion stay as they were."""
        self.isr_state = CommittedIsr(self.isr)

    # ----------------------------------------------------------------------------- gauges

    def is_under_replicated(self) -> bool:
        """KIP-352: replicas being added by a reassignment do not count until they are in sync."""
        return self.is_leader and len(self.assigned_replicas) - len(self.adding_replicas) > len(self.isr)

    def is_under_min_isr(self, min_insync_replicas: int) -> bool:
        return self.is_leader and len(self.isr) < min_insync_replicas

    def is_at_min_isr(self, min_insync_replicas: int) -> bool:
        return self.is_leader and len(self.isr) == min_insync_replicas
