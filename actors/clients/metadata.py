"""A client's view of the cluster: leaders of the topics it uses, and when to refresh it.

Kafka's client ``Metadata`` + ``Cluster``, pure, shared by the producer and the consumer. Only
topics the client has used (or asked about) are requested. A refresh is due when one was requested —
an unknown topic or leader, or an invalid-metadata error — once ``retry.backoff.ms`` has passed
since the last attempt (a new topic goes at once), and otherwise every ``metadata.max.age.ms`` after
the last success. One request at a time.

Rules kept: a partition's metadata carrying an older leader epoch than the one already known is
ignored (KIP-320: a broker whose cache lags must not move a leader back); a topic answered with
an error is unknown (its records wait, up to max.block.ms); a partition without a leader has a
count but no leader and is not *available* (sticky partitioning prefers available ones).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from actors.common.errors import ErrorCode
from actors.common.protocol import BrokerEndpoint, MetadataResponse
from actors.common.types import NO_LEADER, TopicPartition

__all__ = ["NO_DEADLINE", "ClientMetadata", "TopicInfo"]

NO_DEADLINE = 2**63 - 1


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic as last known: its partitions (``tps[p]`` is partition p) and which have leaders."""

    name: str
    tps: tuple[TopicPartition, ...]
    available: tuple[int, ...]
    partition_count: int  # len(tps), kept as a field: it is read twice per record sent


class ClientMetadata:
    """Leaders by partition, partitions by leader, and the refresh policy (module docstring)."""

    def __init__(self, *, metadata_max_age_ms: int, refresh_backoff_ms: int) -> None:
        self.metadata_max_age_ms = metadata_max_age_ms
        self.refresh_backoff_ms = refresh_backoff_ms
        self.topics: set[str] = set()
        self.brokers: dict[int, BrokerEndpoint] = {}
        self._topic_info: dict[str, TopicInfo] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._leader_epochs: dict[TopicPartition, int] = {}
        self._by_node: dict[int, list[TopicPartition]] = {}
        self.topic_errors: dict[str, ErrorCode] = {}
        self.need_update = False
        self.update_in_flight = False
        self.last_refresh_ms = -(2**62)
        self.last_successful_refresh_ms = -(2**62)
        self.updates_total = 0
        self.failed_updates_total = 0

    # ------------------------------------------------------------------------------- queries

    def topic_info(self, topic: str) -> TopicInfo | None:
        return self._topic_info.get(topic)

    def leader_of(self, tp: TopicPartition) -> int | None:
        return self._leaders.get(tp)

    def partitions_for_node(self, node: int) -> Sequence[TopicPartition]:
        return self._by_node.get(node, ())

    # ------------------------------------------------------------------------------ refresh

    def add_topic(self, topic: str) -> None:
        """A topic the producer now needs: fetched at once (Kafka's new-topic update)."""
        if topic not in self.topics:
            self.topics.add(topic)
            self.need_update = True
            self.last_refresh_ms = -(2**62)

    def request_update(self) -> None:
        self.need_update = True

    def time_to_next_update_ms(self, now_ms: int) -> int:
        """0 when a request should go now; NO_DEADLINE while one is in flight or nothing is wanted."""
        if self.update_in_flight or not self.topics:
            return NO_DEADLINE
        if self.need_update:
            return max(self.last_refresh_ms + self.refresh_backoff_ms - now_ms, 0)
        return max(self.last_successful_refresh_ms + self.metadata_max_age_ms - now_ms, 0)

    def update_started(self, now_ms: int) -> tuple[str, ...]:
        """A request is going out now; returns the topics to ask for."""
        self.update_in_flight = True
        self.last_refresh_ms = now_ms
        return tuple(sorted(self.topics))

    def failed_update(self, now_ms: int) -> None:
        self.update_in_flight = False
        self.need_update = True
        self.last_refresh_ms = now_ms
        self.failed_updates_total += 1

    def update(self, response: MetadataResponse, now_ms: int) -> None:
        """Apply a Metadata response (see the module's rules)."""
        self.update_in_flight = False
        self.need_update = False
        self.last_refresh_ms = now_ms
        self.last_successful_refresh_ms = now_ms
        self.updates_total += 1
        self.brokers = {broker.broker_id: broker for broker in response.brokers}
        for topic in response.topics:
            if topic.error_code is not ErrorCode.NONE or not topic.partitions:
                self.topic_errors[topic.name] = topic.error_code
                self._forget_topic(topic.name)
                continue
            self.topic_errors.pop(topic.name, None)
            count = max(p.partition for p in topic.partitions) + 1
            tps = tuple(TopicPartition(topic.name, p) for p in range(count))
            for partition in topic.partitions:
                tp = tps[partition.partition]
                known_epoch = self._leader_epochs.get(tp, -1)
                if partition.leader_epoch < known_epoch:
                    continue  # older than what we know: a lagging broker's cache
                self._leader_epochs[tp] = partition.leader_epoch
                if partition.leader == NO_LEADER or partition.leader not in self.brokers:
                    self._leaders.pop(tp, None)
                else:
                    self._leaders[tp] = partition.leader
            available = tuple(p for p in range(count) if tps[p] in self._leaders)
            self._topic_info[topic.name] = TopicInfo(topic.name, tps, available, count)
        self._rebuild_nodes()

    def _forget_topic(self, topic: str) -> None:
        info = self._topic_info.pop(topic, None)
        if info is None:
            return
        for tp in info.tps:
            self._leaders.pop(tp, None)
        self._rebuild_nodes()

    def _rebuild_nodes(self) -> None:
        by_node: dict[int, list[TopicPartition]] = {}
        for tp, leader in sorted(self._leaders.items(), key=lambda item: (item[0].topic, item[0].partition)):
            by_node.setdefault(leader, []).append(tp)
        self._by_node = by_node
