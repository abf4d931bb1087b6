"""A broker's replica fetchers: Kafka's ``ReplicaFetcherManager`` (docs/replication.md §6.1).

House rules
-----------
1. At most one fetcher per (source broker, fetcher id), named ``replica-fetcher-<id>-<broker>``, a
   child of the broker actor, created on demand and restarted by its supervisor; the fetcher id of
   a partition is ``fetcher_id.py``'s (Java's hash, ``num.replica.fetchers``).
2. This object keeps which partitions each fetcher follows; the broker's ``leader_epoch_of`` says
   at which epoch. A fetcher that starts (or restarts) reads that list (``initial_partitions``).
3. Idle fetchers are stopped after each controller request (``shutdownIdleFetcherThreads``).
4. Every fetcher shares the broker's follower replication quota (node-local state: the fetchers
   run on the broker's event loop, one handler at a time).

Effects go through the broker's context: this object only decides and records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.common.names import fetcher_name
from actors.common.types import BrokerId, TopicPartition
from actors.server.config import BrokerConfig
from actors.server.fetcher.fetcher_id import fetcher_id
from actors.server.fetcher.replica_fetcher import AddPartitions, RemovePartitions, ReplicaFetcherActor
from actors.server.replication_quota import ReplicationQuota
from runtime.context import Context
from runtime.supervision import SupervisorStrategy

__all__ = ["FetcherKey", "ReplicaFetcherManager"]

FetcherKey = tuple[BrokerId, int]
"""(source broker id, fetcher id)."""


class ReplicaFetcherManager:
    def __init__(
        self,
        config: BrokerConfig,
        leader_epoch_of: Callable[[TopicPartition], int | None],
        follower_quota: ReplicationQuota | None = None,
    ) -> None:
        self.config = config
        self._leader_epoch_of = leader_epoch_of
        # One follower quota for every fetcher of the broker (Kafka's QuotaManagers.follower).
        self.follower_quota = follower_quota if follower_quota is not None else ReplicationQuota()
        self.fetchers: dict[FetcherKey, set[TopicPartition]] = {}

    def __len__(self) -> int:
        return len(self.fetchers)

    def add(self, ctx: Context[Any], tp: TopicPartition, leader: BrokerId, leader_epoch: int) -> FetcherKey:
        """Follow ``tp`` from ``leader`` at ``leader_epoch``; returns the fetcher's key."""
        key = (leader, fetcher_id(tp.topic, tp.partition, self.config.num_replica_fetchers))
        members = self.fetchers.get(key)
        name = fetcher_name(key[1], leader)
        if members is None:
            members = self.fetchers[key] = set()

            def initial_partitions() -> tuple[tuple[TopicPartition, int], ...]:
                # What a (re)started fetcher follows: this list, at the current epochs.
                followed = (
                    (member, self._leader_epoch_of(member)) for member in sorted(self.fetchers.get(key, ()))
                )
                return tuple((member, epoch) for member, epoch in followed if epoch is not None)

            ctx.spawn(
                name,
                lambda: ReplicaFetcherActor(
                    fetcher_id=key[1],
                    source_broker_id=leader,
                    config=self.config,
                    initial_partitions=initial_partitions,
                    quota=self.follower_quota,
                ),
                supervision=SupervisorStrategy.restart(),
            )
        members.add(tp)
        ctx.tell(ctx.self_ref.sibling(name), AddPartitions(((tp, leader_epoch),)))
        return key

    def remove(self, ctx: Context[Any], tp: TopicPartition, key: FetcherKey) -> None:
        members = self.fetchers.get(key)
        if members is not None:
            members.discard(tp)
        ctx.tell(ctx.self_ref.sibling(fetcher_name(key[1], key[0])), RemovePartitions((tp,)))

    def stop_idle(self, ctx: Context[Any]) -> None:
        for key in [k for k, members in self.fetchers.items() if not members]:
            del self.fetchers[key]
            ctx.stop(ctx.self_ref.sibling(fetcher_name(key[1], key[0])))
