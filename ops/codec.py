"""The wire codec: every message kind that may cross between nodes, registered in a fresh Codec.

Brokers (``ops.wiring``) and clients (``ops.clients``) build their codec here, so a client never
imports the broker's composition root to talk to it. There is no global registry: each node gets
its own ``Codec``.
"""

from __future__ import annotations

import actors.common.client_protocol
import actors.common.protocol
import runtime.messages
from runtime.codec import Codec

__all__ = ["wire_codec"]


def wire_codec() -> Codec:
    """Every message that may cross between nodes."""
    return Codec.from_modules(runtime.messages, actors.common.protocol, actors.common.client_protocol)
