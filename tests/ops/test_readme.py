"""The README is the user's reference: every command, every broker, producer and consumer key
the code accepts appears in it (a key added to the code without documentation fails here)."""

from __future__ import annotations

import re
from pathlib import Path

from actors.clients.consumer.config import ConsumerConfig
from actors.clients.producer.config import KNOWN_KEYS as PRODUCER_KEYS
from ops.cli.main import COMMANDS
from ops.config import KNOWN_KEYS as BROKER_KEYS
from runtime.storage.config import TOPIC_CONFIG_KEYS

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
DOCUMENTED = set(re.findall(r"`([a-z0-9]+(?:\.[a-z0-9]+)*)`", README))


def test_every_command_is_shown_with_an_example() -> None:
    assert COMMANDS
    missing = [name for name in COMMANDS if f"actorlog {name}" not in README]
    assert missing == []


def test_every_broker_key_is_documented() -> None:
    assert len(BROKER_KEYS) > 40
    assert sorted(BROKER_KEYS - DOCUMENTED) == []


def test_every_topic_key_is_documented() -> None:
    assert sorted(TOPIC_CONFIG_KEYS - DOCUMENTED) == []


def test_every_client_key_is_documented() -> None:
    consumer_keys = {f.replace("_", ".") for f in ConsumerConfig.__dataclass_fields__} | {
        "bootstrap.servers",
        "isolation.level",
    }
    assert sorted((set(PRODUCER_KEYS) | consumer_keys) - DOCUMENTED) == []


def test_the_quick_start_is_the_two_commands() -> None:
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in quick_start
    assert "make test" in quick_start
