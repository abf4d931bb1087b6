"""``actorlog users``: client users (SCRAM-SHA-256 credentials in ZooKeeper), as Kafka's
``kafka-configs.sh --zookeeper ... --entity-type users --alter --add-config 'SCRAM-SHA-256=[password=...]'``.

    actorlog users --zookeeper HOST:PORT --add alice --password-file pw.txt
    actorlog users --zookeeper HOST:PORT --add alice            (reads the password from stdin)
    actorlog users --zookeeper HOST:PORT --delete alice
    actorlog users --zookeeper HOST:PORT --list

It talks to ZooKeeper, not to a broker: like Kafka's SCRAM tooling in 2.4, whoever manages users
manages ZooKeeper. When the brokers close ZooKeeper (``zookeeper.set.acl``), ``--command-config``
names a properties file with the same ``zookeeper.digest.*`` keys the brokers use (a broker's own
``server.properties`` will do; its ``ACTORLOG_CFG_*`` environment is read as the broker reads it, and
its ``zookeeper.connect`` stands in for ``--zookeeper``). A changed
password or a deleted user holds on every broker within 10 s (``ops/security/users.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from ops.clients.connection import load_client_properties
from ops.config import properties_from_environment
from ops.properties import ConfigError
from ops.security.users import UserStore, check_user_name
from ops.zk_security import zk_security
from runtime.clock import LoopClock
from runtime.coordination.errors import CoordinationError
from runtime.coordination.zk import ZkCoordinator

__all__ = ["main"]

_PROG = "actorlog users"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=_PROG, description="Manage client users (SCRAM-SHA-256).")
    parser.add_argument(
        "--zookeeper", metavar="HOST:PORT[/CHROOT]", help="ZooKeeper (else zookeeper.connect)"
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", metavar="USER", help="create USER or change its password")
    action.add_argument("--delete", metavar="USER", help="delete USER")
    action.add_argument("--list", action="store_true", help="list the users")
    parser.add_argument("--password-file", metavar="FILE", help="the password (first line); else stdin")
    parser.add_argument(
        "--command-config", metavar="FILE", help="properties with zookeeper.digest.* when ZooKeeper is closed"
    )
    return parser


def _password(path: str | None) -> str:
    try:
        text = sys.stdin.readline() if path is None else open(path, encoding="utf-8").readline()  # noqa: SIM115
    except OSError as error:
        raise ConfigError(f"cannot read the password file {path!r}: {error.strerror}") from None
    password = text.rstrip("\r\n")
    if not password:
        raise ConfigError("the password is empty")
    return password


async def _run(arguments: argparse.Namespace) -> int:
    properties = {
        **load_client_properties(arguments.command_config),
        **properties_from_environment(os.environ),
    }
    connect = arguments.zookeeper or properties.get("zookeeper.connect")
    if not connect:
        raise ConfigError("--zookeeper is required (or zookeeper.connect in --command-config)")
    coordinator = ZkCoordinator(connect, session_timeout_ms=10_000, security=zk_security(properties))
    await coordinator.start()
    try:
        store = UserStore(coordinator, clock=LoopClock())
        if arguments.list:
            for name in await store.names():
                print(name)
        elif arguments.add is not None:
            created = await store.upsert(check_user_name(arguments.add), _password(arguments.password_file))
            done = "Created" if created else "Updated the password of"
            print(f"{done} user {arguments.add!r} (SCRAM-SHA-256).")
        else:
            if not await store.delete(check_user_name(arguments.delete)):
                print(f"{_PROG}: no user {arguments.delete!r}", file=sys.stderr)
                return 1
            print(f"Deleted user {arguments.delete!r}.")
    finally:
        await coordinator.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return asyncio.run(_run(arguments))
    except (ConfigError, ValueError) as error:
        print(f"{_PROG}: {error}", file=sys.stderr)
        return 2
    except CoordinationError as error:
        print(f"{_PROG}: ZooKeeper: {error}", file=sys.stderr)
        return 1
