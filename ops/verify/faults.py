"""A fault campaign's schedule: which fault, when, for how long, against whom — from a seed.

Rules kept here (pure: no processes, no clock):

* The schedule is a function of the seed and the options alone, so a campaign is replayed by its
  seed and its log names every fault it injected.
* Faults start spread over the campaign's fault window, ``spacing`` apart on average (jittered);
  a fault lasts between ``min_duration_s`` and about twice the spacing, so faults sometimes
  overlap (at most ``max_concurrent`` at once: one that would exceed it starts later).
* Targets are *roles* where the fault is about a role (the partition leader, the controller): the
  runner resolves them when the fault starts, and falls back on the one broker the schedule names
  when no broker holds the role then (ZooKeeper paused, an election under way); otherwise broker
  ids. A fault against two brokers names two different ones; ZooKeeper's faults name none.
* Every fault heals: the runner undoes each at its end, and heals everything at the campaign's end
  before the final read.

Only faults after which Kafka promises to keep every record acknowledged with acks=all (RF 3,
min.insync.replicas 2, no unclean election) are scheduled: a process killed with SIGKILL keeps what
it wrote in the page cache, so no fault here loses a disk's unflushed writes.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Fault", "FaultKind", "describe_fault", "plan_faults"]


class FaultKind(enum.Enum):
    """Every fault a campaign injects (the totals line counts them by these names)."""

    KILL_LEADER = "kill-leader"  # SIGKILL the leader of a partition, restart after the duration
    # SIGKILL the leader of a partition, then its successor as soon as ZooKeeper names it: the
    # remaining replica must lead with every committed record (KIP-101's first scenario).
    KILL_LEADERS_IN_TURN = "kill-leaders-in-turn"
    KILL_CONTROLLER = "kill-controller"
    KILL_BROKER = "kill-broker"
    KILL_TWO = "kill-two"  # two brokers at once
    PAUSE_SHORT = "pause-short"  # SIGSTOP shorter than the ZooKeeper session timeout
    PAUSE_LONG = "pause-long"  # SIGSTOP longer than the session: the broker is declared dead
    ZOOKEEPER_PAUSE = "zookeeper-pause"  # SIGSTOP the ZooKeeper server
    ZOOKEEPER_KILL = "zookeeper-kill"  # SIGKILL it, start it again on the same data
    PARTITION = "partition"  # two brokers cannot reach each other (both ways)
    ISOLATE = "isolate"  # one broker reaches no broker and no client, nor they it
    ZOOKEEPER_CUT = "zookeeper-cut"  # one broker cannot reach ZooKeeper
    DISK_FULL = "disk-full"  # one broker's log dir (a small filesystem) fills up


# Faults about a role, resolved when they start.
ROLE_FAULTS = frozenset({FaultKind.KILL_LEADER, FaultKind.KILL_LEADERS_IN_TURN, FaultKind.KILL_CONTROLLER})
# Faults of the whole cluster's ZooKeeper: no broker target.
ZOOKEEPER_FAULTS = frozenset({FaultKind.ZOOKEEPER_PAUSE, FaultKind.ZOOKEEPER_KILL})
# Faults naming two brokers.
PAIR_FAULTS = frozenset({FaultKind.KILL_TWO, FaultKind.PARTITION})


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: ``at_s`` after the fault window opens, for ``duration_s``; ``brokers`` names its
    targets (a role fault's fallback; empty for ZooKeeper faults); ``partition`` the partition
    whose leader a KILL_LEADER aims at."""

    at_s: float
    kind: FaultKind
    duration_s: float
    brokers: tuple[int, ...] = ()
    partition: int = 0


def describe_fault(fault: Fault) -> str:
    """One line for the campaign log."""
    match fault.kind:
        case FaultKind.KILL_LEADER | FaultKind.KILL_LEADERS_IN_TURN:
            target = f"the leader of partition {fault.partition}"
        case FaultKind.KILL_CONTROLLER:
            target = "the controller"
        case FaultKind.ZOOKEEPER_PAUSE | FaultKind.ZOOKEEPER_KILL:
            target = "ZooKeeper"
        case _:
            target = "broker(s) " + ", ".join(str(b) for b in fault.brokers)
    return f"{fault.kind.value} {target} for {fault.duration_s:.1f} s"


def plan_faults(
    seed: int,
    *,
    count: int,
    window_s: float,
    brokers: Sequence[int],
    partitions: int,
    kinds: Sequence[FaultKind],
    session_timeout_s: float,
    min_duration_s: float = 1.0,
    max_concurrent: int = 2,
) -> list[Fault]:
    """``count`` faults over ``window_s`` seconds, chosen among ``kinds`` (see the module rules)."""
    if count < 0 or window_s <= 0:
        raise ValueError("a campaign needs a positive fault window and a non-negative fault count")
    if not kinds:
        raise ValueError("no fault kind is enabled")
    if len(brokers) < 2 and any(kind in PAIR_FAULTS for kind in kinds):
        raise ValueError("faults on two brokers need at least two brokers")
    rng = random.Random(seed)
    spacing = window_s / max(count, 1)
    faults: list[Fault] = []
    ends: list[float] = []  # when each scheduled fault heals
    at = 0.0
    for _ in range(count):
        # Times are kept to the millisecond from the start, so "starts when another ends" holds
        # exactly in the printed schedule too.
        at = round(at + spacing * rng.uniform(0.5, 1.5), 3)
        kind = kinds[rng.randrange(len(kinds))]
        duration = round(_duration(rng, kind, spacing, min_duration_s, session_timeout_s), 3)
        # Never more than max_concurrent at once: start when enough earlier faults have healed.
        running = sorted(end for end in ends if end > at)
        if len(running) >= max_concurrent:
            at = running[len(running) - max_concurrent]
        chosen = rng.sample(list(brokers), 2 if kind in PAIR_FAULTS else 1)
        faults.append(
            Fault(
                at_s=at,
                kind=kind,
                duration_s=duration,
                brokers=() if kind in ZOOKEEPER_FAULTS else tuple(chosen),
                partition=rng.randrange(partitions),
            )
        )
        ends.append(round(at + duration, 3))
    return faults


def _duration(
    rng: random.Random, kind: FaultKind, spacing: float, min_duration_s: float, session_timeout_s: float
) -> float:
    if kind is FaultKind.PAUSE_SHORT:
        # Well inside the session: the broker must come back without being declared dead.
        return rng.uniform(0.2, 0.5) * session_timeout_s
    if kind is FaultKind.PAUSE_LONG:
        return session_timeout_s * rng.uniform(1.3, 2.0)
    return max(min_duration_s, rng.uniform(0.3, 2.0) * spacing)
