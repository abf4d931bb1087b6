"""The real ``ops.clients.admin.Admin`` over an in-process cluster's simulated network, for testing
the Admin client and the tools built on it in one process on virtual time.

Only the Admin's transport is replaced: instead of its HTTP ``ClientNode`` it asks through the
cluster's client node (``InProcessCluster.client_node``), bootstrapping from the brokers given.
Every request still goes to the same actors (``broker``, ``admin``) the HTTP client reaches, so the
Admin's own logic (retries, NOT_CONTROLLER, error mapping) runs as it does against processes.
Drive it with ``cluster.complete(...)``: virtual time moves only then.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from actors.common.errors import ErrorCode, KafkaError
from actors.common.names import broker_ref
from actors.common.protocol import BrokerEndpoint
from ops.clients.admin import Admin
from runtime.errors import RuntimeFailure
from runtime.ref import ActorRef
from runtime.system import ActorSystem
from tests.support.cluster import InProcessCluster

__all__ = ["sim_admin"]


class _SimClientNode:
    """What ``Admin`` uses of a ``ClientNode``: ``system``, ``bootstrap_refs``, ``learn`` and
    ``ask_first``; a target that cannot be asked is skipped, none answering is NETWORK_EXCEPTION."""

    def __init__(self, system: ActorSystem, bootstrap: Sequence[int]) -> None:
        self.system = system
        self.bootstrap_refs = tuple(broker_ref(b) for b in bootstrap)

    def learn(self, brokers: Iterable[BrokerEndpoint]) -> None:
        pass  # every broker node is reachable on the simulated network

    async def ask_first(self, targets: Sequence[ActorRef], message: object, *, timeout_ms: int) -> Any:
        failures: list[str] = []
        for target in targets:
            try:
                return await self.system.ask(target, message, timeout_ms=timeout_ms)
            except RuntimeFailure as error:
                failures.append(f"{target.node_id}: {error}")
        raise KafkaError(ErrorCode.NETWORK_EXCEPTION, "no broker answered: " + "; ".join(failures[-3:]))

    async def __aenter__(self) -> _SimClientNode:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None


def sim_admin(cluster: InProcessCluster, *bootstrap: int, default_api_timeout_ms: int = 60_000) -> Admin:
    """An Admin bootstrapping from ``bootstrap`` (broker ids; broker 1 when none)."""
    admin = Admin("localhost:1", secret="unused", default_api_timeout_ms=default_api_timeout_ms)
    admin._node = _SimClientNode(cluster.client_node, bootstrap or (1,))  # type: ignore[assignment]
    return admin
