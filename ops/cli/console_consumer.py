"""``actorlog consume``: records from a topic to stdout, like ``kafka-console-consumer.sh``.

    actorlog consume --bootstrap-server H:P --topic T [--partition N] [--from-beginning]
                     [--offset earliest|latest|N] [--max-messages N] [--timeout-ms MS]
                     [--property print.key=true --property key.separator=: ...]
                     [--consumer-property k=v ...] [--consumer.config FILE]

Reads every partition of the topic (or the one given; there are no consumer groups), from the end
unless ``--from-beginning``/``--offset`` says otherwise. Each record prints as its value, optionally
preceded by timestamp, partition, offset and key (``print.timestamp``, ``print.partition``,
``print.offset``, ``print.key``, with ``key.separator``). It stops after ``--max-messages``, after
``--timeout-ms`` without a record, or on Ctrl-C, then prints ``Processed a total of N messages`` to
stderr, as Kafka's tool does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from actors.clients.consumer.state import ConsumerRecord
from actors.common.errors import ErrorCode, KafkaError
from actors.common.types import TopicPartition
from ops.clients.consumer import Consumer
from ops.config import parse_overrides
from ops.properties import ConfigError
from runtime.storage.records import TimestampType

__all__ = ["format_record", "main"]

_PRINT_KEYS = {
    "print.key",
    "print.offset",
    "print.partition",
    "print.timestamp",
    "print.value",
    "key.separator",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="actorlog consume", description="Print a topic's records.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, help="only this partition")
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    parser.add_argument("--offset", help="earliest, latest or an offset (needs --partition)")
    parser.add_argument("--max-messages", type=int, help="stop after this many records")
    parser.add_argument("--timeout-ms", type=int, help="stop after this long without a record")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--consumer.config", dest="consumer_config", metavar="FILE")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    try:
        printing = parse_overrides(arguments.property)
        settings: dict[str, object] = dict(parse_overrides(arguments.consumer_property))
    except ConfigError as error:
        parser.error(str(error).replace("--override", "--property"))
    unknown = set(printing) - _PRINT_KEYS
    if unknown:
        parser.error(
            f"unknown --property {', '.join(sorted(unknown))} (known: {', '.join(sorted(_PRINT_KEYS))})"
        )
    offset: int | None = None
    if arguments.offset not in (None, "earliest", "latest"):
        if arguments.partition is None:
            parser.error("--offset N needs --partition")
        try:
            offset = int(arguments.offset)
        except ValueError:
            parser.error(f"--offset must be earliest, latest or a number, got {arguments.offset!r}")
    if arguments.from_beginning or arguments.offset == "earliest":
        settings["auto.offset.reset"] = "earliest"
    elif "auto.offset.reset" not in settings:
        settings["auto.offset.reset"] = "latest"
    try:
        return asyncio.run(_run(arguments, settings, printing, offset))
    except (ConfigError, ValueError) as error:
        print(f"actorlog consume: {error}", file=sys.stderr)
        return 2
    except KafkaError as error:
        print(f"ERROR Error processing message, terminating consumer process: {error}", file=sys.stderr)
        return 1


async def _run(
    arguments: argparse.Namespace, settings: dict[str, object], printing: dict[str, str], offset: int | None
) -> int:
    processed = 0
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        async with Consumer(
            arguments.bootstrap_server, config=settings, config_file=arguments.consumer_config
        ) as consumer:
            partitions = await consumer.partitions_for(arguments.topic)
            if arguments.partition is not None:
                wanted = TopicPartition(arguments.topic, arguments.partition)
                if wanted not in partitions:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{wanted} does not exist")
                partitions = [wanted]
            consumer.assign(partitions)
            if offset is not None:
                consumer.seek(partitions[0], offset)
            idle_ms = 0
            while not stop.is_set():
                if arguments.max_messages is not None and processed >= arguments.max_messages:
                    break
                wait_ms = (
                    500 if arguments.timeout_ms is None else min(500, max(arguments.timeout_ms - idle_ms, 0))
                )
                polled = asyncio.ensure_future(consumer.poll(timeout_ms=wait_ms))
                stopped = asyncio.ensure_future(stop.wait())
                await asyncio.wait({polled, stopped}, return_when=asyncio.FIRST_COMPLETED)
                stopped.cancel()
                if not polled.done():
                    polled.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await polled
                    break
                records = polled.result()
                if not records:
                    idle_ms += wait_ms
                    if arguments.timeout_ms is not None and idle_ms >= arguments.timeout_ms:
                        break
                    continue
                idle_ms = 0
                for record in records:
                    if arguments.max_messages is not None and processed >= arguments.max_messages:
                        break
                    sys.stdout.buffer.write(format_record(record, printing) + b"\n")
                    processed += 1
                sys.stdout.buffer.flush()
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)
        print(f"Processed a total of {processed} messages", file=sys.stderr)
    return 0


def format_record(record: ConsumerRecord, printing: dict[str, str]) -> bytes:
    """Kafka's DefaultMessageFormatter: optional timestamp, partition, offset and key before the
    value, joined by ``key.separator`` (a tab by default); null prints as ``null``."""

    def on(name: str, default: bool = False) -> bool:
        return printing.get(name, "true" if default else "false").lower() == "true"

    separator = printing.get("key.separator", "\t").encode()
    parts: list[bytes] = []
    if on("print.timestamp"):
        kind = "LogAppendTime" if record.timestamp_type is TimestampType.LOG_APPEND_TIME else "CreateTime"
        parts.append(f"{kind}:{record.timestamp}".encode())
    if on("print.partition"):
        parts.append(f"Partition:{record.partition}".encode())
    if on("print.offset"):
        parts.append(f"Offset:{record.offset}".encode())
    if on("print.key"):
        parts.append(b"null" if record.key is None else record.key)
    if on("print.value", default=True):
        parts.append(b"null" if record.value is None else record.value)
    return separator.join(parts)
