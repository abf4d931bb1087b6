"""The 5 s / 60 s propagation rule on virtual time, driven exactly as the broker's 2500 ms task does."""

from __future__ import annotations

from actors.common.types import TopicPartition
from actors.server.isr_propagation import (
    ISR_CHANGE_PROPAGATION_CHECK_INTERVAL_MS,
    IsrChangePropagation,
    PropagationOutcome,
)

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)


def run_checks(
    propagation: IsrChangePropagation, until_ms: int, changes_at: set[int], start_ms: int = 0
) -> list[int]:
    """Step virtual time 1 ms at a time; record changes and run the task every 2500 ms (first at 0).
    Returns the times at which a propagation was written."""
    written: list[int] = []
    for now in range(start_ms, until_ms + 1):
        if now in changes_at:
            propagation.record(TP, now)
        if (now - start_ms) % ISR_CHANGE_PROPAGATION_CHECK_INTERVAL_MS == 0:
            check = propagation.check(now)
            if check.partitions:
                propagation.propagated(now)
                written.append(now)
    return written


def test_an_isolated_change_propagates_after_five_seconds_of_quiet_within_seven_and_a_half() -> None:
    for change_at in (1, 1_000, 2_499, 2_500, 2_501, 4_999):
        propagation = IsrChangePropagation(start_ms=0)
        written = run_checks(propagation, 20_000, {change_at})
        assert len(written) == 1
        delay = written[0] - change_at
        assert 5_000 < delay <= 7_500, (change_at, written)
        assert propagation.outcomes[PropagationOutcome.WRITTEN] == 1
        assert propagation.outcomes[PropagationOutcome.FORCED] == 0
        assert propagation.delay_seconds.count == 1


def test_a_change_every_second_propagates_at_the_sixty_second_bound() -> None:
    propagation = IsrChangePropagation(start_ms=0)
    changes = set(range(1_000, 70_001, 1_000))
    written = run_checks(propagation, 70_000, changes)
    # Never 5 s of quiet: the first propagation is forced just after 60 s since the start.
    assert written == [62_500]
    assert propagation.outcomes[PropagationOutcome.FORCED] == 1
    assert propagation.outcomes[PropagationOutcome.WRITTEN] == 0
    # Every other check with pending changes was a black-out deferral: 2.5 s … 60 s before the
    # forced write, and 65 s, 67.5 s, 70 s after it (changes keep coming until 70 s).
    deferred_checks = [*range(2_500, 62_500, 2_500), 65_000, 67_500, 70_000]
    assert propagation.outcomes[PropagationOutcome.DEFERRED] == len(deferred_checks)
    assert propagation.delay_seconds.snapshot().sum == 61.5


def test_after_the_storm_the_rest_is_written_after_quiet() -> None:
    propagation = IsrChangePropagation(start_ms=0)
    written = run_checks(propagation, 90_000, set(range(1_000, 70_001, 1_000)))
    assert written == [62_500, 77_500]
    assert propagation.outcomes[PropagationOutcome.FORCED] == 1
    assert propagation.outcomes[PropagationOutcome.WRITTEN] == 1


def test_nothing_pending_means_no_outcome() -> None:
    propagation = IsrChangePropagation(start_ms=0)
    assert propagation.check(100_000).outcome is None
    assert all(count == 0 for count in propagation.outcomes.values())


def test_a_failed_write_keeps_the_partitions_for_the_next_check() -> None:
    propagation = IsrChangePropagation(start_ms=0)
    propagation.record(TP, 1)
    check = propagation.check(10_000)
    assert check.partitions == {TP}
    assert propagation.check(12_500).outcome is None  # one write at a time
    propagation.record(OTHER, 11_000)
    propagation.failed()
    assert propagation.pending == 2
    retry = propagation.check(20_000)
    assert retry.partitions == {TP, OTHER}
    propagation.propagated(20_000)
    assert propagation.pending == 0
    assert propagation.propagation_failures_total == 1
