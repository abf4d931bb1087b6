"""``actorlog configs``: describe and alter dynamic broker and topic configs, like ``kafka-configs.sh``.

    actorlog configs --bootstrap-server H:P --entity-type brokers (--entity-name ID | --entity-default)
                     --describe
    actorlog configs --bootstrap-server H:P --entity-type brokers (--entity-name ID | --entity-default)
                     --alter [--add-config k=v[,k=v...]] [--delete-config k[,k...]]
    actorlog configs --bootstrap-server H:P --entity-type topics --entity-name T
                     (--describe | --alter [--add-config ...] [--delete-config ...])

Broker configs that may change at run time are the replication throttle rates
(``leader.replication.throttled.rate``, ``follower.replication.throttled.rate``); a broker's own
value wins over ``--entity-default``'s (docs/replication-quotas.md). A value holding commas goes in
square brackets, as with Kafka's tool: ``--add-config
'leader.replication.throttled.replicas=[0:1,1:2]'``.

Output lines are Kafka's (2.5+ with ``--bootstrap-server``): ``Dynamic configs for broker 1 are:``
(``Default configs for brokers in the cluster are:``, ``Dynamic configs for topic T are:``) then
``  key=value sensitive=false synonyms={SOURCE:key=value, ...}`` for each dynamic entry;
``Completed updating config for broker 1.`` (``Completed updating default config for brokers in
the cluster.``, ``Completed updating config for topic T.``). The tool's own refusals are Kafka's
one line (``Invalid config(s): k``, exit 1); the cluster's are ``Error while executing config
command with args '...': <message>`` (exit 1); bad options exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from typing import Final

from actors.common.errors import KafkaError
from ops.clients.admin import Admin, ConfigEntry

__all__ = ["ConfigCommandError", "main", "parse_add_config", "parse_delete_config"]

# A comma outside square brackets separates two configs (Kafka's ConfigCommand pattern).
_SEPARATOR: Final = re.compile(r",(?=[^\]]*(?:\[|$))")
_DYNAMIC_SOURCES: Final = {
    "brokers": "DYNAMIC_BROKER_CONFIG",
    "brokers-default": "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "topics": "DYNAMIC_TOPIC_CONFIG",
}


class ConfigCommandError(Exception):
    """A refusal by the tool itself (Kafka's IllegalArgumentException / InvalidConfigurationException)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actorlog configs", description="Describe and alter dynamic broker and topic configs."
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    parser.add_argument(
        "--command-config", metavar="FILE", help="client properties (internal.auth.secret...)"
    )
    parser.add_argument("--entity-type", required=True, choices=("brokers", "topics"))
    entity = parser.add_mutually_exclusive_group(required=True)
    entity.add_argument("--entity-name", metavar="NAME", help="a broker id or a topic name")
    entity.add_argument(
        "--entity-default", action="store_true", help="the cluster-wide default (brokers only)"
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    parser.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V...]")
    parser.add_argument("--delete-config", action="append", default=[], metavar="K[,K...]")
    return parser


def parse_add_config(values: Sequence[str]) -> dict[str, str]:
    """``k=v,k2=[a,b]`` -> ``{"k": "v", "k2": "a,b"}`` (Kafka's rules: brackets keep commas)."""
    configs: dict[str, str] = {}
    for value in values:
        for item in _SEPARATOR.split(value):
            key, equals, raw = item.partition("=")
            if not equals or not key.strip():
                raise ConfigCommandError(
                    'Invalid entity config: all configs to be added must be in the format "key=val".'
                )
            configs[key.strip()] = re.sub(r"^\[|\]$", "", raw.strip()).strip()
    return configs


def parse_delete_config(values: Sequence[str]) -> list[str]:
    return [key.strip() for value in values for key in value.split(",") if key.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    if arguments.entity_default and arguments.entity_type == "topics":
        parser.error("--entity-default is not valid for --entity-type topics")
    if arguments.describe and (arguments.add_config or arguments.delete_config):
        parser.error("--add-config and --delete-config go with --alter")
    if arguments.alter and not (arguments.add_config or arguments.delete_config):
        parser.error("At least one of --add-config or --delete-config must be specified with --alter")
    try:
        return asyncio.run(_run(arguments))
    except ConfigCommandError as error:
        print(str(error), file=sys.stderr)
        return 1
    except KafkaError as error:
        args = " ".join(sys.argv[1:] if argv is None else argv)
        message = " ".join(error.message.split())
        print(f"Error while executing config command with args '{args}': {message}", file=sys.stderr)
        return 1


def _broker_id(arguments: argparse.Namespace) -> int | None:
    if arguments.entity_default:
        return None
    name = arguments.entity_name
    if not re.fullmatch(r"[0-9]+", name or ""):
        raise ConfigCommandError(
            f"The entity name for brokers must be a valid integer broker id, found: {name}"
        )
    return int(name)


async def _run(arguments: argparse.Namespace) -> int:
    # Everything the tool refuses by itself is checked before it connects.
    added = parse_add_config(arguments.add_config)
    deleted = parse_delete_config(arguments.delete_config)
    broker_id = _broker_id(arguments) if arguments.entity_type == "brokers" else None
    async with Admin(arguments.bootstrap_server, command_config=arguments.command_config) as admin:
        if arguments.entity_type == "brokers":
            if arguments.describe:
                await _describe_broker(admin, broker_id)
            else:
                await _alter_broker(admin, broker_id, added, deleted)
        elif arguments.describe:
            await _describe_topic(admin, arguments.entity_name)
        else:
            await _alter_topic(admin, arguments.entity_name, added, deleted)
    return 0


def _dynamic(entries: dict[str, ConfigEntry], source: str) -> dict[str, ConfigEntry]:
    return {name: entry for name, entry in sorted(entries.items()) if entry.source == source}


def _print_entries(entries: dict[str, ConfigEntry], synonyms: dict[str, list[ConfigEntry]]) -> None:
    for name, entry in entries.items():
        chain = ", ".join(f"{s.source}:{name}={s.value}" for s in synonyms.get(name, [entry]))
        sensitive = "true" if entry.is_sensitive else "false"
        print(f"  {name}={entry.value} sensitive={sensitive} synonyms={{{chain}}}")


async def _describe_broker(admin: Admin, broker_id: int | None) -> None:
    default = _dynamic(await admin.describe_broker_config(None), _DYNAMIC_SOURCES["brokers-default"])
    if broker_id is None:
        print("Default configs for brokers in the cluster are:")
        _print_entries(default, {})
        return
    own = _dynamic(await admin.describe_broker_config(broker_id), _DYNAMIC_SOURCES["brokers"])
    print(f"Dynamic configs for broker {broker_id} are:")
    # As Kafka lists them: the winning value first, then what it hides (the cluster default).
    _print_entries(
        own, {name: [entry, *([default[name]] if name in default else [])] for name, entry in own.items()}
    )


async def _alter_broker(
    admin: Admin, broker_id: int | None, added: dict[str, str], deleted: list[str]
) -> None:
    source = _DYNAMIC_SOURCES["brokers" if broker_id is not None else "brokers-default"]
    current = _dynamic(await admin.describe_broker_config(broker_id), source)
    _check_deletions(current, deleted)
    changes: dict[str, str | None] = {**dict.fromkeys(deleted), **added}
    await admin.alter_broker_config(broker_id, changes)
    if broker_id is None:
        print("Completed updating default config for brokers in the cluster.")
    else:
        print(f"Completed updating config for broker {broker_id}.")


async def _describe_topic(admin: Admin, topic: str) -> None:
    entries = _dynamic(await admin.describe_topic_config(topic), _DYNAMIC_SOURCES["topics"])
    print(f"Dynamic configs for topic {topic} are:")
    _print_entries(entries, {})


async def _alter_topic(admin: Admin, topic: str, added: dict[str, str], deleted: list[str]) -> None:
    current = _dynamic(await admin.describe_topic_config(topic), _DYNAMIC_SOURCES["topics"])
    _check_deletions(current, deleted)
    await admin.alter_topic_config(
        topic, set_configs=added, delete_configs=[k for k in deleted if k not in added]
    )
    print(f"Completed updating config for topic {topic}.")


def _check_deletions(current: dict[str, ConfigEntry], deleted: list[str]) -> None:
    """Kafka's tool refuses to delete what is not set."""
    missing = [key for key in deleted if key not in current]
    if missing:
        raise ConfigCommandError(f"Invalid config(s): {','.join(missing)}")
