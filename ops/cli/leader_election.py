"""``actorlog leader-election``: elect preferred or unclean leaders, like ``kafka-leader-election.sh``.

    actorlog leader-election --bootstrap-server H:P --election-type preferred|unclean
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file F)

The JSON file is Kafka's: ``{"partitions":[{"topic":"T","partition":0},...]}``. A preferred
election gives a partition its preferred replica (the first assigned) when that replica is live
and in the ISR; an unclean one gives a partition without a live leader a live replica, from
outside the ISR if no ISR member is live — whatever the topic's ``unclean.leader.election.enable``
says, and so possibly losing acknowledged records. ``--all-topic-partitions`` asks for every
partition and hears only about those that needed an election.

Output lines are Kafka's: ``Successfully completed leader election (PREFERRED) for partitions
T-0, T-1``, ``Valid replica already elected for partitions T-2``, and per failure ``Error
completing leader election (PREFERRED) for partition: T-3: ERROR_NAME: message``, after which the
tool ends with ``Error: N replica(s) could not be elected`` on stderr and exit 1. Bad options
exit 2 with Kafka's messages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from actors.common.errors import ErrorCode, KafkaError
from actors.common.types import TopicPartition
from ops.clients.admin import Admin, ElectionType

__all__ = ["LeaderElectionError", "build_parser", "main", "parse_election_partitions", "run"]


class LeaderElectionError(Exception):
    """A refusal by the tool itself (Kafka's AdminCommandFailedException / AdminOperationException)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actorlog leader-election",
        description="Elect the preferred replica, or any live replica, as leader of partitions.",
    )
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT...]")
    parser.add_argument(
        "--admin.config",
        "--command-config",
        dest="command_config",
        metavar="FILE",
        help="client properties (internal.auth.secret...)",
    )
    parser.add_argument(
        "--election-type", type=_election_type, metavar="preferred|unclean", help="the kind of election"
    )
    parser.add_argument("--topic", help="one partition's topic (with --partition)")
    parser.add_argument("--partition", type=int, help="one partition (with --topic)")
    parser.add_argument("--all-topic-partitions", action="store_true", help="every partition")
    parser.add_argument(
        "--path-to-json-file", metavar="FILE", help='{"partitions":[{"topic":"T","partition":0}]}'
    )
    return parser


def _election_type(text: str) -> ElectionType:
    try:
        return ElectionType[text.upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an election type: preferred or unclean") from None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    _check_options(parser, arguments)
    try:
        partitions = None
        if arguments.path_to_json_file is not None:
            partitions = parse_election_partitions(_read(arguments.path_to_json_file))
        elif arguments.topic is not None:
            partitions = [TopicPartition(arguments.topic, arguments.partition)]
        return asyncio.run(_run_with_admin(arguments, partitions))
    except (KafkaError, LeaderElectionError) as error:
        print(f"Error: {error.message if isinstance(error, KafkaError) else error}", file=sys.stderr)
        return 1


def _check_options(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> None:
    """Kafka's ``LeaderElectionCommand.validate``, in its words."""
    missing = [
        option
        for option, value in (
            ("--bootstrap-server", arguments.bootstrap_server),
            ("--election-type", arguments.election_type),
        )
        if value is None
    ]
    if missing:
        parser.error(f"Missing required option(s): {', '.join(missing)}")
    chosen = [
        arguments.topic is not None,
        arguments.all_topic_partitions,
        arguments.path_to_json_file is not None,
    ]
    if chosen.count(True) != 1:
        parser.error(
            "One and only one of the following options is required: "
            "--topic, --all-topic-partitions, --path-to-json-file"
        )
    if arguments.topic is not None and arguments.partition is None:
        parser.error("Missing required option(s): --partition")
    if arguments.topic is None and arguments.partition is not None:
        parser.error("Option --partition is only allowed if --topic is used")


async def _run_with_admin(arguments: argparse.Namespace, partitions: list[TopicPartition] | None) -> int:
    async with Admin(arguments.bootstrap_server, command_config=arguments.command_config) as admin:
        return await run(admin, arguments.election_type, partitions)


async def run(admin: Admin, election_type: ElectionType, partitions: list[TopicPartition] | None) -> int:
    """Elect, print Kafka's lines; raises LeaderElectionError when some could not be elected."""
    results = await admin.elect_leaders(election_type, partitions)
    order = sorted(results, key=lambda tp: (tp.topic, tp.partition))
    succeeded = [tp for tp in order if results[tp] is None]
    needless = [
        tp for tp in order if (e := results[tp]) is not None and e.error_code is ErrorCode.ELECTION_NOT_NEEDED
    ]
    failed = [tp for tp in order if tp not in succeeded and tp not in needless]
    kind = election_type.name
    if succeeded:
        print(f"Successfully completed leader election ({kind}) for partitions {_joined(succeeded)}")
    if needless:
        print(f"Valid replica already elected for partitions {_joined(needless)}")
    for tp in failed:
        error = results[tp]
        assert error is not None
        print(f"Error completing leader election ({kind}) for partition: {tp}: {error}")
    if failed:
        raise LeaderElectionError(f"{len(failed)} replica(s) could not be elected")
    return 0


def parse_election_partitions(text: str) -> list[TopicPartition]:
    """Kafka's ``parseReplicaElectionData``."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as error:
        raise LeaderElectionError(f"Replica election data is not valid JSON: {error}") from None
    if not data:
        raise LeaderElectionError("Replica election data is empty")
    if not isinstance(data, dict) or "partitions" not in data:
        raise LeaderElectionError('Replica election data is missing "partitions" field')
    entries = data["partitions"]
    partitions: list[TopicPartition] = []
    for entry in entries if isinstance(entries, list) else [entries]:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("topic"), str)
            and isinstance(entry.get("partition"), int)
            and not isinstance(entry.get("partition"), bool)
        ):
            raise LeaderElectionError(f'each partition needs "topic" and "partition": {json.dumps(entry)}')
        partitions.append(TopicPartition(entry["topic"], entry["partition"]))
    duplicates = sorted(
        {tp for tp in partitions if partitions.count(tp) > 1}, key=lambda tp: (tp.topic, tp.partition)
    )
    if duplicates:
        raise LeaderElectionError(
            f"Replica election data contains duplicate partitions: {','.join(str(tp) for tp in duplicates)}"
        )
    return partitions


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise LeaderElectionError(f"cannot read {path}: {error.strerror or error}") from None


def _joined(partitions: list[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in partitions)
