"""Actor addresses.

An ``ActorRef`` is ``(node_id, name)``: a stable identity that outlives incarnations (a restarted
actor keeps its ref, Orleans-style). Names are path-like strings chosen by whoever spawns the actor,
for example ``("2", "partition/orders-3")``. A ref says nothing about *how* to reach the node; the
transport resolves node ids to endpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ActorRef"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ActorRef:
    node_id: str
    name: str

    def __str__(self) -> str:
        return f"{self.name}@{self.node_id}"

    def sibling(self, name: str) -> ActorRef:
        """The ref of another actor on the same node."""
        return ActorRef(node_id=self.node_id, name=name)
