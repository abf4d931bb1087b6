"""The demo's check of the rollup against its timeline (ops/cli/demo_reconcile.py)."""

from __future__ import annotations

from typing import Any

from ops.cli.demo_reconcile import Observation, reconcile

START = 1_800_000_000_000


def _interval(
    isr: list[int], start_s: float, end_s: float, *, epoch: int = 0, open_: bool = False
) -> dict[str, Any]:
    return {
        "topic": "demo-orders", "partition": 0, "isr": isr, "leader_epoch": epoch,
        "start_ms": START + int(start_s * 1000), "end_ms": START + int(end_s * 1000), "open": open_,
        "cause_kind": "isr_shrink", "reason": "lag",
    }  # fmt: skip


INTERVALS = [
    _interval([1, 2, 3], 0, 10),
    _interval([1, 3], 10, 15),
    _interval([1, 2, 3], 15, 40),
    _interval([3, 1], 40, 60, epoch=1, open_=True),
]
TOTALS = [
    {"broker": "1", "kind": "isr_shrink", "events": 1},
    {"broker": "1", "kind": "isr_expand", "events": 1},
]


def _seen(what: str, isr: tuple[int, ...], at_s: float, epoch: int | None = None) -> Observation:
    return Observation(what, "demo-orders", 0, isr, START + int(at_s * 1000), epoch)


def test_observations_match_the_intervals_that_start_just_before_them() -> None:
    result = reconcile(
        [
            _seen("shrank", (1, 3), 10.4),
            _seen("expanded", (1, 2, 3), 15.2),
            _seen("elected", (1, 3), 40.3, epoch=1),
        ],
        INTERVALS,
        {"isr_shrink": 1, "isr_expand": 1},
        TOTALS,
        START,
    )
    assert result.agreed, result.lines
    assert result.lines[0] == (
        "agrees   shrank: seen at   10.4 s, rollup interval from   10.0 s until   15.0 s "
        "(-0.40 s, isr_shrink, lag)"
    )
    assert "still open" in result.lines[2]
    assert (
        result.lines[3]
        == "agrees   isr expands: 1 counted by the brokers' metrics, 1 in the rollup's state-change events"
    )


def test_a_late_interval_a_missing_one_or_other_counts_disagree() -> None:
    # The rollup's change came 1.5 s before the demo saw it: more than the one second allowed.
    late = reconcile([_seen("shrank", (1, 3), 11.5)], INTERVALS, {}, TOTALS, START)
    assert not late.agreed
    assert late.lines[0].startswith("DIFFERS  shrank: seen at   11.5 s, rollup interval from   10.0 s")
    # A rollup interval more than a second after the observation is not the state that was seen.
    early = reconcile([_seen("shrank", (1, 3), 8.5)], INTERVALS, {}, TOTALS, START)
    assert early.lines == ("DIFFERS  shrank: no ISR interval in the rollup",)
    missing = reconcile([_seen("shrank to one", (1,), 10.0)], INTERVALS, {}, TOTALS, START)
    assert not missing.agreed
    assert missing.lines == ("DIFFERS  shrank to one: no ISR interval in the rollup",)
    wrong_epoch = reconcile([_seen("elected", (1, 3), 40.3, epoch=2)], INTERVALS, {}, TOTALS, START)
    assert not wrong_epoch.agreed
    counts = reconcile([], INTERVALS, {"isr_shrink": 2}, TOTALS, START)
    assert not counts.agreed
    assert counts.lines == (
        "DIFFERS  isr shrinks: 2 counted by the brokers' metrics, 1 in the rollup's state-change events",
    )
