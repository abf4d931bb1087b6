"""Leader election algorithms (docs/controller.md §4), as pure functions.

Every algorithm walks the assigned replicas **in assignment order** and returns the new leader and
ISR, or None when no replica qualifies. "Live" means alive in ZooKeeper; shutting-down brokers
count as live except where the controlled-shutdown algorithm says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from actors.common.types import BrokerId

__all__ = [
    "ElectionResult",
    "controlled_shutdown_leader",
    "new_partition_leader",
    "offline_partition_leader",
    "preferred_replica_leader",
    "reassignment_leader",
]


@dataclass(frozen=True, slots=True)
class ElectionResult:
    leader: BrokerId
    isr: tuple[BrokerId, ...]
    unclean: bool = False


def new_partition_leader(
    assignment: Sequence[BrokerId], is_live: Callable[[BrokerId], bool]
) -> ElectionResult | None:
    """A new partition: leader = first live replica; ISR = every live replica (epoch 0)."""
    live = tuple(replica for replica in assignment if is_live(replica))
    if not live:
        return None
    return ElectionResult(live[0], live)


def offline_partition_leader(
    assignment: Sequence[BrokerId],
    isr: Sequence[BrokerId],
    is_live: Callable[[BrokerId], bool],
    *,
    unclean_leader_election_enable: bool,
) -> ElectionResult | None:
    """The first live replica that is in the ISR; with unclean election, else the first live one.

    New ISR: the old ISR filtered to live replicas when the leader comes from the ISR, else just the
    (unclean) leader.
    """
    for replica in assignment:
        if replica in isr and is_live(replica):
            return ElectionResult(replica, tuple(r for r in isr if is_live(r)))
    if unclean_leader_election_enable:
        for replica in assignment:
            if is_live(replica):
                return ElectionResult(replica, (replica,), unclean=True)
    return None


def preferred_replica_leader(
    assignment: Sequence[BrokerId], isr: Sequence[BrokerId], is_live: Callable[[BrokerId], bool]
) -> ElectionResult | None:
    """The head of the assignment, if it is live and in the ISR; the ISR is unchanged."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in isr and is_live(preferred):
        return ElectionResult(preferred, tuple(isr))
    return None


def controlled_shutdown_leader(
    assignment: Sequence[BrokerId],
    isr: Sequence[BrokerId],
    is_live: Callable[[BrokerId], bool],
    shutting_down: Callable[[BrokerId], bool],
) -> ElectionResult | None:
    """The first replica that is live, in the ISR and not shutting down; ISR minus shutting down."""
    new_isr = tuple(r for r in isr if not shutting_down(r))
    for replica in assignment:
        if replica in isr and is_live(replica) and not shutting_down(replica):
            return ElectionResult(replica, new_isr)
    return None


def reassignment_leader(
    target: Sequence[BrokerId], isr: Sequence[BrokerId], is_live: Callable[[BrokerId], bool]
) -> ElectionResult | None:
    """A completing reassignment whose leader is removed or dead: the first replica of the target
    assignment that is live and in the ISR; the ISR is unchanged (the removed replicas leave it
    right after)."""
    for replica in target:
        if replica in isr and is_live(replica):
            return ElectionResult(replica, tuple(isr))
    return None
