"""Error lines of ``actorlog topics`` and ``actorlog produce`` in Kafka's words, with the clients
replaced by fakes (no cluster): every way ``--describe``, ``--alter`` and ``--delete`` can learn that
a named topic is missing prints ``Topic 'T' does not exist as expected``; a console-producer line
without the key separator stops the tool with ``No key found on line N: LINE``. The same against
real processes: ``tests/ops/test_cli_usability_processes.py``."""

from __future__ import annotations

import asyncio
import io
import random
import sys
from collections.abc import Mapping, Sequence
from types import SimpleNamespace, TracebackType
from typing import Any

import pytest

from actors.common.errors import ErrorCode, KafkaError
from actors.server.admin.assignment import AssignmentError, assign_replicas_to_brokers
from ops.cli import console_producer, topics

MISSING = "Error while executing topic command : Topic 'orders' does not exist as expected\n"

# What each request answers today for a topic that is not there (three different texts).
DESCRIBE_MISSING = KafkaError(
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "topic 'orders': This server does not host this topic-partition."
)
GROW_MISSING = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'orders' does not exist.")
CONFIG_MISSING = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Topic 'orders' does not exist")
DELETE_MISSING = KafkaError(
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
)


class FakeAdmin:
    """Answers every request as if the topic were missing (or raises ``failure`` when set)."""

    failure: KafkaError | None = None

    def __init__(self, *_: object, **__: object) -> None:
        pass

    async def __aenter__(self) -> FakeAdmin:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        return None

    async def describe_topics(self, names: Sequence[str] | None = None) -> list[Any]:
        raise self.failure or DESCRIBE_MISSING

    async def create_partitions(self, name: str, total_count: int) -> None:
        raise self.failure or GROW_MISSING

    async def alter_topic_config(self, name: str, **_: object) -> None:
        raise self.failure or CONFIG_MISSING

    async def delete_topics(self, names: Sequence[str]) -> dict[str, KafkaError | None]:
        return dict.fromkeys(names, self.failure or DELETE_MISSING)


@pytest.fixture
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> type[FakeAdmin]:
    monkeypatch.setattr(topics, "Admin", FakeAdmin)
    monkeypatch.setattr(FakeAdmin, "failure", None)
    return FakeAdmin


def _topics(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    code = topics.main(["--bootstrap-server", "localhost:1", *arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "action",
    [
        ["--describe"],
        ["--alter", "--partitions", "4"],
        ["--alter", "--config", "retention.ms=1000"],
        ["--alter", "--delete-config", "retention.ms"],
        ["--delete"],
    ],
    ids=["describe", "alter-partitions", "alter-config", "alter-delete-config", "delete"],
)
def test_every_path_to_a_missing_topic_says_what_kafka_says(
    fake_admin: type[FakeAdmin], capsys: pytest.CaptureFixture[str], action: list[str]
) -> None:
    assert _topics(capsys, *action, "--topic", "orders") == (1, "", MISSING)
    # --if-exists: nothing to do, nothing said.
    assert _topics(capsys, *action, "--topic", "orders", "--if-exists") == (0, "", "")


def test_an_illegal_name_cannot_exist_either(
    fake_admin: type[FakeAdmin], capsys: pytest.CaptureFixture[str]
) -> None:
    fake_admin.failure = KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "illegal")
    code, _, err = _topics(capsys, "--describe", "--topic", "orders")
    assert (code, err) == (1, MISSING)


def test_other_refusals_keep_their_own_message(
    fake_admin: type[FakeAdmin], capsys: pytest.CaptureFixture[str]
) -> None:
    fake_admin.failure = KafkaError(ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partitions.")
    code, _, err = _topics(capsys, "--alter", "--topic", "orders", "--partitions", "3")
    assert (code, err) == (1, "Error while executing topic command : Topic already has 3 partitions.\n")
    # Without --topic there is no named topic to be missing: the answer is passed on as it is.
    fake_admin.failure = None
    code, _, err = _topics(capsys, "--describe")
    assert (code, err) == (1, f"Error while executing topic command : {DESCRIBE_MISSING.message}\n")


# ------------------------------------------------------------------- replication factor, partitions


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "message"),
    [
        (0, 1, "Number of partitions must be larger than 0."),
        (-2, 1, "Number of partitions must be larger than 0."),
        (1, 0, "Replication factor must be larger than 0."),
        (1, 4, "Replication factor: 4 larger than available brokers: 3."),
    ],
)
def test_assignment_refusals_are_kafkas_sentences(
    partitions: int, replication_factor: int, message: str
) -> None:
    with pytest.raises(AssignmentError) as refused:
        assign_replicas_to_brokers([1, 2, 3], partitions, replication_factor, rng=random.Random(0))
    assert str(refused.value) == message


# ------------------------------------------------------------------------------ console producer


class FakeProducer:
    """Records what the tool enqueues; every send succeeds at once."""

    sent: list[tuple[bytes | None, bytes]]
    flushed: bool

    def __init__(self, *_: object, **__: object) -> None:
        FakeProducer.sent = []
        FakeProducer.flushed = False

    async def __aenter__(self) -> FakeProducer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        return None

    async def enqueue(self, topic: str, value: bytes, key: bytes | None) -> asyncio.Future[object]:
        FakeProducer.sent.append((key, value))
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        future.set_result(SimpleNamespace(offset=len(FakeProducer.sent) - 1))
        return future

    async def flush(self) -> None:
        FakeProducer.flushed = True


def _produce(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stdin: bytes,
    properties: Mapping[str, str],
) -> tuple[int, str]:
    monkeypatch.setattr(console_producer, "Producer", FakeProducer)
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(stdin)))
    arguments = ["--bootstrap-server", "localhost:1", "--topic", "lines"]
    for name, value in properties.items():
        arguments += ["--property", f"{name}={value}"]
    code = console_producer.main(arguments)
    return code, capsys.readouterr().err


def test_a_line_without_the_key_separator_stops_the_producer_with_kafkas_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = b"k1:first\nk2:second\nno separator here\nk4:never sent\n"
    code, err = _produce(monkeypatch, capsys, stdin, {"parse.key": "true", "key.separator": ":"})
    assert (code, err) == (1, "No key found on line 3: no separator here\n")
    # What came before was sent and flushed; nothing after.
    assert FakeProducer.sent == [(b"k1", b"first"), (b"k2", b"second")]
    assert FakeProducer.flushed


def test_the_line_is_shown_as_text_even_when_it_is_not_utf8(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _produce(monkeypatch, capsys, b"caf\xc3\xa9\tok\ncaf\xe9\n", {"parse.key": "true"})
    assert (code, err) == (1, "No key found on line 2: caf\ufffd\n")
    assert FakeProducer.sent == [(b"caf\xc3\xa9", b"ok")]


def test_an_empty_first_line_is_line_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _produce(monkeypatch, capsys, b"\nk:v\n", {"parse.key": "true", "key.separator": ":"})
    assert (code, err) == (1, "No key found on line 1: \n")
    assert FakeProducer.sent == []


def test_ignore_error_sends_such_a_line_whole_without_a_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    properties = {"parse.key": "true", "key.separator": ":", "ignore.error": "true"}
    code, err = _produce(monkeypatch, capsys, b"k1:a\nplain\nk3:c\n", properties)
    assert (code, err) == (0, "")
    assert FakeProducer.sent == [(b"k1", b"a"), (None, b"plain"), (b"k3", b"c")]
