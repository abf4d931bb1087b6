"""The runtime's exception tree and the small set of wire error codes it answers with.

    RuntimeFailure
    ├── TransportError
    │   ├── PeerUnavailableError      the peer node cannot be reached (refused, reset, unknown address)
    │   ├── AskTimeoutError           no reply before the ask's deadline
    │   ├── UnknownActorError         the target node has no actor with that name
    │   ├── RefusedMessageError       the target actor takes no such kind (or mode) from another node
    │   └── RemoteRequestError        the peer answered with an HTTP error (status + wire error)
    ├── CodecError
    │   ├── FrameError                the bytes are not a well-formed frame
    │   └── DecodeError               the frame is well formed but a message inside is not
    ├── MailboxClosedError            the actor stopped before the message could be delivered
    ├── StorageError                  (runtime.storage raises its own subclasses)
    └── CoordinationError             (runtime.coordination raises its own subclasses)

Protocol-level failures (a Kafka error code in a response) are data, not exceptions; only
programmer errors crash (assertions), and supervision decides what a crash means.

``WireError`` numbers reuse Kafka's error codes for the few failures the runtime itself reports on
its HTTP endpoints, so that every 4xx body anywhere in actorlog carries a Kafka error code.
"""

from __future__ import annotations

import enum

__all__ = [
    "AskTimeoutError",
    "CodecError",
    "CoordinationError",
    "DecodeError",
    "FrameError",
    "MailboxClosedError",
    "PeerUnavailableError",
    "RefusedMessageError",
    "RemoteRequestError",
    "RuntimeFailure",
    "StorageError",
    "TransportError",
    "UnknownActorError",
    "WireError",
]


class WireError(enum.IntEnum):
    """Kafka error codes used by the runtime's own HTTP answers."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    REQUEST_TIMED_OUT = 7
    NETWORK_EXCEPTION = 13
    INVALID_REQUEST = 42
    SASL_AUTHENTICATION_FAILED = 58
    MESSAGE_TOO_LARGE = 10
    UNKNOWN_TOPIC_OR_PARTITION = 3


class RuntimeFailure(Exception):
    """Base of every exception the runtime raises on purpose."""


class TransportError(RuntimeFailure):
    """A message could not be delivered, or its reply could not be obtained."""


class PeerUnavailableError(TransportError):
    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(f"peer {node_id!r} unavailable: {reason}")
        self.node_id = node_id
        self.reason = reason


class AskTimeoutError(TransportError):
    def __init__(self, target: str, timeout_ms: int) -> None:
        super().__init__(f"no reply from {target} within {timeout_ms} ms")
        self.target = target
        self.timeout_ms = timeout_ms


class UnknownActorError(TransportError):
    def __init__(self, target: str) -> None:
        super().__init__(f"no actor named {target}")
        self.target = target


class RefusedMessageError(TransportError):
    """Raised at the edge: the target actor declares no such remote kind (or not in that mode)."""

    def __init__(self, target: str, kind: str, mode: str) -> None:
        super().__init__(f"{target} takes no {kind} as {mode} from another node")
        self.target = target
        self.kind = kind
        self.mode = mode


class RemoteRequestError(TransportError):
    def __init__(self, status: int, error: WireError | int, message: str) -> None:
        super().__init__(f"HTTP {status} ({error}): {message}")
        self.status = status
        self.error = error
        self.message = message


class CodecError(RuntimeFailure):
    """Bytes or JSON that cannot become a message."""


class FrameError(CodecError):
    """The binary frame itself is malformed (length prefix, header, payload bounds)."""


class DecodeError(CodecError):
    """A field is missing, unknown, or of the wrong type. The message names the field path."""


class MailboxClosedError(RuntimeFailure):
    def __init__(self, target: str) -> None:
        super().__init__(f"mailbox of {target} is closed")
        self.target = target


class StorageError(RuntimeFailure):
    """Base for storage engine failures (see runtime.storage.errors)."""


class CoordinationError(RuntimeFailure):
    """Base for coordination failures (see runtime.coordination.errors)."""
