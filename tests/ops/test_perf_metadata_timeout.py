"""``perf produce`` when its topic's metadata stops coming: one line, not one per record.

Records already handed to the producer wait for their topic's metadata too, each with its own
``max.block.ms`` deadline, which passes before the deadline of the send that is blocked on the same
metadata. Those records fail with the condition that is about to end the tool; printing each would
bury the one line that says why (docs: ``ops/cli/perf.py``). A regression: under load the records'
failures arrived first and printed ``ERROR:`` lines before the tool's own line.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import pytest

from actors.clients.producer.errors import MetadataTimeoutError, ProducerTimeoutError
from ops.cli import perf
from ops.clients.producer import SendCallback


class _TopicGone:
    """A producer whose topic vanishes after ``sent`` records: the records waiting for it fail
    first, then the next send raises after max.block.ms with the reason the user acts on."""

    def __init__(self, *, config: dict[str, object], **_: Any) -> None:
        self.pending: list[SendCallback] = []
        self.sent = 0

    async def __aenter__(self) -> _TopicGone:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        return None

    async def send_with_callback(self, topic: str, value: bytes, callback: SendCallback) -> None:
        self.sent += 1
        if self.sent > 8:
            for waiting in self.pending:  # their deadlines pass first, so their callbacks run first
                waiting(None, MetadataTimeoutError(f"topic {topic} not present in metadata after 2000 ms"))
            raise ProducerTimeoutError(
                f"topic {topic} not present in metadata after 2000 ms: no such topic (the brokers answer "
                "UNKNOWN_TOPIC_OR_PARTITION): deleted, or never created"
            )
        self.pending.append(callback)

    async def flush(self) -> None:
        return None

    async def close(self, timeout_s: float | None = None) -> None:
        return None


@pytest.fixture
def topic_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(perf, "Producer", _TopicGone)


def test_records_waiting_for_a_vanished_topic_are_not_reported_one_by_one(
    topic_gone: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = perf.main(
        ["produce", "--topic", "doomed", "--num-records", "100", "--record-size", "10", "--throughput", "-1",
         "--bootstrap-server", "127.0.0.1:9092"]
    )  # fmt: skip
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    assert err == [
        "actorlog perf: topic doomed not present in metadata after 2000 ms: no such topic (the brokers "
        "answer UNKNOWN_TOPIC_OR_PARTITION): deleted, or never created"
    ]
