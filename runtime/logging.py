"""Logging set-up: JSON lines (production, Kubernetes) or a readable console format (development).

Loggers are configured once, by the composition root, never at import time. Context is bound per
actor (``node``, ``actor``) through ``logging.LoggerAdapter`` extras, and any extra field a caller
passes (``tp``, ``leader_epoch``, ``cause``...) is written as a JSON key.

State changes of partitions, replicas and the controller go to the dedicated ``actorlog.state_change``
logger (Kafka's state-change log), one event per transition with ``from``, ``to`` and ``cause``.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import IO, Any

import orjson

__all__ = ["STATE_CHANGE_LOGGER", "JsonFormatter", "configure_logging", "state_change"]

STATE_CHANGE_LOGGER = "actorlog.state_change"

# Attributes every LogRecord has; anything else on a record came from `extra=` and is context.
_STANDARD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys() | {"message", "asctime", "taskName"}
)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, bound context, exception."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        document.update(
            (key, value)
            for key, value in vars(record).items()
            if key not in _STANDARD_ATTRIBUTES and not key.startswith("_")
        )
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(document, default=str).decode()


class _ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        context = " ".join(
            f"{key}={value}"
            for key, value in vars(record).items()
            if key not in _STANDARD_ATTRIBUTES and not key.startswith("_")
        )
        time_text = self.formatTime(record, "%H:%M:%S")
        line = f"{time_text} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if context:
            line += f"  [{context}]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(level: str = "INFO", *, fmt: str = "json", stream: IO[str] | None = None) -> None:
    """Configure the root logger. ``fmt`` is ``json`` or ``console``."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    if fmt == "json":
        formatter: logging.Formatter = JsonFormatter()
        formatter.converter = _utc_time
    elif fmt == "console":
        formatter = _ConsoleFormatter()
    else:
        raise ValueError(f"unknown log format {fmt!r} (json or console)")
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())


def _utc_time(seconds: float | None) -> Any:
    return time.gmtime(seconds)


def state_change(
    logger: logging.LoggerAdapter[logging.Logger] | logging.Logger,
    subject: str,
    from_state: str,
    to_state: str,
    cause: str,
    **context: Any,
) -> None:
    """Record one state transition on the state-change channel."""
    channel = logging.getLogger(STATE_CHANGE_LOGGER)
    extra = dict(getattr(logger, "extra", None) or {})
    extra.update(context)
    extra.update({"subject": subject, "from": from_state, "to": to_state, "cause": cause})
    channel.info("%s: %s -> %s (%s)", subject, from_state, to_state, cause, extra=extra)
