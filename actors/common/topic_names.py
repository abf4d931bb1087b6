"""Topic name rules (Kafka's ``Topic.validate``), shared by the admin actor and the tools.

A legal name is 1–249 characters of ASCII letters, digits, '.', '_' and '-', and is neither "."
nor "..". The messages are Kafka's, so users see the words they know.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["GROUP_METADATA_TOPIC_NAME", "MAX_TOPIC_NAME_LENGTH", "validate_topic_name"]

MAX_TOPIC_NAME_LENGTH: Final = 249
GROUP_METADATA_TOPIC_NAME: Final = "__consumer_offsets"
"""Kafka's ``Topic.GROUP_METADATA_TOPIC_NAME``: the group coordinator's log (docs/consumer-groups.md)."""
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> str | None:
    """None when ``name`` is legal, else Kafka's message saying why not."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None
