"""``actorlog topics``: create, list, describe, alter and delete topics, like ``kafka-topics.sh``.

    actorlog topics --bootstrap-server H:P --create --topic T [--partitions N]
                    [--replication-factor R] [--replica-assignment 1:2:3,2:3:1] [--config k=v ...]
                    [--if-not-exists]
    actorlog topics --bootstrap-server H:P --list
    actorlog topics --bootstrap-server H:P --describe [--topic T [--if-exists]]
                    [--under-replicated-partitions | --under-min-isr-partitions |
                    --at-min-isr-partitions | --unavailable-partitions]
    actorlog topics --bootstrap-server H:P --alter --topic T [--partitions N] [--config k=v ...]
                    [--delete-config k ...] [--if-exists]
    actorlog topics --bootstrap-server H:P --delete --topic T [--if-exists]

Output lines are Kafka's (``Created topic T.``; ``--describe`` prints ``Topic: T
PartitionCount: ... ReplicationFactor: ... Configs: ...`` then one tab-indented line per partition
with ``Leader``, ``Replicas``, ``Isr``, plus ``LeaderEpoch``). Errors are Kafka's one line
(``Error while executing topic command : ...``) and exit code 1; bad options exit 2. A topic named
by ``--describe``, ``--alter`` or ``--delete`` that does not exist is, whichever request found out,
Kafka's ``Topic 'T' does not exist as expected`` (nothing at all, exit 0, with ``--if-exists``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Final

from actors.common.errors import ErrorCode, KafkaError
from ops.clients.admin import Admin, ConfigEntry, TopicDescription
from ops.config import parse_overrides
from ops.properties import ConfigError

__all__ = ["TopicCommandError", "format_description", "main"]

# The answers that mean "no such topic" to --describe/--alter/--delete of a named topic (an illegal
# name cannot exist either: Kafka's tool finds it missing from the topic list).
_NO_SUCH_TOPIC: Final = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION})


class TopicCommandError(Exception):
    """A refusal by the tool itself (Kafka's ``IllegalArgumentException`` in ``TopicCommand``)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actorlog topics", description="Create, list, describe, alter and delete topics."
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    parser.add_argument(
        "--command-config", metavar="FILE", help="client properties (internal.auth.secret...)"
    )
    action = parser.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true")
    parser.add_argument("--topic")
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--replication-factor", type=int)
    parser.add_argument(
        "--replica-assignment", metavar="B:B,B:B", help="replicas per partition, e.g. 1:2,2:3"
    )
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--delete-config", action="append", default=[], metavar="KEY")
    parser.add_argument("--if-not-exists", action="store_true")
    parser.add_argument(
        "--if-exists",
        action="store_true",
        help="--describe, --alter, --delete: do nothing if the topic is missing",
    )
    filters = parser.add_mutually_exclusive_group()
    filters.add_argument("--under-replicated-partitions", action="store_true")
    filters.add_argument("--under-min-isr-partitions", action="store_true")
    filters.add_argument("--at-min-isr-partitions", action="store_true")
    filters.add_argument("--unavailable-partitions", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    if (arguments.create or arguments.alter or arguments.delete) and not arguments.topic:
        parser.error("--topic is required with --create, --alter and --delete")
    try:
        configs = parse_overrides(arguments.config)
        assignment = _parse_assignment(arguments.replica_assignment)
    except ConfigError as error:
        parser.error(str(error).replace("--override", "--config"))
    if assignment and (arguments.partitions is not None or arguments.replication_factor is not None):
        parser.error("--replica-assignment cannot be combined with --partitions or --replication-factor")
    try:
        return asyncio.run(_run(arguments, configs, assignment))
    except (KafkaError, ConfigError, TopicCommandError) as error:
        print(f"Error while executing topic command : {_message(error)}", file=sys.stderr)
        return 1


async def _run(
    arguments: argparse.Namespace, configs: dict[str, str], assignment: dict[int, list[int]]
) -> int:
    async with Admin(arguments.bootstrap_server, command_config=arguments.command_config) as admin:
        if arguments.create:
            return await _create(admin, arguments, configs, assignment)
        if arguments.list:
            for name in await admin.list_topics():
                print(name)
            return 0
        try:
            await _describe_alter_or_delete(admin, arguments, configs)
        except KafkaError as error:
            # Each request that can meet a missing topic words it its own way (Metadata and the
            # admin actor's CreatePartitions, DescribeConfigs, IncrementalAlterConfigs and
            # DeleteTopics); Kafka's tool checks the topic list first and says one thing. So does
            # this one, whichever request found out (also when the topic went away in between).
            if arguments.topic is None or error.error_code not in _NO_SUCH_TOPIC:
                raise
            if arguments.if_exists:
                return 0
            raise TopicCommandError(f"Topic '{arguments.topic}' does not exist as expected") from None
    return 0


async def _create(
    admin: Admin, arguments: argparse.Namespace, configs: dict[str, str], assignment: dict[int, list[int]]
) -> int:
    try:
        await admin.create_topic(
            arguments.topic,
            num_partitions=-1 if arguments.partitions is None else arguments.partitions,
            replication_factor=-1 if arguments.replication_factor is None else arguments.replication_factor,
            replica_assignment=assignment or None,
            configs=configs,
        )
    except KafkaError as error:
        if arguments.if_not_exists and error.error_code is ErrorCode.TOPIC_ALREADY_EXISTS:
            return 0
        raise
    print(f"Created topic {arguments.topic}.")
    return 0


async def _describe_alter_or_delete(
    admin: Admin, arguments: argparse.Namespace, configs: dict[str, str]
) -> None:
    if arguments.describe:
        names = None if arguments.topic is None else [arguments.topic]
        for description in await admin.describe_topics(names):
            topic_config = await admin.describe_topic_config(description.name)
            overrides = {n: e for n, e in topic_config.items() if e.source == "DYNAMIC_TOPIC_CONFIG"}
            min_isr = int(topic_config["min.insync.replicas"].value or 1)
            for line in format_description(description, overrides, min_isr=min_isr, filters=arguments):
                print(line)
    elif arguments.alter:
        if arguments.partitions is None and not configs and not arguments.delete_config:
            raise ConfigError("--alter needs --partitions, --config or --delete-config")
        if arguments.partitions is not None:
            await admin.create_partitions(arguments.topic, arguments.partitions)
            print(
                "WARNING: If partitions are increased for a topic that has a key, the partition logic "
                "or ordering of the messages will be affected"
            )
            print("Adding partitions succeeded!")
        if configs or arguments.delete_config:
            await admin.alter_topic_config(
                arguments.topic, set_configs=configs, delete_configs=arguments.delete_config
            )
            print(f"Updated config for topic {arguments.topic}.")
    elif arguments.delete:
        refused = (await admin.delete_topics([arguments.topic]))[arguments.topic]
        if refused is not None:
            raise refused
        print(f"Topic {arguments.topic} is deleted.")


def format_description(
    description: TopicDescription,
    overrides: dict[str, ConfigEntry],
    *,
    min_isr: int,
    filters: argparse.Namespace | None = None,
) -> list[str]:
    """Kafka's ``--describe`` lines for one topic (the partition filters keep matching partitions
    only, and print no topic line, as Kafka does)."""
    configs = ",".join(f"{name}={entry.value}" for name, entry in sorted(overrides.items()))
    partitions = description.partitions
    filtered = filters is not None and any(
        getattr(filters, name, False)
        for name in (
            "under_replicated_partitions",
            "under_min_isr_partitions",
            "at_min_isr_partitions",
            "unavailable_partitions",
        )
    )
    lines = []
    if not filtered:
        lines.append(
            f"Topic: {description.name}\tPartitionCount: {len(partitions)}\t"
            f"ReplicationFactor: {description.replication_factor}\tConfigs: {configs}"
        )
    for p in partitions:
        if filtered and filters is not None:
            keep = (
                (filters.under_replicated_partitions and len(p.isr) < len(p.replicas))
                or (filters.under_min_isr_partitions and len(p.isr) < min_isr)
                or (filters.at_min_isr_partitions and len(p.isr) == min_isr)
                or (filters.unavailable_partitions and p.leader < 0)
            )
            if not keep:
                continue
        leader = "none" if p.leader < 0 else str(p.leader)
        line = (
            f"\tTopic: {description.name}\tPartition: {p.partition}\tLeader: {leader}\t"
            f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
        )
        if p.offline_replicas:
            line += f"\tOffline: {_ids(p.offline_replicas)}"
        lines.append(line + f"\tLeaderEpoch: {p.leader_epoch}")
    return lines


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _parse_assignment(raw: str | None) -> dict[int, list[int]]:
    if not raw:
        return {}
    assignment: dict[int, list[int]] = {}
    for partition, part in enumerate(raw.split(",")):
        try:
            assignment[partition] = [int(broker) for broker in part.split(":")]
        except ValueError:
            raise ConfigError(
                f"--replica-assignment: {part!r} is not a list of broker ids like 1:2:3"
            ) from None
    return assignment


def _message(error: Exception) -> str:
    if isinstance(error, KafkaError):
        return error.message
    return str(error)
