"""Every actor name in actorlog, and the node ids actors live on: one module, so an address a
message is sent to can be checked against the name its actor was spawned under.

A broker node (node id ``str(broker_id)``) hosts the actors named here; clients (producer,
consumer, admin, the CLI) are nodes of their own that address brokers through these names only.
Per-instance actors (partition replicas, replica fetchers, producers) get names built by the
functions below, which are Kafka's thread and object names turned into actor names.
"""

from __future__ import annotations

from typing import Final

from actors.common.types import BrokerId, TopicPartition
from runtime.ref import ActorRef

__all__ = [
    "ADMIN_ACTOR_NAME",
    "BROKER_ACTOR_NAME",
    "CONSUMER_ACTOR_NAME",
    "CONTROLLER_ACTOR_NAME",
    "GROUP_COORDINATOR_ACTOR_NAME",
    "REGISTRATION_ACTOR_NAME",
    "TOPIC_CONFIGS_ACTOR_NAME",
    "admin_ref",
    "broker_node",
    "broker_ref",
    "controller_ref",
    "fetcher_name",
    "partition_name",
    "producer_name",
    "producer_results_name",
]

# On every broker node.
BROKER_ACTOR_NAME: Final = "broker"
"""Request routing: Produce, Fetch, ListOffsets, Metadata, the controller's requests."""
REGISTRATION_ACTOR_NAME: Final = "broker-registration"
"""The ephemeral ``/brokers/ids/N`` across session expiries (a child of the broker actor)."""
TOPIC_CONFIGS_ACTOR_NAME: Final = "topic-configs"
"""Topic config overrides and ``/config/changes`` (a child of the broker actor)."""
ADMIN_ACTOR_NAME: Final = "admin"
"""Topic administration and producer ids, by writing ZooKeeper as a 2.4 broker does."""
CONTROLLER_ACTOR_NAME: Final = "controller"
"""Runs on every broker; one of them is the active controller at a time."""
GROUP_COORDINATOR_ACTOR_NAME: Final = "group-coordinator"
"""The groups of the ``__consumer_offsets`` partitions this broker leads (docs/consumer-groups.md §10)."""

# On client nodes.
CONSUMER_ACTOR_NAME: Final = "consumer"


def broker_node(broker_id: BrokerId) -> str:
    """The actor-system node id of a broker process."""
    return str(broker_id)


def broker_ref(broker_id: BrokerId) -> ActorRef:
    """The broker actor of broker ``broker_id``: where clients and other brokers send requests."""
    return ActorRef(node_id=broker_node(broker_id), name=BROKER_ACTOR_NAME)


def controller_ref(broker_id: BrokerId) -> ActorRef:
    return ActorRef(node_id=broker_node(broker_id), name=CONTROLLER_ACTOR_NAME)


def admin_ref(broker_id: BrokerId) -> ActorRef:
    return ActorRef(node_id=broker_node(broker_id), name=ADMIN_ACTOR_NAME)


def partition_name(tp: TopicPartition) -> str:
    """The actor name of a partition replica on its broker."""
    return f"partition/{tp}"


def fetcher_name(fetcher_id: int, source_broker_id: BrokerId) -> str:
    """Kafka's ReplicaFetcherThread-<fetcherId>-<sourceBrokerId>, as an actor name."""
    return f"replica-fetcher-{fetcher_id}-{source_broker_id}"


def producer_name(client_id: str, number: int) -> str:
    """The producer actor of one ``Producer`` façade (``number`` tells several apart)."""
    return f"producer-{client_id}-{number}"


def producer_results_name(number: int) -> str:
    """The actor that hands a producer's outcomes back to its façade's futures."""
    return f"producer-results-{number}"
