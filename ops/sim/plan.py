"""The plan of one simulated run: a list of timed actions drawn from the seed, before it starts.

A plan is data, independent of what the cluster does: an action names its targets (a broker id, a
topic slot) and is skipped at run time when it does not apply (killing a broker that is down).
That is what makes a failing run shrinkable: drop actions from the plan, run again with the same
seed, and see whether it still fails.

Workload actions: create, delete and re-create topics; alter ``unclean.leader.election.enable``
and ``min.insync.replicas``; produce (idempotent, acks=all); controlled shutdowns; preferred
leader elections; partition reassignments to another replica set (KIP-455), some cancelled later.
Fault actions: kill and power loss (with a restart after a downtime), clean
restarts, stalls (SIGSTOP), network partitions (symmetric, one-way, a broker isolated, a broker
cut from ZooKeeper only, a broker cut from the controller only), slow and lossy links, ZooKeeper
session expiry, a ZooKeeper outage, disk faults and actor crashes injected into handlers.
Durations end on their own; the runner heals what is left before it checks liveness.
"""

from __future__ import annotations

import dataclasses
import enum
import random
from dataclasses import dataclass
from typing import TypeAlias

from runtime.storage.fs import DiskFault

__all__ = [
    "Action",
    "FaultKind",
    "PlanOptions",
    "Reassign",
    "generate_plan",
]


class FaultKind(enum.Enum):
    """Every fault the simulation injects (the closing note counts them by these names)."""

    KILL = "kill"
    POWER_LOSS = "power-loss"
    CLEAN_RESTART = "clean-restart"
    STALL = "stall"
    PARTITION = "partition"
    ONE_WAY_PARTITION = "one-way-partition"
    ISOLATE = "isolate"
    ZOOKEEPER_CUT = "zookeeper-cut"
    CONTROLLER_CUT = "controller-cut"
    SLOW_LINK = "slow-link"
    LOSSY_LINK = "lossy-link"
    SESSION_EXPIRY = "session-expiry"
    ZOOKEEPER_OUTAGE = "zookeeper-outage"
    DISK_FAULT = "disk-fault"
    ACTOR_CRASH = "actor-crash"


# ----------------------------------------------------------------------------------- workload


@dataclass(frozen=True, slots=True)
class CreateTopic:
    at_ms: int
    slot: int
    partitions: int
    replication_factor: int


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    at_ms: int
    slot: int


@dataclass(frozen=True, slots=True)
class AlterTopicConfig:
    at_ms: int
    slot: int
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class Produce:
    at_ms: int
    slot: int
    producer: int
    count: int


@dataclass(frozen=True, slots=True)
class ControlledShutdown:
    at_ms: int
    broker: int
    downtime_ms: int


@dataclass(frozen=True, slots=True)
class PreferredElection:
    at_ms: int
    slot: int


@dataclass(frozen=True, slots=True)
class Reassign:
    """Reassign a partition of a topic slot (``partition`` modulo its partition count) to the
    first N of ``brokers`` (a permutation of every broker), N being its replication factor; with
    ``cancel_after_ms``, cancel it that much later if it is still in progress."""

    at_ms: int
    slot: int
    partition: int
    brokers: tuple[int, ...]
    cancel_after_ms: int | None


# ------------------------------------------------------------------------------------- faults


@dataclass(frozen=True, slots=True)
class BrokerFault:
    """KILL, POWER_LOSS, CLEAN_RESTART (``duration_ms`` is the downtime), STALL, ISOLATE,
    ZOOKEEPER_CUT, CONTROLLER_CUT, SESSION_EXPIRY (instant)."""

    at_ms: int
    kind: FaultKind
    broker: int
    duration_ms: int


@dataclass(frozen=True, slots=True)
class LinkFault:
    """PARTITION (both ways), ONE_WAY_PARTITION (``source`` to ``target`` only), SLOW_LINK and
    LOSSY_LINK (both ways) between two brokers."""

    at_ms: int
    kind: FaultKind
    source: int
    target: int
    duration_ms: int
    amount: float = 0.0


@dataclass(frozen=True, slots=True)
class ZooKeeperOutage:
    at_ms: int
    duration_ms: int


@dataclass(frozen=True, slots=True)
class DiskFaultAction:
    at_ms: int
    broker: int
    fault: DiskFault
    duration_ms: int


@dataclass(frozen=True, slots=True)
class ActorCrash:
    """The next handler run by an actor of ``actor`` kind on ``broker`` raises."""

    at_ms: int
    broker: int
    actor: str


Action: TypeAlias = (
    CreateTopic
    | DeleteTopic
    | AlterTopicConfig
    | Produce
    | ControlledShutdown
    | PreferredElection
    | Reassign
    | BrokerFault
    | LinkFault
    | ZooKeeperOutage
    | DiskFaultAction
    | ActorCrash
)


@dataclass(frozen=True, slots=True)
class PlanOptions:
    brokers: tuple[int, ...] = (1, 2, 3)
    topic_slots: int = 3
    producers_per_topic: int = 2
    mean_gap_ms: int = 400
    fault_probability: float = 0.3
    # Fault kinds to draw from (all by default).
    faults: frozenset[FaultKind] = frozenset(FaultKind)
    # Topic deletion and config changes (off for runs that check one topic's data end to end).
    topic_churn: bool = True
    config_changes: bool = True
    # Partition reassignments (taking part of the preferred elections' share).
    reassignments: bool = True
    # Replication factors new topics draw from (capped by the broker count).
    replication_factors: tuple[int, ...] = (2, 3, 3)
    # Share of workload actions that are produce actions (the rest: topic and broker admin).
    produce_share: float = 0.70
    # Actors an injected crash may hit.
    actor_kinds: tuple[str, ...] = (
        "partition",
        "broker",
        "controller",
        "replica-fetcher",
        "admin",
        "broker-registration",
    )


def generate_plan(seed: int, steps: int, options: PlanOptions) -> list[Action]:
    """``steps`` actions, the first ones creating every topic slot, drawn from ``seed`` only."""
    rng = random.Random(f"plan:{seed}")
    brokers = options.brokers
    plan: list[Action] = []
    now = 500
    for slot in range(options.topic_slots):
        rf = min(len(brokers), rng.choice(options.replication_factors))
        plan.append(CreateTopic(now, slot, rng.choice((1, 2, 3)), rf))
        now += 100
    faults = sorted(options.faults, key=lambda kind: kind.value)
    while len(plan) < steps:
        now += max(1, int(rng.expovariate(1 / options.mean_gap_ms)))
        roll = rng.random()
        if faults and roll < options.fault_probability:
            plan.append(_fault(rng, now, rng.choice(faults), brokers, options.actor_kinds))
            continue
        slot = rng.randrange(options.topic_slots)
        workload = rng.random()
        if workload < options.produce_share:
            plan.append(Produce(now, slot, rng.randrange(options.producers_per_topic), rng.randint(1, 20)))
        elif workload < 0.78 and options.topic_churn:
            plan.append(DeleteTopic(now, slot))
        elif workload < 0.86 and options.topic_churn:
            rf = min(len(brokers), rng.choice(options.replication_factors))
            plan.append(CreateTopic(now, slot, rng.choice((1, 2, 3)), rf))
        elif workload < 0.92 and options.config_changes:
            key, value = rng.choice(
                (
                    ("unclean.leader.election.enable", "true"),
                    ("unclean.leader.election.enable", "false"),
                    ("min.insync.replicas", "1"),
                    ("min.insync.replicas", "2"),
                )
            )
            plan.append(AlterTopicConfig(now, slot, key, value))
        elif workload < 0.96:
            plan.append(ControlledShutdown(now, rng.choice(brokers), rng.randint(500, 8_000)))
        elif workload < 0.975 or not options.reassignments:
            plan.append(PreferredElection(now, slot))
        else:
            plan.append(_reassign(seed, len(plan), now, slot, brokers))
    return plan


def _reassign(seed: int, index: int, now: int, slot: int, brokers: tuple[int, ...]) -> Reassign:
    # Drawn from a generator of its own, so the plan's other draws are those they would be
    # without reassignments.
    rng = random.Random(f"reassign:{seed}:{index}")
    order = tuple(rng.sample(brokers, len(brokers)))
    cancel = rng.choice((None, None, rng.randint(1, 400)))
    return Reassign(now, slot, rng.randrange(3), order, cancel)


def _fault(
    rng: random.Random, now: int, kind: FaultKind, brokers: tuple[int, ...], actor_kinds: tuple[str, ...]
) -> Action:
    broker = rng.choice(brokers)
    if kind in (FaultKind.PARTITION, FaultKind.ONE_WAY_PARTITION, FaultKind.SLOW_LINK, FaultKind.LOSSY_LINK):
        source, target = rng.sample(brokers, 2)
        amount = 0.0
        if kind is FaultKind.SLOW_LINK:
            amount = float(rng.choice((200, 1_000, 5_000)))
        elif kind is FaultKind.LOSSY_LINK:
            amount = rng.choice((0.05, 0.2, 0.5))
        return LinkFault(now, kind, source, target, rng.randint(500, 15_000), amount)
    if kind is FaultKind.ZOOKEEPER_OUTAGE:
        return ZooKeeperOutage(now, rng.randint(500, 10_000))
    if kind is FaultKind.DISK_FAULT:
        return DiskFaultAction(now, broker, rng.choice(tuple(DiskFault)), rng.randint(1_000, 10_000))
    if kind is FaultKind.ACTOR_CRASH:
        return ActorCrash(now, broker, rng.choice(actor_kinds))
    durations = {
        FaultKind.KILL: (200, 12_000),
        FaultKind.POWER_LOSS: (200, 12_000),
        FaultKind.CLEAN_RESTART: (200, 5_000),
        FaultKind.STALL: (200, 12_000),
        FaultKind.ISOLATE: (500, 15_000),
        FaultKind.ZOOKEEPER_CUT: (500, 12_000),
        FaultKind.CONTROLLER_CUT: (500, 12_000),
        FaultKind.SESSION_EXPIRY: (0, 0),
    }
    low, high = durations[kind]
    return BrokerFault(now, kind, broker, rng.randint(low, high))


def describe(action: Action) -> str:
    """One line for the event log and the shrunk schedule."""
    match action:
        case CreateTopic(_, slot, partitions, rf):
            return f"create topic{slot} ({partitions} partitions, RF {rf})"
        case DeleteTopic(_, slot):
            return f"delete topic{slot}"
        case AlterTopicConfig(_, slot, key, value):
            return f"alter topic{slot} {key}={value}"
        case Produce(_, slot, producer, count):
            return f"produce {count} to topic{slot} by producer {producer}"
        case ControlledShutdown(_, broker, downtime):
            return f"controlled shutdown of broker {broker}, back after {downtime} ms"
        case PreferredElection(_, slot):
            return f"preferred leader election for topic{slot}"
        case Reassign(_, slot, partition, brokers, cancel_after_ms):
            cancel = "" if cancel_after_ms is None else f", cancelled after {cancel_after_ms} ms"
            return f"reassign topic{slot} partition {partition} onto {list(brokers)}{cancel}"
        case BrokerFault(_, kind, broker, duration):
            return f"{kind.value} broker {broker} for {duration} ms"
        case LinkFault(_, kind, source, target, duration, amount):
            extra = f" ({amount:g})" if amount else ""
            return f"{kind.value} {source}->{target}{extra} for {duration} ms"
        case ZooKeeperOutage(_, duration):
            return f"zookeeper-outage for {duration} ms"
        case DiskFaultAction(_, broker, fault, duration):
            return f"disk-fault {fault.value} on broker {broker} for {duration} ms"
        case ActorCrash(_, broker, actor):
            return f"actor-crash in a {actor} handler on broker {broker}"
    raise AssertionError(action)


def as_python(action: Action) -> str:
    """The action as the Python expression that builds it (a shrunk schedule pasted into
    tests/sim/test_regressions.py)."""

    def value(field_value: object) -> str:
        if isinstance(field_value, enum.Enum):
            return f"{type(field_value).__name__}.{field_value.name}"
        return repr(field_value)

    fields = ", ".join(value(getattr(action, f.name)) for f in dataclasses.fields(action))
    return f"{type(action).__name__}({fields})"


def fault_kind(action: Action) -> FaultKind | None:
    match action:
        case BrokerFault() | LinkFault():
            return action.kind
        case ZooKeeperOutage():
            return FaultKind.ZOOKEEPER_OUTAGE
        case DiskFaultAction():
            return FaultKind.DISK_FAULT
        case ActorCrash():
            return FaultKind.ACTOR_CRASH
        case _:
            return None
