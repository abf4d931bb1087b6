"""Each topic's settings as the broker knows them: its ``TopicPolicy`` and ``LogConfig``, as last
read from ZooKeeper by the broker's ``topic-configs`` child, or a fixed lookup (tests).

Rules
-----
1. A topic not read yet has the broker defaults (the one fallback; ``HostedPartitions`` asks here).
2. A LeaderAndIsr naming topics not read yet waits for them (``controller_gate.py`` rule 4):
   ``missing`` names them; with a fixed lookup nothing is ever missing.
3. Every read or change updates the topic's throttled replicas in the replication quotas; a
   change is handed to the hosted partitions, and one that allows an unclean leader is told to the
   controller if it runs here (Kafka's TopicConfigHandler: it elects the topic's offline partitions).
4. A deleted topic forgets its settings: a topic created again with its name must not keep them.

Effects go through the broker's context: this object decides, records and tells.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.common.names import CONTROLLER_ACTOR_NAME
from actors.common.protocol import LeaderAndIsrRequest
from actors.controller.controller import EnableTopicUncleanLeaderElection
from actors.server.config import BrokerConfig, TopicPolicy
from actors.server.controller_gate import ControllerRequest, TopicConfigsReady
from actors.server.replica_manager import HostedPartitions
from actors.server.replication_quota import ReplicationQuotas
from actors.server.topic_config_manager import TopicConfigChanged
from runtime.context import Context
from runtime.ref import ActorRef
from runtime.storage.config import LogConfig
from runtime.storage.log_manager import LogManager

__all__ = ["TopicSettings"]

Settings = tuple[TopicPolicy, LogConfig]


class TopicSettings:
    def __init__(
        self,
        *,
        config: BrokerConfig,
        log_manager: LogManager,
        quotas: ReplicationQuotas,
        fixed: Callable[[str], Settings] | None = None,
    ) -> None:
        self._config = config
        self._log_manager = log_manager
        self._quotas = quotas
        self.fixed = fixed
        self.settings: dict[str, Settings] = {}

    def of(self, topic: str) -> Settings:
        if self.fixed is not None:
            return self.fixed(topic)
        settings = self.settings.get(topic)
        if settings is not None:
            return settings
        return self._config.topic_policy(), self._log_manager.config_for(topic)

    def missing(self, request: ControllerRequest) -> list[str]:
        if not isinstance(request, LeaderAndIsrRequest) or self.fixed is not None:
            return []
        return sorted({s.topic for s in request.partition_states} - self.settings.keys())

    def read(self, ctx: Context[Any], message: TopicConfigsReady) -> None:
        """The topic-configs actor's answer to the gate's ask (None: it failed)."""
        if message.loaded is None:
            ctx.log.warning("topic configs not read yet; LeaderAndIsr waits and asks again")
            return
        self.settings.update(message.loaded.settings)
        for topic, (_, log_config) in message.loaded.settings.items():
            self._update_quotas(topic, log_config)

    def changed(self, ctx: Context[Any], hosted: HostedPartitions, message: TopicConfigChanged) -> None:
        self.settings[message.topic] = (message.policy, message.log_config)
        self._update_quotas(message.topic, message.log_config)
        hosted.update_topic_config(ctx, message.topic, message.policy, message.log_config)
        if message.policy.unclean_leader_election_enable:
            controller = ActorRef(node_id=ctx.self_ref.node_id, name=CONTROLLER_ACTOR_NAME)
            ctx.tell(controller, EnableTopicUncleanLeaderElection(message.topic))

    def forget(self, topic: str) -> None:
        self.settings.pop(topic, None)

    def _update_quotas(self, topic: str, log_config: LogConfig) -> None:
        self._quotas.update_topic(
            topic,
            log_config.leader_replication_throttled_replicas,
            log_config.follower_replication_throttled_replicas,
        )
