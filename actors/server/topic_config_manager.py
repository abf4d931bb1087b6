"""The broker's ``topic-configs`` child actor: topic overrides from ZooKeeper, kept current.

Kafka's broker reads ``/config/topics/<t>`` when a topic first appears in a LeaderAndIsr, and its
``DynamicConfigManager`` watches ``/config/changes`` for later edits. Here:

* ``LoadTopicConfigs(topics)`` (an ask from the broker) reads those topics' configs and answers
  ``TopicConfigsLoaded`` with every asked topic's settings; the broker holds the LeaderAndIsr
  until then, so no partition starts with the wrong ``min.insync.replicas``. A ZooKeeper failure
  is retried after ``_RETRY_MS`` (the broker keeps waiting: the controller resends nothing);
* a child watch on ``/config/changes`` re-reads the topics named by new notifications and tells
  the broker ``TopicConfigChanged`` for each (``topic_configs.py`` keeps the bookkeeping);
* dynamic broker configs (``dynamic_broker_config.py``): ``/config/brokers/<id>`` and
  ``/config/brokers/<default>`` are read once the first listing of ``/config/changes`` has set
  the mark (so no change can fall between the read and the watch), and again after every
  ``brokers/<id>`` or ``brokers/<default>`` notification; each read is told to the broker as
  ``BrokerConfigChanged``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TypeAlias, assert_never

from actors.common.scripts import Pause, Resume, Script, ScriptRunner, ScriptStep
from actors.server import zk_data
from actors.server.config import BrokerConfig, TopicPolicy
from actors.server.dynamic_broker_config import DynamicBrokerConfigs, DynamicBrokerSettings
from actors.server.topic_configs import TopicConfigs
from runtime.actor import Actor
from runtime.context import Context
from runtime.coordination.base import Coordinator, WatchEvent
from runtime.coordination.errors import CoordinationError
from runtime.coordination.requests import ZkGetChildren, ZkGetMany, execute
from runtime.messages import Requester
from runtime.ref import ActorRef
from runtime.storage.config import LogConfig

__all__ = [
    "BrokerConfigChanged",
    "LoadTopicConfigs",
    "TopicConfigChanged",
    "TopicConfigManagerActor",
    "TopicConfigsLoaded",
]

_RETRY_MS = 500
_log = logging.getLogger("actorlog.broker")


@dataclass(frozen=True, slots=True)
class LoadTopicConfigs:
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopicConfigsLoaded:
    settings: dict[str, tuple[TopicPolicy, LogConfig]]


@dataclass(frozen=True, slots=True)
class TopicConfigChanged:
    topic: str
    policy: TopicPolicy
    log_config: LogConfig


@dataclass(frozen=True, slots=True)
class BrokerConfigChanged:
    """This broker's dynamic configs as just read: the settings in force, and the raw overrides
    (per broker, cluster default) for DescribeConfigs."""

    settings: DynamicBrokerSettings
    per_broker: dict[str, str]
    default: dict[str, str]


@dataclass(frozen=True, slots=True)
class _ChangesFired:
    pass


@dataclass(frozen=True, slots=True)
class _ChangesListed:
    children: tuple[str, ...] | None


TopicConfigMessage: TypeAlias = LoadTopicConfigs | ScriptStep | Resume | _ChangesFired | _ChangesListed


class TopicConfigManagerActor(Actor[TopicConfigMessage]):
    def __init__(
        self,
        *,
        config: BrokerConfig,
        coordinator: Coordinator,
        default_log_config: LogConfig,
        broker: ActorRef,
    ) -> None:
        self.coordinator = coordinator
        self.broker = broker
        self.configs = TopicConfigs(config, default_log_config)
        self.broker_configs = DynamicBrokerConfigs(config.broker_id)
        self.scripts = ScriptRunner(coordinator)

    def on_start(self, ctx: Context[TopicConfigMessage]) -> None:
        self._list_changes(ctx)

    def receive(self, ctx: Context[TopicConfigMessage], message: TopicConfigMessage) -> None:
        match message:
            case LoadTopicConfigs():
                requester = ctx.requester
                if requester is not None:
                    self._load(ctx, message.topics, requester)
            case ScriptStep():
                self.scripts.on_step(ctx, message)
            case Resume():
                self.scripts.on_resume(ctx, message)
            case _ChangesFired():
                self._list_changes(ctx)
            case _ChangesListed():
                self._on_changes_listed(ctx, message)
            case _:
                assert_never(message)

    # --------------------------------------------------------------------------------- loading

    def _load(self, ctx: Context[TopicConfigMessage], topics: tuple[str, ...], requester: Requester) -> None:
        def finish(result: object, error: Exception | None) -> None:
            if error is not None:
                ctx.log.error("reading topic configs failed: %s", error)
                return
            ctx.reply_to(requester, TopicConfigsLoaded({t: self.configs.settings(t) for t in topics}))

        self.scripts.start(ctx, self._read(topics), finish)

    def _read(self, topics: tuple[str, ...]) -> Script:
        """Read the topics' configs afresh (a topic deleted and created again must not keep its
        old overrides), retrying ZooKeeper failures."""
        while True:
            paths = {topic: zk_data.topic_config_path(topic) for topic in topics}
            try:
                found = yield ZkGetMany(tuple(paths.values()))
            except CoordinationError as error:
                _log.warning("reading topic configs: %s; retrying in %d ms", error, _RETRY_MS)
                yield Pause(_RETRY_MS)
                continue
            for topic, path in paths.items():
                self.configs.load(topic, found.get(path))
            return None

    # --------------------------------------------------------------------------------- changes

    def _list_changes(self, ctx: Context[TopicConfigMessage]) -> None:
        coordinator = self.coordinator
        fire = ctx.message_adapter(lambda _event: _ChangesFired())

        def watch(event: WatchEvent) -> None:
            fire(event)

        ctx.pipe_to_self(
            lambda: execute(coordinator, ZkGetChildren(zk_data.CONFIG_CHANGES_PATH, watch=True), watch),
            lambda children: _ChangesListed(tuple(str(name) for name in children)),  # type: ignore[attr-defined]
            lambda _error: _ChangesListed(None),
        )

    def _on_changes_listed(self, ctx: Context[TopicConfigMessage], message: _ChangesListed) -> None:
        if message.children is None:
            ctx.start_timer("changes-retry", _ChangesFired(), _RETRY_MS)
            return
        first_listing = self.configs.last_change is None
        fresh = self.configs.new_changes(message.children)
        if first_listing:
            self._start_broker_config_read(ctx)
        if not fresh:
            return

        def finish(result: object, error: Exception | None) -> None:
            if error is not None:
                ctx.log.error("applying config changes failed: %s", error)

        self.scripts.start(ctx, self._apply_changes(ctx, fresh), finish)

    def _apply_changes(self, ctx: Context[TopicConfigMessage], names: list[str]) -> Script:
        paths = tuple(f"{zk_data.CONFIG_CHANGES_PATH}/{name}" for name in names)
        notifications = yield ZkGetMany(paths)
        if any(self.broker_configs.concerns(name) for name in self.configs.changed_brokers(notifications)):
            self._start_broker_config_read(ctx)
        topics = self.configs.changed_topics(notifications)
        if not topics:
            return None
        configs = {topic: zk_data.topic_config_path(topic) for topic in topics}
        found = yield ZkGetMany(tuple(configs.values()))
        for topic, path in configs.items():
            self.configs.load(topic, found.get(path))
            policy, log_config = self.configs.settings(topic)
            ctx.log.info("config of topic %s changed: %s", topic, self.configs.overrides[topic])
            ctx.tell(self.broker, TopicConfigChanged(topic, policy, log_config))
        return None

    # --------------------------------------------------------------- dynamic broker configs

    def _start_broker_config_read(self, ctx: Context[TopicConfigMessage]) -> None:
        def finish(result: object, error: Exception | None) -> None:
            if error is not None:
                ctx.log.error("reading dynamic broker configs failed: %s", error)
                return
            configs = self.broker_configs
            ctx.log.info("dynamic broker configs: broker %s, default %s", configs.per_broker, configs.default)
            ctx.tell(
                self.broker,
                BrokerConfigChanged(configs.settings(), dict(configs.per_broker), dict(configs.default)),
            )

        self.scripts.start(ctx, self._read_broker_configs(), finish)

    def _read_broker_configs(self) -> Script:
        paths = self.broker_configs.paths()
        while True:
            try:
                found = yield ZkGetMany(paths)
            except CoordinationError as error:
                _log.warning("reading dynamic broker configs: %s; retrying in %d ms", error, _RETRY_MS)
                yield Pause(_RETRY_MS)
                continue
            self.broker_configs.load(found)
            return None
