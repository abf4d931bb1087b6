"""What actors run on: the actor system, mailboxes, timers, supervision, clock, codec, transports,
coordination port and adapters, storage engine and metrics plumbing. Knows nothing of Kafka's roles.

The public surface is re-exported here; adapters (HTTP, aiozk, OS files) are imported from their own
modules by the composition root only.
"""

from runtime.activity import Activity
from runtime.actor import Actor
from runtime.clock import Clock, LoopClock, ManualClock
from runtime.codec import Codec, WireEnvelope, wire
from runtime.context import Context
from runtime.messages import AskFailure, AskTimedOut, Envelope, PeerUnavailable, Requester, UnknownActor
from runtime.ref import ActorRef
from runtime.supervision import Directive, SupervisorStrategy
from runtime.system import ActorSystem

__all__ = [
    "Activity",
    "Actor",
    "ActorRef",
    "ActorSystem",
    "AskFailure",
    "AskTimedOut",
    "Clock",
    "Codec",
    "Context",
    "Directive",
    "Envelope",
    "LoopClock",
    "ManualClock",
    "PeerUnavailable",
    "Requester",
    "SupervisorStrategy",
    "UnknownActor",
    "WireEnvelope",
    "wire",
]
