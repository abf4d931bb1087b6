"""The truncation point rule (docs/leader-epochs.md §2) on the numbers of docs/scenarios.md §3 and §7."""

from __future__ import annotations

import pytest

from actors.server.fetcher.truncation import TruncationDecision, decide_truncation


@pytest.mark.parametrize(
    ("leader_answer", "local", "expected"),
    [
        # #26: follower epoch 5, LEO 200; leader replies (5, 156) / (5, 172).
        ((5, 156), (5, 200), TruncationDecision(156, True)),
        ((5, 172), (5, 200), TruncationDecision(172, True)),
        # #26: the follower has no epoch ≤ 4; leader replies (4, 156) / (4, 202).
        ((4, 156), None, TruncationDecision(156, True)),
        ((4, 202), None, TruncationDecision(200, True)),
        # #27: local end for epoch ≤ 4 is (3, 120): truncate to 120, not complete.
        ((4, 155), (3, 120), TruncationDecision(120, False)),
        ((4, 143), (3, 120), TruncationDecision(120, False)),
        # #27, second round: leader replies (3, 101) / (3, 102) and the follower knows epoch 3.
        ((3, 101), (3, 120), TruncationDecision(101, True)),
        ((3, 102), (3, 120), TruncationDecision(102, True)),
    ],
)
def test_replica_fetcher_thread_examples(
    leader_answer: tuple[int, int], local: tuple[int, int] | None, expected: TruncationDecision
) -> None:
    epoch, end_offset = leader_answer
    decision = decide_truncation(
        leader_epoch_answer=epoch,
        leader_end_offset=end_offset,
        local_end_offset_for_epoch=local,
        log_end_offset=200,
        high_watermark=100,
    )
    assert decision == expected


def test_undefined_leader_offset_truncates_to_the_high_watermark() -> None:
    """#28: reply (-1, -1) with initial fetch offset (HW) 100 → truncate to 100."""
    assert decide_truncation(
        leader_epoch_answer=-1, leader_end_offset=-1, local_end_offset_for_epoch=(5, 200),
        log_end_offset=200, high_watermark=100,
    ) == TruncationDecision(100, True)  # fmt: skip


def test_version_zero_answer_uses_the_leader_end_offset() -> None:
    """#28: an undefined epoch with a defined offset (API v0) → min(offset, LEO) in one round."""
    assert decide_truncation(
        leader_epoch_answer=-1, leader_end_offset=155, local_end_offset_for_epoch=None,
        log_end_offset=200, high_watermark=100,
    ) == TruncationDecision(155, True)  # fmt: skip


def test_multi_round_truncation_from_kip_279() -> None:
    """#20: follower offsets 0,1,2 in epochs 0,2,4; leader offsets 0,1,2 in epochs 1,3,5."""
    follower_epochs = [(0, 0), (2, 1), (4, 2)]  # (epoch, start offset)
    leader_epochs = [(1, 0), (3, 1), (5, 2)]
    leader_end = 3

    def end_offset_for(
        entries: list[tuple[int, int]], requested: int, log_end: int
    ) -> tuple[int, int] | None:
        # LeaderEpochFileCache.endOffsetFor (docs/leader-epochs.md §1): below every entry → (requested, first
        # start).
        previous = [e for e in entries if e[0] <= requested]
        subsequent = [e for e in entries if e[0] > requested]
        if not previous:
            return (requested, subsequent[0][1]) if subsequent else None
        return (previous[-1][0], subsequent[0][1] if subsequent else log_end)

    follower_log_end = 3
    rounds: list[tuple[int, int, TruncationDecision]] = []
    ask = follower_epochs[-1][0]
    while True:
        answer = end_offset_for(leader_epochs, ask, leader_end) or (-1, -1)
        decision = decide_truncation(
            leader_epoch_answer=answer[0],
            leader_end_offset=answer[1],
            local_end_offset_for_epoch=end_offset_for(follower_epochs, answer[0], follower_log_end),
            log_end_offset=follower_log_end,
            high_watermark=0,
        )
        rounds.append((ask, answer[0], decision))
        follower_log_end = decision.offset
        follower_epochs = [e for e in follower_epochs if e[1] < decision.offset]
        if decision.complete:
            break
        ask = follower_epochs[-1][0]
    assert [(r[0], r[1], r[2].offset, r[2].complete) for r in rounds] == [
        (4, 3, 2, False),
        (2, 1, 1, False),
        (0, 0, 0, True),
    ]


def test_kip_279_fast_failover_keeps_the_replicas_consistent() -> None:
    """docs/scenarios.md §7 (c): B asks for epoch 2; A answers (1, 21); B's epoch 1 ends at 11 → truncate to
    11."""
    assert decide_truncation(
        leader_epoch_answer=1, leader_end_offset=21, local_end_offset_for_epoch=(1, 11),
        log_end_offset=16, high_watermark=11,
    ) == TruncationDecision(11, True)  # fmt: skip
