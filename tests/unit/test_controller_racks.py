"""The active controller's count of partitions breaking the rack constraint
(``ControllerContext.rack_constraint_violating_partition_count``, exported as
``kafka_controller_kafkacontroller_rackconstraintviolatingpartitioncount``)."""

from __future__ import annotations

from actors.common.protocol import BrokerEndpoint
from actors.controller.state import ControllerContext, LiveBroker


def context_with(racks: dict[int, str | None]) -> ControllerContext:
    context = ControllerContext()
    for broker_id, rack in racks.items():
        endpoint = BrokerEndpoint(broker_id=broker_id, host=f"b{broker_id}", port=9092, rack=rack)
        context.live_brokers[broker_id] = LiveBroker(endpoint=endpoint, broker_epoch=broker_id)
    return context


def test_without_racks_nothing_is_counted() -> None:
    context = context_with({1: None, 2: None, 3: None})
    context.add_topic("t", {0: (1, 2), 1: (2, 3)})
    assert context.rack_constraint_violating_partition_count() == 0


def test_partitions_on_fewer_racks_than_they_could_use_are_counted() -> None:
    context = context_with({1: "a", 2: "a", 3: "b", 4: "c"})
    context.add_topic("t", {0: (1, 2), 1: (1, 3), 2: (1, 2, 3), 3: (2, 3, 4), 4: (1,)})
    context.add_topic("u", {0: (2, 1, 3)})
    # t-0: a, a (2 < 2 possible); t-2: a, a, b (2 < 3); u-0 likewise. t-1, t-3 and t-4 are spread.
    assert context.rack_constraint_violating_partition_count() == 3
    # A topic being deleted is left out.
    context.topics_to_delete.add("u")
    assert context.rack_constraint_violating_partition_count() == 2


def test_a_replica_on_a_broker_that_is_down_is_a_rack_less_group() -> None:
    context = context_with({1: "a", 2: "b"})
    # Broker 3 is down: its rack is unknown, and a partition on 1 and 3 is not judged broken.
    context.add_topic("t", {0: (1, 3), 1: (1, 3, 4)})
    # t-1: a and two rack-less replicas: 2 groups = min(3 replicas, 2 racks).
    assert context.rack_constraint_violating_partition_count() == 0
    # With one rack left among the live brokers, nothing can be spread further.
    del context.live_brokers[2]
    assert context.rack_constraint_violating_partition_count() == 0


def test_a_broker_without_a_rack_among_racked_ones_is_its_own_group() -> None:
    context = context_with({1: "a", 2: None, 3: "b"})
    context.add_topic("t", {0: (1, 2), 1: (2, 3), 2: (1, 3)})
    assert context.rack_constraint_violating_partition_count() == 0
    context = context_with({1: "a", 2: None, 3: None, 4: "b"})
    context.add_topic("t", {0: (2, 3)})
    assert context.rack_constraint_violating_partition_count() == 1
