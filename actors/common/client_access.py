"""What a client may ask of a broker: the requests of Kafka's client APIs, to the actor that serves them.

The client endpoint (``/client/v1``) admits a request only if this module says so; everything else a
broker's actors take (the controller's LeaderAndIsr, UpdateMetadata and StopReplica, a broker's
ControlledShutdown) needs the broker identity on ``/internal/v1``. Kafka draws the same line with its
``ClusterAction`` permission.

Rules kept:
* data-path requests go to the ``broker`` actor, admin requests to the ``admin`` actor;
* a client fetches, lists offsets and asks for epoch end offsets as a consumer (``replica_id`` -1): a
  fetch naming a replica id would be taken as a follower's, and a follower's fetch moves the ISR and the
  high watermark;
* Produce may come as a tell (acks=0); everything else is an ask.
"""

from __future__ import annotations

import typing

from actors.common.client_protocol import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
)
from actors.common.names import ADMIN_ACTOR_NAME, BROKER_ACTOR_NAME
from actors.common.protocol import (
    CONSUMER_REPLICA_ID,
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    FetchRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    OffsetsForLeaderEpochRequest,
    ProduceRequest,
)

__all__ = ["client_request_refusal"]

_BROKER_KINDS: typing.Final = (
    ProduceRequest,
    FetchRequest,
    ListOffsetsRequest,
    OffsetsForLeaderEpochRequest,
    MetadataRequest,
)
_ADMIN_KINDS: typing.Final = (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    CreatePartitionsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    # Relayed by the admin actor to the active controller (Kafka's ALTER/DESCRIBE on the cluster).
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    ElectLeadersRequest,
)


def client_request_refusal(target: str, message: object, *, ask: bool) -> str | None:
    """Why a client may not send ``message`` to the actor ``target`` (None: it may)."""
    kind = type(message).__name__
    if isinstance(message, _BROKER_KINDS):
        if target != BROKER_ACTOR_NAME:
            return f"{kind} is served by the {BROKER_ACTOR_NAME!r} actor, not {target!r}"
        replica_id = getattr(message, "replica_id", CONSUMER_REPLICA_ID)
        if replica_id != CONSUMER_REPLICA_ID:
            return f"a client sends {kind} as a consumer (replica_id -1), not as replica {replica_id}"
        if not ask and not isinstance(message, ProduceRequest):
            return f"{kind} is an ask: only Produce (acks=0) may come without waiting for an answer"
        if not ask and isinstance(message, ProduceRequest) and message.acks != 0:
            return f"a Produce with acks={message.acks} wants an answer: send it as an ask"
        return None
    if isinstance(message, _ADMIN_KINDS):
        if target != ADMIN_ACTOR_NAME:
            return f"{kind} is served by the {ADMIN_ACTOR_NAME!r} actor, not {target!r}"
        return None if ask else f"{kind} is an ask"
    return f"clients may not send {kind}: it needs the broker identity"
