"""Java ``.properties`` text and the error every configuration problem is reported with.

Shared by the broker's configuration (``ops.config``) and every client (``client.properties``,
``--producer.config``): a client reads its properties without importing the broker's config.
"""

from __future__ import annotations

import re

__all__ = ["ConfigError", "parse_properties"]


class ConfigError(ValueError):
    """A configuration problem, worded for the person who wrote the configuration."""


def parse_properties(text: str, *, source: str = "properties") -> dict[str, str]:
    """Java ``.properties``: ``key=value``/``key: value``, comments, ``\\`` continuations."""
    properties: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match is None:
            raise ConfigError(f"{source}:{number}: expected 'key=value', got {raw.strip()!r}")
        properties[match.group(1)] = match.group(2).strip()
    if pending:
        raise ConfigError(f"{source}: the last line ends with a continuation backslash")
    return properties
