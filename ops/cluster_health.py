"""The cluster health view and the rolling-restart check: what ``GET /v1/cluster/health`` answers and
``actorlog cluster health`` prints, from one broker's metadata cache and the topics' configs.

Two halves:

* ``assess`` is pure: a ``MetadataResponse`` (leader, replicas, ISR per partition; the live brokers
  and their racks) and each topic's ``min.insync.replicas`` in, a ``ClusterHealth`` out. It lists
  under-replicated partitions (ISR smaller than the replica set, with the replicas out of the
  ISR), under-min-ISR partitions, offline partitions (no leader) and partitions breaking the rack
  constraint (``actors/common/racks.py``). ``health_body`` and ``health_lines`` shape it as JSON
  and as the tool's lines.
* ``gather_cluster_health`` is the one way both callers fill it in: a Metadata request to some
  broker's ``broker`` actor and one DescribeConfigs request (every topic, ``min.insync.replicas``
  only) to an ``admin`` actor, through the ``ask`` the caller passes (the Admin client's for the
  tool, the serving broker's own actor system for the HTTP endpoint).

The restart rule (Strimzi's ``KafkaAvailability.canRoll`` in its strict form; docs/operations.md
§8.2): broker N may restart now only if no partition it hosts would go below
``min.insync.replicas``, that is, for every partition whose ISR holds N, the ISR without N still has
at least ``min.insync.replicas`` members. A partition already under min ISR whose ISR holds N
blocks too (it would lose one more), and so does a partition whose replication factor is not above
its min ISR while N is in its ISR: such a topic can never lose a replica without refusing acks=all
writes, so the check says so rather than letting the roll go on silently. A replica of N outside
the ISR blocks nothing (its restart takes nothing from the ISR). A broker that is not live (not in
the metadata's brokers) may always restart: it is already gone, and starting it again is how its
partitions come back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from actors.common.client_protocol import (
    ConfigResourceType,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from actors.common.errors import ErrorCode
from actors.common.names import ADMIN_ACTOR_NAME, BROKER_ACTOR_NAME
from actors.common.protocol import MetadataRequest, MetadataResponse
from actors.common.racks import rack_constraint_broken

__all__ = [
    "MIN_INSYNC_REPLICAS",
    "Ask",
    "ClusterHealth",
    "PartitionHealth",
    "RestartCheck",
    "assess",
    "gather_cluster_health",
    "health_body",
    "health_lines",
    "restart_check",
]

MIN_INSYNC_REPLICAS: Final = "min.insync.replicas"

# ``ask(actor_name, message)``: the answer of that actor on some broker (the caller picks which).
Ask = Callable[[str, object], Awaitable[object]]


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionHealth:
    """One partition as the metadata cache has it, with its topic's min ISR and replicas' racks."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_insync_replicas: int
    replica_racks: tuple[str | None, ...] = ()

    @property
    def out_of_isr(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.isr)

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def under_min_isr(self) -> bool:
        return len(self.isr) < self.min_insync_replicas

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartCheck:
    """Whether ``broker`` may restart now; ``blocking``: the partitions that forbid it."""

    broker: int
    live: bool
    hosted_partitions: int
    blocking: tuple[PartitionHealth, ...]

    @property
    def allowed(self) -> bool:
        return not self.blocking

    @property
    def reason(self) -> str:
        if not self.live:
            return f"broker {self.broker} is not live: restarting it takes nothing from any ISR"
        if self.blocking:
            return (
                f"{len(self.blocking)} partition(s) whose ISR holds broker {self.broker} would go below "
                f"{MIN_INSYNC_REPLICAS}"
            )
        return (
            f"every partition broker {self.broker} hosts ({self.hosted_partitions}) keeps at least "
            f"{MIN_INSYNC_REPLICAS} in-sync replicas without it"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterHealth:
    controller_id: int
    brokers: tuple[int, ...]
    topic_count: int
    partition_count: int
    under_replicated: tuple[PartitionHealth, ...]
    under_min_isr: tuple[PartitionHealth, ...]
    offline: tuple[PartitionHealth, ...]
    rack_constraint_broken: tuple[PartitionHealth, ...]
    restart: RestartCheck | None = None

    @property
    def healthy(self) -> bool:
        return not (
            self.under_replicated or self.under_min_isr or self.offline or self.rack_constraint_broken
        )

    @property
    def ok(self) -> bool:
        """The tool's exit status: the restart answer when one was asked for, else ``healthy``."""
        return self.restart.allowed if self.restart is not None else self.healthy


def restart_check(partitions: Iterable[PartitionHealth], broker: int, *, live: bool) -> RestartCheck:
    """The restart rule of the module docstring for ``broker`` over ``partitions``."""
    hosted = [p for p in partitions if broker in p.replicas]
    blocking = () if not live else tuple(
        p for p in hosted if broker in p.isr and len(p.isr) - 1 < p.min_insync_replicas
    )  # fmt: skip
    return RestartCheck(broker=broker, live=live, hosted_partitions=len(hosted), blocking=blocking)


def assess(
    metadata: MetadataResponse, min_insync_replicas: Mapping[str, int], *, broker: int | None = None
) -> ClusterHealth:
    """The health of every partition of ``metadata`` whose topic has a ``min_insync_replicas``
    entry (a topic without one was deleted between the two requests, or failed in the metadata:
    left out); with ``broker``, the restart check for it."""
    racks = {b.broker_id: b.rack for b in metadata.brokers}
    partitions: list[PartitionHealth] = []
    topics = 0
    for topic in sorted(metadata.topics, key=lambda t: t.name):
        if topic.error_code is not ErrorCode.NONE or topic.name not in min_insync_replicas:
            continue
        topics += 1
        partitions.extend(
            PartitionHealth(
                topic=topic.name,
                partition=p.partition,
                leader=p.leader,
                replicas=tuple(p.replicas),
                isr=tuple(p.isr),
                min_insync_replicas=min_insync_replicas[topic.name],
                replica_racks=tuple(racks.get(r) for r in p.replicas),
            )
            for p in sorted(topic.partitions, key=lambda p: p.partition)
        )
    return ClusterHealth(
        controller_id=metadata.controller_id,
        brokers=tuple(sorted(racks)),
        topic_count=topics,
        partition_count=len(partitions),
        under_replicated=tuple(p for p in partitions if p.under_replicated),
        under_min_isr=tuple(p for p in partitions if p.under_min_isr),
        offline=tuple(p for p in partitions if p.offline),
        rack_constraint_broken=tuple(p for p in partitions if rack_constraint_broken(p.replicas, racks)),
        restart=None if broker is None else restart_check(partitions, broker, live=broker in racks),
    )


async def gather_cluster_health(ask: Ask, *, broker: int | None = None) -> ClusterHealth:
    """Metadata, then every topic's ``min.insync.replicas`` in one DescribeConfigs request, then
    ``assess``. Raises whatever ``ask`` raises; an unexpected answer is a ``TypeError``."""
    metadata = await ask(BROKER_ACTOR_NAME, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    if not isinstance(metadata, MetadataResponse):
        raise TypeError(f"expected a MetadataResponse, got {type(metadata).__name__}")
    names = sorted(t.name for t in metadata.topics if t.error_code is ErrorCode.NONE)
    min_isr: dict[str, int] = {}
    if names:
        request = DescribeConfigsRequest(
            resources=tuple(
                DescribeConfigsResource(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name=name,
                    configuration_keys=(MIN_INSYNC_REPLICAS,),
                )
                for name in names
            )
        )
        configs = await ask(ADMIN_ACTOR_NAME, request)
        if not isinstance(configs, DescribeConfigsResponse):
            raise TypeError(f"expected a DescribeConfigsResponse, got {type(configs).__name__}")
        for result in configs.results:
            if result.error_code is not ErrorCode.NONE:
                continue  # deleted since the metadata was read
            value = next((e.value for e in result.configs if e.name == MIN_INSYNC_REPLICAS), None)
            min_isr[result.resource_name] = int(value) if value else 1
    return assess(metadata, min_isr, broker=broker)


# ---------------------------------------------------------------------------------- shaping


def _partition_body(p: PartitionHealth) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "leader": p.leader,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "out_of_isr": list(p.out_of_isr),
        "min_insync_replicas": p.min_insync_replicas,
        "replica_racks": list(p.replica_racks),
    }


def health_body(health: ClusterHealth) -> dict[str, Any]:
    """The JSON answer of ``GET /v1/cluster/health`` and ``cluster health --output json``."""
    restart = health.restart
    return {
        "healthy": health.healthy,
        "controller_id": health.controller_id,
        "brokers": list(health.brokers),
        "topic_count": health.topic_count,
        "partition_count": health.partition_count,
        "under_replicated_partitions": [_partition_body(p) for p in health.under_replicated],
        "under_min_isr_partitions": [_partition_body(p) for p in health.under_min_isr],
        "offline_partitions": [_partition_body(p) for p in health.offline],
        "rack_constraint_broken_partitions": [_partition_body(p) for p in health.rack_constraint_broken],
        "restart": None
        if restart is None
        else {
            "broker": restart.broker,
            "live": restart.live,
            "allowed": restart.allowed,
            "hosted_partitions": restart.hosted_partitions,
            "blocking_partitions": [_partition_body(p) for p in restart.blocking],
            "reason": restart.reason,
        },
    }


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids) or "none"


def _line(p: PartitionHealth, *extra: str) -> str:
    leader = "none" if p.leader < 0 else str(p.leader)
    fields = [
        f"Topic: {p.topic}",
        f"Partition: {p.partition}",
        f"Leader: {leader}",
        f"Replicas: {_ids(p.replicas)}",
        f"Isr: {_ids(p.isr)}",
        f"MinIsr: {p.min_insync_replicas}",
        *extra,
    ]
    return "\t" + "\t".join(fields)


def health_lines(health: ClusterHealth) -> list[str]:
    """The tool's lines: a summary, one block per category (partition lines shaped like
    ``topics --describe``), the verdict and, with a broker, the restart answer."""
    lines = [
        f"Brokers: {_ids(health.brokers)}\tController: {health.controller_id}\t"
        f"Topics: {health.topic_count}\tPartitions: {health.partition_count}"
    ]
    categories: list[tuple[str, tuple[PartitionHealth, ...], Callable[[PartitionHealth], list[str]]]] = [
        (
            "Under-replicated partitions",
            health.under_replicated,
            lambda p: [f"OutOfIsr: {_ids(p.out_of_isr)}"],
        ),
        ("Under-min-ISR partitions", health.under_min_isr, lambda p: []),
        ("Offline partitions", health.offline, lambda p: []),
        (
            "Rack-constraint violations",
            health.rack_constraint_broken,
            lambda p: ["Racks: " + ",".join(r if r is not None else "-" for r in p.replica_racks)],
        ),
    ]  # fmt: skip
    problems = []
    for title, partitions, extra in categories:
        lines.append(f"{title}: {len(partitions)}")
        lines += [_line(p, *extra(p)) for p in partitions]
        if partitions:
            problems.append(f"{len(partitions)} {title[0].lower()}{title[1:]}")
    lines.append("Cluster: HEALTHY" if health.healthy else f"Cluster: NOT HEALTHY ({'; '.join(problems)})")
    restart = health.restart
    if restart is not None:
        verdict = "ALLOWED" if restart.allowed else "REFUSED"
        lines.append(f"Restart of broker {restart.broker}: {verdict}: {restart.reason}")
        lines += [
            _line(p, f"IsrWithout{restart.broker}: {_ids(r for r in p.isr if r != restart.broker)}")
            for p in restart.blocking
        ]
    return lines
