"""``actorlog cluster health``: the cluster health view and the rolling-restart check, for people and
for Kubernetes' preStop hook.

    actorlog cluster health --bootstrap-server H:P [--command-config FILE] [--broker N]
                            [--output text|json] [--wait SECONDS]

Lists under-replicated partitions (with the replicas out of the ISR), under-min-ISR partitions,
offline partitions and partitions breaking the rack constraint; with ``--broker N``, also whether
broker N may restart now without taking any partition it hosts below ``min.insync.replicas``, and
which partitions forbid it. The assessment is ``ops/cluster_health.py``'s, from the metadata cache
of the broker that answers (the same requests ``GET /v1/cluster/health`` makes).

``--wait SECONDS`` asks again every two seconds until the answer is yes (healthy; restart allowed)
or the time is up, and prints the last answer: what the brokers' preStop hook runs, so that a
rolling restart waits for the previous broker's partitions to be back in their ISRs
(docs/operations.md §8).

Exit status: 0 healthy (with ``--broker``: restart allowed), 1 not healthy (restart refused), 2 bad
options or the cluster could not be asked (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

import orjson

from actors.common.errors import ErrorCode, KafkaError
from ops.clients.admin import Admin
from ops.cluster_health import ClusterHealth, health_body, health_lines
from ops.properties import ConfigError
from runtime.clock import LoopClock, wait_ms

__all__ = ["POLL_INTERVAL_MS", "add_arguments", "run"]

POLL_INTERVAL_MS: Final = 2_000
# One round of questions never takes longer than this (Admin's default.api.timeout.ms), and never
# longer than what is left of --wait.
_ROUND_TIMEOUT_MS: Final = 30_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    parser.add_argument(
        "--command-config", metavar="FILE", help="client properties (credential, security.protocol...)"
    )
    parser.add_argument(
        "--broker",
        type=_broker_id,
        metavar="N",
        help="also answer whether broker N may restart now without taking a partition below "
        "min.insync.replicas (exit status 0 only if it may)",
    )
    parser.add_argument("--output", choices=("text", "json"), default="text", help="default text")
    parser.add_argument(
        "--wait",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="ask again every 2 s until healthy (restart allowed) or SECONDS have passed (default 0: once)",
    )


def _broker_id(raw: str) -> int:
    if not raw.isascii() or not raw.isdecimal() or int(raw) > 2**31 - 1:
        raise argparse.ArgumentTypeError(f"a broker id is a non-negative integer, not {raw!r}")
    return int(raw)


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {raw!r}") from None
    if not 0 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"--wait must be between 0 and 86400 seconds, not {raw}")
    return value


async def run(arguments: argparse.Namespace) -> int:
    """Print the (last) answer; the exit status of the module docstring."""
    clock = LoopClock()
    deadline_ms = clock.now_ms() + int(arguments.wait * 1000)
    health: ClusterHealth | None = None
    failure: Exception | None = None
    while True:
        remaining_ms = max(deadline_ms - clock.now_ms(), 0)
        try:
            health = await _ask(arguments, timeout_ms=max(min(_ROUND_TIMEOUT_MS, remaining_ms), 1_000))
            failure = None
        except ConfigError as error:
            print(f"actorlog cluster health: {error}", file=sys.stderr)
            return 2  # asking again cannot fix a bad option or credential
        except KafkaError as error:
            if error.error_code is ErrorCode.SASL_AUTHENTICATION_FAILED:
                print(f"actorlog cluster health: {error.message}", file=sys.stderr)
                return 2  # nor can asking again fix a refused credential
            failure = error
        if (health is not None and failure is None and health.ok) or clock.now_ms() >= deadline_ms:
            break
        await wait_ms(clock, min(POLL_INTERVAL_MS, max(deadline_ms - clock.now_ms(), 0)))
    if failure is not None or health is None:
        message = failure.message if isinstance(failure, KafkaError) else str(failure)
        print(f"actorlog cluster health: cannot ask the cluster: {message}", file=sys.stderr)
        return 2
    if arguments.output == "json":
        print(orjson.dumps(health_body(health), option=orjson.OPT_INDENT_2).decode())
    else:
        print("\n".join(health_lines(health)))
    return 0 if health.ok else 1


async def _ask(arguments: argparse.Namespace, *, timeout_ms: int) -> ClusterHealth:
    async with Admin(
        arguments.bootstrap_server,
        command_config=arguments.command_config,
        default_api_timeout_ms=timeout_ms,
        request_timeout_ms=min(timeout_ms, 30_000),
    ) as admin:
        return await admin.cluster_health(broker=arguments.broker)
