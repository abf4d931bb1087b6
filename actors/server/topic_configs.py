"""A broker's view of topic configuration overrides (``/config/topics/<t>``), and what follows.

Kafka's broker reads a topic's config from ZooKeeper when it first creates the topic's log, and
its ``DynamicConfigManager`` applies later changes announced under ``/config/changes``. This module
is that bookkeeping, pure:

* ``settings(topic)`` — the partition's ``TopicPolicy`` (``min.insync.replicas``,
  ``unclean.leader.election.enable``) and ``LogConfig``: the topic's overrides over the broker's
  defaults;
* ``load(topic, znode)`` — a topic's overrides as read; the broker reads them before it applies a
  LeaderAndIsr naming a topic it has no settings for, so a partition never leads with the broker
  default when its topic says otherwise (e.g. ``min.insync.replicas=3``);
* change notifications: ``config_change_<seq>`` children newer than the last one processed name
  the entities whose config to re-read (``topics/<t>``). The first listing after start only sets
  the mark: everything before it is already reflected in ``/config/topics``.

An override that does not parse (written by hand into ZooKeeper) is logged and ignored key by
key: the broker keeps serving with the defaults for that key, as Kafka does with invalid dynamic
configs.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping

from actors.server import zk_data
from actors.server.config import BrokerConfig, TopicPolicy
from runtime.coordination.base import Stat
from runtime.storage.config import LogConfig

__all__ = ["TopicConfigs"]

_log = logging.getLogger("actorlog.broker")


class TopicConfigs:
    def __init__(self, config: BrokerConfig, default_log_config: LogConfig) -> None:
        self.config = config
        self.default_log_config = default_log_config
        self.overrides: dict[str, dict[str, str]] = {}
        self.last_change: str | None = None  # the newest notification name already handled

    # ---------------------------------------------------------------------------------- reads

    def settings(self, topic: str) -> tuple[TopicPolicy, LogConfig]:
        overrides = self.overrides.get(topic, {})
        log_config = self.default_log_config
        for key, value in overrides.items():
            try:
                log_config = LogConfig.from_properties({key: value}, base=log_config)
            except ValueError as error:
                _log.warning("topic %s: ignoring config %s=%r: %s", topic, key, value, error)
        policy = TopicPolicy(
            min_insync_replicas=(
                log_config.min_insync_replicas
                if "min.insync.replicas" in overrides
                else self.config.min_insync_replicas
            ),
            unclean_leader_election_enable=(
                log_config.unclean_leader_election_enable
                if "unclean.leader.election.enable" in overrides
                else self.config.unclean_leader_election_enable
            ),
        )
        # The log's own copy of the replication keys follows the policy (one source of truth).
        log_config = dataclasses.replace(
            log_config,
            min_insync_replicas=policy.min_insync_replicas,
            unclean_leader_election_enable=policy.unclean_leader_election_enable,
        )
        return policy, log_config

    # -------------------------------------------------------------------------------- updates

    def load(self, topic: str, found: tuple[bytes, Stat] | None) -> None:
        """The content of ``/config/topics/<topic>`` (None: no overrides)."""
        if found is None:
            self.overrides[topic] = {}
            return
        try:
            self.overrides[topic] = dict(zk_data.decode_topic_config(topic, found[0]))
        except zk_data.ZkDataError as error:
            _log.error("unreadable config of topic %s, using the broker defaults: %s", topic, error)
            self.overrides[topic] = {}

    def new_changes(self, children: Iterable[str]) -> list[str]:
        """The notifications to handle, oldest first; the first call only sets the mark."""
        names = sorted(name for name in children if name.startswith(zk_data.CONFIG_CHANGE_PREFIX))
        if self.last_change is None:
            self.last_change = names[-1] if names else ""
            return []
        fresh = [name for name in names if name > self.last_change]
        if fresh:
            self.last_change = fresh[-1]
        return fresh

    def changed_topics(self, notifications: Mapping[str, tuple[bytes, Stat] | None]) -> list[str]:
        """The topics named by change notifications (others — clients, users — are not ours)."""
        return self._changed("topics", notifications)

    def changed_brokers(self, notifications: Mapping[str, tuple[bytes, Stat] | None]) -> list[str]:
        """The broker entities (ids, ``<default>``) named by change notifications."""
        return self._changed("brokers", notifications, quiet=True)

    def _changed(
        self, wanted: str, notifications: Mapping[str, tuple[bytes, Stat] | None], *, quiet: bool = False
    ) -> list[str]:
        names: list[str] = []
        for path, found in sorted(notifications.items()):
            if found is None:
                continue  # purged meanwhile
            try:
                entity_type, name = zk_data.decode_config_change_notification(found[0], path=path)
            except zk_data.ZkDataError as error:
                if not quiet:  # said once, by the topics pass
                    _log.warning("ignoring an unreadable config change notification: %s", error)
                continue
            if entity_type == wanted and name not in names:
                names.append(name)
        return names
