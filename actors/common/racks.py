"""The rack constraint on a partition's replicas (``broker.rack``), shared by placement, the
controller's gauge and the health view.

Rule: when racks are in use, a partition's replicas should sit on as many distinct racks as they
can, that is ``min(replication factor, number of racks among live and registered brokers)``. Kafka's
rack-aware assignment gives that spread at creation; a reassignment or a rack label changed later
can break it, which is what ``rack_constraint_broken`` reports. Without racks (no broker has one)
nothing is broken; a replica on a broker without a rack while others have one counts as its own
rack-less group (Kafka refuses rack-aware assignment in that mixed case, so such a cluster shows up
here instead of passing silently).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from actors.common.types import BrokerId

__all__ = ["rack_constraint_broken", "racks_in_use"]


def racks_in_use(racks: Mapping[BrokerId, str | None]) -> frozenset[str]:
    """The distinct racks named by these brokers (a broker without one names none)."""
    return frozenset(rack for rack in racks.values() if rack is not None)


def rack_constraint_broken(replicas: Iterable[BrokerId], racks: Mapping[BrokerId, str | None]) -> bool:
    """Whether ``replicas`` cover fewer distinct racks than they could (see the module rule).
    ``racks``: every known broker's rack; a replica on an unknown broker has no rack."""
    available = racks_in_use(racks)
    if not available:
        return False
    replica_ids = list(dict.fromkeys(replicas))
    covered = {racks.get(broker_id) for broker_id in replica_ids}
    return len(covered) < min(len(replica_ids), len(available))
