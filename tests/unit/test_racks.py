"""The rack constraint (actors/common/racks.py)."""

from __future__ import annotations

from actors.common.racks import rack_constraint_broken, racks_in_use


def test_no_racks_means_nothing_is_broken() -> None:
    assert not rack_constraint_broken((1, 2, 3), {1: None, 2: None, 3: None})


def test_replicas_spread_over_every_rack_they_can() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c"}
    assert not rack_constraint_broken((1, 3, 5), racks)
    assert rack_constraint_broken((1, 2, 3), racks)  # three replicas, three racks, only two used
    assert not rack_constraint_broken((1, 3), racks)  # two replicas on two racks
    assert rack_constraint_broken((1, 2), racks)


def test_fewer_racks_than_replicas_needs_every_rack() -> None:
    racks = {1: "a", 2: "a", 3: "b"}
    assert not rack_constraint_broken((1, 2, 3), racks)
    assert rack_constraint_broken((1, 2), racks)


def test_a_broker_without_a_rack_among_racked_ones_is_its_own_group() -> None:
    racks = {1: "a", 2: "b", 3: None}
    assert racks_in_use(racks) == {"a", "b"}
    assert not rack_constraint_broken((1, 3), racks)
    assert rack_constraint_broken((3, 4), racks)  # neither has a rack: one group of two
