"""Supervision decisions on numbers alone: back-off growth, restart windows, escalation."""

from __future__ import annotations

import pytest

from runtime.supervision import Directive, RestartTracker, SupervisorStrategy


def test_restart_back_off_doubles_up_to_the_maximum() -> None:
    tracker = RestartTracker(
        SupervisorStrategy.restart(backoff_min_ms=100, backoff_max_ms=500, max_restarts=10)
    )
    delays = [tracker.on_failure(now_ms=i)[1] for i in range(5)]
    assert delays == [100, 200, 400, 500, 500]


def test_a_handled_message_resets_the_back_off() -> None:
    tracker = RestartTracker(SupervisorStrategy.restart(backoff_min_ms=100))
    tracker.on_failure(0)
    tracker.on_failure(1)
    tracker.on_message_processed()
    assert tracker.on_failure(2) == (Directive.RESTART, 100)


def test_more_restarts_than_allowed_within_the_window_escalate() -> None:
    tracker = RestartTracker(SupervisorStrategy.restart(max_restarts=2, within_ms=1000))
    assert tracker.on_failure(0)[0] is Directive.RESTART
    assert tracker.on_failure(500)[0] is Directive.RESTART
    assert tracker.on_failure(900)[0] is Directive.ESCALATE


def test_failures_outside_the_window_are_forgotten() -> None:
    tracker = RestartTracker(SupervisorStrategy.restart(max_restarts=2, within_ms=1000))
    tracker.on_failure(0)
    tracker.on_failure(100)
    assert tracker.on_failure(1200)[0] is Directive.RESTART


@pytest.mark.parametrize(
    ("strategy", "directive"),
    [(SupervisorStrategy.stop(), Directive.STOP), (SupervisorStrategy.escalate(), Directive.ESCALATE)],
)
def test_stop_and_escalate_strategies_apply_directly(
    strategy: SupervisorStrategy, directive: Directive
) -> None:
    assert RestartTracker(strategy).on_failure(0) == (directive, 0)


def test_invalid_strategies_are_rejected() -> None:
    with pytest.raises(ValueError, match="backoff"):
        SupervisorStrategy(backoff_min_ms=10, backoff_max_ms=5)
