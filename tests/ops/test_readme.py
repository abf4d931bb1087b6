"""The README is the user's reference: every command, every broker, producer and consumer key
the code accepts appears in it (a key added to the code without documentation fails here)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from actors.clients.consumer.config import ConsumerConfig
from actors.clients.producer.config import KNOWN_KEYS as PRODUCER_KEYS
from actors.common.client_security import SECURITY_KEYS
from ops.cli.main import COMMANDS
from ops.config import KNOWN_KEYS as BROKER_KEYS
from runtime.storage.config import TOPIC_CONFIG_KEYS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
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
    consumer_keys = {f.replace("_", ".") for f in ConsumerConfig.__dataclass_fields__ if f != "security"} | {
        "bootstrap.servers",
        "isolation.level",
        *SECURITY_KEYS,
    }
    assert sorted((set(PRODUCER_KEYS) | consumer_keys) - DOCUMENTED) == []


def test_the_quick_start_is_the_two_commands() -> None:
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in quick_start
    assert "make test" in quick_start


def _performance_commands() -> list[str]:
    section = README.split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    commands = []
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if set(cells[0]) <= {"-", " "}:
            continue  # the header's separator line
        found = re.findall(r"`((?:actorlog|make|python -m) [^`]+)`", row)
        assert found, f"a performance figure without the command that produced it: {row}"
        assert re.search(r"\d+ (B|KiB) records|no records", row), f"no record size: {row}"
        commands.extend(found)
    return commands


def test_every_performance_figure_names_a_command_that_exists() -> None:
    commands = _performance_commands()
    assert len(commands) >= 8
    makefile = (ROOT / "Makefile").read_text()
    for command in commands:
        words = command.split()
        if words[0] == "make":
            assert re.search(rf"^{re.escape(words[1])}:", makefile, re.MULTILINE), command
            continue
        subcommands = []
        for word in words[1:] if words[0] == "actorlog" else words[3:]:
            if word.startswith("-"):
                break
            subcommands.append(word)
        program = ["-m", "ops", *subcommands] if words[0] == "actorlog" else words[1:3]
        completed = subprocess.run(
            [sys.executable, *program, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )
        assert completed.returncode == 0, (program, completed.stderr)
        for option in re.findall(r"(?<!\S)(--[a-z][a-z0-9-]*)", command):
            assert option in completed.stdout, f"{' '.join(program)} has no {option}"


def test_the_package_metadata_uses_an_spdx_license_string() -> None:
    """The table form of ``project.license`` is deprecated by setuptools (removal 2027-02-18) and
    made every install print pages of warnings; an SPDX expression needs setuptools 77 or later."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
