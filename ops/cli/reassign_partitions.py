"""``actorlog reassign-partitions``: move partition replicas between brokers, like
``kafka-reassign-partitions.sh`` (its KIP-455 form, over the Admin API).

    actorlog reassign-partitions --bootstrap-server H:P --generate
        --topics-to-move-json-file F --broker-list 1,2,3 [--disable-rack-aware]
    actorlog reassign-partitions --bootstrap-server H:P --execute --reassignment-json-file F
        [--throttle BYTES_PER_S] [--additional]
    actorlog reassign-partitions --bootstrap-server H:P --verify --reassignment-json-file F
        [--preserve-throttles]
    actorlog reassign-partitions --bootstrap-server H:P --cancel --reassignment-json-file F
        [--preserve-throttles]
    actorlog reassign-partitions --bootstrap-server H:P --list

Files are Kafka's: ``{"version":1,"topics":[{"topic":"T"}]}`` to generate from, and the plan
``{"version":1,"partitions":[{"topic":"T","partition":0,"replicas":[1,2,3],"log_dirs":[...]}]}``
(``log_dirs``, optional, may only say ``"any"``: replicas are not moved between a broker's log
dirs). ``--generate`` prints the current assignment and a proposal made as topic creation places
replicas (``actors/server/admin/assignment.py``, rack-aware when the brokers have ``broker.rack``).

Rules kept, as Kafka's tool keeps them:

* ``--execute`` prints the current assignment first (to roll back with), refuses to start while
  another reassignment runs unless ``--additional``, and names unknown brokers or partitions
  before anything changes.
* ``--throttle`` sets, before the move starts, ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` on every broker the move involves, and on each topic
  ``leader.replication.throttled.replicas`` (``partition:broker`` of the replicas being copied
  from: the current ones) and ``follower.replication.throttled.replicas`` (the replicas being
  added). ``--verify`` removes them all (on every broker, and on the plan's topics) once no
  reassignment at all is running, since older moves may have set some (unless
  ``--preserve-throttles``); so does ``--cancel``.
* Output lines are Kafka's. Errors are one line on stderr with exit 1; bad options exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from actors.common.errors import KafkaError
from actors.common.types import TopicPartition
from actors.server.admin.assignment import (
    MIXED_RACKS_ERROR,
    MIXED_RACKS_TOOL_MESSAGE,
    AssignmentError,
    assign_replicas_to_brokers,
)
from ops.clients.admin import Admin, PartitionReassignment

__all__ = [
    "BROKER_THROTTLES",
    "TOPIC_THROTTLES",
    "Move",
    "ReassignCommandError",
    "build_parser",
    "format_reassignment_json",
    "main",
    "parse_reassignment",
    "parse_topics_to_move",
    "proposed_moves",
    "run",
    "throttled_replicas",
]

LEADER_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_RATE: Final = "follower.replication.throttled.rate"
LEADER_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS: Final = "follower.replication.throttled.replicas"
BROKER_THROTTLES: Final = (LEADER_RATE, FOLLOWER_RATE)
TOPIC_THROTTLES: Final = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
ANY_LOG_DIR: Final = "any"

_EXISTING_REASSIGNMENT: Final = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. The "
    "--additional flag can also be used to change the throttle by resubmitting the current "
    "reassignment."
)
_RUN_VERIFY: Final = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
    "throttle is removed."
)


class ReassignCommandError(Exception):
    """A refusal by the tool itself (Kafka's AdminCommandFailedException / TerseException)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actorlog reassign-partitions",
        description="Move partition replicas between brokers (generate, execute, verify, cancel, list).",
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    parser.add_argument(
        "--command-config", metavar="FILE", help="client properties (internal.auth.secret...)"
    )
    action = parser.add_mutually_exclusive_group(required=True)
    for name in ("generate", "execute", "verify", "cancel", "list"):
        action.add_argument(f"--{name}", action="store_true")
    parser.add_argument("--topics-to-move-json-file", metavar="FILE", help="--generate: the topics to move")
    parser.add_argument("--broker-list", metavar="1,2,3", help="--generate: the brokers to move them to")
    parser.add_argument(
        "--disable-rack-aware", action="store_true", help="--generate: place replicas ignoring racks"
    )
    parser.add_argument(
        "--reassignment-json-file", metavar="FILE", help="--execute, --verify, --cancel: the plan"
    )
    parser.add_argument(
        "--throttle",
        type=int,
        default=-1,
        metavar="BYTES_PER_S",
        help="--execute: the replication throttle on the brokers the move involves",
    )
    parser.add_argument(
        "--additional", action="store_true", help="--execute: even while another reassignment runs"
    )
    parser.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="--verify, --cancel: leave the throttles in place",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    _check_options(parser, arguments)
    try:
        return asyncio.run(_run_with_admin(arguments))
    except (KafkaError, ReassignCommandError) as error:
        print(f"Error: {_message(error)}", file=sys.stderr)
        return 1


def _check_options(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> None:
    """Kafka's option rules: each action's required options, and no option another action owns."""
    required: tuple[str, ...]
    if arguments.generate:
        action = "--generate"
        required = ("topics_to_move_json_file", "broker_list")
    elif arguments.list:
        action, required = "--list", ()
    else:
        action = next(f"--{a}" for a in ("execute", "verify", "cancel") if getattr(arguments, a))
        required = ("reassignment_json_file",)
    for name in required:
        if getattr(arguments, name) is None:
            parser.error(f'Missing required argument "--{name.replace("_", "-")}" for {action}')
    allowed = {
        "--generate": {"topics_to_move_json_file", "broker_list", "disable_rack_aware"},
        "--execute": {"reassignment_json_file", "throttle", "additional"},
        "--verify": {"reassignment_json_file", "preserve_throttles"},
        "--cancel": {"reassignment_json_file", "preserve_throttles"},
        "--list": set(),
    }[action]
    defaults = {"throttle": -1, "additional": False, "preserve_throttles": False, "disable_rack_aware": False}
    for name in (
        "topics_to_move_json_file",
        "broker_list",
        "disable_rack_aware",
        "reassignment_json_file",
        "throttle",
        "additional",
        "preserve_throttles",
    ):
        if name not in allowed and getattr(arguments, name) != defaults.get(name):
            parser.error(f'Option "--{name.replace("_", "-")}" can\'t be used with action "{action}"')
    if arguments.execute and arguments.throttle < -1:
        parser.error("--throttle must be a number of bytes per second (0 or more)")


async def _run_with_admin(arguments: argparse.Namespace) -> int:
    async with Admin(arguments.bootstrap_server, command_config=arguments.command_config) as admin:
        return await run(admin, arguments)


async def run(admin: Admin, arguments: argparse.Namespace) -> int:
    """The action ``arguments`` name, with this client (``main`` opens it from the options)."""
    if arguments.list:
        print(await _current_reassignments_text(admin))
        return 0
    if arguments.generate:
        topics = parse_topics_to_move(_read(arguments.topics_to_move_json_file))
        brokers = _parse_broker_list(arguments.broker_list)
        await _generate(admin, topics, brokers, rack_aware=not arguments.disable_rack_aware)
        return 0
    plan = parse_reassignment(_read(arguments.reassignment_json_file))
    if arguments.execute:
        await _execute(admin, plan, throttle=arguments.throttle, additional=arguments.additional)
    elif arguments.verify:
        await _verify(admin, plan, preserve_throttles=arguments.preserve_throttles)
    else:
        await _cancel(admin, plan, preserve_throttles=arguments.preserve_throttles)
    return 0


# ------------------------------------------------------------------------------- --generate


async def _generate(admin: Admin, topics: list[str], brokers: list[int], *, rack_aware: bool) -> None:
    current = await _assignments_of_topics(admin, topics)
    cluster = await admin.describe_cluster()
    # Kafka's tool keeps the listed brokers that exist and places replicas over them.
    chosen = {b.broker_id: b.rack for b in cluster.brokers if b.broker_id in set(brokers)}
    racks = chosen if rack_aware else None
    if rack_aware and any(rack is not None for rack in chosen.values()) and None in chosen.values():
        raise ReassignCommandError(MIXED_RACKS_TOOL_MESSAGE)
    proposed: dict[TopicPartition, list[int]] = {}
    rng = random.Random()  # a placement's starting broker, drawn as Kafka's tool draws it
    for topic in topics:
        partitions = sorted(tp.partition for tp in current if tp.topic == topic)
        replication = len(current[TopicPartition(topic, partitions[0])])
        try:
            placed = assign_replicas_to_brokers(
                list(chosen), len(partitions), replication, rng=rng, racks=racks
            )
        except AssignmentError as error:
            message = MIXED_RACKS_TOOL_MESSAGE if error.error_name == MIXED_RACKS_ERROR else str(error)
            raise ReassignCommandError(message) from None
        for partition, replicas in placed.items():
            proposed[TopicPartition(topic, partition)] = list(replicas)
    print(f"Current partition replica assignment\n{format_reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}")


# -------------------------------------------------------------------------------- --execute


async def _execute(
    admin: Admin, plan: dict[TopicPartition, list[int]], *, throttle: int, additional: bool
) -> None:
    ongoing = await admin.list_partition_reassignments()
    if ongoing and not additional:
        raise ReassignCommandError(_EXISTING_REASSIGNMENT)
    cluster = await admin.describe_cluster()
    known = {b.broker_id for b in cluster.brokers}
    unknown = sorted({b for replicas in plan.values() for b in replicas} - known)
    if unknown:
        raise ReassignCommandError(f"Unknown broker id {unknown[0]}")
    current = await _assignments_of_partitions(admin, plan)
    print(
        f"Current partition replica assignment\n\n{format_reassignment_json(current)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )
    if throttle >= 0:
        print(_RUN_VERIFY)
        moves = proposed_moves(ongoing, plan, current)
        for topic, (leader, follower) in sorted(throttled_replicas(moves).items()):
            await admin.alter_topic_config(
                topic, set_configs={LEADER_REPLICAS: leader, FOLLOWER_REPLICAS: follower}
            )
        for broker_id in sorted({b for move in moves.values() for b in (*move.sources, *move.destinations)}):
            await admin.alter_broker_config(
                broker_id, {LEADER_RATE: str(throttle), FOLLOWER_RATE: str(throttle)}
            )
        print(f"The inter-broker throttle limit was set to {throttle} B/s")
    errors = await admin.alter_partition_reassignments(plan)
    failed = {tp: error for tp, error in errors.items() if error is not None}
    if failed:
        raise ReassignCommandError(
            "Error reassigning partition(s): "
            + "; ".join(f"{tp}: {_message(failed[tp])}" for tp in sorted(failed, key=_order))
        )
    names = ",".join(str(tp) for tp in sorted(plan, key=_order))
    print(f"Successfully started partition reassignment{'' if len(plan) == 1 else 's'} for {names}")


@dataclass(frozen=True, slots=True)
class Move:
    """One partition's move: the replicas it is copied from and those it is copied to."""

    sources: frozenset[int]
    destinations: frozenset[int]


def proposed_moves(
    ongoing: Mapping[TopicPartition, PartitionReassignment],
    plan: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
) -> dict[TopicPartition, Move]:
    """Kafka's ``calculateProposedMoveMap``: the ongoing moves, then the plan's, whose sources are
    an ongoing move's sources (its original replicas) or else the current replicas."""
    moves = {
        tp: Move(frozenset(r.replicas) - frozenset(r.adding_replicas), frozenset(r.adding_replicas))
        for tp, r in ongoing.items()
    }
    for tp, replicas in plan.items():
        sources = moves[tp].sources if tp in moves else frozenset(current[tp])
        moves[tp] = Move(sources, frozenset(replicas) - sources)
    return moves


def throttled_replicas(moves: Mapping[TopicPartition, Move]) -> dict[str, tuple[str, str]]:
    """Per topic, Kafka's ``partition:broker`` lists: (leader side = every move's sources, follower
    side = its destinations), each sorted as Kafka's TreeSet of strings sorts them."""
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for tp, move in moves.items():
        leader.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in move.sources)
        follower.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in move.destinations)
    return {
        topic: (",".join(sorted(leader[topic])), ",".join(sorted(follower.get(topic, set()))))
        for topic in leader
    }


# ------------------------------------------------------------------------- --verify, --cancel


async def _verify(admin: Admin, plan: dict[TopicPartition, list[int]], *, preserve_throttles: bool) -> None:
    ongoing = await admin.list_partition_reassignments()
    current = await _assignments_of_partitions(admin, plan)
    lines = ["Status of partition reassignment:"]
    for tp in sorted(plan, key=_order):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif list(current[tp]) == list(plan[tp]):
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {tp}, but replica set is "
                f"{_joined(current[tp])} rather than {_joined(plan[tp])}."
            )
    print("\n".join(lines))
    # Kafka clears the throttles only when no reassignment at all is left (it cannot tell which
    # brokers older moves involved).
    if not ongoing and not preserve_throttles:
        await _clear_throttles(admin, plan)


async def _cancel(admin: Admin, plan: dict[TopicPartition, list[int]], *, preserve_throttles: bool) -> None:
    ongoing = await admin.list_partition_reassignments(plan)
    cancelling = sorted(ongoing, key=_order)
    if cancelling:
        errors = await admin.alter_partition_reassignments(dict.fromkeys(cancelling))
        failed = {tp: error for tp, error in errors.items() if error is not None}
        if failed:
            raise ReassignCommandError(
                f"Error cancelling partition reassignment{'' if len(failed) == 1 else 's'} for: "
                + "; ".join(f"{tp}: {_message(failed[tp])}" for tp in sorted(failed, key=_order))
            )
        names = ",".join(str(tp) for tp in cancelling)
        print(
            f"Successfully cancelled partition reassignment{'' if len(cancelling) == 1 else 's'} for: {names}"
        )
    else:
        print("None of the specified partition reassignments are active.")
    if not preserve_throttles:
        await _clear_throttles(admin, plan)


async def _clear_throttles(admin: Admin, plan: Mapping[TopicPartition, Sequence[int]]) -> None:
    cluster = await admin.describe_cluster()
    brokers = sorted({b.broker_id for b in cluster.brokers} | {b for r in plan.values() for b in r})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} {_joined(brokers)}")
    for broker_id in brokers:
        if broker_id in {b.broker_id for b in cluster.brokers}:  # a broker that is down keeps its znode
            await admin.alter_broker_config(broker_id, dict.fromkeys(BROKER_THROTTLES))
    topics = sorted({tp.topic for tp in plan})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    for topic in topics:
        await admin.alter_topic_config(topic, delete_configs=TOPIC_THROTTLES)


# ----------------------------------------------------------------------------------- --list


async def _current_reassignments_text(admin: Admin) -> str:
    ongoing = await admin.list_partition_reassignments()
    if not ongoing:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for tp in sorted(ongoing, key=_order):
        r = ongoing[tp]
        line = f"{tp}: replicas: {_joined(r.replicas)}."
        if r.adding_replicas:
            line += f" adding: {_joined(r.adding_replicas)}."
        if r.removing_replicas:
            line += f" removing: {_joined(r.removing_replicas)}."
        lines.append(line)
    return "\n".join(lines)


# ------------------------------------------------------------------------- files and lookups


def parse_topics_to_move(text: str) -> list[str]:
    """Kafka's topics-to-move file: ``{"version":1,"topics":[{"topic":"T"},...]}``."""
    data = _json(text)
    topics = data.get("topics") if isinstance(data, dict) else None
    if not isinstance(topics, list) or not all(
        isinstance(t, dict) and isinstance(t.get("topic"), str) for t in topics
    ):
        raise ReassignCommandError('the topics-to-move file needs "topics": [{"topic": "NAME"}, ...]')
    names = [t["topic"] for t in topics]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ReassignCommandError(
            f"List of topics to reassign contains duplicate entries: {', '.join(duplicates)}"
        )
    if not names:
        raise ReassignCommandError("the topics-to-move file names no topic")
    return names


def parse_reassignment(text: str) -> dict[TopicPartition, list[int]]:
    """Kafka's plan: ``{"version":1,"partitions":[{"topic","partition","replicas"[,"log_dirs"]}]}``,
    checked as Kafka's tool checks it."""
    data = _json(text)
    entries = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ReassignCommandError('the reassignment file needs "partitions": [...]')
    plan: dict[TopicPartition, list[int]] = {}
    duplicates: list[str] = []
    for entry in entries:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("topic"), str)
            and _is_int(entry.get("partition"))
            and isinstance(entry.get("replicas"), list)
            and all(_is_int(r) for r in entry["replicas"])
        ):
            raise ReassignCommandError(
                'each partition needs "topic" (a name), "partition" and "replicas" (broker ids): '
                + json.dumps(entry)
            )
        tp = TopicPartition(entry["topic"], entry["partition"])
        log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(entry["replicas"]))
        if not isinstance(log_dirs, list) or len(log_dirs) != len(entry["replicas"]):
            raise ReassignCommandError(
                f"Size of replicas list {entry['replicas']} is different from size of log dirs list "
                f"{log_dirs} for partition {tp}"
            )
        if any(d != ANY_LOG_DIR for d in log_dirs):
            raise ReassignCommandError(
                f'{tp}: moving replicas between log dirs is not supported (log_dirs must be "any")'
            )
        if tp in plan:
            duplicates.append(str(tp))
        plan[tp] = list(entry["replicas"])
    if not plan:
        raise ReassignCommandError("Partition reassignment list cannot be empty")
    if duplicates:
        raise ReassignCommandError(
            f"Partition reassignment contains duplicate topic partitions: {','.join(duplicates)}"
        )
    if any(not replicas for replicas in plan.values()):
        raise ReassignCommandError("Partition replica list cannot be empty")
    repeated = [
        f"{tp} contains multiple entries for {_joined(_duplicates(replicas))}"
        for tp, replicas in plan.items()
        if _duplicates(replicas)
    ]
    if repeated:
        raise ReassignCommandError(
            f"Partition replica lists may not contain duplicate entries: {'. '.join(repeated)}"
        )
    return plan


def format_reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's ``formatAsReassignmentJson``: compact, partitions in topic then partition order."""
    partitions = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": list(assignment[tp]),
            "log_dirs": [ANY_LOG_DIR] * len(assignment[tp]),
        }
        for tp in sorted(assignment, key=_order)
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


async def _assignments_of_topics(admin: Admin, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
    found: dict[TopicPartition, list[int]] = {}
    for topic in topics:
        try:
            (description,) = await admin.describe_topics([topic])
        except KafkaError as error:
            raise ReassignCommandError(f"Topic {topic} not found.") from error
        for p in description.partitions:
            found[TopicPartition(topic, p.partition)] = list(p.replicas)
    return found


async def _assignments_of_partitions(
    admin: Admin, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, list[int]]:
    wanted = set(partitions)
    found: dict[TopicPartition, list[int]] = {}
    for topic in sorted({tp.topic for tp in wanted}):
        try:
            (description,) = await admin.describe_topics([topic])
        except KafkaError:
            continue
        for p in description.partitions:
            if (tp := TopicPartition(topic, p.partition)) in wanted:
                found[tp] = list(p.replicas)
    missing = sorted(wanted - set(found), key=_order)
    if missing:
        raise ReassignCommandError(f"Unable to find partition: {', '.join(str(tp) for tp in missing)}")
    return found


def _parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(item) for item in text.split(",")]
    except ValueError:
        raise ReassignCommandError(
            f"--broker-list must be broker ids separated by commas, not {text!r}"
        ) from None
    duplicates = _duplicates(brokers)
    if duplicates:
        raise ReassignCommandError(f"Broker list contains duplicate entries: {_joined(duplicates)}")
    return brokers


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ReassignCommandError(f"cannot read {path}: {error.strerror or error}") from None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ReassignCommandError(f"not valid JSON: {error}") from None


def _duplicates(items: Sequence[int]) -> list[int]:
    return sorted({item for item in items if items.count(item) > 1})


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _order(tp: TopicPartition) -> tuple[str, int]:
    return tp.topic, tp.partition


def _joined(brokers: Iterable[int]) -> str:
    return ",".join(str(b) for b in brokers)


def _message(error: Exception) -> str:
    if isinstance(error, KafkaError):
        return error.message
    return str(error)
